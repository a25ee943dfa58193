// The weekly utilization report: one self-contained HTML page (inline CSS and SVG, no
// scripts, nothing fetched) for ML leads and finance. Its figures come from the same
// Usage and Chargeback calls as the CLI, so they agree with them to the micro-unit.
#pragma once

#include <map>
#include <string>

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
  std::string title = "GPU utilization";
};

// Renders the report of the ISO week `week` (e.g. ParseIsoWeek("2026-W48")): KPIs with
// week-over-week change, the buckets over the week, each team's cost and efficiency,
// pools with training and serving apart, and the largest sources of waste.
Result<std::string> RenderWeeklyReport(ledger::Ledger& ledger, const TimeRange& week,
                                       const WeeklyOptions& options = {});

}  // namespace gpuledger::report
