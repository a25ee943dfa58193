// What-if on the ledger's own history, in money: the recorded workload
// (core/workload.h) replayed on the recorded fleet and on changed ones, answering
//   pools   separate training and serving pools, or merge them;
//   mig     move serving and notebook jobs onto the MIG slices right-sizing advises;
//   policy  fair-share or backfill instead of FIFO, per team;
//   fleet   how many GPUs the same work needed to meet the availability SLO;
// each in money, utilization and waiting, with the assumptions stated.
//
// Every answer compares replays, never a replay with the recorded reality: the
// baseline is the same workload replayed under FIFO on the recorded pools, so that a
// difference comes from the change alone. Money follows core/money.h: a job's
// allocated time is priced at what one GPU-hour of it cost in the ledger, exactly, and
// rounded once per figure; a fleet's cost is its GPUs x the window x its pool's price.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/money.h"
#include "core/status.h"
#include "core/workload.h"
#include "sim/cluster.h"
#include "sim/trace.h"

namespace gpuledger::sim {

// The recorded jobs as simulator jobs: queue = team (or "default"), duration = end -
// start, a MIG profile as its share of a GPU, activity as recorded. With
// `advised_mig`, a job with an advised profile asks for that profile instead. Jobs the
// simulator cannot take (a profile it cannot read) are left out and counted.
std::vector<SimJob> SimJobsFromWorkload(const Workload& w, bool advised_mig,
                                        size_t* skipped = nullptr);
// One pool per recorded pool, of its GPUs, in nodes of 8 (or 4, 2, 1: the largest that
// divides the count), priced at the pool's mean price, no locality, no sharing.
ClusterSpec ClusterFromWorkload(const Workload& w);

enum class WhatIfQuestion { kPools, kMig, kPolicy, kFleet };
std::string_view WhatIfQuestionName(WhatIfQuestion q);  // "pools", "mig", "policy", "fleet"
Result<WhatIfQuestion> ParseWhatIfQuestion(std::string_view text);

struct WhatIfOptions {
  std::vector<WhatIfQuestion> questions{WhatIfQuestion::kPools, WhatIfQuestion::kMig,
                                        WhatIfQuestion::kPolicy, WhatIfQuestion::kFleet};
  std::string baseline_policy = "fifo";
  std::vector<std::string> other_policies{"fair-share", "backfill"};
  // The availability SLO: slo_target of the requested GPUs started within slo_wait.
  int64_t slo_wait_ms = 10 * 60 * 1000;
  double slo_target_ratio = 0.95;
  // The MIG layout (sevenths) of a pool that takes advised slices.
  std::vector<int32_t> mig_layout{3, 2, 1, 1};
};

struct TeamFigures {
  std::string team;
  size_t jobs = 0;
  double wait_mean_s = 0, wait_p95_s = 0;
  double completion_mean_s = 0, completion_p95_s = 0;
};

// One replay, summed up.
struct ScenarioFigures {
  std::string label;
  std::string policy;
  int64_t gpus = 0;                    // the fleet's GPUs
  int64_t span_ms = 0;                 // window start to the later of its end and the last job end
  double allocated_gpu_hours = 0;      // GPU time held by jobs (a MIG slice counts its share)
  double allocated_ratio = 0;          // allocated / (fleet x span)
  std::optional<double> active_ratio;  // from recorded activity; empty if none recorded
  Money allocated_cost;                // jobs' allocated time at their recorded prices
  Money fleet_cost;                    // the fleet's GPUs over the window at its pools' prices
  double wait_mean_s = 0, wait_p95_s = 0;
  double slo_granted_ratio = 0;  // of requested GPUs, the share started within slo_wait
  bool slo_met = false;
  int64_t slo_wait_ms = 0;       // the SLO held to (WhatIfOptions)
  double slo_target_ratio = 0;
  size_t completed = 0, jobs = 0;
  std::vector<TeamFigures> teams;
};

struct WhatIfAnswer {
  WhatIfQuestion question = WhatIfQuestion::kPools;
  std::string title;
  std::vector<ScenarioFigures> scenarios;  // [0] is the baseline
  std::vector<std::string> findings;       // sentences, in money first
  std::vector<std::string> assumptions;
};

struct WhatIfReport {
  TimeRange window;
  size_t jobs = 0;
  size_t left_out = 0;                   // recorded jobs the replay could not take
  std::vector<std::string> assumptions;  // common to every answer
  std::vector<WhatIfAnswer> answers;
};

// Answers `options.questions` on `w`. Fails when the workload has no pool or no job, or
// on a policy name MakePolicy does not know.
Result<WhatIfReport> WhatIf(const Workload& w, const WhatIfOptions& options);

// The smallest GPU count, in whole nodes, at which `pool` of `cluster` meets the SLO
// for the jobs routed to it under `policy`; nullopt if even kMaxPoolGpus would not.
Result<std::optional<int64_t>> SmallestPoolMeetingSlo(const ClusterSpec& cluster, size_t pool,
                                                      const std::vector<SimJob>& jobs,
                                                      const std::string& policy,
                                                      int64_t slo_wait_ms, double slo_target_ratio);

// One screen per answer: the scenarios side by side, the findings, the assumptions.
std::string RenderWhatIfText(const WhatIfReport& r);
std::string RenderWhatIfJson(const WhatIfReport& r);

}  // namespace gpuledger::sim
