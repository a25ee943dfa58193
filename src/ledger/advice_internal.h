// The evidence the advice reads, per job, and the two halves that turn it into advice
// (advice_training.cc, advice_serving.cc). Internal to src/ledger: the public face is
// rightsizing.h.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/money.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "ledger/rightsizing.h"
#include "store/store.h"

namespace gpuledger::ledger::advice {

// A stretch of samples without work (activity at or below 1%) on one GPU: from the
// sample before it to its last sample.
struct Pause {
  int64_t from_ms = 0;
  int64_t length_ms = 0;
};

// What one job's samples, usage row and reports say over the window.
struct JobEvidence {
  const store::JobRecord* record = nullptr;
  const UsageRow* row = nullptr;
  Money cost;
  int64_t held_ticks = 0;  // active + allocated_idle, GPU-ms x kShareScale
  int gpus = 0;            // distinct devices held
  const store::DeviceRecord* first_device = nullptr;
  bool on_mig = false;
  // Every sample's activity ratio while the job's samples are read; once they all are,
  // TakeActivityPercentiles keeps their number and percentiles and lets them go.
  std::vector<double> activity;
  size_t activity_samples = 0;
  double activity_p50 = 0, activity_p95 = 0;
  std::vector<double> gpu_p95;   // per GPU
  double peak_memory_mib = 0;
  int64_t sampled_ms = 0;
  int64_t idle_stretch_beyond_ms = 0;  // notebooks: idle beyond the idle-shutdown limit
  // The agent's gap profiles, summed.
  int64_t gap_interval_ms = 0, gap_idle_ms = 0, gap_short_idle_ms = 0;
  // Pauses of 1 to 15 minutes (the checkpoint rule's size) and the spans between the
  // starts of consecutive ones on the same GPU.
  std::vector<int64_t> pause_lengths_ms, pause_intervals_ms;
  // Stretches with no process on the GPU or no kernel, at least held_stretch_ms long.
  int64_t unused_ms = 0, longest_unused_ms = 0;
  int64_t longest_unused_from_ms = 0;
  std::optional<double> flops_per_second;  // from the job's progress reports
  std::string activity_evidence;           // "activity p50 .., p95 ..; ..."
  std::string confidence;                  // from the time sampled

  const Job& job() const { return record->job; }
  // Ticks of the job's idle time with cause `c`, as a share of its held time.
  double CauseShare(IdleCause c) const;
};

// What advice on one job reads of the others: the fleet's best input-stall level and
// the measured throughput of runs of each experiment and project.
struct FleetEvidence {
  double best_input_stall_share = 0;
  // Training runs with progress reports, by experiment and by project.
  std::map<std::string, std::vector<const JobEvidence*>> by_experiment, by_project;
};
FleetEvidence GatherFleet(const std::vector<JobEvidence>& jobs);

// A recommendation of `kind` for `e`'s job, its evidence the job's activity.
Recommendation Base(const JobEvidence& e, RecommendationKind kind, const TimeRange& window);
// Run on MIG slice `p`: saves the compute slices it leaves.
Recommendation MigAdvice(const JobEvidence& e, const MigProfile& p, const TimeRange& window);
// Sets the saving of `r` alone to share_ppm millionths of its job's cost (at most all).
void SetSavingPpm(Recommendation& r, double share);
// Sets r.lost from the cost of the idle cause and its GPU-hours, and the weekly rate.
void SetLost(Recommendation& r, const JobEvidence& e, IdleCause cause);

Money Scale(Money m, int64_t num, int64_t den);
double Percentile(std::vector<double> v, double p);
// Sets e.activity_samples, _p50 and _p95 from e.activity, and empties it.
void TakeActivityPercentiles(JobEvidence& e);
double Median(std::vector<int64_t> v);

// Training and batch advice for `e` (input-bound, checkpoint-bound, fewer GPUs, held
// with nothing running), appended to `out`.
void AdviseTraining(const JobEvidence& e, const FleetEvidence& fleet, const TimeRange& window,
                    const RightSizingOptions& options, std::vector<Recommendation>& out);

// What the serving advice weighs of a job's engine snapshots over the window (a week of
// them is 10,000 a job; the advice keeps these few figures of each job, not the
// snapshots).
struct ServingEvidence {
  size_t queue_scrapes = 0;  // snapshots with the queue's length
  double queue_p99 = 0;
  size_t kv_scrapes = 0;  // snapshots with the KV cache's usage
  double kv_p95 = 0, kv_max = 0;
};
ServingEvidence SummarizeServing(const std::vector<ServingGauges>& snapshots);

// Serving advice for `e` from its engine's snapshots (StoreReads::ServingGaugesOf,
// summarized), fewer replicas or a MIG slice for a single-GPU deployment, appended to
// `out`; none when the snapshots show requests queueing at p99 or the KV cache near full,
// or when there are none to show it.
void AdviseServing(const ServingEvidence& serving, const JobEvidence& e, const TimeRange& window,
                   const RightSizingOptions& options, std::vector<Recommendation>& out);

}  // namespace gpuledger::ledger::advice
