// The weekly utilization report: one self-contained HTML page (inline CSS and SVG, no
// scripts, nothing fetched) for ML leads and finance. Its figures come from the same
// Usage and Chargeback calls as the CLI, so they agree with them to the micro-unit.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/goals.h"
#include "core/money.h"
#include "core/objective.h"
#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::report {

struct WeeklyOptions {
  // What the fleet is held to: the fleet's and each pool's utilization target, each
  // team's monthly budget (the config's [targets] and [budgets]). The SLO section shows
  // what ledger::JudgeTargets and ledger::JudgeWeeklyBudgets make of them, and which
  // targets apply and where each was set (Goals::Describe) under the pools' table.
  Goals goals;
  // The config's [[objective]]s: the SLO section judges each at the week's end with the
  // engine `gpuledger slo status` and the server use (objectives::Evaluate).
  std::vector<ObjectiveSpec> objectives;
  // How many pieces of advice the report leads with (ledger::TopAdvice's order).
  size_t recommendations = 5;
  std::string title = "GPU utilization";
};

// Renders the report of the ISO week `week` (e.g. ParseIsoWeek("2026-W48")): KPIs with
// week-over-week change, the buckets over the week, each team's cost and efficiency,
// SLO status (utilization targets, budgets), pools with training and serving apart, the
// largest sources of waste with their causes, and right-sizing recommendations.
Result<std::string> RenderWeeklyReport(ledger::Ledger& ledger, const TimeRange& week,
                                       const WeeklyOptions& options = {});

}  // namespace gpuledger::report
