#include "ledger/experiments.h"

#include <algorithm>
#include <cassert>
#include <map>

namespace gpuledger::ledger {
namespace {

// Usage's key part for a job attribute the job left empty (ledger.cc's ValueOr); no batch
// can carry it, names in parentheses being refused (core/batch.h).
constexpr std::string_view kUnsetKey = "(unset)";

bool CostlierFirst(const ExperimentCost& a, const ExperimentCost& b) {
  if (a.labeled != b.labeled) return a.labeled;  // the unlabelled row last
  if (a.cost != b.cost) return a.cost > b.cost;
  return a.experiment < b.experiment;
}

}  // namespace

Money NearestRankPercentile(std::vector<Money> costs, int percent) {
  assert(!costs.empty() && percent > 0 && percent <= 100);
  std::sort(costs.begin(), costs.end());
  const size_t n = costs.size();
  // ceil(percent x n / 100), in integers.
  const size_t rank = (static_cast<size_t>(percent) * n + 99) / 100;
  return costs[rank - 1];
}

CostDistribution DistributionOf(const std::vector<ExperimentCost>& experiments) {
  CostDistribution d;
  std::vector<Money> costs;
  const ExperimentCost* costliest = nullptr;
  for (const ExperimentCost& e : experiments) {
    if (!e.labeled) continue;
    costs.push_back(e.cost);
    d.total += e.cost;
    if (costliest == nullptr || e.cost > costliest->cost ||
        (e.cost == costliest->cost && e.experiment < costliest->experiment)) {
      costliest = &e;
    }
  }
  d.count = costs.size();
  if (costs.empty()) return d;
  d.median = NearestRankPercentile(costs, 50);
  d.p90 = NearestRankPercentile(costs, 90);
  d.costliest = costliest->experiment;
  d.costliest_cost = costliest->cost;
  return d;
}

Result<ExperimentReport> Experiments(Ledger& ledger, const TimeRange& window, const Scope& scope,
                                     const std::string& team) {
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport usage,
                             ledger.ScopedUsage(window, {Dimension::kTeam, Dimension::kExperiment}, scope));
  ExperimentReport out;
  out.window = usage.window;
  out.requested = usage.requested;
  out.unpriced = usage.unpriced;
  out.currency = usage.currency;
  std::map<std::string, TeamExperiments> teams;
  for (const UsageRow& row : usage.rows) {
    // Time held by no job is nobody's experiment: chargeback bills it on capacity lines.
    if (row.no_job || !scope.MaySee(row.key[0])) continue;
    if (!team.empty() && row.key[0] != team) continue;
    ExperimentCost e;
    e.team = row.key[0];
    e.labeled = row.key[1] != kUnsetKey;
    e.experiment = e.labeled ? row.key[1] : std::string(kNoExperiment);
    e.active_gpu_hours = row.gpu_hours(Bucket::kActive);
    e.gpu_hours = e.active_gpu_hours + row.gpu_hours(Bucket::kAllocatedIdle);
    e.cost = row.cost[static_cast<size_t>(Bucket::kActive)] + row.cost[static_cast<size_t>(Bucket::kAllocatedIdle)];
    e.waste = row.cost[static_cast<size_t>(Bucket::kAllocatedIdle)];
    TeamExperiments& t = teams[e.team];
    t.team = e.team;
    t.cost += e.cost;
    t.waste += e.waste;
    t.gpu_hours += e.gpu_hours;
    t.experiments.push_back(std::move(e));
  }
  for (auto& [name, t] : teams) {
    std::sort(t.experiments.begin(), t.experiments.end(), CostlierFirst);
    t.distribution = DistributionOf(t.experiments);
    out.teams.push_back(std::move(t));
  }
  std::stable_sort(out.teams.begin(), out.teams.end(),
                   [](const TeamExperiments& a, const TeamExperiments& b) { return a.cost > b.cost; });
  return out;
}

}  // namespace gpuledger::ledger
