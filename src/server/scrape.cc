#include "server/scrape.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "server/metrics.h"
#include "wire/batch.h"
#include "wire/prometheus/prom_text.h"

namespace gpuledger::server {

Result<std::pair<std::string, std::string>> SplitHttpUrl(const std::string& url) {
  constexpr std::string_view kHttp = "http://";
  if (!std::string_view(url).starts_with(kHttp)) {
    return InvalidArgument(fmt::format("url \"{}\": only http:// is supported", url));
  }
  size_t slash = url.find('/', kHttp.size());
  std::string base = url.substr(0, slash);
  std::string path = slash == std::string::npos ? "/metrics" : url.substr(slash);
  if (base.size() == kHttp.size()) return InvalidArgument(fmt::format("url \"{}\": no host", url));
  return std::pair{base, path};
}

Scraper::Scraper(std::vector<ScrapeTarget> targets, DcgmIngestor& ingestor, const Clock& clock,
                 MetricsRegistry* metrics)
    : targets_(std::move(targets)), ingestor_(ingestor), clock_(clock), metrics_(metrics) {}

Scraper::~Scraper() { Stop(); }

void Scraper::Start() {
  if (targets_.empty() || thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Scraper::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<DcgmIngestResult> Scraper::ScrapeOnce(const ScrapeTarget& target) {
  GPULEDGER_ASSIGN_OR_RETURN(auto parts, SplitHttpUrl(target.url));
  httplib::Client client(parts.first);
  auto timeout = std::chrono::milliseconds(target.timeout_ms);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), 0);
  client.set_read_timeout(timeout);
  int64_t now = clock_.NowMs();
  auto res = client.Get(parts.second);
  if (!res) {
    return Unavailable(fmt::format("scrape {}: {}", target.url, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Unavailable(fmt::format("scrape {}: HTTP {}", target.url, res->status));
  }
  prometheus::TextParseOptions opts;
  opts.mode = prometheus::ParseMode::kLenient;
  opts.source = target.url;
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::ParsedText parsed, prometheus::ParseText(res->body, opts));
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::DcgmBatch mapped,
                             ingestor_.mapper().MapScrape(parsed.families, now));
  uint64_t target_hash = wire::Fnv1a64(target.url);
  uint64_t digest = wire::Fnv1a64(res->body) ^ static_cast<uint64_t>(now);
  auto r = ingestor_.Apply(mapped, fmt::format("scrape-{:016x}-{}", target_hash, now), digest, "scrape");
  if (!r.ok()) return r.status().WithContext(fmt::format("scrape {}", target.url));
  return r;
}

void Scraper::Loop() {
  std::vector<int64_t> next_ms(targets_.size(), 0);
  auto steady_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  for (;;) {
    int64_t now = steady_ms();
    int64_t wake = now + kMsPerMinute;
    for (size_t i = 0; i < targets_.size(); ++i) {
      if (now >= next_ms[i]) {
        auto r = ScrapeOnce(targets_[i]);
        if (!r.ok()) spdlog::warn("event=scrape_failed target={} error={:?}", targets_[i].url, r.status().message());
        if (metrics_) {
          metrics_->Add(MetricId::kScrapes, {targets_[i].url, r.ok() ? "ok" : "error"});
          std::string outcome = !r.ok() ? "rejected" : r->applied ? "applied" : r->duplicate ? "duplicate" : "empty";
          metrics_->Add(MetricId::kIngestRequests, {"scrape", outcome});
          if (r.ok() && r->applied) metrics_->Add(MetricId::kIngestSamples, {"scrape"}, static_cast<double>(r->samples));
        }
        next_ms[i] = now + targets_[i].interval_ms;
      }
      wake = std::min(wake, next_ms[i]);
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(0, wake - steady_ms())),
                     [this] { return stop_; })) {
      return;
    }
  }
}

}  // namespace gpuledger::server
