// Serving pressure: what a serving job's engine says about its load, over a window.
// Serving is latency-bound: idle headroom is expected, and the questions are whether
// requests queue, whether the KV cache is full, how big the batches are, how the time
// splits between prefill and decode, and what a million tokens cost.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/money.h"
#include "core/serving.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger::ledger {

struct Distribution {
  size_t n = 0;
  double mean = 0, p50 = 0, p95 = 0, max = 0;
};
Distribution Summarize(std::vector<double> values);

struct ServingReport {
  int64_t seconds = 0;  // covered by consecutive snapshots
  Distribution queue_depth;       // requests waiting, per scrape
  Distribution running;           // requests in the batch, per scrape
  Distribution kv_cache_usage;    // ratio, per scrape
  double kv_cache_full_share = 0;  // share of scrapes at >= 90% KV cache
  std::optional<double> prefill_share;  // of prefill + decode time of finished requests
  std::optional<double> tokens_per_second;             // prompt + generation
  std::optional<double> generation_tokens_per_second;
  std::optional<double> mean_batch_size;     // Triton: inferences per execution
  std::optional<double> mean_tokens_per_step;  // vLLM: iteration tokens per engine step
  std::vector<std::pair<double, double>> tokens_per_step_histogram;  // (le, steps in window)
  std::optional<double> preemptions_per_hour;
  std::optional<double> queue_seconds_per_request;  // Triton
  std::optional<Money> cost_per_million_tokens;     // with the job's cost over the window
};

// Analyzes the snapshots of one engine and model, in time order. Counter resets (an
// engine restart) are handled as Prometheus does: a decrease starts from zero. Figures
// the engine did not report stay empty. Fails when the snapshots are not one model's or
// not in time order.
Result<ServingReport> AnalyzeServing(const std::vector<ServingSnapshot>& snapshots,
                                     std::optional<Money> cost = std::nullopt);

class Ledger;

struct JobServingReport {
  std::string engine;
  std::string model;
  ServingReport report;
};

// The serving pressure of `job_id` over `window`, one report per engine and model it
// ran, from the snapshots its batches carried. Cost per million tokens uses the job's
// cost over the window when it ran one model. NotFound for an unknown job.
Result<std::vector<JobServingReport>> JobServing(Ledger& ledger, const std::string& job_id,
                                                 const TimeRange& window);

}  // namespace gpuledger::ledger
