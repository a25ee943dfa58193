// The server's own metrics: one catalog (name, type, unit, help, labels, source) from
// which the /metrics exposition's HELP and TYPE lines and the table in docs/server.md
// are generated, and a registry of the current values.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "wire/prometheus/prom_text.h"

namespace gpuledger::server {

enum class MetricId {
  kHttpRequests,
  kIngestRequests,
  kIngestSamples,
  kIngestDuration,
  kIgnoredPoints,
  kDroppedSamples,
  kScrapes,
  kStoreBytes,
  kStoreSamples,
  kStoreSampleRows,
  kStoreDevices,
  kStoreWritesFailing,
  kFleetUtilization,
  kFleetGpuSeconds,
  // The objectives loop (server/objectives_loop.h).
  kObjectiveEvaluations,
  kObjectiveBurnRate,
  kObjectiveBudgetLeft,
  kAlertsFiring,
  kAlertDeliveries,
  kAlertQueue,
  kInterventionDecisions,
  kInterventionActions,
  kAuditLogPending,
  kObjectivesLeader,
};

struct CatalogEntry {
  MetricId id;
  prometheus::MetricSpec spec;
  std::vector<std::string_view> labels;  // label names, in order
  std::string_view source;               // where the value comes from (for the docs)
};

// Every metric the server exports, in exposition order.
std::span<const CatalogEntry> MetricCatalog();

// The catalog as a Markdown table (docs/server.md embeds it; a test keeps them equal).
std::string MetricCatalogMarkdown();

// Current values. Thread-safe. Label values are given in the catalog's label order.
class MetricsRegistry {
 public:
  // Adds `delta` to a counter.
  void Add(MetricId id, const std::vector<std::string>& label_values, double delta = 1);
  // Sets a gauge (or a counter whose total is computed elsewhere, such as the fleet's
  // GPU-seconds per bucket).
  void Set(MetricId id, const std::vector<std::string>& label_values, double value);
  // Records one observation of a histogram, in seconds.
  void Observe(MetricId id, const std::vector<std::string>& label_values, double value);
  // Forgets every series of `id` (a gauge recomputed as a whole).
  void Clear(MetricId id);

  // The value of one series (0 when absent): for tests and the benchmark.
  double Value(MetricId id, const std::vector<std::string>& label_values) const;

  // The exposition text (format 0.0.4). Fails only on a catalog bug.
  Result<std::string> Render() const;

 private:
  struct Histogram {
    std::vector<double> counts;  // per bucket, not cumulative
    double sum = 0;
    double count = 0;
  };
  using Key = std::pair<MetricId, std::vector<std::string>>;
  mutable Mutex mu_;
  std::map<Key, double> values_ GUARDED_BY(mu_);
  std::map<Key, Histogram> histograms_ GUARDED_BY(mu_);
};

}  // namespace gpuledger::server
