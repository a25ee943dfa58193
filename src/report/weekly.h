// The weekly utilization report: one self-contained HTML page (inline CSS and SVG, no
// scripts, nothing fetched) for ML leads and finance. Its figures come from the same
// Usage and Chargeback calls as the CLI, so they agree with them to the micro-unit.
#pragma once

#include <map>
#include <string>

#include "core/money.h"
#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::report {

struct WeeklyOptions {
  // The effective-utilization target the fleet is held to (0..1).
  double target = 0.6;
  // Each pool's own target where it differs: serving keeps headroom on purpose, so its
  // target is lower than training's.
  std::map<std::string, double> pool_targets;
  // Each team's budget per calendar month (the config's [budgets]): the SLO section
  // holds the team's week to the budget's share of the week.
  std::map<std::string, Money> monthly_budgets;
  // How many right-sizing recommendations to list, largest saving first.
  size_t recommendations = 8;
  std::string title = "GPU utilization";
  // Which targets apply and where each was set (Goals::Describe), printed under
  // the pools' table so that a reader can tell why two surfaces disagree. Empty: none.
  std::string targets_source;
};

// Renders the report of the ISO week `week` (e.g. ParseIsoWeek("2026-W48")): KPIs with
// week-over-week change, the buckets over the week, each team's cost and efficiency,
// SLO status (utilization targets, budgets), pools with training and serving apart, the
// largest sources of waste with their causes, and right-sizing recommendations.
Result<std::string> RenderWeeklyReport(ledger::Ledger& ledger, const TimeRange& week,
                                       const WeeklyOptions& options = {});

}  // namespace gpuledger::report
