// The ledger's domain: devices (GPUs and MIG slices), jobs, allocations and samples.
// Plain data; validation lives with the formats that build these (wire) and the
// ledger that reads them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/money.h"
#include "core/status.h"

namespace gpuledger {

// Where each second of capacity lands. Exactly one bucket per device-second.
enum class Bucket : uint8_t {
  kActive = 0,         // allocated and doing work: allocated time x activity ratio
  kAllocatedIdle = 1,  // allocated but idle: allocated time x (1 - activity)
  kUnallocated = 2,    // healthy, monitored, held by no job
  kUnavailable = 3,    // lost, unhealthy, drained
  kUnmonitored = 4,    // no telemetry for the span
};
inline constexpr size_t kBucketCount = 5;
inline constexpr std::array<Bucket, kBucketCount> kAllBuckets = {
    Bucket::kActive, Bucket::kAllocatedIdle, Bucket::kUnallocated, Bucket::kUnavailable,
    Bucket::kUnmonitored};
std::string_view BucketName(Bucket b);  // "active", "allocated_idle", ...

enum class JobKind : uint8_t { kTraining, kServing, kNotebook, kBatch, kUnknown };
std::string_view JobKindName(JobKind k);
Result<JobKind> ParseJobKind(std::string_view text);

enum class CapacityType : uint8_t { kReserved, kOnDemand, kSpot };
std::string_view CapacityTypeName(CapacityType c);
Result<CapacityType> ParseCapacityType(std::string_view text);

enum class Health : uint8_t {
  kOk = 0,
  kDegraded = 1,   // works, but a non-fatal problem was reported (counted as available)
  kUnhealthy = 2,  // XID or drained: counted as unavailable
  kLost = 3,       // NVML GPU_IS_LOST: counted as unavailable
};
std::string_view HealthName(Health h);
Result<Health> ParseHealth(std::string_view text);
inline bool IsAvailable(Health h) { return h == Health::kOk || h == Health::kDegraded; }

// Why allocated time was idle (docs/idle-causes.md). An estimate from the evidence the
// agent sends; `kOther` when the evidence does not say.
enum class IdleCause : uint8_t {
  kInputStall = 0,       // short, repeated gaps between bursts: the GPU waits for data
  kCheckpointStall = 1,  // long gaps that recur: the job writes checkpoints
  kHeldIdle = 2,         // no process, or no kernel for a long stretch: e.g. a notebook
  kOther = 3,
};
inline constexpr size_t kIdleCauseCount = 4;
inline constexpr std::array<IdleCause, kIdleCauseCount> kAllIdleCauses = {
    IdleCause::kInputStall, IdleCause::kCheckpointStall, IdleCause::kHeldIdle, IdleCause::kOther};
std::string_view IdleCauseName(IdleCause c);  // "input_stall", "checkpoint_stall", ...

// The agent's summary of when the GPU had no kernel running during a sample's interval
// (from the driver's sub-second utilization samples).
struct IdleGaps {
  int64_t interval_ms = 0;    // the span the profile covers
  int64_t idle_ms = 0;        // no kernel running, in all
  int64_t short_idle_ms = 0;  // of which in gaps shorter than 2 s between bursts of work
  bool operator==(const IdleGaps&) const = default;
};

// Which figure an activity ratio came from.
enum class ActivitySource : uint8_t {
  kSmActive = 0,  // DCGM SM_ACTIVE / NVML GPM SM_UTIL: the fine-grained default
  kGpuUtil = 1,   // NVML utilization.gpu: "a kernel was running", coarse
};

// A share of a physical GPU, e.g. 3/7 of its compute slices for a 3g MIG instance.
struct Share {
  int32_t num = 1;
  int32_t den = 1;
  // The share in ticks of kShareScale. REQUIRES: IsValid().
  int64_t ticks() const { return num * (kShareScale / den); }
  bool IsValid() const { return den > 0 && num > 0 && num <= den && kShareScale % den == 0; }
  bool operator==(const Share&) const = default;
};
// "3/7" -> {3, 7}; the denominator must divide 840 (MIG uses 7, 4, 8).
Result<Share> ParseShare(std::string_view text);

// A GPU, or a MIG instance of one (parent_uuid set, share < 1).
struct Device {
  std::string uuid;
  std::string node;
  std::string model;  // "NVIDIA H200", as NVML names it
  int64_t memory_mib = 0;
  std::string pool;
  CapacityType capacity_type = CapacityType::kOnDemand;
  std::string parent_uuid;  // empty for a physical GPU
  Share share;              // of the parent's capacity; 1/1 for a physical GPU
  std::string mig_profile;  // "3g.71gb"; empty for a physical GPU
  // The agent's sampling interval; sets the default staleness limit. 0 = unknown.
  int64_t sample_interval_ms = 0;

  bool is_mig() const { return !parent_uuid.empty(); }
};

// A job's labels or annotations, by key. A sorted map rather than a vector: keys are
// unique (as in Kubernetes), and the batch writer's canonical form, over which a batch's
// content digest is taken, does not depend on the order the scheduler listed them in.
using JobMetadata = std::map<std::string, std::string, std::less<>>;

struct Job {
  std::string id;
  std::string team;
  std::string project;
  std::string experiment;
  std::string user;
  JobKind kind = JobKind::kUnknown;
  std::string pool;
  int32_t priority = 0;
  int32_t requested_gpus = 0;
  std::string requested_mig_profile;
  std::optional<int64_t> submit_ms;
  std::optional<int64_t> start_ms;
  std::optional<int64_t> end_ms;
  // What a training job trains, for MFU from its token counts (all optional).
  std::optional<double> model_parameters;
  int64_t model_layers = 0;
  int64_t model_hidden = 0;
  int64_t model_sequence = 0;
  std::string model_dtype;  // "bf16" when empty
  // The scheduler's labels and annotations the agent was configured to keep
  // (docs/agent.md), which exemptions match (`label:KEY=VALUE`, core/objective.h).
  // Absent: the declaration says nothing of them, and a stored job keeps its set; present,
  // even empty: the job's whole set now, which replaces the stored one (so a label taken
  // off a pod is taken off its job).
  std::optional<JobMetadata> labels;
  std::optional<JobMetadata> annotations;
};

// A job's own report of the work it did over (t_ms - interval_ms, t_ms]: tokens trained,
// or model FLOPs directly.
struct Progress {
  std::string job_id;
  int64_t t_ms = 0;
  int64_t interval_ms = 0;
  std::optional<double> tokens;
  std::optional<double> model_flops;
};

// A job holding a device over [from_ms, to_ms); to_ms empty while it runs.
struct Allocation {
  std::string device_uuid;
  std::string job_id;
  int64_t from_ms = 0;
  std::optional<int64_t> to_ms;
};

// One process on a GPU shared without MIG (time-slicing or MPS).
struct ProcessSample {
  int64_t pid = 0;
  std::string job_id;  // empty when the agent could not attribute it
  double fb_used_mib = 0;
  std::optional<double> sm_share;  // ratio 0..1 of the GPU's SM time
};

// The figures of one device at one instant. The sample covers the span since the
// previous sample of the same device (up to the staleness limit).
struct Sample {
  std::string device_uuid;
  int64_t t_ms = 0;
  std::optional<double> sm_active;      // ratio 0..1
  std::optional<double> sm_occupancy;   // ratio 0..1
  std::optional<double> tensor_active;  // ratio 0..1
  std::optional<double> dram_active;    // ratio 0..1
  std::optional<double> gpu_util;       // ratio 0..1, coarse
  std::optional<double> fb_used_mib;
  std::optional<double> power_watts;
  Health health = Health::kOk;
  std::vector<ProcessSample> processes;
  // Processes the agent saw on the device (0: nothing running); empty if not reported.
  std::optional<int32_t> process_count;
  std::optional<IdleGaps> gaps;

  // The activity ratio the ledger uses: sm_active where present, else gpu_util.
  std::optional<double> ActivityRatio() const { return sm_active ? sm_active : gpu_util; }
  ActivitySource activity_source() const {
    return sm_active ? ActivitySource::kSmActive : ActivitySource::kGpuUtil;
  }
};

}  // namespace gpuledger
