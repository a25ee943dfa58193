#include "agent/exporter.h"

#include <functional>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpuledger::agent {
namespace {

using prometheus::Label;
using prometheus::Labels;
using prometheus::MetricSpec;
using prometheus::MetricType;
using DeviceGetter = std::function<std::optional<double>(const nvml::DeviceSnapshot&)>;

constexpr MetricType kGauge = MetricType::kGauge;
constexpr MetricType kCounter = MetricType::kCounter;

struct CatalogEntry {
  AgentMetric metric;
  DeviceGetter device;  // device families only
};

std::optional<double> Percent(std::optional<double> ratio) {
  if (!ratio) return std::nullopt;
  return *ratio * 100.0;
}

const std::vector<CatalogEntry>& Catalog() {
  static const auto* catalog = new std::vector<CatalogEntry>{
      {{{"DCGM_FI_PROF_SM_ACTIVE", kGauge, "", "Ratio of cycles an SM has at least one warp assigned (NVML GPM SM_UTIL)."},
        MetricScope::kDevice, "GPM SM_UTIL / 100"},
       [](const nvml::DeviceSnapshot& d) { return d.sm_active; }},
      {{{"DCGM_FI_PROF_SM_OCCUPANCY", kGauge, "", "Ratio of resident warps to the SMs' maximum (NVML GPM SM_OCCUPANCY)."},
        MetricScope::kDevice, "GPM SM_OCCUPANCY / 100"},
       [](const nvml::DeviceSnapshot& d) { return d.sm_occupancy; }},
      {{{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", kGauge, "", "Ratio of cycles any tensor pipe is active (NVML GPM ANY_TENSOR_UTIL)."},
        MetricScope::kDevice, "GPM ANY_TENSOR_UTIL / 100"},
       [](const nvml::DeviceSnapshot& d) { return d.tensor_active; }},
      {{{"DCGM_FI_PROF_DRAM_ACTIVE", kGauge, "", "Ratio of cycles the device memory interface is active (NVML GPM DRAM_BW_UTIL)."},
        MetricScope::kDevice, "GPM DRAM_BW_UTIL / 100"},
       [](const nvml::DeviceSnapshot& d) { return d.dram_active; }},
      {{{"DCGM_FI_DEV_GPU_UTIL", kGauge, "", "GPU utilization in percent: share of time a kernel ran (coarse)."},
        MetricScope::kDevice, "nvmlDeviceGetUtilizationRates"},
       [](const nvml::DeviceSnapshot& d) { return Percent(d.gpu_util); }},
      {{{"DCGM_FI_DEV_FB_USED", kGauge, "", "Framebuffer memory used (in MiB)."}, MetricScope::kDevice,
        "nvmlDeviceGetMemoryInfo"},
       [](const nvml::DeviceSnapshot& d) { return d.fb_used_mib; }},
      {{{"DCGM_FI_DEV_FB_FREE", kGauge, "", "Framebuffer memory free (in MiB)."}, MetricScope::kDevice,
        "nvmlDeviceGetMemoryInfo"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> {
         if (!d.fb_used_mib || !d.fb_total_mib) return std::nullopt;
         return std::max(0.0, *d.fb_total_mib - *d.fb_used_mib);
       }},
      {{{"DCGM_FI_DEV_POWER_USAGE", kGauge, "", "Power draw (in W)."}, MetricScope::kDevice,
        "nvmlDeviceGetPowerUsage"},
       [](const nvml::DeviceSnapshot& d) { return d.power_watts; }},
      {{{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", kGauge, "",
         "Total energy consumption since the driver was loaded (in mJ). A gauge here: the exposition "
         "linter wants counters named *_total."},
        MetricScope::kDevice, "nvmlDeviceGetTotalEnergyConsumption"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> {
         if (!d.energy_millijoules_total) return std::nullopt;
         return static_cast<double>(*d.energy_millijoules_total);
       }},
      {{{"DCGM_FI_DEV_SM_CLOCK", kGauge, "", "SM clock frequency (in MHz)."}, MetricScope::kDevice,
        "nvmlDeviceGetClockInfo(SM)"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> {
         if (!d.sm_clock_mhz) return std::nullopt;
         return static_cast<double>(*d.sm_clock_mhz);
       }},
      {{{"DCGM_FI_DEV_GPU_TEMP", kGauge, "", "GPU temperature (in C)."}, MetricScope::kDevice,
        "nvmlDeviceGetTemperature(GPU)"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> {
         if (!d.temperature_c) return std::nullopt;
         return static_cast<double>(*d.temperature_c);
       }},
      {{{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", kGauge, "",
         "Ratio of time the graphics engine is active; here the coarse GPU utilization / 100 (GPM "
         "GRAPHICS_UTIL is not read), so not on MIG instances."},
        MetricScope::kDevice, "nvmlDeviceGetUtilizationRates / 100"},
       [](const nvml::DeviceSnapshot& d) { return d.gpu_util; }},
      {{{"gpuledger_device_healthy", kGauge, "",
         "1 when the device is available (health ok or degraded), 0 when unhealthy or lost."},
        MetricScope::kDevice, "GPU_IS_LOST from any NVML call"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> { return IsAvailable(d.health) ? 1.0 : 0.0; }},
      {{{"gpuledger_device_activity_coarse", kGauge, "",
         "1 when the device's activity figure is only the coarse GPU utilization (no GPM)."},
        MetricScope::kDevice, "collector"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> { return d.coarse ? 1.0 : 0.0; }},
      {{{"gpuledger_gap_busy_ratio", kGauge, "ratio",
         "Time-weighted busy share of the driver's utilization samples in the last interval."},
        MetricScope::kDevice, "nvmlDeviceGetSamples (gap profile)"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> {
         if (!d.gaps || d.gaps->sample_count == 0) return std::nullopt;
         return d.gaps->busy_ratio;
       }},
      {{{"gpuledger_gap_max_seconds", kGauge, "seconds", "Longest idle gap in the last interval."},
        MetricScope::kDevice, "nvmlDeviceGetSamples (gap profile)"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> {
         if (!d.gaps || d.gaps->sample_count == 0) return std::nullopt;
         return static_cast<double>(d.gaps->gap_max_ms) / 1000.0;
       }},
      {{{"gpuledger_gap_trailing_idle_seconds", kGauge, "seconds",
         "Idle time at the end of the last interval (a gap that may go on)."},
        MetricScope::kDevice, "nvmlDeviceGetSamples (gap profile)"},
       [](const nvml::DeviceSnapshot& d) -> std::optional<double> {
         if (!d.gaps || d.gaps->sample_count == 0) return std::nullopt;
         return static_cast<double>(d.gaps->trailing_idle_ms) / 1000.0;
       }},
      {{{"gpuledger_gap_duration_seconds", MetricType::kHistogram, "seconds",
         "Idle gaps between bursts of work since the agent started, by length (the sum is the idle time)."},
        MetricScope::kDevice, "nvmlDeviceGetSamples (gap profile)"},
       nullptr},
      {{{"gpuledger_gap_covered_seconds_total", kCounter, "seconds",
         "Time covered by the driver's utilization samples since the agent started."},
        MetricScope::kDevice, "nvmlDeviceGetSamples (gap profile)"},
       nullptr},
      {{{"gpuledger_process_sm_share_ratio", kGauge, "ratio",
         "A process' share of the GPU's SM time since the previous collection (not on MIG)."},
        MetricScope::kProcess, "nvmlDeviceGetProcessUtilization"},
       nullptr},
      {{{"gpuledger_process_sm_share_timestamp_seconds", kGauge, "seconds",
         "Driver timestamp of the process utilization sample the SM share comes from."},
        MetricScope::kProcess, "nvmlDeviceGetProcessUtilization"},
       nullptr},
      {{{"gpuledger_process_fb_used_bytes", kGauge, "bytes", "Device memory used by the process."},
        MetricScope::kProcess, "nvmlDeviceGetComputeRunningProcesses"},
       nullptr},
      {{{"gpuledger_process_attribution", kGauge, "",
         "1 per process on a device, labelled with the job it is attributed to (empty: unattributed) "
         "and the source that said so."},
        MetricScope::kProcess, "attribution (environ, Slurm, cgroup, mapping files)"},
       nullptr},
      {{{"gpuledger_agent_collections_total", kCounter, "", "Collections the agent completed."},
        MetricScope::kAgent, "agent"},
       nullptr},
      {{{"gpuledger_agent_collection_cpu_seconds_total", kCounter, "seconds",
         "CPU time the collection thread spent (NVML calls, attribution, batching)."},
        MetricScope::kAgent, "CLOCK_THREAD_CPUTIME_ID"},
       nullptr},
      {{{"gpuledger_agent_collection_duration_seconds", kGauge, "seconds",
         "Wall time of the last collection's NVML calls (a hung driver call shows here)."},
        MetricScope::kAgent, "collector"},
       nullptr},
      {{{"gpuledger_agent_last_collection_timestamp_seconds", kGauge, "seconds",
         "When the collection shown here was taken."},
        MetricScope::kAgent, "agent clock"},
       nullptr},
      {{{"gpuledger_agent_cycles_skipped_total", kCounter, "",
         "Collection cycles skipped because a collection overran its interval."},
        MetricScope::kAgent, "agent"},
       nullptr},
      {{{"gpuledger_agent_nvml_errors_total", kCounter, "", "NVML calls that failed."},
        MetricScope::kAgent, "collector"},
       nullptr},
      {{{"gpuledger_agent_samples_dropped_total", kCounter, "",
         "Healthy samples without any activity figure, left out of batches."},
        MetricScope::kAgent, "batch assembler"},
       nullptr},
      {{{"gpuledger_agent_open_allocations", kGauge, "", "Allocations (device, job) open now."},
        MetricScope::kAgent, "batch assembler"},
       nullptr},
      {{{"gpuledger_agent_pushed_batches_total", kCounter, "", "Batches the server took."},
        MetricScope::kAgent, "pusher"},
       nullptr},
      {{{"gpuledger_agent_push_failures_total", kCounter, "", "Failed attempts to send a batch."},
        MetricScope::kAgent, "pusher"},
       nullptr},
      {{{"gpuledger_agent_rejected_batches_total", kCounter, "",
         "Batches the server refused for good (removed from the spool)."},
        MetricScope::kAgent, "pusher"},
       nullptr},
      {{{"gpuledger_agent_spool_bytes", kGauge, "bytes", "Bytes of batches waiting in the spool."},
        MetricScope::kAgent, "spool"},
       nullptr},
      {{{"gpuledger_agent_spool_batches", kGauge, "", "Batches waiting in the spool."}, MetricScope::kAgent,
        "spool"},
       nullptr},
      {{{"gpuledger_agent_spool_dropped_batches_total", kCounter, "",
         "Oldest batches dropped because the spool was full."},
        MetricScope::kAgent, "spool"},
       nullptr},
      {{{"gpuledger_agent_slurm_queries_total", kCounter, "", "Times scontrol was asked about a job."},
        MetricScope::kAgent, "slurm"},
       nullptr},
      {{{"gpuledger_agent_kubernetes_pod_resources_up", kGauge, "",
         "1 when the kubelet's PodResources API answered the last collection's List."},
        MetricScope::kAgent, "kubelet PodResources v1"},
       nullptr},
      {{{"gpuledger_agent_kubernetes_api_server_up", kGauge, "",
         "1 when the API server answered the last request for pod or namespace metadata; 0 also when none is set."},
        MetricScope::kAgent, "API server"},
       nullptr},
      {{{"gpuledger_agent_kubernetes_kubelet_only", kGauge, "",
         "1 when jobs are made from what the kubelet gives alone (namespace, pod, container): no API server, or "
         "it cannot be reached."},
        MetricScope::kAgent, "agent"},
       nullptr},
      {{{"gpuledger_agent_kubernetes_pod_devices", kGauge, "",
         "(container, device) pairs the kubelet lists as held now."},
        MetricScope::kAgent, "kubelet PodResources v1"},
       nullptr},
  };
  return *catalog;
}

// `model_label` is dcgm-exporter's "modelName" on its families, or the lint-clean
// "model_name" (promtool refuses camelCase label names; gpuledger's own families always
// use it).
Labels DeviceLabels(const nvml::DeviceInfo& info, const std::string& node, std::string_view model_label) {
  Labels l;
  l.push_back({"gpu", std::to_string(info.gpu_index)});
  // dcgm-exporter labels a MIG instance's series with its GPU's UUID and GPU_I_ID.
  l.push_back({"UUID", info.is_mig() ? info.parent_uuid : info.uuid});
  l.push_back({"device", fmt::format("nvidia{}", info.gpu_index)});
  l.push_back({std::string(model_label), info.model});
  l.push_back({"Hostname", node});
  if (info.is_mig()) {
    l.push_back({"GPU_I_PROFILE", info.mig_profile});
    l.push_back({"GPU_I_ID", std::to_string(info.gpu_instance_id)});
    l.push_back({"mig_uuid", info.uuid});
  }
  return l;
}

class Emitter {
 public:
  void Begin(const MetricSpec& spec) { Check(w_.BeginFamily(spec)); }
  void Sample(const Labels& labels, double value) { Check(w_.WriteSample(labels, value)); }
  void Histogram(const Labels& labels, const std::vector<prometheus::HistogramBucket>& buckets, double sum,
                 double count) {
    Check(w_.WriteHistogram(labels, buckets, sum, count));
  }
  std::string Take() {
    if (!first_error_.ok()) spdlog::error("agent: /metrics: {}", first_error_.message());
    return w_.Take();
  }

 private:
  void Check(const Status& st) {
    if (!st.ok() && first_error_.ok()) first_error_ = st;
  }
  prometheus::TextWriter w_;
  Status first_error_;
};

}  // namespace

void GapTotals::Add(const nvml::GapProfile& p) {
  for (size_t i = 0; i < histogram.size(); ++i) histogram[i] += p.gap_histogram[i];
  gap_count += p.gap_count;
  gap_ms += p.gap_total_ms;
  covered_ms += p.covered_ms;
}

const std::vector<AgentMetric>& AgentMetricCatalog() {
  static const auto* metrics = [] {
    auto* out = new std::vector<AgentMetric>;
    for (const CatalogEntry& e : Catalog()) out->push_back(e.metric);
    return out;
  }();
  return *metrics;
}

std::string MetricsTableMarkdown() {
  std::string out = "| family | type | labels | from | meaning |\n|---|---|---|---|---|\n";
  for (const CatalogEntry& e : Catalog()) {
    const AgentMetric& m = e.metric;
    std::string_view labels = m.scope == MetricScope::kDevice    ? "device"
                              : m.scope == MetricScope::kProcess ? "device, `pid` (+ `job`, `source`)"
                                                                 : "`Hostname`";
    if (m.spec.name == "gpuledger_process_attribution") labels = "device, `pid`, `job`, `source`";
    if (m.scope == MetricScope::kProcess && m.spec.name != "gpuledger_process_attribution") labels = "device, `pid`";
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", m.spec.name, prometheus::MetricTypeName(m.spec.type), labels,
                       m.source, m.spec.help);
  }
  return out;
}

std::string RenderMetrics(const ExportState& state) {
  static const std::vector<nvml::DeviceInfo> kNone;
  const std::vector<nvml::DeviceInfo>& infos = state.devices ? *state.devices : kNone;
  size_t n = std::min(infos.size(), state.snapshot.devices.size());
  std::vector<Labels> labels;  // gpuledger_* device families
  std::vector<Labels> dcgm;    // DCGM_FI_* families: dcgm-exporter's names, and the pod
  labels.reserve(n);
  dcgm.reserve(n);
  const bool on_kubernetes = state.kubernetes.has_value();
  for (size_t i = 0; i < n; ++i) {
    labels.push_back(DeviceLabels(infos[i], state.node, "model_name"));
    Labels d = DeviceLabels(infos[i], state.node,
                            state.label_names == ExpositionLabels::kDcgm ? "modelName" : "model_name");
    if (on_kubernetes) {
      const std::optional<DevicePod>* pod = i < state.device_pods.size() ? &state.device_pods[i] : nullptr;
      bool held = pod != nullptr && pod->has_value();
      d.push_back({"container", held ? (*pod)->container : ""});
      d.push_back({"namespace", held ? (*pod)->ns : ""});
      d.push_back({"pod", held ? (*pod)->pod : ""});
    }
    dcgm.push_back(std::move(d));
  }
  // Per process: its snapshot and its attribution.
  struct Proc {
    size_t device;
    const nvml::ProcessSnapshot* snap;
    const ProcessView* view;
  };
  std::map<std::pair<std::string, uint32_t>, const ProcessView*> views;
  for (const ProcessView& v : state.processes) views[{v.device_uuid, v.pid}] = &v;
  std::vector<Proc> procs;
  for (size_t i = 0; i < n; ++i) {
    for (const nvml::ProcessSnapshot& p : state.snapshot.devices[i].processes) {
      auto it = views.find({p.device_uuid.empty() ? infos[i].uuid : p.device_uuid, p.pid});
      procs.push_back({i, &p, it == views.end() ? nullptr : it->second});
    }
  }
  auto proc_labels = [&](const Proc& p) {
    Labels l = labels[p.device];
    l.push_back({"pid", std::to_string(p.snap->pid)});
    return l;
  };

  const AgentCounters& c = state.counters;
  const std::map<std::string, double> agent_values = {
      {"gpuledger_agent_collections_total", static_cast<double>(c.collections)},
      {"gpuledger_agent_collection_cpu_seconds_total", c.collection_cpu_seconds},
      {"gpuledger_agent_collection_duration_seconds", state.snapshot.nvml_seconds},
      {"gpuledger_agent_last_collection_timestamp_seconds", static_cast<double>(state.snapshot.t_ms) / 1000.0},
      {"gpuledger_agent_cycles_skipped_total", static_cast<double>(c.cycles_skipped)},
      {"gpuledger_agent_nvml_errors_total", static_cast<double>(c.nvml_errors)},
      {"gpuledger_agent_samples_dropped_total", static_cast<double>(c.samples_dropped)},
      {"gpuledger_agent_open_allocations", static_cast<double>(c.open_allocations)},
      {"gpuledger_agent_pushed_batches_total", static_cast<double>(c.pushed_batches)},
      {"gpuledger_agent_push_failures_total", static_cast<double>(c.push_failures)},
      {"gpuledger_agent_rejected_batches_total", static_cast<double>(c.rejected_batches)},
      {"gpuledger_agent_spool_bytes", static_cast<double>(c.spool_bytes)},
      {"gpuledger_agent_spool_batches", static_cast<double>(c.spool_batches)},
      {"gpuledger_agent_spool_dropped_batches_total", static_cast<double>(c.spool_dropped_batches)},
      {"gpuledger_agent_slurm_queries_total", static_cast<double>(c.slurm_queries)},
  };
  std::map<std::string, double> kube_values;
  if (const auto& k = state.kubernetes) {
    kube_values = {
        {"gpuledger_agent_kubernetes_pod_resources_up", k->pod_resources_up ? 1.0 : 0.0},
        {"gpuledger_agent_kubernetes_api_server_up", k->api_up ? 1.0 : 0.0},
        {"gpuledger_agent_kubernetes_kubelet_only", k->api_configured && k->api_up ? 0.0 : 1.0},
        {"gpuledger_agent_kubernetes_pod_devices", static_cast<double>(k->holders)},
    };
  }

  Emitter out;
  for (const CatalogEntry& e : Catalog()) {
    const MetricSpec& spec = e.metric.spec;
    out.Begin(spec);
    if (e.device) {
      for (size_t i = 0; i < n; ++i) {
        bool dcgm_family = spec.name.starts_with("DCGM_FI_");
        if (auto v = e.device(state.snapshot.devices[i])) out.Sample(dcgm_family ? dcgm[i] : labels[i], *v);
      }
    } else if (spec.name == "gpuledger_gap_duration_seconds") {
      for (size_t i = 0; i < n && i < state.gap_totals.size(); ++i) {
        if (infos[i].is_mig() || infos[i].mig_enabled) continue;
        const GapTotals& g = state.gap_totals[i];
        std::vector<prometheus::HistogramBucket> buckets;
        double cumulative = 0;
        for (size_t b = 0; b < g.histogram.size(); ++b) {
          cumulative += static_cast<double>(g.histogram[b]);
          double le = b < nvml::GapProfile::kBucketUpperMs.size()
                          ? static_cast<double>(nvml::GapProfile::kBucketUpperMs[b]) / 1000.0
                          : std::numeric_limits<double>::infinity();
          buckets.push_back({le, cumulative});
        }
        out.Histogram(labels[i], buckets, static_cast<double>(g.gap_ms) / 1000.0, static_cast<double>(g.gap_count));
      }
    } else if (spec.name == "gpuledger_gap_covered_seconds_total") {
      for (size_t i = 0; i < n && i < state.gap_totals.size(); ++i) {
        if (infos[i].is_mig() || infos[i].mig_enabled) continue;
        out.Sample(labels[i], static_cast<double>(state.gap_totals[i].covered_ms) / 1000.0);
      }
    } else if (e.metric.scope == MetricScope::kProcess) {
      for (const Proc& p : procs) {
        if (spec.name == "gpuledger_process_sm_share_ratio") {
          if (p.snap->sm_share) out.Sample(proc_labels(p), *p.snap->sm_share);
        } else if (spec.name == "gpuledger_process_sm_share_timestamp_seconds") {
          if (p.snap->sm_share_timestamp_us) {
            out.Sample(proc_labels(p), static_cast<double>(*p.snap->sm_share_timestamp_us) / 1e6);
          }
        } else if (spec.name == "gpuledger_process_fb_used_bytes") {
          out.Sample(proc_labels(p), p.snap->fb_used_mib * 1024.0 * 1024.0);
        } else if (spec.name == "gpuledger_process_attribution") {
          Labels l = proc_labels(p);
          l.push_back({"job", p.view ? p.view->job_id : ""});
          l.push_back({"source", p.view ? p.view->source : "none"});
          out.Sample(l, 1);
        }
      }
    } else if (auto it = agent_values.find(spec.name); it != agent_values.end()) {
      out.Sample({{"Hostname", state.node}}, it->second);
    } else if (auto kt = kube_values.find(spec.name); kt != kube_values.end()) {
      out.Sample({{"Hostname", state.node}}, kt->second);
    }
  }
  return out.Take();
}

}  // namespace gpuledger::agent
