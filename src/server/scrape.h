// The server's scraper: fetches the exposition of listed Prometheus endpoints
// (dcgm-exporter, the gpuledger agent's exporter, vLLM) at an interval, parses it with
// the wire library's text parser and ingests what the DCGM mapper makes of it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "server/ingest.h"

namespace gpuledger::server {

struct ScrapeTarget {
  std::string url;  // "http://host:port/metrics"
  int64_t interval_ms = 15 * kMsPerSecond;
  int64_t timeout_ms = 10 * kMsPerSecond;
};

// Splits "http://host:port/path" into "http://host:port" and "/path" ("/metrics" when
// absent). Only http is accepted.
Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url);

class Scraper {
 public:
  // `ingestor`, `clock` and `metrics` must outlive the scraper.
  Scraper(std::vector<ScrapeTarget> targets, DcgmIngestor& ingestor, const Clock& clock,
          MetricsRegistry* metrics);
  ~Scraper();
  Scraper(const Scraper&) = delete;
  Scraper& operator=(const Scraper&) = delete;

  // Starts one thread that scrapes every target at its interval. No-op without targets.
  void Start();
  // Stops and joins the thread; a scrape in progress completes first.
  void Stop();

  // Scrapes `target` once, now: fetch, parse (lenient: a broken line is skipped and
  // counted, not the whole scrape), map and apply. Samples without a timestamp take
  // the clock's time. Fails naming the target on a network, HTTP or mapping error.
  Result<DcgmIngestResult> ScrapeOnce(const ScrapeTarget& target);

 private:
  void Loop();

  std::vector<ScrapeTarget> targets_;
  DcgmIngestor& ingestor_;
  const Clock& clock_;
  MetricsRegistry* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace gpuledger::server
