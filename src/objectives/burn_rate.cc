#include "objectives/burn_rate.h"

namespace gpuledger::objectives {

std::string_view SeverityName(Severity s) { return s == Severity::kPage ? "page" : "ticket"; }

std::string_view BurnWindowName(const BurnWindow& w) {
  if (w.long_ms == kMsPerHour) return "1h/5m";
  if (w.long_ms == 6 * kMsPerHour) return "6h/30m";
  if (w.long_ms == kMsPerDay) return "1d/2h";
  if (w.long_ms == 3 * kMsPerDay) return "3d/6h";
  return "?";
}

Tally RatioTally(double good, double total, double target) {
  Tally t;
  t.has_data = total > 0;
  if (!t.has_data) return t;
  t.bad = total - good;
  t.allowed = (1 - target) * total;
  t.sli = good / total;
  return t;
}

Tally BudgetTally(double spend_micros, int64_t window_ms, double monthly_budget_micros, double target,
                  int64_t month_ms) {
  Tally t;
  t.has_data = window_ms > 0;
  t.bad = spend_micros;
  t.allowed = target * monthly_budget_micros * static_cast<double>(window_ms) / static_cast<double>(month_ms);
  t.sli = t.BurnRate();
  return t;
}

}  // namespace gpuledger::objectives
