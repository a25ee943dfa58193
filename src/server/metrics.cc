#include "server/metrics.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <limits>

namespace gpuledger::server {
namespace {

using prometheus::MetricType;

constexpr std::array<double, 10> kLatencyBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025,
                                                     0.05,  0.1,    0.25,  1,    5};

const std::vector<CatalogEntry>& Catalog() {
  static const std::vector<CatalogEntry> kCatalog = {
      {MetricId::kHttpRequests,
       {"gpuledger_http_requests_total", MetricType::kCounter, "",
        "HTTP requests answered, by route and status code."},
       {"route", "code"},
       "every request"},
      {MetricId::kIngestRequests,
       {"gpuledger_ingest_requests_total", MetricType::kCounter, "",
        "Ingest requests by path (native, remote_write, scrape) and outcome (applied, "
        "duplicate, rejected, error)."},
       {"path", "outcome"},
       "POST /api/v1/batches, POST /api/v1/write, the scraper"},
      {MetricId::kIngestSamples,
       {"gpuledger_ingest_samples_total", MetricType::kCounter, "",
        "Samples applied to the ledger, by ingest path."},
       {"path"},
       "applied batches"},
      {MetricId::kIngestDuration,
       {"gpuledger_ingest_batch_duration_seconds", MetricType::kHistogram, "seconds",
        "Time from a request's body being read to its batch being durable, by ingest path."},
       {"path"},
       "applied and duplicate batches"},
      {MetricId::kIgnoredPoints,
       {"gpuledger_ingest_ignored_points_total", MetricType::kCounter, "",
        "Points of Prometheus families the ledger does not use, by family (at most 256 "
        "families of at most 128 bytes each; the rest are counted as \"(other)\")."},
       {"family"},
       "remote-write and scrape"},
      {MetricId::kDroppedSamples,
       {"gpuledger_ingest_dropped_samples_total", MetricType::kCounter, "",
        "Mapped samples not applied, by reason: no_activity (neither SM activity nor GPU "
        "utilization), already_stored (the device already has a sample at that instant), "
        "stale_or_blank (staleness markers and DCGM blank values); for job-bound scrapes "
        "(docs/server.md): serving_absent, serving_invalid, progress_absent, "
        "progress_invalid, progress_reset."},
       {"path", "reason"},
       "remote-write and scrape"},
      {MetricId::kScrapes,
       {"gpuledger_scrapes_total", MetricType::kCounter, "",
        "Scrapes of configured targets by target and outcome (ok, error)."},
       {"target", "outcome"},
       "the scraper"},
      {MetricId::kStoreBytes,
       {"gpuledger_store_size_bytes", MetricType::kGauge, "bytes", "Size of the store's database."},
       {},
       "Store::Stats"},
      {MetricId::kStoreSamples,
       {"gpuledger_store_samples", MetricType::kGauge, "", "Raw samples held by the store."},
       {},
       "Store::Stats"},
      {MetricId::kStoreSampleRows,
       {"gpuledger_store_sample_rows", MetricType::kGauge, "",
        "Rows the raw samples are packed in: a device-hour's batches each add one, merged into one once the "
        "device's samples are past the hour and the hour is rolled up."},
       {},
       "Store::Stats"},
      {MetricId::kStoreDevices,
       {"gpuledger_store_devices", MetricType::kGauge, "", "GPUs and MIG slices known to the store."},
       {},
       "Store::Stats"},
      {MetricId::kStoreWritesFailing,
       {"gpuledger_store_writes_failing", MetricType::kGauge, "",
        "1 while the store's writes fail (the disk full, an I/O error), by what failed: ingest (group "
        "commits) or refresh (the rollup refresh); reads are still served. /healthz says degraded."},
       {"what"},
       "the group committer and the maintenance thread"},
      {MetricId::kFleetUtilization,
       {"gpuledger_fleet_effective_utilization_ratio", MetricType::kGauge, "ratio",
        "Active GPU time over capacity in the last hour, by pool."},
       {"pool"},
       "Ledger::Usage over the last hour, by pool"},
      {MetricId::kFleetGpuSeconds,
       {"gpuledger_fleet_gpu_seconds_total", MetricType::kCounter, "seconds",
        "GPU-seconds of capacity by bucket since the first sample, up to five minutes ago "
        "(a MIG slice counts its share). Late data can move seconds between buckets."},
       {"bucket"},
       "Ledger::Usage from the first sample"},
      {MetricId::kObjectiveEvaluations,
       {"gpuledger_objective_evaluations_total", MetricType::kCounter, "",
        "Evaluations of each configured objective, by outcome (ok, error)."},
       {"objective", "outcome"},
       "the objectives loop"},
      {MetricId::kObjectiveBurnRate,
       {"gpuledger_objective_burn_rate", MetricType::kGauge, "",
        "Each objective's error-budget burn rate over each alert's long window (1h/5m, 6h/30m, 1d/2h, 3d/6h) at the last evaluation."},
       {"objective", "window"},
       "objectives::Evaluate"},
      {MetricId::kObjectiveBudgetLeft,
       {"gpuledger_objective_error_budget_left_ratio", MetricType::kGauge, "ratio",
        "The share of each objective's error budget left over its window (negative: overspent)."},
       {"objective"},
       "objectives::Evaluate"},
      {MetricId::kAlertsFiring,
       {"gpuledger_alerts_firing", MetricType::kGauge, "",
        "Objective alerts firing at the last evaluation."},
       {},
       "alerting::AlertTracker"},
      {MetricId::kAlertDeliveries,
       {"gpuledger_alert_deliveries_total", MetricType::kCounter, "",
        "Alert deliveries per sink by outcome: sent (batches delivered), failed_attempt (retried with backoff), given_up, dropped (queue full)."},
       {"sink", "outcome"},
       "alerting::DeliveryQueue"},
      {MetricId::kAlertQueue,
       {"gpuledger_alert_queue_batches", MetricType::kGauge, "",
        "Alert batches waiting for a sink (with the one in flight)."},
       {"sink"},
       "alerting::DeliveryQueue"},
      {MetricId::kInterventionDecisions,
       {"gpuledger_intervention_decisions_total", MetricType::kCounter, "",
        "Intervention decisions by rule and outcome (proposed, taken, warned, skipped)."},
       {"rule", "outcome"},
       "objectives::Decide"},
      {MetricId::kInterventionActions,
       {"gpuledger_intervention_actions_total", MetricType::kCounter, "",
        "Enforced decisions carried out by an actuator or an owner notice, by rule, action and result (ok, failed, retry_later)."},
       {"rule", "action", "result"},
       "actuators::Actuator"},
      {MetricId::kAuditLogPending,
       {"gpuledger_audit_log_pending", MetricType::kGauge, "",
        "Decisions not yet recorded in the store's audit log (kept and retried at the next evaluation)."},
       {},
       "ledger::RecordActions"},
      {MetricId::kObjectivesLeader,
       {"gpuledger_objectives_leader", MetricType::kGauge, "",
        "1 on the server that evaluates objectives, sends alerts and acts (it holds the store's lease); 0 on the "
        "others sharing its store, which stand by."},
       {},
       "ledger::HoldLease"},
  };
  return kCatalog;
}

prometheus::Labels MakeLabels(const CatalogEntry& e, const std::vector<std::string>& values) {
  prometheus::Labels labels;
  for (size_t i = 0; i < e.labels.size() && i < values.size(); ++i) {
    labels.push_back({std::string(e.labels[i]), values[i]});
  }
  return labels;
}

}  // namespace

std::span<const CatalogEntry> MetricCatalog() { return Catalog(); }

std::string MetricCatalogMarkdown() {
  std::string out = "| metric | type | labels | help | source |\n|---|---|---|---|---|\n";
  for (const CatalogEntry& e : Catalog()) {
    std::string labels;
    for (std::string_view l : e.labels) labels += (labels.empty() ? "" : ", ") + std::string(l);
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", e.spec.name,
                       prometheus::MetricTypeName(e.spec.type), labels, e.spec.help, e.source);
  }
  return out;
}

void MetricsRegistry::Add(MetricId id, const std::vector<std::string>& label_values, double delta) {
  MutexLock lock(mu_);
  values_[{id, label_values}] += delta;
}

void MetricsRegistry::Set(MetricId id, const std::vector<std::string>& label_values, double value) {
  MutexLock lock(mu_);
  values_[{id, label_values}] = value;
}

void MetricsRegistry::Observe(MetricId id, const std::vector<std::string>& label_values,
                              double value) {
  MutexLock lock(mu_);
  Histogram& h = histograms_[{id, label_values}];
  if (h.counts.empty()) h.counts.assign(kLatencyBuckets.size(), 0);
  for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
    if (value <= kLatencyBuckets[i]) {
      h.counts[i] += 1;
      break;
    }
  }
  h.sum += value;
  h.count += 1;
}

void MetricsRegistry::Clear(MetricId id) {
  MutexLock lock(mu_);
  for (auto it = values_.begin(); it != values_.end();) {
    it = it->first.first == id ? values_.erase(it) : std::next(it);
  }
}

double MetricsRegistry::Value(MetricId id, const std::vector<std::string>& label_values) const {
  MutexLock lock(mu_);
  auto it = values_.find({id, label_values});
  return it == values_.end() ? 0 : it->second;
}

Result<std::string> MetricsRegistry::Render() const {
  MutexLock lock(mu_);
  prometheus::TextWriter w;
  for (const CatalogEntry& e : Catalog()) {
    GPULEDGER_RETURN_IF_ERROR(w.BeginFamily(e.spec));
    if (e.spec.type == MetricType::kHistogram) {
      for (auto it = histograms_.lower_bound({e.id, {}}); it != histograms_.end() && it->first.first == e.id;
           ++it) {
        std::vector<prometheus::HistogramBucket> buckets;
        double cumulative = 0;
        for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
          cumulative += it->second.counts[i];
          buckets.push_back({kLatencyBuckets[i], cumulative});
        }
        buckets.push_back({std::numeric_limits<double>::infinity(), it->second.count});
        GPULEDGER_RETURN_IF_ERROR(w.WriteHistogram(MakeLabels(e, it->first.second), buckets,
                                                   it->second.sum, it->second.count));
      }
      continue;
    }
    bool any = false;
    for (auto it = values_.lower_bound({e.id, {}}); it != values_.end() && it->first.first == e.id; ++it) {
      GPULEDGER_RETURN_IF_ERROR(w.WriteSample(MakeLabels(e, it->first.second), it->second));
      any = true;
    }
    // Unlabelled series are always present, so that a dashboard finds them from the start.
    if (!any && e.labels.empty()) GPULEDGER_RETURN_IF_ERROR(w.WriteSample({}, 0));
  }
  return w.Take();
}

}  // namespace gpuledger::server
