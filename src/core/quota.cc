#include "core/quota.h"

#include <fmt/format.h>

#include <charconv>

namespace gpuledger {
namespace {

// The period's first month: "2026-11" of `t_ms`'s month, moved back to its quarter's first.
std::pair<int, int> YearMonthOf(int64_t t_ms) {
  std::string text = FormatTime(t_ms);
  int year = 0, month = 0;
  std::from_chars(text.data(), text.data() + 4, year);
  std::from_chars(text.data() + 5, text.data() + 7, month);
  return {year, month};
}

int64_t MonthStart(int year, int month) {
  while (month > 12) {
    month -= 12;
    ++year;
  }
  return DaysFromCivil(year, static_cast<unsigned>(month), 1) * kMsPerDay;
}

}  // namespace

std::string_view QuotaPeriodName(QuotaPeriod p) { return p == QuotaPeriod::kMonth ? "month" : "quarter"; }

Result<QuotaPeriod> ParseQuotaPeriod(std::string_view text) {
  if (text == "month") return QuotaPeriod::kMonth;
  if (text == "quarter") return QuotaPeriod::kQuarter;
  return InvalidArgument(fmt::format("period \"{}\": want month or quarter", text));
}

std::string_view QuotaModeName(QuotaMode m) { return m == QuotaMode::kSoft ? "soft" : "hard"; }

Result<QuotaMode> ParseQuotaMode(std::string_view text) {
  if (text == "soft") return QuotaMode::kSoft;
  if (text == "hard") return QuotaMode::kHard;
  return InvalidArgument(fmt::format("mode \"{}\": want soft (alerts) or hard (enforced by the scheduler)", text));
}

TimeRange QuotaPeriodContaining(QuotaPeriod p, int64_t t_ms) {
  auto [year, month] = YearMonthOf(t_ms);
  if (p == QuotaPeriod::kQuarter) month = (month - 1) / 3 * 3 + 1;
  int months = p == QuotaPeriod::kMonth ? 1 : 3;
  return {MonthStart(year, month), MonthStart(year, month + months)};
}

std::string QuotaPeriodLabel(QuotaPeriod p, const TimeRange& range) {
  auto [year, month] = YearMonthOf(range.begin_ms);
  if (p == QuotaPeriod::kMonth) return fmt::format("{:04}-{:02}", year, month);
  return fmt::format("{:04}-Q{}", year, (month - 1) / 3 + 1);
}

Result<std::pair<QuotaPeriod, TimeRange>> ParseQuotaPeriodLabel(std::string_view text) {
  if (text.size() == 7 && text[4] == '-' && text[5] == 'Q' && text[6] >= '1' && text[6] <= '4') {
    int year = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + 4, year);
    if (ec == std::errc() && ptr == text.data() + 4) {
      int first = (text[6] - '1') * 3 + 1;
      return std::pair{QuotaPeriod::kQuarter, TimeRange{MonthStart(year, first), MonthStart(year, first + 3)}};
    }
  }
  auto month = ParseMonth(text);
  if (!month.ok()) {
    return InvalidArgument(fmt::format("period \"{}\": want a month (YYYY-MM) or a quarter (YYYY-Q1..Q4)", text));
  }
  return std::pair{QuotaPeriod::kMonth, *month};
}

std::string QuotaSpec::OwnerLabel() const {
  return fmt::format("{}:{}", owner == Owner::kTeam ? "team" : "project", name);
}

std::string QuotaSpec::Label() const {
  std::string out = fmt::format("{} {}", OwnerLabel(), QuotaPeriodName(period));
  if (gpu_hours) out += " gpu_hours";
  if (!pool.empty()) out += " pool:" + pool;
  if (!model.empty()) out += " model:" + model;
  if (budget) out += " budget";
  return out;
}

}  // namespace gpuledger
