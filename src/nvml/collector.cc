#include "nvml/collector.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <utility>

namespace gpuledger::nvml {
namespace {

constexpr double kBytesPerMib = 1024.0 * 1024.0;
constexpr double kIdlePercent = 1.0;  // a sample below this busy share is idle
constexpr int32_t kDefaultMigSlices = 7;
constexpr std::array<GpmMetricId, 4> kGpmIds = {GpmMetricId::kSmUtil, GpmMetricId::kSmOccupancy,
                                                GpmMetricId::kAnyTensorUtil,
                                                GpmMetricId::kDramBwUtil};

std::string GpmMetricName(GpmMetricId id) {
  switch (id) {
    case GpmMetricId::kGraphicsUtil: return "GRAPHICS_UTIL";
    case GpmMetricId::kSmUtil: return "SM_UTIL";
    case GpmMetricId::kSmOccupancy: return "SM_OCCUPANCY";
    case GpmMetricId::kAnyTensorUtil: return "ANY_TENSOR_UTIL";
    case GpmMetricId::kDramBwUtil: return "DRAM_BW_UTIL";
  }
  return fmt::format("metric {}", static_cast<uint32_t>(id));
}

int64_t UsToMs(uint64_t us) { return static_cast<int64_t>((us + 500) / 1000); }

// "NVIDIA H200 MIG 3g.71gb" -> "3g.71gb"; "" when the name has no MIG suffix.
std::string ProfileFromName(const std::string& name) {
  static constexpr std::string_view kMarker = " MIG ";
  size_t pos = name.rfind(kMarker);
  return pos == std::string::npos ? "" : name.substr(pos + kMarker.size());
}

// Compute slices of the whole GPU: the parent's own attributes where the driver gives
// them, else 4 for the A30 and 7 for every other MIG-capable GPU.
int32_t TotalSlices(const NvmlLibrary& lib, NvmlDevice gpu, const std::string& model) {
  auto attrs = lib.Attributes(gpu);
  // Only a plausible whole (4 on the A30, 7 on most, 8 at most) is believed.
  if (attrs.ok() && attrs.value().gpu_instance_slice_count >= 4 &&
      attrs.value().gpu_instance_slice_count <= 8) {
    return static_cast<int32_t>(attrs.value().gpu_instance_slice_count);
  }
  return model.find("A30") != std::string::npos ? 4 : kDefaultMigSlices;
}

}  // namespace

GapProfile ComputeGapProfile(std::span<const UtilizationSample> samples, uint64_t since_us) {
  GapProfile p;
  if (samples.empty()) return p;
  std::vector<uint64_t> spans(samples.size());
  std::vector<uint64_t> diffs;
  for (size_t i = 1; i < samples.size(); ++i) {
    diffs.push_back(samples[i].timestamp_us - samples[i - 1].timestamp_us);
  }
  uint64_t first_us = samples[0].timestamp_us;
  uint64_t lead_us = since_us > 0 && first_us > since_us ? first_us - since_us : 0;
  uint64_t median_us = lead_us;
  if (!diffs.empty()) {
    std::vector<uint64_t> sorted = diffs;
    std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
    median_us = sorted[sorted.size() / 2];
  }
  spans[0] = (lead_us == 0 || lead_us > 2 * median_us) ? median_us : lead_us;
  for (size_t i = 1; i < samples.size(); ++i) spans[i] = diffs[i - 1];

  uint64_t covered_us = 0;
  double busy_us = 0;
  uint64_t gap_total_us = 0;
  uint64_t gap_max_us = 0;
  uint64_t run_us = 0;  // the idle run in progress
  auto close_run = [&](bool at_end) {
    if (run_us == 0) return;
    int64_t ms = UsToMs(run_us);
    ++p.gap_count;
    gap_total_us += run_us;
    gap_max_us = std::max(gap_max_us, run_us);
    size_t bucket = 0;
    while (bucket < GapProfile::kBucketUpperMs.size() && ms > GapProfile::kBucketUpperMs[bucket]) {
      ++bucket;
    }
    ++p.gap_histogram[bucket];
    if (ms < GapProfile::kShortGapMs) p.short_gap_ms += ms;
    if (at_end) p.trailing_idle_ms = ms;
    run_us = 0;
  };
  bool leading = true;
  for (size_t i = 0; i < samples.size(); ++i) {
    double v = std::clamp(samples[i].value_percent, 0.0, 100.0);
    covered_us += spans[i];
    busy_us += v / 100.0 * static_cast<double>(spans[i]);
    if (v < kIdlePercent) {
      run_us += spans[i];
      if (leading) p.leading_idle_ms = UsToMs(run_us);
    } else {
      leading = false;
      close_run(false);
    }
  }
  close_run(true);
  p.sample_count = static_cast<int32_t>(samples.size());
  p.covered_ms = UsToMs(covered_us);
  p.sample_period_ms = UsToMs(median_us);
  p.busy_ratio = covered_us > 0 ? busy_us / static_cast<double>(covered_us) : 0;
  p.gap_total_ms = UsToMs(gap_total_us);
  p.gap_max_ms = UsToMs(gap_max_us);
  return p;
}

// Per-device state kept between collections.
struct Tracked {
  NvmlDevice handle;
  int parent = -1;             // index of the parent GPU, for a MIG instance
  std::vector<int> instances;  // indices of the MIG instances, for a GPU
  bool lost = false;
  GpmSample gpm_last;  // the newest GPM sample, taken at gpm_last_ms
  GpmSample gpm_spare;
  int64_t gpm_last_ms = 0;
  uint64_t samples_seen_us = 0;       // newest nvmlDeviceGetSamples timestamp seen
  uint64_t process_util_seen_us = 0;  // newest process-utilization timestamp seen
};

struct Collector::Impl {
  Impl(const NvmlLibrary& l, const Clock& c, Options o) : lib(l), clock(c), options(o) {}

  const NvmlLibrary& lib;
  const Clock& clock;
  Options options;
  std::vector<DeviceInfo> infos;
  std::vector<Tracked> tracked;  // parallel to infos
  std::vector<NvmlError> enumeration_failures;
  int64_t last_collect_ms = 0;

  // The value of `r`, or nullopt with its error recorded (and the device marked lost
  // on GPU_IS_LOST).
  template <typename T>
  std::optional<T> Take(NvmlResult<T> r, size_t i, DeviceSnapshot& snap) {
    if (r.ok()) return std::move(r).value();
    if (r.Is(NvmlCode::kGpuIsLost)) {
      tracked[i].lost = true;
      snap.health = Health::kLost;
    }
    snap.failures.push_back(r.error());
    return std::nullopt;
  }

  // The handle and UUID of a device, or nullopt with the failure recorded. NOT_FOUND
  // is an empty MIG slot, not a failure.
  std::optional<std::pair<NvmlDevice, std::string>> Identify(NvmlResult<NvmlDevice> handle) {
    if (!handle.ok()) {
      if (!handle.Is(NvmlCode::kNotFound)) enumeration_failures.push_back(handle.error());
      return std::nullopt;
    }
    auto uuid = lib.Uuid(handle.value());
    if (!uuid.ok()) {
      enumeration_failures.push_back(uuid.error());
      return std::nullopt;
    }
    return std::pair<NvmlDevice, std::string>(handle.value(), uuid.value());
  }

  void Enumerate(unsigned count);
  void AddInstances(size_t gpu_index);
  void PrimeGpm(size_t i);
  NvmlStatus TakeGpmSample(size_t i, const GpmSample& sample);
  void MeasureGpm(size_t i, int64_t now_ms, DeviceSnapshot& snap);
  void CollectGpu(size_t i, int64_t now_ms, std::vector<DeviceSnapshot>& snaps);
  void CollectProcesses(size_t i, std::vector<DeviceSnapshot>& snaps);
  void CollectInstance(size_t i, int64_t now_ms, DeviceSnapshot& snap);
};

void Collector::Impl::Enumerate(unsigned count) {
  for (unsigned index = 0; index < count; ++index) {
    auto id = Identify(lib.DeviceByIndex(index));
    if (!id) continue;
    NvmlDevice h = id->first;
    DeviceInfo info;
    info.uuid = id->second;
    info.gpu_index = static_cast<int>(index);
    if (auto name = lib.Name(h); name.ok()) info.model = name.value();
    if (auto mem = lib.Memory(h); mem.ok()) {
      info.memory_mib = static_cast<int64_t>(mem.value().total_bytes >> 20);
    }
    if (auto cc = lib.CudaComputeCapability(h); cc.ok()) {
      info.cc_major = cc.value().first;
      info.cc_minor = cc.value().second;
    }
    if (auto mig = lib.MigMode(h); mig.ok()) info.mig_enabled = mig.value().first == 1;
    auto gpm = lib.GpmSupported(h);
    if (!gpm.ok()) {
      info.gpm_unavailable = gpm.error().ToString();
    } else if (!gpm.value()) {
      info.gpm_unavailable = fmt::format("device does not support GPM (compute capability {}.{})",
                                         info.cc_major, info.cc_minor);
    } else {
      info.gpm = true;
    }
    infos.push_back(std::move(info));
    tracked.push_back(Tracked{h});
    if (infos.back().mig_enabled) {
      size_t g = infos.size() - 1;
      AddInstances(g);  // they inherit the GPU's GPM capability
      if (infos[g].gpm) {
        infos[g].gpm = false;
        infos[g].gpm_unavailable = "GPU in MIG mode: GPM is read per MIG instance";
      }
    }
  }
}

void Collector::Impl::AddInstances(size_t gpu_index) {
  const NvmlDevice parent = tracked[gpu_index].handle;
  const DeviceInfo gpu = infos[gpu_index];
  int32_t total_slices = TotalSlices(lib, parent, gpu.model);
  auto max_count = lib.MaxMigDeviceCount(parent);
  unsigned max = max_count.ok() ? max_count.value() : static_cast<unsigned>(total_slices);
  for (unsigned j = 0; j < max; ++j) {
    auto id = Identify(lib.MigDeviceByIndex(parent, j));
    if (!id) continue;
    NvmlDevice m = id->first;
    DeviceInfo info;
    info.uuid = id->second;
    info.model = gpu.model;
    info.gpu_index = gpu.gpu_index;
    info.cc_major = gpu.cc_major;
    info.cc_minor = gpu.cc_minor;
    info.parent_uuid = gpu.uuid;
    int32_t slices = 0;
    if (auto attrs = lib.Attributes(m); attrs.ok()) {
      const DeviceAttributes& a = attrs.value();
      // A compute instance's own slices: several CIs in one GI split its capacity.
      slices = static_cast<int32_t>(a.compute_instance_slice_count > 0
                                        ? a.compute_instance_slice_count
                                        : a.gpu_instance_slice_count);
      info.memory_mib = static_cast<int64_t>(a.memory_size_mb);
    } else {
      enumeration_failures.push_back(attrs.error());
    }
    if (auto mem = lib.Memory(m); mem.ok()) {
      info.memory_mib = static_cast<int64_t>(mem.value().total_bytes >> 20);
    }
    Share share{slices, total_slices};
    if (share.IsValid()) {
      info.share = share;
    } else {
      enumeration_failures.push_back(
          NvmlError{static_cast<int>(NvmlCode::kUnknown), "nvmlDeviceGetAttributes",
                    fmt::format("{}: cannot tell its share ({} of {} slices); counted as 1/{}",
                                info.uuid, slices, total_slices, total_slices)});
      info.share = Share{1, total_slices};
    }
    if (auto name = lib.Name(m); name.ok()) info.mig_profile = ProfileFromName(name.value());
    if (info.mig_profile.empty()) {
      info.mig_profile = fmt::format("{}g.{}gb", slices, std::lround(static_cast<double>(info.memory_mib) / 1024.0));
    }
    if (auto gi = lib.GpuInstanceId(m); gi.ok()) info.gpu_instance_id = gi.value();
    if (auto ci = lib.ComputeInstanceId(m); ci.ok()) info.compute_instance_id = ci.value();
    info.gpm = gpu.gpm && info.gpu_instance_id != ProcessInfo::kNoInstance;
    info.gpm_unavailable = gpu.gpm ? (info.gpm ? "" : "GPU instance id unknown")
                                   : gpu.gpm_unavailable;
    Tracked t{m};
    t.parent = static_cast<int>(gpu_index);
    tracked[gpu_index].instances.push_back(static_cast<int>(infos.size()));
    infos.push_back(std::move(info));
    tracked.push_back(std::move(t));
  }
}

NvmlStatus Collector::Impl::TakeGpmSample(size_t i, const GpmSample& sample) {
  const Tracked& t = tracked[i];
  if (t.parent >= 0) {
    return lib.GpmMigSampleGet(tracked[t.parent].handle, infos[i].gpu_instance_id, sample);
  }
  return lib.GpmSampleGet(t.handle, sample);
}

// Takes the baseline sample. A driver that cannot (no such entry point, or the device
// refuses) turns GPM off for the device, with the reason; other failures retry later.
void Collector::Impl::PrimeGpm(size_t i) {
  DeviceInfo& info = infos[i];
  if (!info.gpm) return;
  auto disable = [&](const NvmlError& e) {
    if (e.Is(NvmlCode::kFunctionNotFound) || e.Is(NvmlCode::kNotSupported)) {
      info.gpm = false;
      info.gpm_unavailable = e.ToString();
    }
  };
  auto sample = lib.GpmSampleAlloc();
  if (!sample.ok()) return disable(sample.error());
  if (auto st = TakeGpmSample(i, sample.value()); !st.ok()) return disable(st.error());
  tracked[i].gpm_last = std::move(sample).value();
  tracked[i].gpm_last_ms = clock.NowMs();
}

void Collector::Impl::MeasureGpm(size_t i, int64_t now_ms, DeviceSnapshot& snap) {
  Tracked& t = tracked[i];
  if (t.gpm_last.valid() && now_ms - t.gpm_last_ms < options.min_gpm_interval_ms) return;
  if (!t.gpm_spare.valid()) {
    auto sample = Take(lib.GpmSampleAlloc(), i, snap);
    if (!sample) return;
    t.gpm_spare = std::move(*sample);
  }
  if (!Take(TakeGpmSample(i, t.gpm_spare), i, snap)) return;
  if (t.gpm_last.valid()) {
    if (auto metrics = Take(lib.GpmMetrics(t.gpm_last, t.gpm_spare, kGpmIds), i, snap)) {
      for (const GpmMetricValue& m : *metrics) {
        if (m.code != 0) {
          snap.failures.push_back(NvmlError{m.code, "nvmlGpmMetricsGet[" + GpmMetricName(m.id) + "]",
                                            ""});
          continue;
        }
        double ratio = std::clamp(m.value / 100.0, 0.0, 1.0);
        switch (m.id) {
          case GpmMetricId::kSmUtil: snap.sm_active = ratio; break;
          case GpmMetricId::kSmOccupancy: snap.sm_occupancy = ratio; break;
          case GpmMetricId::kAnyTensorUtil: snap.tensor_active = ratio; break;
          case GpmMetricId::kDramBwUtil: snap.dram_active = ratio; break;
          case GpmMetricId::kGraphicsUtil: break;
        }
      }
      snap.gpm_window_ms = now_ms - t.gpm_last_ms;
    }
  }
  std::swap(t.gpm_last, t.gpm_spare);
  t.gpm_last_ms = now_ms;
}

void Collector::Impl::CollectGpu(size_t i, int64_t now_ms, std::vector<DeviceSnapshot>& snaps) {
  DeviceSnapshot& snap = snaps[i];
  Tracked& t = tracked[i];
  const DeviceInfo& info = infos[i];
  // Memory first: a lost GPU answers GPU_IS_LOST here and is asked nothing more.
  t.lost = false;
  if (auto mem = Take(lib.Memory(t.handle), i, snap)) {
    snap.fb_used_mib = static_cast<double>(mem->used_bytes) / kBytesPerMib;
    snap.fb_total_mib = static_cast<double>(mem->total_bytes) / kBytesPerMib;
  }
  if (t.lost) return;
  if (auto mw = Take(lib.PowerUsageMilliwatts(t.handle), i, snap)) {
    snap.power_watts = *mw / 1000.0;
  }
  snap.energy_millijoules_total = Take(lib.TotalEnergyMillijoules(t.handle), i, snap);
  snap.sm_clock_mhz = Take(lib.ClockMhz(t.handle, ClockType::kSm), i, snap);
  snap.temperature_c = Take(lib.TemperatureCelsius(t.handle), i, snap);
  if (t.lost) return;
  // A GPU in MIG mode has no whole-GPU utilization; its instances carry the activity.
  if (!info.mig_enabled) {
    if (auto util = Take(lib.Utilization(t.handle), i, snap)) {
      snap.gpu_util = util->gpu_percent / 100.0;
    }
    uint64_t since = t.samples_seen_us;
    if (auto samples = Take(lib.UtilizationSamples(t.handle, since), i, snap)) {
      snap.gaps = ComputeGapProfile(*samples, since);
      if (!samples->empty()) t.samples_seen_us = samples->back().timestamp_us;
    }
    if (info.gpm && !t.lost) MeasureGpm(i, now_ms, snap);
  }
  if (t.lost) return;
  snap.coarse = !snap.sm_active && snap.gpu_util;
  if (options.processes) CollectProcesses(i, snaps);
}

// Lists the GPU's processes once and hands each to the MIG instance it runs in.
void Collector::Impl::CollectProcesses(size_t i, std::vector<DeviceSnapshot>& snaps) {
  DeviceSnapshot& snap = snaps[i];
  Tracked& t = tracked[i];
  auto procs = Take(lib.ComputeProcesses(t.handle), i, snap);
  if (!procs) return;
  snap.processes_listed = true;
  for (int m : t.instances) snaps[static_cast<size_t>(m)].processes_listed = true;
  std::map<uint32_t, ProcessUtilization> util;
  bool have_util = false;
  if (!infos[i].mig_enabled) {
    uint64_t since = t.process_util_seen_us;
    if (auto samples = Take(lib.ProcessUtilizations(t.handle, since), i, snap)) {
      have_util = true;
      for (const ProcessUtilization& u : *samples) {
        util[u.pid] = u;
        t.process_util_seen_us = std::max(t.process_util_seen_us, u.timestamp_us);
      }
    }
  }
  for (const ProcessInfo& p : *procs) {
    ProcessSnapshot ps;
    ps.pid = p.pid;
    ps.fb_used_mib = static_cast<double>(p.used_memory_bytes) / kBytesPerMib;
    size_t owner = i;
    for (int m : t.instances) {
      if (infos[m].gpu_instance_id == p.gpu_instance_id &&
          infos[m].compute_instance_id == p.compute_instance_id) {
        owner = static_cast<size_t>(m);
      }
    }
    ps.device_uuid = infos[owner].uuid;
    if (have_util) {
      // No sample for a process means no utilization since the last one seen.
      auto it = util.find(p.pid);
      ps.sm_share = it == util.end() ? 0.0 : std::clamp(it->second.sm_percent / 100.0, 0.0, 1.0);
      if (it != util.end()) ps.sm_share_timestamp_us = it->second.timestamp_us;
    }
    snaps[owner].processes.push_back(std::move(ps));
  }
}

void Collector::Impl::CollectInstance(size_t i, int64_t now_ms, DeviceSnapshot& snap) {
  Tracked& t = tracked[i];
  if (tracked[t.parent].lost) {
    t.lost = true;
    snap.health = Health::kLost;
    return;
  }
  t.lost = false;
  if (auto mem = Take(lib.Memory(t.handle), i, snap)) {
    snap.fb_used_mib = static_cast<double>(mem->used_bytes) / kBytesPerMib;
    snap.fb_total_mib = static_cast<double>(mem->total_bytes) / kBytesPerMib;
  }
  if (infos[i].gpm && !t.lost) MeasureGpm(i, now_ms, snap);
}

Collector::Collector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Collector::~Collector() = default;

Result<std::unique_ptr<Collector>> Collector::Create(const NvmlLibrary& lib, const Clock& clock,
                                                     Options options) {
  auto count = lib.DeviceCount();
  if (!count.ok()) return Unavailable("cannot count GPUs: " + count.error().ToString());
  auto impl = std::make_unique<Impl>(lib, clock, options);
  impl->Enumerate(count.value());
  int64_t now_ms = clock.NowMs();
  for (size_t i = 0; i < impl->infos.size(); ++i) {
    impl->PrimeGpm(i);
    uint64_t now_us = static_cast<uint64_t>(std::max<int64_t>(0, now_ms)) * 1000;
    impl->tracked[i].samples_seen_us = now_us;
    impl->tracked[i].process_util_seen_us = now_us;
  }
  impl->last_collect_ms = now_ms;
  return std::unique_ptr<Collector>(new Collector(std::move(impl)));
}

const std::vector<DeviceInfo>& Collector::devices() const { return impl_->infos; }

const std::vector<NvmlError>& Collector::enumeration_failures() const {
  return impl_->enumeration_failures;
}

Snapshot Collector::Collect() {
  auto started = std::chrono::steady_clock::now();
  Snapshot s;
  s.t_ms = impl_->clock.NowMs();
  s.interval_ms = s.t_ms - impl_->last_collect_ms;
  impl_->last_collect_ms = s.t_ms;
  s.devices.resize(impl_->infos.size());
  // GPUs come before their instances, so an instance sees its parent's state and the
  // processes the parent handed to it.
  for (size_t i = 0; i < impl_->infos.size(); ++i) {
    s.devices[i].uuid = impl_->infos[i].uuid;
    if (impl_->infos[i].is_mig()) {
      impl_->CollectInstance(i, s.t_ms, s.devices[i]);
    } else {
      impl_->CollectGpu(i, s.t_ms, s.devices);
    }
  }
  s.nvml_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return s;
}

std::vector<Device> ToDevices(std::span<const DeviceInfo> devices, std::string_view node,
                              int64_t sample_interval_ms) {
  std::vector<Device> out;
  for (const DeviceInfo& info : devices) {
    Device d;
    d.uuid = info.uuid;
    d.node = std::string(node);
    d.model = info.model;
    d.memory_mib = info.memory_mib;
    d.parent_uuid = info.parent_uuid;
    d.share = info.share;
    d.mig_profile = info.mig_profile;
    d.sample_interval_ms = sample_interval_ms;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<Sample> ToSamples(const Snapshot& snapshot) {
  std::vector<Sample> out;
  for (const DeviceSnapshot& d : snapshot.devices) {
    Sample s;
    s.device_uuid = d.uuid;
    s.t_ms = snapshot.t_ms;
    s.sm_active = d.sm_active;
    s.sm_occupancy = d.sm_occupancy;
    s.tensor_active = d.tensor_active;
    s.dram_active = d.dram_active;
    s.gpu_util = d.gpu_util;
    s.fb_used_mib = d.fb_used_mib;
    s.power_watts = d.power_watts;
    s.health = d.health;
    for (const ProcessSnapshot& p : d.processes) {
      s.processes.push_back(ProcessSample{p.pid, "", p.fb_used_mib, p.sm_share});
    }
    if (d.processes_listed) s.process_count = static_cast<int32_t>(d.processes.size());
    if (d.gaps && d.gaps->covered_ms > 0) {
      s.gaps = IdleGaps{d.gaps->covered_ms, std::min(d.gaps->gap_total_ms, d.gaps->covered_ms),
                        std::min(d.gaps->short_gap_ms, d.gaps->gap_total_ms)};
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpuledger::nvml
