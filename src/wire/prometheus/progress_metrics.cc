#include "wire/prometheus/progress_metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace gpuledger::prometheus {
namespace {

// The sum of the series named `name`, or nullopt with the reason in `invalid` (or
// nothing when no series has that name).
std::optional<double> ReadCounter(const std::vector<Family>& families, const std::string& name,
                                  bool& found, std::vector<std::string>& invalid) {
  found = false;
  if (name.empty()) return std::nullopt;
  double sum = 0;
  bool bad = false;
  for (const Family& f : families) {
    for (const TextSample& smp : f.samples) {
      if (smp.name != name) continue;
      found = true;
      if (smp.role != SampleRole::kValue || f.type == MetricType::kHistogram ||
          f.type == MetricType::kSummary) {
        invalid.push_back(fmt::format("{} line {}: type {} where a counter was expected", name,
                                      f.line, MetricTypeName(f.type)));
        bad = true;
        break;
      }
      if (!std::isfinite(smp.value) || smp.value < 0) {
        invalid.push_back(fmt::format("{}{} line {}: value {} is not a count", smp.name,
                                      FormatLabels(smp.labels), smp.line, FormatValue(smp.value)));
        bad = true;
        continue;
      }
      sum += smp.value;
    }
  }
  if (!found || bad) return std::nullopt;
  return sum;
}

}  // namespace

ProgressExtract ExtractProgress(const std::vector<Family>& families, int64_t scrape_ms,
                                const ProgressMetricNames& names) {
  ProgressExtract out;
  out.counters.t_ms = scrape_ms;
  bool tokens_found = false, flops_found = false;
  out.counters.tokens_total = ReadCounter(families, names.tokens, tokens_found, out.invalid);
  out.counters.model_flops_total =
      ReadCounter(families, names.model_flops, flops_found, out.invalid);
  out.absent = !tokens_found && !flops_found;
  return out;
}

ProgressStep ProgressBetween(const ProgressCounters& from, const ProgressCounters& to,
                             const std::string& job_id) {
  ProgressStep step;
  Progress p;
  p.job_id = job_id;
  p.t_ms = to.t_ms;
  p.interval_ms = to.t_ms - from.t_ms;
  auto increase = [&](const std::optional<double>& a, const std::optional<double>& b,
                      std::string_view what) -> std::optional<double> {
    if (!a || !b) return std::nullopt;
    if (*b < *a) {
      step.resets.push_back(fmt::format("{} went down from {} to {}", what, *a, *b));
      return std::nullopt;
    }
    return *b - *a;
  };
  p.tokens = increase(from.tokens_total, to.tokens_total, "tokens");
  p.model_flops = increase(from.model_flops_total, to.model_flops_total, "model FLOPs");
  if (p.tokens || p.model_flops) step.progress = std::move(p);
  return step;
}

}  // namespace gpuledger::prometheus
