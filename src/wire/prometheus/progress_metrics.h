// A training job's own progress counters, read from its Prometheus endpoint
// (docs/mfu.md): cumulative tokens trained and/or model FLOPs done. One scrape gives the
// counters' values; two consecutive scrapes give the work done between them as a
// Progress report, the same a job could push in a batch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "wire/prometheus/prom_text.h"

namespace gpuledger::prometheus {

// The sample names a training job exports (counters, so the names end in _total).
inline constexpr std::string_view kJobTokensMetric = "gpuledger_job_tokens_total";
inline constexpr std::string_view kJobModelFlopsMetric = "gpuledger_job_model_flops_total";

// Which sample names carry the two counters. A job that already exports a cumulative
// count of its own can be read under that name instead; an empty name is not read.
struct ProgressMetricNames {
  std::string tokens = std::string(kJobTokensMetric);
  std::string model_flops = std::string(kJobModelFlopsMetric);
};

// The counters of one job at one scrape; a counter is empty when the scrape did not give
// a usable value for it.
struct ProgressCounters {
  int64_t t_ms = 0;
  std::optional<double> tokens_total;
  std::optional<double> model_flops_total;
  bool empty() const { return !tokens_total && !model_flops_total; }
};

struct ProgressExtract {
  ProgressCounters counters;
  // Neither counter's samples were in the scrape.
  bool absent = false;
  // Counters left out, each with its reason ("gpuledger_job_tokens_total{rank="1"} line 7:
  // value NaN is not a count"): a bad value is never turned into a number.
  std::vector<std::string> invalid;
};

// Reads the counters named by `names` from a scrape taken at `scrape_ms`. The samples are
// matched by name whatever their family is called (a client may write the TYPE line with
// or without _total); several series of one counter (per rank, per worker) add up. A
// counter is left out whole, and said in `invalid`, when any of its series has a value
// that is not finite or negative, or belongs to a histogram or summary: a partial sum
// would be a wrong number.
ProgressExtract ExtractProgress(const std::vector<Family>& families, int64_t scrape_ms,
                                const ProgressMetricNames& names = {});

// The work between two scrapes of one job.
struct ProgressStep {
  // Over (from.t_ms, to.t_ms]: the increase of each counter present in both readings that
  // did not go down. Empty when no counter gives an increase (a zero increase is a report:
  // the job did nothing).
  std::optional<Progress> progress;
  // Counters that went down between the readings (a restart, or a restore from a
  // checkpoint): their increase is unknown and not reported, never negative; `to` is their
  // new baseline. Each entry names the counter and both values.
  std::vector<std::string> resets;
};

// REQUIRES: from.t_ms < to.t_ms.
ProgressStep ProgressBetween(const ProgressCounters& from, const ProgressCounters& to,
                             const std::string& job_id);

}  // namespace gpuledger::prometheus
