#include "ledger/targets.h"

#include <algorithm>
#include <map>

namespace gpuledger::ledger {
namespace {

BudgetStatus Judge(const std::string& team, Money budget, Money spent) {
  BudgetStatus s;
  s.team = team;
  s.budget = budget;
  s.spent = spent;
  s.burn = budget.micros() > 0 ? static_cast<double>(spent.micros()) / static_cast<double>(budget.micros()) : 0.0;
  s.within = spent <= budget;
  return s;
}

}  // namespace

std::vector<TargetStatus> JudgeTargets(const Goals& goals, const UsageReport& by_pool) {
  std::vector<TargetStatus> out;
  double fleet = by_pool.total.effective_utilization();
  out.push_back({"fleet", goals.fleet_target, fleet, fleet >= goals.fleet_target});
  for (const UsageRow& row : by_pool.rows) {
    double target = goals.TargetFor(row.key[0]);
    double actual = row.effective_utilization();
    out.push_back({"pool:" + row.key[0], target, actual, actual >= target});
  }
  return out;
}

Result<BudgetReport> JudgeMonthlyBudgets(Ledger& ledger, const Goals& goals, const TimeRange& month, int64_t now_ms,
                                         const Scope& scope) {
  BudgetReport r;
  r.period = month;
  r.to_date = {month.begin_ms, std::clamp(now_ms, month.begin_ms, month.end_ms)};
  std::map<std::string, Money> spent;
  if (!r.to_date.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(ChargebackReport cb, ledger.Chargeback(r.to_date, /*share_idle=*/false));
    r.to_date = cb.period;  // ends where the data ends
    for (const auto& line : cb.lines) spent[line.team] += line.direct_cost;
  }
  int64_t length = month.length_ms(), elapsed = r.to_date.length_ms();
  r.elapsed = length > 0 ? static_cast<double>(elapsed) / static_cast<double>(length) : 0.0;
  for (const auto& [team, budget] : goals.monthly_budgets) {
    if (!scope.MaySee(team)) continue;
    BudgetStatus s = Judge(team, budget, spent[team]);
    if (elapsed > 0) {
      CostNumerator num = static_cast<CostNumerator>(s.spent.micros()) * length;
      s.projected = Money::FromMicros(static_cast<int64_t>((2 * num + elapsed) / (2 * elapsed)));
    }
    r.teams.push_back(std::move(s));
  }
  return r;
}

std::vector<BudgetStatus> JudgeWeeklyBudgets(const Goals& goals, const UsageReport& by_team, const TimeRange& week) {
  std::vector<BudgetStatus> out;
  auto month = ParseMonth(FormatTime(week.begin_ms).substr(0, 7));
  int64_t days = month.ok() ? month->length_ms() / kMsPerDay : 30;
  int64_t week_days = std::max<int64_t>(1, week.length_ms() / kMsPerDay);
  for (const auto& [team, budget] : goals.monthly_budgets) {
    Money share = Money::FromMicros(budget.micros() * week_days / days);
    Money spent;
    for (const UsageRow& row : by_team.rows) {
      if (!row.no_job && row.key[0] == team) spent = row.total_cost();
    }
    out.push_back(Judge(team, share, spent));
  }
  return out;
}

}  // namespace gpuledger::ledger
