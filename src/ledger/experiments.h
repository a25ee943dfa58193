// Cost per experiment, per team: what each experiment cost, its GPU-hours, its waste and
// its effective utilization, and each team's experiments as a distribution (count,
// median, p90, the costliest), not one average. The CLI (`gpuledger experiments`), the
// API (/api/v1/experiments), the dashboard and the monthly report render what this
// returns; none of them computes a figure of it.
//
// Rule. The figures are Ledger::Usage grouped by team and experiment over the window:
// the same rounded atoms as every other table (docs/ARCHITECTURE.md, "Usage"), so a
// team's experiments, its "(none)" row included, add up to the team's chargeback (its
// lines' direct cost, without --share-idle) to the micro-unit.
//
// Percentiles are nearest-rank: of n costs sorted ascending, the p-th percentile is the
// one at rank ceil(p x n / 100), counting from 1. The median is the 50th (for an even
// count the lower of the two middle costs: never an average, always a cost that some
// experiment had); the p90 is the 90th. Computed in integers, so no rounding decides a
// rank.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/currency.h"
#include "core/money.h"
#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

// The row of a team's jobs that carry no experiment label.
inline constexpr std::string_view kNoExperiment = "(none)";

struct ExperimentCost {
  std::string team;
  std::string experiment;  // kNoExperiment for the unlabelled row
  bool labeled = true;     // false: the team's jobs without an experiment label
  double gpu_hours = 0;    // held by its jobs: active + allocated idle (a MIG slice its share)
  double active_gpu_hours = 0;
  Money cost;   // active + allocated idle: what chargeback bills for it
  Money waste;  // the money of its non-useful time: allocated idle (a job holds no other bucket)
  // active / held; 0 when it held nothing.
  double effective_utilization() const { return gpu_hours > 0 ? active_gpu_hours / gpu_hours : 0.0; }
};

// A team's labelled experiments as a distribution. The "(none)" row is not an
// experiment and is left out of it (it stays in the team's totals).
struct CostDistribution {
  size_t count = 0;  // labelled experiments; the figures below are zero when none
  Money total;       // their cost, summed
  Money median;      // NearestRankPercentile(costs, 50)
  Money p90;         // NearestRankPercentile(costs, 90)
  std::string costliest;  // the costliest experiment's name (the first by name on a tie)
  Money costliest_cost;
};

struct TeamExperiments {
  std::string team;
  // By descending cost, then name; the unlabelled row (if any) last.
  std::vector<ExperimentCost> experiments;
  CostDistribution distribution;
  // Every row of the team, the unlabelled one too: its chargeback's direct cost.
  Money cost;
  Money waste;
  double gpu_hours = 0;
};

struct ExperimentReport {
  TimeRange window;     // as Usage reports it: ending where the data ends
  TimeRange requested;  // the window asked for
  std::vector<TeamExperiments> teams;  // by descending cost, then team name
  std::vector<UnpricedCapacity> unpriced;
  Currency currency;
};

// The p-th percentile of `costs` by nearest rank (above). REQUIRES: costs not empty and
// 0 < percent <= 100.
Money NearestRankPercentile(std::vector<Money> costs, int percent);

// The distribution of `experiments`' labelled rows.
CostDistribution DistributionOf(const std::vector<ExperimentCost>& experiments);

// Each team's experiments over `window`, the teams `scope` may see only (a viewer's
// token: its own teams). `team`, when not empty, narrows it to that one team (none when
// the scope may not see it). Fails when the ledger cannot be read.
Result<ExperimentReport> Experiments(Ledger& ledger, const TimeRange& window, const Scope& scope,
                                     const std::string& team = "");

}  // namespace gpuledger::ledger
