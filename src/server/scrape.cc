#include "server/scrape.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "server/metrics.h"
#include "wire/batch.h"
#include "wire/prometheus/prom_text.h"
#include "wire/prometheus/serving_metrics.h"

namespace gpuledger::server {
namespace {

// Identifies a target in batch ids and in the progress state: its URL for a DCGM
// target, with the kind and the job for the others (one endpoint may serve several).
std::string TargetKey(const ScrapeTarget& t) {
  if (t.kind == ScrapeKind::kDcgm) return t.url;
  return fmt::format("{}\n{}\n{}", t.url, ScrapeKindName(t.kind), t.job);
}

// The same target scraped at the same instant makes the same batch id: a retry is
// acknowledged as a duplicate.
std::string BatchId(const ScrapeTarget& t, int64_t now_ms) {
  return fmt::format("scrape-{:016x}-{}", wire::Fnv1a64(TargetKey(t)), now_ms);
}

Result<std::string> Fetch(const ScrapeTarget& target) {
  GPULEDGER_ASSIGN_OR_RETURN(auto parts, SplitHttpUrl(target.url));
  httplib::Client client(parts.first);
  auto timeout = std::chrono::milliseconds(target.timeout_ms);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                                0);
  client.set_read_timeout(timeout);
  auto res = client.Get(parts.second);
  if (!res) {
    return Unavailable(fmt::format("scrape {}: {}", target.url, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Unavailable(fmt::format("scrape {}: HTTP {}", target.url, res->status));
  }
  return std::move(res->body);
}

// Lenient: a broken line is skipped, not the scrape.
Result<prometheus::ParsedText> Parse(const ScrapeTarget& target, const std::string& body) {
  prometheus::TextParseOptions opts;
  opts.mode = prometheus::ParseMode::kLenient;
  opts.source = target.url;
  return prometheus::ParseText(body, opts);
}

}  // namespace

std::string_view ScrapeKindName(ScrapeKind kind) {
  switch (kind) {
    case ScrapeKind::kDcgm:
      return "dcgm";
    case ScrapeKind::kServing:
      return "serving";
    case ScrapeKind::kProgress:
      return "progress";
  }
  return "dcgm";
}

Result<ScrapeKind> ParseScrapeKind(std::string_view text) {
  if (text == "dcgm") return ScrapeKind::kDcgm;
  if (text == "serving" || text == "vllm" || text == "triton") return ScrapeKind::kServing;
  if (text == "progress") return ScrapeKind::kProgress;
  return InvalidArgument(
      fmt::format("kind \"{}\": want dcgm, serving (or vllm, triton) or progress", text));
}

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
                 MetricsRegistry* metrics, DcgmIngestor::ApplyFn apply_batch)
    : targets_(std::move(targets)),
      ingestor_(ingestor),
      clock_(clock),
      metrics_(metrics),
      apply_batch_(std::move(apply_batch)) {}

Scraper::~Scraper() { Stop(); }

void Scraper::Start() {
  if (targets_.empty() || thread_.joinable()) return;
  {
    MutexLock lock(mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void Scraper::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

Result<ScrapeResult> Scraper::ScrapeOnce(const ScrapeTarget& target) {
  if (target.kind != ScrapeKind::kDcgm) {
    if (target.job.empty()) {
      return InvalidArgument(fmt::format("scrape {}: a {} target needs a job", target.url,
                                         ScrapeKindName(target.kind)));
    }
    if (!apply_batch_) {
      return FailedPrecondition(fmt::format("scrape {}: this scraper cannot apply {} batches",
                                            target.url, ScrapeKindName(target.kind)));
    }
  }
  int64_t now = clock_.NowMs();
  GPULEDGER_ASSIGN_OR_RETURN(std::string body, Fetch(target));
  if (target.kind == ScrapeKind::kServing) return ScrapeServing(target, body, now);
  if (target.kind == ScrapeKind::kProgress) return ScrapeProgress(target, body, now);

  GPULEDGER_ASSIGN_OR_RETURN(prometheus::ParsedText parsed, Parse(target, body));
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::DcgmBatch mapped,
                             ingestor_.mapper().MapScrape(parsed.families, now));
  uint64_t digest = wire::Fnv1a64(body) ^ static_cast<uint64_t>(now);
  auto r = ingestor_.Apply(mapped, BatchId(target, now), digest, "scrape");
  if (!r.ok()) return r.status().WithContext(fmt::format("scrape {}", target.url));
  ScrapeResult result;
  result.applied = r->applied;
  result.duplicate = r->duplicate;
  if (r->applied || r->duplicate) result.batch_id = r->batch_id;
  result.samples = r->samples;
  return result;
}

Result<ScrapeResult> Scraper::ScrapeServing(const ScrapeTarget& target, const std::string& body,
                                            int64_t now) {
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::ParsedText parsed, Parse(target, body));
  prometheus::ServingExtract x = prometheus::ExtractServing(parsed.families, now);
  ScrapeResult result;
  result.skipped = std::move(x.skipped);
  CountSkipped("serving_invalid", result.skipped.size());
  if (x.snapshots.empty()) {
    result.skipped.push_back("no vLLM or Triton family in the scrape");
    CountSkipped("serving_absent", 1);
    return result;
  }
  Batch batch;
  for (ServingSnapshot& s : x.snapshots) {
    s.job_id = target.job;
    batch.serving.push_back(std::move(s));
  }
  return ApplyBatch(target, now, batch, std::move(result));
}

Result<ScrapeResult> Scraper::ScrapeProgress(const ScrapeTarget& target, const std::string& body,
                                             int64_t now) {
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::ParsedText parsed, Parse(target, body));
  prometheus::ProgressExtract x =
      prometheus::ExtractProgress(parsed.families, now, target.progress_metrics);
  ScrapeResult result;
  result.skipped = std::move(x.invalid);
  CountSkipped("progress_invalid", result.skipped.size());
  if (x.absent) {
    std::string names;
    for (const std::string* n :
         {&target.progress_metrics.tokens, &target.progress_metrics.model_flops}) {
      if (!n->empty()) names += (names.empty() ? "" : " or ") + *n;
    }
    result.skipped.push_back(fmt::format("no {} in the scrape", names));
    CountSkipped("progress_absent", 1);
  }

  MutexLock lock(progress_mu_);
  ProgressState& state = progress_[TargetKey(target)];
  ProgressState next = state;
  std::optional<prometheus::ProgressCounters> from = state.base;
  if (state.base && now == state.base->t_ms) {
    // A retry at the time of the last reading: measured from the reading before it, it
    // rebuilds the same batch (a duplicate) and changes nothing.
    from = state.before;
  } else if (state.base && now < state.base->t_ms) {
    // The clock went back: the interval is unknown. Start again from this reading.
    result.skipped.push_back(fmt::format("the clock went back from {} to {}: a new baseline",
                                         FormatTime(state.base->t_ms), FormatTime(now)));
    CountSkipped("progress_reset", 1);
    from.reset();
    if (!x.counters.empty()) next = {x.counters, std::nullopt};
  } else if (!x.counters.empty()) {
    // A reading with no usable counter keeps the old baseline: the next good reading
    // covers the gap.
    next = {x.counters, state.base};
  }
  if (!from || x.counters.empty()) {
    state = std::move(next);
    return result;
  }
  prometheus::ProgressStep step = prometheus::ProgressBetween(*from, x.counters, target.job);
  for (const std::string& r : step.resets) result.skipped.push_back(r + ": a new baseline");
  CountSkipped("progress_reset", step.resets.size());
  if (!step.progress) {
    state = std::move(next);
    return result;
  }
  Batch batch;
  batch.progress.push_back(std::move(*step.progress));
  GPULEDGER_ASSIGN_OR_RETURN(result, ApplyBatch(target, now, batch, std::move(result)));
  state = std::move(next);
  return result;
}

Result<ScrapeResult> Scraper::ApplyBatch(const ScrapeTarget& target, int64_t now, Batch& batch,
                                         ScrapeResult result) {
  batch.batch_id = BatchId(target, now);
  batch.source = "scrape";
  // The digest of what is applied: a retry with the same figures is a duplicate, one with
  // other figures at the same instant a conflict (the ledger keeps one figure per instant).
  batch.content_digest = 0;
  batch.content_digest = wire::Fnv1a64(wire::WriteBatch(batch));
  auto outcome = apply_batch_(batch, BatchSender{"scrape", {}});
  if (!outcome.ok()) return outcome.status().WithContext(fmt::format("scrape {}", target.url));
  result.batch_id = batch.batch_id;
  result.applied = *outcome == store::ApplyOutcome::kApplied;
  result.duplicate = !result.applied;
  if (result.applied) {
    result.serving_snapshots = batch.serving.size();
    result.progress_reports = batch.progress.size();
  }
  return result;
}

void Scraper::CountSkipped(std::string_view reason, size_t n) {
  if (metrics_ && n > 0) {
    metrics_->Add(MetricId::kDroppedSamples, {"scrape", std::string(reason)},
                  static_cast<double>(n));
  }
}

void Scraper::Loop() {
  std::vector<int64_t> next_ms(targets_.size(), 0);
  // What each target's last scrape left out: logged when it changes, not every scrape.
  std::vector<std::vector<std::string>> last_skipped(targets_.size());
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
        const ScrapeTarget& target = targets_[i];
        auto r = ScrapeOnce(target);
        if (!r.ok())
          spdlog::warn("event=scrape_failed target={} error={:?}", target.url,
                       r.status().message());
        if (r.ok() && r->skipped != last_skipped[i]) {
          for (const std::string& s : r->skipped) {
            spdlog::warn("event=scrape_skipped target={} kind={} job={:?} what={:?}", target.url,
                         ScrapeKindName(target.kind), target.job, s);
          }
          last_skipped[i] = r->skipped;
        }
        if (metrics_) {
          metrics_->Add(MetricId::kScrapes, {target.url, r.ok() ? "ok" : "error"});
          std::string outcome = !r.ok()        ? "rejected"
                                : r->applied   ? "applied"
                                : r->duplicate ? "duplicate"
                                               : "empty";
          metrics_->Add(MetricId::kIngestRequests, {"scrape", outcome});
          if (r.ok() && r->applied && r->samples > 0) {
            metrics_->Add(MetricId::kIngestSamples, {"scrape"}, static_cast<double>(r->samples));
          }
        }
        next_ms[i] = now + target.interval_ms;
      }
      wake = std::min(wake, next_ms[i]);
    }
    MutexLock lock(mu_);
    if (cv_.WaitFor(mu_, std::chrono::milliseconds(std::max<int64_t>(0, wake - steady_ms())),
                    [this]() REQUIRES(mu_) { return stop_; })) {
      return;
    }
  }
}

}  // namespace gpuledger::server
