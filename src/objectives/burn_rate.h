// Error budgets and multiwindow, multi-burn-rate alerts (docs/objectives.md).
//
// An objective promises a share of good: of capacity active, of GPU requests started in
// time. What is not good spends the error budget, (1 - target) of the total. The burn
// rate over a window is what the window spent divided by what it was allowed:
//   burn = (total - good) / ((1 - target) x total)
// A budget objective spends money instead: burn = spend / (target x budget x window / month).
// A burn of 1 spends exactly the budget over the objective's window.
//
// An alert fires when both its long and its short window burn at least its factor (the
// short window makes it resolve soon after the burn stops), with the defaults of SRE
// practice (Sloth's and Pyrra's): 14.4x over 1 h and 5 min, 6x over 6 h and 30 min (page);
// 3x over 1 d and 2 h, 1x over 3 d and 6 h (ticket). A ratio objective can burn at most
// 1 / (1 - target) (nothing good at all): a factor above that can never fire, and the
// status says so (a 65% utilization target burns at most 2.86x).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/time.h"

namespace gpuledger::objectives {

enum class Severity : uint8_t { kPage, kTicket };
std::string_view SeverityName(Severity s);  // "page", "ticket"

struct BurnWindow {
  int64_t long_ms = 0;
  int64_t short_ms = 0;
  double factor = 0;
  Severity severity = Severity::kPage;
};

inline constexpr std::array<BurnWindow, 4> kBurnWindows = {{
    {kMsPerHour, 5 * kMsPerMinute, 14.4, Severity::kPage},
    {6 * kMsPerHour, 30 * kMsPerMinute, 6, Severity::kPage},
    {kMsPerDay, 2 * kMsPerHour, 3, Severity::kTicket},
    {3 * kMsPerDay, 6 * kMsPerHour, 1, Severity::kTicket},
}};
// The longest window any alert reads.
inline constexpr int64_t kLongestBurnWindowMs = 3 * kMsPerDay;

// "1h/5m": a burn window's name, as alerts and the CLI print it.
std::string_view BurnWindowName(const BurnWindow& w);

// One window's count against an objective: what it spent of the error budget (`bad`) and
// what it was allowed to spend (`allowed`), in the same unit; `sli` the measured value.
struct Tally {
  double bad = 0;
  double allowed = 0;
  double sli = 0;         // good / total; for a budget, its burn
  bool has_data = false;  // the window held anything to judge
  // bad / allowed; 0 without data (nothing to judge burns nothing).
  double BurnRate() const { return has_data && allowed > 0 ? bad / allowed : 0; }
};

// A ratio objective's tally: `good` of `total` (GPU-time, or requested GPUs).
// REQUIRES: 0 <= good <= total, 0 < target < 1.
Tally RatioTally(double good, double total, double target);

// A budget's tally: `spend_micros` over a window of `window_ms`, against `target` x
// `monthly_budget_micros` spread evenly over a month of `month_ms`.
// REQUIRES: window_ms, month_ms > 0.
Tally BudgetTally(double spend_micros, int64_t window_ms, double monthly_budget_micros, double target,
                  int64_t month_ms);

// Within this relative distance a burn counts as equal to a factor: the burn is a ratio of
// sums computed in floating point, so a window that spends exactly its factor (1 - target
// of its total bad, to the GPU-millisecond) may come out a few ulps short of it.
inline constexpr double kBurnTolerance = 1e-9;

// Whether an alert with `window`'s factor fires for these two burns.
inline bool Fires(const BurnWindow& window, double long_burn, double short_burn) {
  double at_least = window.factor * (1 - kBurnTolerance);
  return long_burn >= at_least && short_burn >= at_least;
}

}  // namespace gpuledger::objectives
