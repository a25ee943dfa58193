// The discrete-event simulator: replays a workload on a cluster under one policy and
// measures utilization, waiting, completion, cost and preemptions. Deterministic: the
// same inputs give bit-for-bit the same result (the engine draws no random numbers but
// failure times seeded per job and attempt; ties are broken by time, then event kind,
// then submit order).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/money.h"
#include "core/status.h"
#include "core/time.h"
#include "sim/cluster.h"
#include "sim/policy.h"
#include "sim/trace.h"

namespace gpuledger::sim {

// The simulated clock: the same Clock interface the ledger reads, moved by the engine.
class SimClock final : public Clock {
 public:
  int64_t NowMs() const override { return now_ms_.load(std::memory_order_relaxed); }
  void Set(int64_t t_ms) { now_ms_.store(t_ms, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ms_{0};
};

struct SimOptions {
  PlacementMode placement = PlacementMode::kTopology;
  // Keep one JobOutcome per job (about 112 bytes each with its node list); off for the
  // largest runs.
  bool keep_job_outcomes = true;
  // Called now and then with (jobs arrived, jobs in total); may be empty.
  std::function<void(size_t, size_t)> progress;
  // Failures at random: a job holding g GPUs fails at a rate of g x this per hour of
  // running (exponential times to failure, drawn from `failure_seed` per job and
  // attempt, so a run stays reproducible). 0: none. A failed run's work is lost and its
  // GPU time counted as failed; the job restarts from the beginning up to
  // `max_restarts` times, then ends failed.
  double failure_rate_per_gpu_hour = 0;
  int32_t max_restarts = 3;
  uint64_t failure_seed = 1;
};

enum class JobStatus : uint8_t {
  kCompleted,      // ran all its work
  kFailed,         // ended failed: the trace says so, or it ran out of restarts
  kStarved,        // still pending when nothing else could happen
  kUnschedulable,  // no pool takes it, or it is larger than its pool
};
std::string_view JobStatusName(JobStatus s);  // "completed", "failed", "starved", "unschedulable"

// What happened to one job. Times are absolute ms; -1 if it never started or ended.
struct JobOutcome {
  int64_t start_ms = -1;  // first start
  int64_t end_ms = -1;
  int64_t allocated_tick_ms = 0;  // share held x time, all runs together
  int64_t failed_tick_ms = 0;     // of which in runs that failed
  int32_t preemptions = 0;
  int32_t restarts = 0;  // runs that failed and were started again
  int32_t pool = -1;     // -1: no pool could ever run it
  JobStatus status = JobStatus::kStarved;
  std::string nodes;  // pool-local node numbers of its last run, "3;4"; empty if none
};

struct Percentiles {
  int64_t p50_ms = 0;
  int64_t p95_ms = 0;
  int64_t p99_ms = 0;
  double mean_ms = 0;
};

// Slowdown = completion time / run time alone (1 = no waiting, no slowing).
struct RatioPercentiles {
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double mean = 0;
};

struct QueueSummary {
  std::string name;
  size_t jobs = 0;
  Percentiles wait;        // over its jobs that started
  Percentiles completion;  // over its jobs that completed
  RatioPercentiles slowdown;
  double gpu_hours = 0;
  Money cost;
  // Of the GPUs this queue requested (in ticks), the share granted within slo_wait.
  double slo_granted_ratio = 0;
  bool slo_met = false;
  // The SLO it was held to (SchedulerSpec's slo_wait and slo_target).
  int64_t slo_wait_ms = 0;
  double slo_target_ratio = 0;
};

struct PoolSummary {
  std::string name;
  int64_t gpus = 0;
  double gpu_hours = 0;
  double allocated_ratio = 0;  // over the run's span
  Money cost;
};

// Per pool, per step: allocated and active share of capacity, averaged over the step.
struct TimeSeries {
  int64_t begin_ms = 0;
  int64_t step_ms = 0;
  std::vector<std::string> pools;
  std::vector<int64_t> pool_capacity_ticks;
  std::vector<std::vector<int64_t>> allocated_tick_ms;  // [pool][bin]
  std::vector<std::vector<double>> active_tick_ms;      // [pool][bin]
  size_t bins() const { return allocated_tick_ms.empty() ? 0 : allocated_tick_ms.front().size(); }
};

struct SimResult {
  std::string cluster;
  std::string policy;
  // What the policy knew of durations: "oracle", "user-mean", "queue-mean", or empty.
  std::string durations;
  std::string placement;
  size_t jobs = 0;
  size_t completed = 0;
  size_t failed = 0;    // ended failed (the trace's status, or out of restarts)
  int64_t restarts = 0;  // failed runs started again
  double failed_gpu_hours = 0;
  size_t unschedulable = 0;  // routed to no pool, or larger than its pool
  // Still pending when nothing else could happen, so with every GPU of the cluster
  // free: a queue ceiling or a non-borrowing guarantee smaller than the job never let it
  // run, or the policy never looked at it (see RunSimulate's warning).
  size_t starved = 0;
  int64_t begin_ms = 0;      // first submit
  int64_t end_ms = 0;        // last end
  int64_t makespan_ms = 0;
  Percentiles wait;        // submit -> first start, over jobs that ran
  Percentiles completion;  // submit -> end, over jobs that completed
  RatioPercentiles slowdown;  // completion / duration, over jobs that completed
  double allocated_ratio = 0;  // allocated ticks x ms / (capacity x span)
  // Active share of capacity, from jobs that carry an activity ratio; empty if none.
  std::optional<double> active_ratio;
  double gpu_hours = 0;
  CostNumerator allocated_tick_ms = 0;  // exact; CostNumerator is a 128-bit integer
  Money cost;
  int64_t preemptions = 0;
  std::vector<QueueSummary> queues;
  std::vector<PoolSummary> pools;
  TimeSeries timeseries;
  std::vector<JobOutcome> outcomes;  // by the jobs' input order, when kept
  // OK when every conservation check held: each job's GPU-seconds counted exactly once,
  // the sum over jobs equals the integral over the cluster, allocation never exceeded
  // capacity, and every job that finished ran exactly its work.
  Status conservation;
  uint64_t events = 0;
};

// Replays `jobs` on `cluster` under `policy`. Fails with InvalidArgument naming the job
// on a malformed job (duration <= 0, a bad request) or the pool on a broken cluster.
// Runs share no state: several may run at once on different threads, each with its
// own policy. REQUIRES: `policy` is fresh (Init not yet called).
Result<SimResult> Simulate(const ClusterSpec& cluster, const std::vector<SimJob>& jobs,
                           Policy& policy, const SimOptions& options);
// The same with the policy made by name (see MakePolicy).
Result<SimResult> Simulate(const ClusterSpec& cluster, const std::vector<SimJob>& jobs,
                           std::string_view policy_name, const SimOptions& options);

}  // namespace gpuledger::sim
