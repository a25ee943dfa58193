#include "wire/prometheus/dcgm_mapping.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside libstdc++'s <regex> when optimizing
// with sanitizers (GCC bug 105616); the rest of the warnings stay on.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <set>
#include <tuple>
#include <utility>

namespace gpuledger::prometheus {
namespace {

// Ratios a hair above 1 (rounding in the exporter) are clamped; beyond that, refused.
constexpr double kRatioSlack = 0.01;
constexpr double kPercentSlack = 1.0;
constexpr double kMillijoulesPerJoule = 1000.0;
constexpr int64_t kMibPerGb = 1024;
constexpr size_t kMaxSkippedKept = 16;
// libstdc++'s std::regex recurses per character: a long hostile label value could
// overflow the stack. Kubernetes names are at most 253 bytes; longer values never match.
constexpr size_t kMaxRuleValueBytes = 1024;
// "<<<NULL>>>" is DCGM's blank string: the label is present but has no value.
constexpr std::string_view kDcgmBlankString = "<<<NULL>>>";
constexpr std::string_view kDcgmFamilyPrefix = "DCGM_FI_";

constexpr DcgmFieldSpec kTable[] = {
    {"DCGM_FI_PROF_SM_ACTIVE", DcgmField::kSmActive, DcgmScale::kRatio, "Sample::sm_active"},
    {"DCGM_FI_PROF_SM_OCCUPANCY", DcgmField::kSmOccupancy, DcgmScale::kRatio,
     "Sample::sm_occupancy"},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", DcgmField::kTensorActive, DcgmScale::kRatio,
     "Sample::tensor_active"},
    {"DCGM_FI_PROF_DRAM_ACTIVE", DcgmField::kDramActive, DcgmScale::kRatio, "Sample::dram_active"},
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", DcgmField::kGrEngineActive, DcgmScale::kRatio,
     "SampleExtras::gr_engine_active"},
    {"DCGM_FI_DEV_GPU_UTIL", DcgmField::kGpuUtil, DcgmScale::kPercent, "Sample::gpu_util"},
    {"DCGM_FI_DEV_FB_USED", DcgmField::kFbUsedMib, DcgmScale::kMib, "Sample::fb_used_mib"},
    {"DCGM_FI_DEV_FB_FREE", DcgmField::kFbFreeMib, DcgmScale::kMib, "SampleExtras::fb_free_mib"},
    {"DCGM_FI_DEV_FB_RESERVED", DcgmField::kFbReservedMib, DcgmScale::kMib,
     "SampleExtras::fb_reserved_mib"},
    {"DCGM_FI_DEV_POWER_USAGE", DcgmField::kPowerWatts, DcgmScale::kWatts, "Sample::power_watts"},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", DcgmField::kEnergyJoulesTotal, DcgmScale::kMillijoules,
     "SampleExtras::energy_joules_total"},
    {"DCGM_FI_DEV_XID_ERRORS", DcgmField::kXid, DcgmScale::kCode,
     "SampleExtras::xid, Sample::health"},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", DcgmField::kRowRemapFailure, DcgmScale::kCount,
     "Sample::health"},
    {"DCGM_FI_DEV_ROW_REMAP_PENDING", DcgmField::kRowRemapPending, DcgmScale::kCount,
     "Sample::health"},
    {"DCGM_FI_DEV_RETIRED_PENDING", DcgmField::kRetiredPagesPending, DcgmScale::kCount,
     "Sample::health"},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", DcgmField::kEccDbeVolatile, DcgmScale::kCount,
     "Sample::health"},
};

Health Worse(Health a, Health b) {
  return static_cast<uint8_t>(a) >= static_cast<uint8_t>(b) ? a : b;
}

std::string_view LabelOr(const Labels& labels, std::string_view name) {
  return FindLabel(labels, name).value_or(std::string_view());
}

// Parses a whole non-negative decimal integer.
std::optional<int64_t> ParseIndex(std::string_view text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) {
    return std::nullopt;
  }
  return v;
}

// The node: dcgm-exporter's Hostname (or hostname), else the scrape target's host.
std::string_view NodeOf(const Labels& labels) {
  for (std::string_view key : {"Hostname", "hostname"}) {
    std::string_view v = LabelOr(labels, key);
    if (!v.empty()) return v;
  }
  std::string_view instance = LabelOr(labels, "instance");
  if (!instance.empty() && instance.front() == '[') {  // "[::1]:9400"
    size_t close = instance.find(']');
    return close == std::string_view::npos ? instance : instance.substr(1, close - 1);
  }
  size_t colon = instance.rfind(':');
  return colon == std::string_view::npos ? instance : instance.substr(0, colon);
}

// The workload a series is attributed to. When Prometheus scraped dcgm-exporter with
// honor_labels off, the exporter's pod/namespace/container were renamed exported_* and
// the plain ones name the exporter's own pod: exported_* then win.
struct Workload {
  std::string_view pod;
  std::string_view ns;
  std::string_view container;
};
Workload ResolveWorkload(const Labels& labels) {
  std::string_view exported_pod = LabelOr(labels, "exported_pod");
  if (!exported_pod.empty()) {
    return {exported_pod, LabelOr(labels, "exported_namespace"),
            LabelOr(labels, "exported_container")};
  }
  return {LabelOr(labels, "pod"), LabelOr(labels, "namespace"), LabelOr(labels, "container")};
}

struct MigProfile {
  int32_t compute_slices = 0;
  int32_t memory_gb = 0;
};
// "3g.71gb", "1g.10gb+me", "7g.79gb" -> {slices, GB}.
std::optional<MigProfile> ParseMigProfile(std::string_view text) {
  std::string_view core = text.substr(0, text.find('+'));
  size_t g = core.find("g.");
  if (g == std::string_view::npos || core.size() < g + 5 || core.substr(core.size() - 2) != "gb") {
    return std::nullopt;
  }
  std::optional<int64_t> slices = ParseIndex(core.substr(0, g));
  std::optional<int64_t> gb = ParseIndex(core.substr(g + 2, core.size() - g - 4));
  if (!slices || !gb || *slices <= 0 || *slices > 64 || *gb > 1 << 20) return std::nullopt;
  return MigProfile{static_cast<int32_t>(*slices), static_cast<int32_t>(*gb)};
}

// Indices of "$N" references in a rule's replacement text.
int MaxGroupReference(std::string_view text) {
  int max = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '$' && text[i + 1] >= '0' && text[i + 1] <= '9') {
      max = std::max(max, text[i + 1] - '0');
    }
  }
  return max;
}

struct CompiledRule {
  LabelRule rule;
  std::optional<std::regex> re;
};

}  // namespace

std::string_view DcgmScaleName(DcgmScale scale) {
  switch (scale) {
    case DcgmScale::kRatio:
      return "ratio";
    case DcgmScale::kPercent:
      return "percent";
    case DcgmScale::kMib:
      return "MiB";
    case DcgmScale::kWatts:
      return "W";
    case DcgmScale::kMillijoules:
      return "mJ";
    case DcgmScale::kCode:
      return "code";
    case DcgmScale::kCount:
      return "count";
  }
  return "?";
}

std::span<const DcgmFieldSpec> DcgmFieldTable() { return kTable; }

const DcgmFieldSpec* FindDcgmField(std::string_view family) {
  for (const DcgmFieldSpec& spec : kTable) {
    if (spec.family == family) return &spec;
  }
  return nullptr;
}

Health XidHealth(int64_t xid) {
  switch (xid) {
    case 0:
    case 13:  // graphics engine exception: the application's fault
    case 31:  // GPU memory page fault: the application's fault
    case 43:  // GPU stopped processing: the application's fault
    case 45:  // preemptive cleanup after a killed context
      return Health::kOk;
    case 79:  // fallen off the bus
      return Health::kLost;
    case 48:   // double-bit ECC error
    case 62:   // internal micro-controller halt
    case 64:   // row remapping could not be recorded
    case 74:   // NVLink error
    case 95:   // uncontained ECC error
    case 119:  // GSP RPC timeout
    case 120:  // GSP error
    case 140:  // unrecovered ECC error
      return Health::kUnhealthy;
    default:
      return Health::kDegraded;
  }
}

bool IsDcgmBlank(double value) {
  constexpr double kInt32Blank = 2147483632.0;           // 0x7ffffff0
  constexpr double kInt64Blank = 9223372036854775792.0;  // 0x7ffffffffffffff0
  constexpr double kFp64Blank = 140737488355328.0;       // 2^47
  constexpr double kBlankRange = 16.0;                   // the NOT_FOUND ... neighbours
  return (value >= kInt32Blank && value < kInt32Blank + kBlankRange) ||
         (value >= kFp64Blank && value < kFp64Blank + kBlankRange) || value >= kInt64Blank;
}

std::string MigInstanceUuid(std::string_view parent_uuid, int64_t gpu_instance_id) {
  return fmt::format("MIG-{}/{}", parent_uuid, gpu_instance_id);
}

// ---- Mapping ----------------------------------------------------------------------------------

struct DcgmMapper::Impl {
  DcgmMappingConfig config;
  std::vector<CompiledRule> rules;
};

namespace {

// One point to map, and how to name it in a message.
struct PointRef {
  std::string_view family;
  const Labels* labels = nullptr;
  int64_t t_ms = 0;
  bool remote = false;
  size_t where = 0;  // 1-based line (scrape) or series index (remote-write)

  std::string Describe() const {
    Labels shown;
    for (const Label& l : *labels) {
      if (l.name != kMetricNameLabel) shown.push_back(l);
    }
    return fmt::format(
        "{}{}{} at {} ms",
        remote ? fmt::format("timeseries[{}] ", where) : fmt::format("line {}: ", where), family,
        FormatLabels(shown), t_ms);
  }
};

class BatchBuilder {
 public:
  BatchBuilder(const DcgmMappingConfig& config, const std::vector<CompiledRule>& rules)
      : config_(config), rules_(rules) {}

  Status Add(const PointRef& p, double value);
  DcgmBatch Finish() &&;

 private:
  struct Slot {
    Sample sample;
    SampleExtras extras;
  };

  Status Bad(const PointRef& p, std::string_view what);
  Result<std::string> ResolveDevice(const PointRef& p);
  void ResolveJob(const PointRef& p, const std::string& device_uuid);
  std::string RuleValue(const CompiledRule& r, const Labels& labels, const Workload& w,
                        const std::string& out_template) const;
  Slot& SlotFor(const std::string& uuid, int64_t t_ms);
  Status SetDouble(const PointRef& p, std::optional<double>& slot, double v);

  const DcgmMappingConfig& config_;
  const std::vector<CompiledRule>& rules_;
  std::map<std::string, Device, std::less<>> devices_;
  std::map<std::string, int32_t, std::less<>> mig_memory_gb_;
  std::map<std::pair<std::string, int64_t>, Slot> slots_;
  std::map<std::string, Job, std::less<>> jobs_;
  std::set<std::tuple<std::string, int64_t, std::string>> holds_;
  DcgmBatch batch_;
};

Status BatchBuilder::Bad(const PointRef& p, std::string_view what) {
  std::string message = fmt::format("{}: {}", p.Describe(), what);
  if (config_.on_bad_value == DcgmMappingConfig::BadValue::kReject) {
    return InvalidArgument(std::move(message));
  }
  ++batch_.skipped_points;
  if (batch_.skipped.size() < kMaxSkippedKept) batch_.skipped.push_back(std::move(message));
  return Status::Ok();
}

Result<std::string> BatchBuilder::ResolveDevice(const PointRef& p) {
  const Labels& labels = *p.labels;
  std::string_view uuid = LabelOr(labels, "UUID");
  if (uuid.empty()) uuid = LabelOr(labels, "uuid");  // early exporters
  if (uuid.empty()) return InvalidArgument("no UUID label");
  std::string_view node = NodeOf(labels);
  std::string_view model = LabelOr(labels, "modelName");
  std::string_view profile = LabelOr(labels, "GPU_I_PROFILE");
  bool mig = !profile.empty() && profile != kDcgmBlankString;

  auto [parent_it, parent_new] = devices_.try_emplace(std::string(uuid));
  if (parent_new) {
    Device& d = parent_it->second;
    d.uuid = std::string(uuid);
    d.node = std::string(node);
    d.model = std::string(model);
  }
  if (!mig) return std::string(uuid);

  std::string_view gi_text = LabelOr(labels, "GPU_I_ID");
  std::optional<int64_t> gi = ParseIndex(gi_text);
  if (!gi) {
    return InvalidArgument(fmt::format("GPU_I_ID \"{}\": want the GPU instance id", gi_text));
  }
  std::string mig_uuid = MigInstanceUuid(uuid, *gi);
  if (devices_.find(mig_uuid) != devices_.end()) return mig_uuid;
  std::optional<MigProfile> prof = ParseMigProfile(profile);
  if (!prof) {
    return InvalidArgument(
        fmt::format("GPU_I_PROFILE \"{}\": want a MIG profile such as 3g.71gb", profile));
  }
  int32_t slices = config_.default_mig_slices;
  for (const MigSlices& m : config_.mig_slices) {
    if (model.find(m.model_substring) != std::string_view::npos) {
      slices = m.slices;
      break;
    }
  }
  if (prof->compute_slices > slices) {
    return InvalidArgument(fmt::format("GPU_I_PROFILE \"{}\": {} slices on a {}-slice {}", profile,
                                       prof->compute_slices, slices, model));
  }
  Device d;
  d.uuid = mig_uuid;
  d.node = std::string(node);
  d.model = std::string(model);
  d.parent_uuid = std::string(uuid);
  d.share = Share{prof->compute_slices, slices};
  d.mig_profile = std::string(profile);
  mig_memory_gb_[mig_uuid] = prof->memory_gb;
  devices_.emplace(mig_uuid, std::move(d));
  return mig_uuid;
}

std::string BatchBuilder::RuleValue(const CompiledRule& r, const Labels& labels, const Workload& w,
                                    const std::string& out_template) const {
  if (out_template.empty()) return {};
  std::optional<std::string_view> value;
  if (r.rule.label == "pod") {
    value = w.pod;
  } else if (r.rule.label == "namespace") {
    value = w.ns;
  } else if (r.rule.label == "container") {
    value = w.container;
  } else {
    value = FindLabel(labels, r.rule.label);
  }
  if (!value || value->empty()) return {};
  if (!r.re) return *value == r.rule.pattern ? out_template : std::string();
  if (value->size() > kMaxRuleValueBytes) return {};
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(value->begin(), value->end(), m, *r.re)) return {};
  return m.format(out_template);
}

void BatchBuilder::ResolveJob(const PointRef& p, const std::string& device_uuid) {
  const Labels& labels = *p.labels;
  Workload w = ResolveWorkload(labels);
  std::string_view hpc_job = LabelOr(labels, "hpc_job");
  std::string id;
  if (!hpc_job.empty()) {
    id = fmt::format("hpc/{}", hpc_job);
  } else if (!w.pod.empty()) {
    id = w.ns.empty() ? fmt::format("k8s/{}", w.pod) : fmt::format("k8s/{}/{}", w.ns, w.pod);
  } else {
    return;  // nobody holds the device
  }
  if (jobs_.find(id) == jobs_.end()) {
    Job job;
    job.id = id;
    for (const CompiledRule& r : rules_) {
      if (job.team.empty()) job.team = RuleValue(r, labels, w, r.rule.team);
      if (job.project.empty()) job.project = RuleValue(r, labels, w, r.rule.project);
    }
    jobs_.emplace(id, std::move(job));
  }
  holds_.emplace(device_uuid, p.t_ms, std::move(id));
}

BatchBuilder::Slot& BatchBuilder::SlotFor(const std::string& uuid, int64_t t_ms) {
  auto [it, inserted] = slots_.try_emplace({uuid, t_ms});
  if (inserted) {
    it->second.sample.device_uuid = uuid;
    it->second.sample.t_ms = t_ms;
  }
  return it->second;
}

Status BatchBuilder::SetDouble(const PointRef& p, std::optional<double>& slot, double v) {
  if (slot && *slot != v) {
    return Bad(p, fmt::format("conflicting values {} and {} for one device and instant",
                              FormatValue(*slot), FormatValue(v)));
  }
  slot = v;
  return Status::Ok();
}

Status BatchBuilder::Add(const PointRef& p, double value) {
  const DcgmFieldSpec* spec = FindDcgmField(p.family);
  bool dcgm_family = p.family.substr(0, kDcgmFamilyPrefix.size()) == kDcgmFamilyPrefix;
  if (spec == nullptr) {
    auto it = batch_.ignored_families.find(p.family);
    if (it == batch_.ignored_families.end()) {
      it = batch_.ignored_families.emplace(std::string(p.family), 0).first;
    }
    ++it->second;
    // An unused DCGM family still tells which device exists and which job holds it.
    if (dcgm_family) {
      Result<std::string> uuid = ResolveDevice(p);
      if (uuid.ok()) ResolveJob(p, *uuid);
    }
    return Status::Ok();
  }
  if (IsStaleMarker(value)) {
    ++batch_.stale_points;
    return Status::Ok();
  }
  if (!std::isfinite(value))
    return Bad(p, fmt::format("value {} is not finite", FormatValue(value)));
  if (IsDcgmBlank(value)) {
    ++batch_.blank_points;
    return Status::Ok();
  }
  Result<std::string> uuid_or = ResolveDevice(p);
  if (!uuid_or.ok()) return Bad(p, uuid_or.status().message());
  const std::string& uuid = *uuid_or;

  double v = value;
  switch (spec->scale) {
    case DcgmScale::kRatio:
      if (v < 0 || v > 1 + kRatioSlack) {
        return Bad(p, fmt::format("ratio {} is outside 0..1", FormatValue(value)));
      }
      v = std::min(v, 1.0);
      break;
    case DcgmScale::kPercent:
      if (v < 0 || v > 100 + kPercentSlack) {
        return Bad(p, fmt::format("percent {} is outside 0..100", FormatValue(value)));
      }
      v = std::min(v, 100.0) / 100.0;
      break;
    case DcgmScale::kMillijoules:
      if (v < 0) return Bad(p, fmt::format("energy {} mJ is negative", FormatValue(value)));
      v = v / kMillijoulesPerJoule;
      break;
    case DcgmScale::kCode:
      if (v < 0 || v != std::floor(v) || v > 1e9) {
        return Bad(p, fmt::format("{} is not an XID code", FormatValue(value)));
      }
      break;
    case DcgmScale::kMib:
    case DcgmScale::kWatts:
    case DcgmScale::kCount:
      if (v < 0) {
        return Bad(
            p, fmt::format("{} {} is negative", FormatValue(value), DcgmScaleName(spec->scale)));
      }
      break;
  }

  Slot& slot = SlotFor(uuid, p.t_ms);
  Sample& s = slot.sample;
  SampleExtras& x = slot.extras;
  Status st;
  switch (spec->field) {
    case DcgmField::kSmActive:
      st = SetDouble(p, s.sm_active, v);
      break;
    case DcgmField::kSmOccupancy:
      st = SetDouble(p, s.sm_occupancy, v);
      break;
    case DcgmField::kTensorActive:
      st = SetDouble(p, s.tensor_active, v);
      break;
    case DcgmField::kDramActive:
      st = SetDouble(p, s.dram_active, v);
      break;
    case DcgmField::kGpuUtil:
      st = SetDouble(p, s.gpu_util, v);
      break;
    case DcgmField::kFbUsedMib:
      st = SetDouble(p, s.fb_used_mib, v);
      break;
    case DcgmField::kPowerWatts:
      st = SetDouble(p, s.power_watts, v);
      break;
    case DcgmField::kGrEngineActive:
      st = SetDouble(p, x.gr_engine_active, v);
      break;
    case DcgmField::kFbFreeMib:
      st = SetDouble(p, x.fb_free_mib, v);
      break;
    case DcgmField::kFbReservedMib:
      st = SetDouble(p, x.fb_reserved_mib, v);
      break;
    case DcgmField::kEnergyJoulesTotal:
      st = SetDouble(p, x.energy_joules_total, v);
      break;
    case DcgmField::kXid: {
      auto xid = static_cast<int64_t>(v);
      if (x.xid && *x.xid != xid) {
        st = Bad(p, fmt::format("conflicting XIDs {} and {}", *x.xid, xid));
        break;
      }
      x.xid = xid;
      s.health = Worse(s.health, XidHealth(xid));
      break;
    }
    case DcgmField::kRowRemapFailure:
      if (v > 0) s.health = Worse(s.health, Health::kUnhealthy);
      break;
    case DcgmField::kRowRemapPending:
    case DcgmField::kRetiredPagesPending:
    case DcgmField::kEccDbeVolatile:
      if (v > 0) s.health = Worse(s.health, Health::kDegraded);
      break;
  }
  GPULEDGER_RETURN_IF_ERROR(st);
  ++batch_.used_points;
  ResolveJob(p, uuid);
  return Status::Ok();
}

DcgmBatch BatchBuilder::Finish() && {
  // Memory of each device from its last complete FB reading; MIG instances without one
  // from their profile. The sampling interval from the smallest gap between samples.
  std::map<std::string, int64_t, std::less<>> min_gap;
  std::map<std::string, int64_t, std::less<>> last_t;
  for (auto& [key, slot] : slots_) {
    const std::string& uuid = key.first;
    const Sample& s = slot.sample;
    auto lt = last_t.find(uuid);
    if (lt != last_t.end()) {
      int64_t gap = s.t_ms - lt->second;
      auto [g, inserted] = min_gap.try_emplace(uuid, gap);
      if (!inserted && gap < g->second) g->second = gap;
      lt->second = s.t_ms;
    } else {
      last_t.emplace(uuid, s.t_ms);
    }
    if (s.fb_used_mib && slot.extras.fb_free_mib) {
      double total =
          *s.fb_used_mib + *slot.extras.fb_free_mib + slot.extras.fb_reserved_mib.value_or(0.0);
      devices_[uuid].memory_mib = std::llround(total);
    }
  }
  for (auto& [uuid, d] : devices_) {
    if (d.memory_mib == 0) {
      auto it = mig_memory_gb_.find(uuid);
      if (it != mig_memory_gb_.end()) d.memory_mib = int64_t{it->second} * kMibPerGb;
    }
    auto g = min_gap.find(uuid);
    if (g != min_gap.end()) d.sample_interval_ms = g->second;
    batch_.devices.push_back(std::move(d));
  }
  batch_.samples.reserve(slots_.size());
  batch_.extras.reserve(slots_.size());
  for (auto& [key, slot] : slots_) {
    batch_.samples.push_back(std::move(slot.sample));
    batch_.extras.push_back(slot.extras);
  }
  for (auto& [id, job] : jobs_) batch_.jobs.push_back(std::move(job));
  for (const auto& [uuid, t, job] : holds_) batch_.holds.push_back({uuid, job, t});
  return std::move(batch_);
}

}  // namespace

DcgmMapper::DcgmMapper(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DcgmMapper::DcgmMapper(DcgmMapper&&) noexcept = default;
DcgmMapper& DcgmMapper::operator=(DcgmMapper&&) noexcept = default;
DcgmMapper::~DcgmMapper() = default;

const DcgmMappingConfig& DcgmMapper::config() const { return impl_->config; }

Result<DcgmMapper> DcgmMapper::Create(DcgmMappingConfig config) {
  auto impl = std::make_unique<Impl>();
  for (size_t i = 0; i < config.rules.size(); ++i) {
    const LabelRule& r = config.rules[i];
    auto bad = [i](std::string_view what) {
      return InvalidArgument(fmt::format("rules[{}]: {}", i, what));
    };
    if (!IsValidLabelName(r.label))
      return bad(fmt::format("label \"{}\" is not a label name", r.label));
    if (r.team.empty() && r.project.empty()) return bad("sets neither team nor project");
    CompiledRule c{r, std::nullopt};
    if (r.match == LabelRule::Match::kRegex) {
      try {
        c.re.emplace(r.pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return bad(fmt::format("regex \"{}\": {}", r.pattern, e.what()));
      }
      int groups = static_cast<int>(c.re->mark_count());
      int wanted = std::max(MaxGroupReference(r.team), MaxGroupReference(r.project));
      if (wanted > groups) {
        return bad(fmt::format("refers to ${} but regex \"{}\" has {} group(s)", wanted, r.pattern,
                               groups));
      }
    }
    impl->rules.push_back(std::move(c));
  }
  constexpr int32_t kShareScaleDivisible = 840;  // Share's denominators divide 840
  for (const MigSlices& m : config.mig_slices) {
    if (m.slices <= 0 || kShareScaleDivisible % m.slices != 0 || m.model_substring.empty()) {
      return InvalidArgument(fmt::format("mig_slices \"{}\": {} slices; want a divisor of 840",
                                         m.model_substring, m.slices));
    }
  }
  if (config.default_mig_slices <= 0 || kShareScaleDivisible % config.default_mig_slices != 0) {
    return InvalidArgument(
        fmt::format("default_mig_slices {}: want a divisor of 840", config.default_mig_slices));
  }
  impl->config = std::move(config);
  return DcgmMapper(std::move(impl));
}

Result<DcgmBatch> DcgmMapper::MapScrape(const std::vector<Family>& families,
                                        int64_t scrape_time_ms) const {
  BatchBuilder b(impl_->config, impl_->rules);
  for (const Family& f : families) {
    for (const TextSample& s : f.samples) {
      PointRef p{f.name, &s.labels, s.timestamp_ms.value_or(scrape_time_ms), false, s.line};
      GPULEDGER_RETURN_IF_ERROR(b.Add(p, s.value));
    }
  }
  return std::move(b).Finish();
}

Result<DcgmBatch> DcgmMapper::MapWriteRequest(const WriteRequest& request) const {
  BatchBuilder b(impl_->config, impl_->rules);
  for (size_t i = 0; i < request.timeseries.size(); ++i) {
    const TimeSeries& ts = request.timeseries[i];
    std::string_view name = FindLabel(ts.labels, kMetricNameLabel).value_or(std::string_view());
    for (const RemoteSample& s : ts.samples) {
      PointRef p{name, &ts.labels, s.timestamp_ms, true, i};
      GPULEDGER_RETURN_IF_ERROR(b.Add(p, s.value));
    }
  }
  return std::move(b).Finish();
}

}  // namespace gpuledger::prometheus
