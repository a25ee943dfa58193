#include "ledger/serving.h"
#include "ledger/store_access.h"

#include "ledger/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace gpuledger::ledger {
namespace {

// The increase of a counter from a to b, across a reset.
double Increase(double a, double b) { return b >= a ? b - a : b; }

// Sum of increases of an optional counter over the series; empty if never reported.
std::optional<double> CounterIncrease(const std::vector<ServingSnapshot>& s,
                                      std::optional<double> ServingSnapshot::*field) {
  std::optional<double> total;
  for (size_t i = 1; i < s.size(); ++i) {
    const auto& a = s[i - 1].*field;
    const auto& b = s[i].*field;
    if (a && b) total = total.value_or(0.0) + Increase(*a, *b);
  }
  return total;
}

double HistogramIncrease(const std::vector<ServingSnapshot>& s,
                         CumulativeHistogram ServingSnapshot::*field, bool sum) {
  double total = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    const CumulativeHistogram& a = s[i - 1].*field;
    const CumulativeHistogram& b = s[i].*field;
    if (a.empty() || b.empty()) continue;
    total += sum ? Increase(a.sum, b.sum) : Increase(a.total, b.total);
  }
  return total;
}

}  // namespace

Distribution Summarize(std::vector<double> v) {
  Distribution d;
  d.n = v.size();
  if (v.empty()) return d;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  d.mean = sum / static_cast<double>(v.size());
  auto at = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
  };
  d.p50 = at(0.5);
  d.p95 = at(0.95);
  d.max = v.back();
  return d;
}

Result<ServingReport> AnalyzeServing(const std::vector<ServingSnapshot>& s,
                                     std::optional<Money> cost) {
  ServingReport r;
  for (size_t i = 1; i < s.size(); ++i) {
    if (s[i].t_ms <= s[i - 1].t_ms) {
      return InvalidArgument(fmt::format("serving snapshots out of time order at index {}", i));
    }
    if (s[i].engine != s[0].engine || s[i].model != s[0].model) {
      return InvalidArgument(fmt::format("serving snapshot {} is {} / {}, not {} / {}", i, s[i].engine,
                                         s[i].model, s[0].engine, s[0].model));
    }
  }
  if (s.size() >= 2) r.seconds = (s.back().t_ms - s.front().t_ms) / 1000;
  std::vector<double> waiting, running, kv;
  for (const auto& x : s) {
    if (x.requests_waiting) waiting.push_back(*x.requests_waiting);
    if (x.requests_running) running.push_back(*x.requests_running);
    if (x.kv_cache_usage_ratio) kv.push_back(*x.kv_cache_usage_ratio);
  }
  r.queue_depth = Summarize(waiting);
  r.running = Summarize(running);
  r.kv_cache_usage = Summarize(kv);
  if (!kv.empty()) {
    r.kv_cache_full_share =
        static_cast<double>(std::count_if(kv.begin(), kv.end(), [](double v) { return v >= 0.9; })) /
        static_cast<double>(kv.size());
  }
  if (r.seconds <= 0) return r;
  double secs = static_cast<double>(r.seconds);

  double prefill = HistogramIncrease(s, &ServingSnapshot::prefill_seconds, true);
  double decode = HistogramIncrease(s, &ServingSnapshot::decode_seconds, true);
  if (prefill + decode > 0) r.prefill_share = prefill / (prefill + decode);

  auto prompt = CounterIncrease(s, &ServingSnapshot::prompt_tokens_total);
  auto generated = CounterIncrease(s, &ServingSnapshot::generation_tokens_total);
  if (prompt || generated) {
    double tokens = prompt.value_or(0) + generated.value_or(0);
    r.tokens_per_second = tokens / secs;
    if (cost && tokens > 0) {
      r.cost_per_million_tokens = Money::FromMicros(
          static_cast<int64_t>(std::llround(static_cast<double>(cost->micros()) * 1e6 / tokens)));
    }
  }
  if (generated) r.generation_tokens_per_second = *generated / secs;

  auto requests = CounterIncrease(s, &ServingSnapshot::requests_total);
  auto executions = CounterIncrease(s, &ServingSnapshot::executions_total);
  if (requests && executions && *executions > 0) r.mean_batch_size = *requests / *executions;
  auto queued = CounterIncrease(s, &ServingSnapshot::queue_seconds_total);
  if (queued && requests && *requests > 0) r.queue_seconds_per_request = *queued / *requests;
  if (auto pre = CounterIncrease(s, &ServingSnapshot::preemptions_total)) {
    r.preemptions_per_hour = *pre / (secs / 3600.0);
  }

  double steps = HistogramIncrease(s, &ServingSnapshot::iteration_tokens, false);
  if (steps > 0) {
    r.mean_tokens_per_step = HistogramIncrease(s, &ServingSnapshot::iteration_tokens, true) / steps;
    // Steps per bucket (non-cumulative) over the window.
    const CumulativeHistogram& first = s.front().iteration_tokens;
    const CumulativeHistogram& last = s.back().iteration_tokens;
    if (first.le == last.le) {
      double prev = 0;
      for (size_t b = 0; b < last.le.size(); ++b) {
        double cum = Increase(first.count[b], last.count[b]);
        r.tokens_per_step_histogram.emplace_back(last.le[b], std::max(0.0, cum - prev));
        prev = cum;
      }
    }
  }
  return r;
}

Result<std::vector<JobServingReport>> JobServing(Ledger& ledger, const std::string& job_id,
                                                 const TimeRange& window) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, internal_StoreOf(ledger).Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, snap->SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  int64_t id = 0;
  for (const auto& j : jobs) {
    if (j.job.id == job_id) id = j.id;
  }
  if (id == 0) return NotFound(fmt::format("no job {}", job_id));
  GPULEDGER_ASSIGN_OR_RETURN(auto snapshots, snap->ServingOf(id, window));
  std::vector<std::vector<ServingSnapshot>> series;
  for (ServingSnapshot& s : snapshots) {
    if (series.empty() || series.back().front().engine != s.engine ||
        series.back().front().model != s.model) {
      series.emplace_back();
    }
    series.back().push_back(std::move(s));
  }
  std::optional<Money> cost;
  if (series.size() == 1) {
    GPULEDGER_ASSIGN_OR_RETURN(UsageReport usage, internal_UsageOn(ledger, *snap, window, {Dimension::kJob}));
    for (const auto& row : usage.rows) {
      if (row.key[0] == job_id) cost = row.total_cost();
    }
  }
  std::vector<JobServingReport> out;
  for (const auto& one : series) {
    GPULEDGER_ASSIGN_OR_RETURN(ServingReport r, AnalyzeServing(one, cost));
    out.push_back({one.front().engine, one.front().model, std::move(r)});
  }
  return out;
}

}  // namespace gpuledger::ledger
