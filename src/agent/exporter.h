// The agent's /metrics: one catalog of the families it exports (dcgm-exporter's names
// and labels where the meaning is the same, gpuledger_* families for the rest), and the
// rendering of one complete collection into exposition text. Rendering reads only an
// immutable ExportState, so a scrape never waits for NVML.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "kube/pod_directory.h"
#include "nvml/collector.h"
#include "wire/prometheus/prom_text.h"

namespace gpuledger::agent {

// Which labels a family carries and where its value comes from, besides its spec.
enum class MetricScope : uint8_t { kDevice, kProcess, kAgent };

struct AgentMetric {
  prometheus::MetricSpec spec;
  MetricScope scope = MetricScope::kDevice;
  std::string source;  // where the figure comes from, for docs/agent.md
};

// The catalog, in exposition order. docs/agent.md's table lists the same families (a
// test checks it).
const std::vector<AgentMetric>& AgentMetricCatalog();

// A process as the exporter shows it.
struct ProcessView {
  std::string device_uuid;
  uint32_t pid = 0;
  std::string job_id;  // empty: unattributed
  std::string source;  // AttributionSourceName
};

// Cumulative gap figures of one device since the agent started.
struct GapTotals {
  std::array<int64_t, nvml::GapProfile::kBucketUpperMs.size() + 1> histogram{};  // not cumulative
  int64_t gap_count = 0;
  int64_t gap_ms = 0;
  int64_t covered_ms = 0;
  void Add(const nvml::GapProfile& p);
};

struct AgentCounters {
  int64_t collections = 0;
  double collection_cpu_seconds = 0;
  int64_t cycles_skipped = 0;
  int64_t nvml_errors = 0;
  int64_t samples_dropped = 0;
  int64_t pushed_batches = 0;
  int64_t push_failures = 0;
  int64_t rejected_batches = 0;
  int64_t spool_dropped_batches = 0;
  uint64_t spool_bytes = 0;
  uint64_t spool_batches = 0;
  int64_t open_allocations = 0;
  int64_t slurm_queries = 0;
};

// The pod holding a device, as dcgm-exporter labels its series.
struct DevicePod {
  std::string pod, ns, container;
};

// Everything one scrape shows: the last complete collection and the agent's counters.
struct ExportState {
  ExpositionLabels label_names = ExpositionLabels::kDcgm;
  std::string node;
  std::shared_ptr<const std::vector<nvml::DeviceInfo>> devices;
  nvml::Snapshot snapshot;                // devices in the same order as `devices`
  std::vector<ProcessView> processes;
  std::vector<GapTotals> gap_totals;      // per device, same order
  // Per device, same order (or empty): the pod holding it. A device shared by several
  // pods (time-slicing) has none here: its series cannot name one.
  std::vector<std::optional<DevicePod>> device_pods;
  std::optional<kube::PodDirectoryStatus> kubernetes;  // none: not on Kubernetes
  AgentCounters counters;
};

// The catalog as the Markdown table in docs/agent.md (family, type, labels, source,
// help); a test keeps the docs equal to it.
std::string MetricsTableMarkdown();

// Writes the exposition of `state`. Families without a value (no GPM, say) are written
// with their HELP and TYPE only.
std::string RenderMetrics(const ExportState& state);

}  // namespace gpuledger::agent
