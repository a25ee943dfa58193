// What a serving engine (vLLM, Triton) reports at one scrape: queue and batch state as
// gauges, work done as cumulative counters and histograms. Absent figures stay empty:
// the analysis never invents a zero.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuledger {

// A cumulative histogram: bucket upper bounds with cumulative counts (last is +Inf).
struct CumulativeHistogram {
  std::vector<double> le;
  std::vector<double> count;
  double sum = 0;
  double total = 0;
  bool empty() const { return le.empty(); }
};

struct ServingSnapshot {
  std::string job_id;  // the serving job whose engine this is (empty when unknown)
  int64_t t_ms = 0;
  std::string engine;  // "vllm" or "triton"
  std::string model;   // the engine's model name label
  // Gauges.
  std::optional<double> requests_waiting;
  std::optional<double> requests_running;
  std::optional<double> kv_cache_usage_ratio;  // 0..1
  // Counters (cumulative since the engine started).
  std::optional<double> prompt_tokens_total;
  std::optional<double> generation_tokens_total;
  std::optional<double> preemptions_total;
  std::optional<double> requests_total;          // finished requests (vLLM) / inferences (Triton)
  std::optional<double> executions_total;        // Triton: model executions (batches)
  std::optional<double> queue_seconds_total;     // time requests spent queued
  std::optional<double> compute_seconds_total;   // time in the model
  CumulativeHistogram prefill_seconds;           // vLLM request_prefill_time_seconds
  CumulativeHistogram decode_seconds;            // vLLM request_decode_time_seconds
  CumulativeHistogram iteration_tokens;          // vLLM tokens per engine step
};

// The two gauges the serving advice reads of one snapshot, its queue and its KV cache,
// without the snapshot's engine, model, counters or histograms: the advice weighs every
// snapshot of a week (10,000 a job at one a minute), so each figure not read counts.
struct ServingGauges {
  int64_t t_ms = 0;
  std::optional<double> requests_waiting;
  std::optional<double> kv_cache_usage_ratio;  // 0..1
  bool operator==(const ServingGauges&) const = default;
};

// "sum;total;le:count,le:count,..." and back (the store keeps histograms as text).
// Decode fails on anything it did not write.
std::string EncodeHistogram(const CumulativeHistogram& h);
bool DecodeHistogram(std::string_view text, CumulativeHistogram& out);

}  // namespace gpuledger
