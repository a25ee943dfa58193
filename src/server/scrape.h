// The server's scraper: fetches the exposition of listed Prometheus endpoints at an
// interval and parses it with the wire library's text parser. What it makes of a scrape
// depends on the target's kind (docs/server.md, "Scrape"):
// - dcgm: dcgm-exporter or the gpuledger agent's exporter, ingested through the DCGM
//   mapper (devices, samples, job holds);
// - serving: a vLLM or Triton endpoint of one serving job, turned into that job's
//   ServingSnapshots (prometheus::ExtractServing);
// - progress: a training job's own counters (docs/mfu.md), turned into Progress reports
//   from one scrape to the next (prometheus::ExtractProgress, ProgressBetween).
// Every scrape becomes at most one batch whose id comes from the target and the scrape
// time, so a scrape retried at the same time is a duplicate, never counted twice.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "core/time.h"
#include "server/ingest.h"
#include "wire/prometheus/progress_metrics.h"

namespace gpuledger::server {

enum class ScrapeKind { kDcgm, kServing, kProgress };
// "dcgm", "serving", "progress".
std::string_view ScrapeKindName(ScrapeKind kind);
// The inverse of ScrapeKindName; "vllm" and "triton" are accepted spellings of "serving"
// (one extractor reads both engines' families). InvalidArgument names the text.
Result<ScrapeKind> ParseScrapeKind(std::string_view text);

struct ScrapeTarget {
  std::string url;  // "http://host:port/metrics"
  int64_t interval_ms = 15 * kMsPerSecond;
  int64_t timeout_ms = 10 * kMsPerSecond;
  ScrapeKind kind = ScrapeKind::kDcgm;
  // The job the endpoint belongs to: required for kServing and kProgress, unused for
  // kDcgm (whose jobs come from the series' labels). The job must be known to the ledger
  // (declared by an agent's or a native batch) for the scrape's batch to apply.
  std::string job;
  // kProgress: which samples carry the job's counters.
  prometheus::ProgressMetricNames progress_metrics;
};

// Splits "http://host:port/path" into "http://host:port" and "/path" ("/metrics" when
// absent). Only http is accepted.
Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url);

// What one scrape did.
struct ScrapeResult {
  bool applied = false;  // false: a duplicate, or nothing to apply
  bool duplicate = false;
  std::string batch_id;          // empty when there was nothing to apply
  size_t samples = 0;            // kDcgm: samples applied
  size_t serving_snapshots = 0;  // kServing: snapshots applied
  size_t progress_reports = 0;   // kProgress: reports applied (0 or 1)
  // Figures left out, each with its reason; also counted in
  // gpuledger_ingest_dropped_samples_total{path="scrape"} (docs/server.md).
  std::vector<std::string> skipped;
};

class Scraper {
 public:
  // `ingestor`, `clock` and `metrics` (may be null) must outlive the scraper.
  // `apply_batch` applies a batch whole or not at all (the server's ledger ingest); it is
  // what serving and progress targets use. Without it their scrapes fail.
  Scraper(std::vector<ScrapeTarget> targets, DcgmIngestor& ingestor, const Clock& clock,
          MetricsRegistry* metrics, DcgmIngestor::ApplyFn apply_batch = nullptr);
  ~Scraper();
  Scraper(const Scraper&) = delete;
  Scraper& operator=(const Scraper&) = delete;

  // Starts one thread that scrapes every target at its interval. No-op without targets.
  void Start();
  // Stops and joins the thread; a scrape in progress completes first.
  void Stop();

  // Scrapes `target` once, now: fetch, parse (lenient: a broken line is skipped and
  // counted, not the whole scrape), turn into a batch by kind and apply it. Samples
  // without a timestamp, serving snapshots and progress reports take the clock's time.
  // Fails naming the target on a network, HTTP, mapping or ingest error; then nothing of
  // the scraper's state changes (a progress target keeps its baseline, so the next scrape
  // covers the missed interval). A progress target's first scrape only sets its baseline.
  // Thread-safe.
  Result<ScrapeResult> ScrapeOnce(const ScrapeTarget& target);

 private:
  // A progress target's readings: intervals are measured from `base`; `before` is the
  // reading before it, so that a scrape retried at base's time rebuilds the same batch.
  struct ProgressState {
    std::optional<prometheus::ProgressCounters> base;
    std::optional<prometheus::ProgressCounters> before;
  };

  Result<ScrapeResult> ScrapeServing(const ScrapeTarget& target, const std::string& body,
                                     int64_t now);
  Result<ScrapeResult> ScrapeProgress(const ScrapeTarget& target, const std::string& body,
                                      int64_t now);
  // Names `batch` after the target and `now` and applies it through apply_batch_.
  Result<ScrapeResult> ApplyBatch(const ScrapeTarget& target, int64_t now, Batch& batch,
                                  ScrapeResult result);
  void CountSkipped(std::string_view reason, size_t n);
  void Loop();

  std::vector<ScrapeTarget> targets_;
  DcgmIngestor& ingestor_;
  const Clock& clock_;
  MetricsRegistry* metrics_;
  DcgmIngestor::ApplyFn apply_batch_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
  // Held across a progress target's read, apply and update, so that two scrapes of one
  // target never interleave. Never held while mu_ is.
  Mutex progress_mu_;
  std::map<std::string, ProgressState> progress_ GUARDED_BY(progress_mu_);  // by target key
};

}  // namespace gpuledger::server
