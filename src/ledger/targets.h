// Targets and budgets, judged: the fleet and each pool against its utilization target,
// each budgeted team's spend against its budget, with the projection to the period's end.
// The weekly report, the server's API and the dashboard render these; none of them
// judges a target or a budget itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/goals.h"
#include "core/money.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

struct TargetStatus {
  std::string scope;  // "fleet" or "pool:NAME"
  double target = 0;  // effective utilization it is held to, 0..1
  double actual = 0;  // effective utilization over the window
  bool met = false;   // actual >= target
};

// The fleet (first) and each pool of `by_pool` (a report grouped by pool, first
// dimension) against the target Goals::TargetFor gives it.
std::vector<TargetStatus> JudgeTargets(const Goals& goals, const UsageReport& by_pool);

struct BudgetStatus {
  std::string team;
  Money budget;  // for the period judged
  Money spent;   // the team's cost in it (its jobs' active and allocated-idle time)
  double burn = 0;  // spent / budget; 0 for a zero budget
  // At the pace so far, to the end of the period (exact, rounded half up); none when no
  // time of the period has passed.
  std::optional<Money> projected;
  bool within = true;  // spent <= budget
};

struct BudgetReport {
  TimeRange period;   // the calendar month
  TimeRange to_date;  // the part of it the spend covers: up to now and to the data's end
  double elapsed = 0;  // to_date's share of the period
  std::vector<BudgetStatus> teams;  // the budgeted teams `scope` may see, by name
};

// Each budgeted team's spend in `month` up to `now_ms` against its monthly budget.
Result<BudgetReport> JudgeMonthlyBudgets(Ledger& ledger, const Goals& goals, const TimeRange& month, int64_t now_ms,
                                         const Scope& scope);

// Each budgeted team's spend in `week` against its budget's share of the week: the
// budget of the month the week starts in, spread evenly over that month's days.
// `by_team` is a report of the week grouped by team (first dimension).
std::vector<BudgetStatus> JudgeWeeklyBudgets(const Goals& goals, const UsageReport& by_team, const TimeRange& week);

}  // namespace gpuledger::ledger
