#include "wire/prometheus/serving_metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace gpuledger::prometheus {
namespace {

enum class Field {
  kWaiting, kRunning, kKvCache, kPromptTokens, kGenerationTokens, kPreemptions, kRequests,
  kExecutions, kQueueUs, kComputeUs, kPending, kPrefill, kDecode, kIterationTokens
};

struct Known {
  std::string_view family;
  const char* engine;
  const char* model_label;
  Field field;
  MetricType type;
};

// The families we read, as their TYPE lines name them (vLLM's counters keep their
// _total suffix there); older vLLM releases called the KV-cache gauge
// vllm:gpu_cache_usage_perc.
constexpr Known kKnown[] = {
    {"vllm:num_requests_waiting", "vllm", "model_name", Field::kWaiting, MetricType::kGauge},
    {"vllm:num_requests_running", "vllm", "model_name", Field::kRunning, MetricType::kGauge},
    {"vllm:kv_cache_usage_perc", "vllm", "model_name", Field::kKvCache, MetricType::kGauge},
    {"vllm:gpu_cache_usage_perc", "vllm", "model_name", Field::kKvCache, MetricType::kGauge},
    {"vllm:prompt_tokens_total", "vllm", "model_name", Field::kPromptTokens, MetricType::kCounter},
    {"vllm:generation_tokens_total", "vllm", "model_name", Field::kGenerationTokens, MetricType::kCounter},
    {"vllm:num_preemptions_total", "vllm", "model_name", Field::kPreemptions, MetricType::kCounter},
    {"vllm:request_success_total", "vllm", "model_name", Field::kRequests, MetricType::kCounter},
    {"vllm:request_prefill_time_seconds", "vllm", "model_name", Field::kPrefill, MetricType::kHistogram},
    {"vllm:request_decode_time_seconds", "vllm", "model_name", Field::kDecode, MetricType::kHistogram},
    {"vllm:iteration_tokens_total", "vllm", "model_name", Field::kIterationTokens, MetricType::kHistogram},
    {"nv_inference_pending_request_count", "triton", "model", Field::kWaiting, MetricType::kGauge},
    {"nv_inference_count", "triton", "model", Field::kRequests, MetricType::kCounter},
    {"nv_inference_exec_count", "triton", "model", Field::kExecutions, MetricType::kCounter},
    {"nv_inference_queue_duration_us", "triton", "model", Field::kQueueUs, MetricType::kCounter},
    {"nv_inference_compute_infer_duration_us", "triton", "model", Field::kComputeUs, MetricType::kCounter},
};

// Counters may come typed as counters or untyped (Triton's older exporters).
bool TypeFits(MetricType want, MetricType got) {
  return got == want || (want != MetricType::kHistogram && got == MetricType::kUntyped) ||
         (want == MetricType::kCounter && got == MetricType::kGauge);
}

void Add(std::optional<double>& slot, double v) { slot = slot.value_or(0.0) + v; }

}  // namespace

ServingExtract ExtractServing(const std::vector<Family>& families, int64_t scrape_ms) {
  ServingExtract out;
  std::map<std::pair<std::string, std::string>, ServingSnapshot> by_model;
  auto snapshot = [&](const char* engine, const std::string& model) -> ServingSnapshot& {
    ServingSnapshot& s = by_model[{engine, model}];
    s.t_ms = scrape_ms;
    s.engine = engine;
    s.model = model;
    return s;
  };
  for (const Family& f : families) {
    std::string name = f.name;
    for (const Known& k : kKnown) {
      if (name != k.family) continue;
      if (!TypeFits(k.type, f.type)) {
        out.skipped.push_back(fmt::format("{} line {}: type {} where {} was expected", f.name,
                                          f.line, MetricTypeName(f.type), MetricTypeName(k.type)));
        break;
      }
      if (k.type == MetricType::kHistogram) {
        auto series = GroupHistogram(f);
        if (!series.ok()) {
          out.skipped.push_back(fmt::format("{}: {}", f.name, series.status().message()));
          break;
        }
        for (const HistogramSeries& h : *series) {
          std::string model(FindLabel(h.labels, k.model_label).value_or(""));
          ServingSnapshot& s = snapshot(k.engine, model);
          CumulativeHistogram& dst = k.field == Field::kPrefill ? s.prefill_seconds
                                     : k.field == Field::kDecode ? s.decode_seconds
                                                                 : s.iteration_tokens;
          dst = {};
          for (const auto& b : h.buckets) {
            dst.le.push_back(b.le);
            dst.count.push_back(b.count);
          }
          dst.sum = h.sum.value_or(0.0);
          dst.total = h.count.value_or(dst.count.empty() ? 0.0 : dst.count.back());
        }
        break;
      }
      for (const TextSample& smp : f.samples) {
        if (smp.role != SampleRole::kValue) continue;
        std::string model(FindLabel(smp.labels, k.model_label).value_or(""));
        if (!std::isfinite(smp.value) || smp.value < 0) {
          out.skipped.push_back(fmt::format("{}{} line {}: value {} is not a count or level",
                                            smp.name, FormatLabels(smp.labels), smp.line,
                                            FormatValue(smp.value)));
          continue;
        }
        ServingSnapshot& s = snapshot(k.engine, model);
        // Several series of one model (per source, per GPU) add up.
        switch (k.field) {
          case Field::kWaiting: Add(s.requests_waiting, smp.value); break;
          case Field::kRunning: Add(s.requests_running, smp.value); break;
          case Field::kKvCache:
            // vLLM's "perc" is a ratio in 0..1 despite its name.
            if (smp.value > 1.0) {
              out.skipped.push_back(fmt::format("{} line {}: {} is not a ratio", smp.name,
                                                smp.line, FormatValue(smp.value)));
            } else {
              s.kv_cache_usage_ratio = smp.value;
            }
            break;
          case Field::kPromptTokens: Add(s.prompt_tokens_total, smp.value); break;
          case Field::kGenerationTokens: Add(s.generation_tokens_total, smp.value); break;
          case Field::kPreemptions: Add(s.preemptions_total, smp.value); break;
          case Field::kRequests: Add(s.requests_total, smp.value); break;
          case Field::kExecutions: Add(s.executions_total, smp.value); break;
          case Field::kQueueUs: Add(s.queue_seconds_total, smp.value / 1e6); break;
          case Field::kComputeUs: Add(s.compute_seconds_total, smp.value / 1e6); break;
          default: break;
        }
      }
      break;
    }
  }
  for (auto& [key, s] : by_model) out.snapshots.push_back(std::move(s));
  return out;
}

}  // namespace gpuledger::prometheus
