// The collector: enumerates a node's GPUs and MIG instances once, then on every
// Collect() reads their figures through the NVML binding into a snapshot. A failed call
// leaves its figure empty and is recorded with its reason; GPU_IS_LOST marks the device
// (and its MIG instances) lost; nothing here throws or aborts on driver behaviour.
//
// The snapshot is richer than the ledger's Sample (energy, clocks, the gap profile,
// per-call failures) for the agent's exporter; ToDevices()/ToSamples() map it onto
// core/model.h for the ledger.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/time.h"
#include "nvml/nvml_api.h"

namespace gpuledger::nvml {

// What the collector learnt about a device at enumeration.
struct DeviceInfo {
  std::string uuid;         // "GPU-..." or "MIG-..."
  std::string model;        // nvmlDeviceGetName of the GPU, e.g. "NVIDIA H200"
  int64_t memory_mib = 0;   // total memory of the device (the instance's own for MIG)
  int gpu_index = 0;        // nvml index of the physical GPU
  int cc_major = 0;         // CUDA compute capability of the GPU; 0 when unknown
  int cc_minor = 0;
  bool mig_enabled = false;  // a physical GPU in MIG mode
  // MIG instance only.
  std::string parent_uuid;
  std::string mig_profile;  // "3g.71gb"
  Share share;              // of the parent; 1/1 for a physical GPU
  uint32_t gpu_instance_id = ProcessInfo::kNoInstance;
  uint32_t compute_instance_id = ProcessInfo::kNoInstance;
  // GPM: whether this device gets fine-grained activity, and why not when it does not.
  bool gpm = false;
  std::string gpm_unavailable;  // e.g. "nvmlGpmSampleGet: FUNCTION_NOT_FOUND (...)"

  bool is_mig() const { return !parent_uuid.empty(); }
};

// The shape of idle time within one collection interval, from the driver's
// GPU-utilization sample buffer (nvmlDeviceGetSamples). A sample whose busy share is
// below 1% is idle; a gap is a maximal run of idle samples, as long as the time those
// samples cover. The ledger tells input stalls (many short gaps between busy samples)
// from held-idle time (one gap spanning the interval) with it. See docs/nvml.md.
struct GapProfile {
  // Upper bounds (inclusive) of the histogram buckets; the last bucket is open.
  static constexpr std::array<int64_t, 4> kBucketUpperMs = {250, 1000, 5000, 30000};

  int32_t sample_count = 0;
  int64_t covered_ms = 0;       // time covered by the samples
  int64_t sample_period_ms = 0;  // median spacing of the samples
  double busy_ratio = 0;        // mean busy share over the covered time, 0..1
  int32_t gap_count = 0;
  int64_t gap_total_ms = 0;
  int64_t gap_max_ms = 0;
  // Idle time in gaps shorter than kShortGapMs: the GPU waiting between bursts of work
  // (the ledger's input-stall evidence, docs/idle-causes.md).
  static constexpr int64_t kShortGapMs = 2000;
  int64_t short_gap_ms = 0;
  std::array<int32_t, kBucketUpperMs.size() + 1> gap_histogram{};  // gap counts per bucket
  int64_t leading_idle_ms = 0;   // the gap touching the interval's start (may continue one)
  int64_t trailing_idle_ms = 0;  // the gap touching its end (may go on)

  bool operator==(const GapProfile&) const = default;
};

// Builds the profile from samples newer than `since_us`, oldest first. The first
// sample covers (since_us, t0] when that is no longer than twice the median spacing,
// else one median spacing. Empty samples give an all-zero profile.
GapProfile ComputeGapProfile(std::span<const UtilizationSample> samples, uint64_t since_us);

struct ProcessSnapshot {
  uint32_t pid = 0;
  double fb_used_mib = 0;
  // SM share 0..1 from nvmlDeviceGetProcessUtilization, with the driver's timestamp of
  // that sample; empty on MIG (not supported) or when the process had no sample.
  std::optional<double> sm_share;
  std::optional<uint64_t> sm_share_timestamp_us;
  std::string device_uuid;  // the MIG instance it runs in, else the GPU
};

struct DeviceSnapshot {
  std::string uuid;
  Health health = Health::kOk;
  // Activity ratios 0..1. From GPM when the device has it (over gpm_window_ms);
  // else only gpu_util, and `coarse` is set.
  std::optional<double> sm_active;
  std::optional<double> sm_occupancy;
  std::optional<double> tensor_active;
  std::optional<double> dram_active;
  std::optional<double> gpu_util;
  bool coarse = false;
  int64_t gpm_window_ms = 0;
  std::optional<double> fb_used_mib;
  std::optional<double> fb_total_mib;
  std::optional<double> power_watts;
  std::optional<uint64_t> energy_millijoules_total;  // counter since driver load
  std::optional<unsigned> sm_clock_mhz;
  std::optional<unsigned> temperature_c;  // whole GPUs only
  std::optional<GapProfile> gaps;  // since the previous collection; physical non-MIG GPUs
  std::vector<ProcessSnapshot> processes;
  bool processes_listed = false;  // the process list was read (so an empty one means none)
  std::vector<NvmlError> failures;  // every call that failed in this collection
};

struct Snapshot {
  int64_t t_ms = 0;
  int64_t interval_ms = 0;  // since the previous Collect(), or since Create() for the first
  // Real (steady-clock) time this Collect() took, nearly all of it inside NVML calls:
  // a driver call that hangs shows here.
  double nvml_seconds = 0;
  std::vector<DeviceSnapshot> devices;  // the same order as Collector::devices()
};

class Collector {
 public:
  struct Options {
    // GPM measurements need two samples at least this far apart; a Collect() sooner
    // than that after the last GPM sample reports no GPM figures for the device.
    int64_t min_gpm_interval_ms = 100;
    bool processes = true;
  };

  // Enumerates the GPUs and their MIG instances and takes the first GPM samples, so
  // that the first Collect() can report GPM figures. Fails only when the device count
  // cannot be read; a device that cannot be identified (no handle or UUID) is left out
  // and its reason is in enumeration_failures().
  // REQUIRES: `lib` and `clock` outlive the collector.
  static Result<std::unique_ptr<Collector>> Create(const NvmlLibrary& lib, const Clock& clock,
                                                   Options options);
  static Result<std::unique_ptr<Collector>> Create(const NvmlLibrary& lib, const Clock& clock) {
    return Create(lib, clock, Options{});
  }
  ~Collector();
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  const std::vector<DeviceInfo>& devices() const;
  const std::vector<NvmlError>& enumeration_failures() const;

  // Reads every device's figures now. Never fails as a whole: failures are per device
  // and per call. Not thread-safe: one caller at a time.
  Snapshot Collect();

 private:
  struct Impl;
  explicit Collector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The ledger's view of the inventory: node, pool and capacity type are the agent's to
// fill; `sample_interval_ms` is recorded on each device.
std::vector<Device> ToDevices(std::span<const DeviceInfo> devices, std::string_view node,
                              int64_t sample_interval_ms);

// The ledger's view of a snapshot: one Sample per device (job ids left empty for the
// agent's attribution).
std::vector<Sample> ToSamples(const Snapshot& snapshot);

}  // namespace gpuledger::nvml
