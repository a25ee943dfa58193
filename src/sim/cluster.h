// The simulated cluster: pools of nodes with their topology, sharing mode and price,
// the fair-share queue tree, and the scheduler's knobs, read from a TOML file (see
// docs/simulator.md and testdata/example_cluster.toml).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/money.h"
#include "core/status.h"
#include "sim/trace.h"

namespace gpuledger::sim {

// Where a job's GPUs go among a pool's free ones (see docs/simulator.md).
enum class PlacementMode {
  kTopology,  // best fit: one node, then one NVLink domain, then one rack, then anywhere
  kSpread,    // worst fit: the node with the most free GPUs; a job that does not fit
              // on one node takes one GPU at a time from the emptiest nodes
};
std::string_view PlacementModeName(PlacementMode m);
Result<PlacementMode> ParsePlacementMode(std::string_view text);

// How a pool's GPUs take requests for less than one GPU.
enum class Sharing {
  kNone,         // a sub-GPU request takes a whole GPU
  kMig,          // each GPU is cut into the pool's MIG layout; a request takes a slice
  kTimeSlicing,  // requests are packed by share onto one GPU and slowed while sharing
};
std::string_view SharingName(Sharing s);

// What SJF and SRTF know of a job's run time (see docs/simulator.md).
enum class DurationEstimate {
  kOracle,     // the trace's own duration: a bound, not something a scheduler knows
  kUserMean,   // the mean run time of the user's jobs finished before it was submitted
  kQueueMean,  // the same over its queue's jobs
};
std::string_view DurationEstimateName(DurationEstimate e);  // "oracle", "user-mean", "queue-mean"
Result<DurationEstimate> ParseDurationEstimate(std::string_view text);

// The most GPUs one pool may have. A job's share is held as a 32-bit count of ticks
// (840 a GPU), which caps a job near 2.5 million GPUs; a million keeps a margin and
// still lets a peer's cluster be modelled as one node of thousands of GPUs.
inline constexpr int64_t kMaxPoolGpus = 1'000'000;

struct PoolSpec {
  std::string name;
  std::string gpu_model = "GPU";
  int32_t nodes = 0;
  int32_t gpus_per_node = 8;
  // Topology: consecutive nodes form an NVLink domain, consecutive domains a rack.
  int32_t nodes_per_nvlink_domain = 1;
  int32_t nodes_per_rack = 16;
  // Locality constraint: a job that fits on one node must run on one node, a larger one
  // on the fewest nodes its size allows; it waits rather than scatter (Philly's
  // consolidated placement).
  bool strict_locality = false;
  Money price_per_gpu_hour;
  Sharing sharing = Sharing::kNone;
  // MIG: the slices of every GPU in sevenths of a GPU, e.g. {3, 2, 1, 1}; sum <= 7.
  std::vector<int32_t> mig_layout;
  // Extra run time, as a ratio of the run time, while a job shares a time-sliced GPU.
  double timeslice_slowdown = 0.0;
  // Extra run time for a job whose GPUs span more than one node, NVLink domain or rack.
  double cross_node_slowdown = 0.0;
  double cross_domain_slowdown = 0.0;
  double cross_rack_slowdown = 0.0;
  // Routing: job kinds ("training", ...) and queues this pool takes; empty means any.
  std::vector<std::string> kinds;
  std::vector<std::string> queues;

  int64_t gpus() const { return static_cast<int64_t>(nodes) * gpus_per_node; }
};

// A fair-share queue (a Kueue ClusterQueue in a cohort, a YuniKorn queue). Queues form
// a tree by `parent`; jobs name leaf queues. Queues not listed are leaves under the root
// that share evenly what the listed guarantees leave.
struct QueueSpec {
  std::string name;
  std::string parent;            // empty: the root
  int64_t guaranteed_gpus = -1;  // -1: an even share of what is left
  int64_t max_gpus = -1;         // -1: no ceiling
  double weight = 1.0;
  bool borrowing = true;  // may use idle quota of others beyond its guarantee
};

struct SchedulerSpec {
  int64_t min_runtime_ms = 10 * 60 * 1000;  // before a job may be preempted
  int64_t usage_half_life_ms = 60 * 60 * 1000;  // fair-share usage decay
  // How many pending jobs that cannot start a pass may pass over, after the first one
  // that cannot (backfill: after the blocked head) before it stops. 0 is strict order:
  // the first job that cannot start blocks the rest. Never negative.
  int32_t backfill_depth = 1000;
  DurationEstimate duration_estimate = DurationEstimate::kOracle;  // sjf, srtf
  // LAS: attained-service thresholds in GPU-time (ms of one GPU), ascending; n
  // thresholds make n + 1 queues. The default is Tiresias' two queues split at one
  // GPU-hour.
  std::vector<int64_t> las_thresholds_gpu_ms{60 * 60 * 1000};
  int64_t slo_wait_ms = 10 * 60 * 1000;  // "granted within 10 minutes"
  double slo_target_ratio = 0.95;        // "95% of requested GPUs"
  int64_t timeseries_step_ms = 60 * 60 * 1000;
};

struct ClusterSpec {
  std::string name = "cluster";
  std::vector<PoolSpec> pools;
  std::vector<QueueSpec> queues;
  SchedulerSpec scheduler;

  int64_t TotalGpus() const;
  // The pool a job runs in: the pool it names if that exists, else the first pool whose
  // kinds and queues take it. -1 if none does.
  int RoutePool(const SimJob& job) const;
};

// Checks what the engine relies on: at least one pool, positive sizes of at most
// kMaxPoolGpus GPUs a pool, backfill_depth >= 0, a MIG layout of
// 1..7 sevenths adding up to at most 7 where sharing is MIG, a sound queue tree.
// The error names the pool or queue.
Status ValidateCluster(const ClusterSpec& spec);

// Parses a cluster file. Fails with InvalidArgument naming the file, and line or key, on
// a TOML syntax error, an unknown key, a missing or out-of-range value.
Result<ClusterSpec> ParseClusterToml(std::string_view text, std::string_view source_name);
Result<ClusterSpec> LoadClusterFile(const std::string& path);

// One pool of `nodes` x `gpus_per_node` GPUs at `price`: for tests and benchmarks.
ClusterSpec UniformCluster(int32_t nodes, int32_t gpus_per_node, Money price);

}  // namespace gpuledger::sim
