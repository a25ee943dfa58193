// Serving advice: fewer replicas where the load leaves headroom at p95, a MIG slice for
// a one-GPU deployment; never when requests queue at p99 or the KV cache nears full:
// latency comes first (docs/recommendations.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ledger/advice_internal.h"

namespace gpuledger::ledger::advice {

ServingEvidence SummarizeServing(const std::vector<ServingGauges>& snapshots) {
  std::vector<double> queue, kv;
  for (const ServingGauges& s : snapshots) {
    if (s.requests_waiting) queue.push_back(*s.requests_waiting);
    if (s.kv_cache_usage_ratio) kv.push_back(*s.kv_cache_usage_ratio);
  }
  ServingEvidence out;
  out.queue_scrapes = queue.size();
  out.kv_scrapes = kv.size();
  out.kv_max = kv.empty() ? 0 : *std::max_element(kv.begin(), kv.end());
  out.queue_p99 = Percentile(std::move(queue), 0.99);
  out.kv_p95 = Percentile(std::move(kv), 0.95);
  return out;
}

void AdviseServing(const ServingEvidence& serving, const JobEvidence& e, const TimeRange& window,
                   const RightSizingOptions& options, std::vector<Recommendation>& out) {
  const int n = e.gpus;
  // Without the engine's queue there is no telling whether latency has room to give: no
  // fewer replicas; a one-GPU deployment's MIG slice rests on its GPU's figures alone,
  // at low confidence, and says so.
  if (serving.queue_scrapes == 0) {
    if (n != 1 || e.on_mig) return;
    auto profiles = MigProfilesFor(e.first_device->device.model, e.first_device->device.memory_mib);
    if (auto p = SmallestFittingProfile(profiles, e.activity_p95, e.peak_memory_mib)) {
      Recommendation r = MigAdvice(e, *p, window);
      r.evidence += "; no engine metrics: queue and KV cache not checked";
      r.confidence = "low";
      out.push_back(std::move(r));
    }
    return;
  }
  const double kv_p95 = serving.kv_p95, kv_max = serving.kv_max;
  if (serving.queue_p99 > 0 || kv_max >= options.kv_cache_near_full) return;
  double activity_p95 = 0;
  for (double v : e.gpu_p95) activity_p95 += v;
  activity_p95 /= static_cast<double>(std::max<size_t>(1, e.gpu_p95.size()));
  std::string evidence = fmt::format(
      "queue empty at p99 ({} scrapes); KV cache p95 {:.0f}%, max {:.0f}%{}; GPU activity p95 {:.0f}% "
      "(mean over {} GPU(s)); peak memory {:.1f} GiB; window {} .. {}",
      serving.queue_scrapes, kv_p95 * 100, kv_max * 100, serving.kv_scrapes == 0 ? " (not reported)" : "", activity_p95 * 100,
      e.gpu_p95.size(), e.peak_memory_mib / 1024.0, FormatTime(window.begin_ms), FormatTime(window.end_ms));
  if (n == 1 && !e.on_mig) {
    auto profiles = MigProfilesFor(e.first_device->device.model, e.first_device->device.memory_mib);
    if (auto p = SmallestFittingProfile(profiles, e.activity_p95, e.peak_memory_mib)) {
      Recommendation r = MigAdvice(e, *p, window);
      r.evidence = evidence;
      out.push_back(std::move(r));
    }
    return;
  }
  if (n < 2) return;
  // The load each of m replicas carries at p95 once the traffic of n is spread over them.
  double load = std::max(activity_p95, kv_p95);
  auto m = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(n) * load /
                                                                 options.serving_target_load)));
  if (m >= n) return;
  Recommendation r = Base(e, RecommendationKind::kServingHeadroom, window);
  r.action = fmt::format("serve on {} GPUs instead of {} (fewer replicas): each then carries {:.0f}% at p95",
                         m, n, load * static_cast<double>(n) / static_cast<double>(m) * 100);
  r.evidence = evidence;
  r.remedies = "scale the deployment's replicas down, or let an autoscaler on queue depth do it";
  r.saving_share_num = n - m;
  r.saving_share_den = n;
  r.saving = Scale(r.cost, n - m, n);
  out.push_back(std::move(r));
}

}  // namespace gpuledger::ledger::advice
