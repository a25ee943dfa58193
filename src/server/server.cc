#include "server/server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <span>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/mutex.h"
#include "dashboard/dashboard.h"
#include "server/api.h"
#include "server/connections.h"
#include "server/actions_api.h"
#include "server/objectives_api.h"
#include "server/slurm_limits_cache.h"
#include "server/whatif_api.h"
#include "wire/batch.h"
#include "wire/prometheus/remote_write.h"

namespace gpuledger::server {
namespace {

using Clock_ = std::chrono::steady_clock;

// Who may do what (docs/server.md).
constexpr Role kWriters[] = {Role::kAgent, Role::kAdmin};
constexpr Role kReaders[] = {Role::kViewer, Role::kAdmin};
constexpr Role kAdmins[] = {Role::kAdmin};

// How much more than the body limit is read (and dropped) to answer 413 cleanly.
constexpr size_t kDrainFactor = 4;

double SecondsSince(Clock_::time_point t0) {
  return std::chrono::duration<double>(Clock_::now() - t0).count();
}

// Why cpp-httplib refused a request it could not parse, by the status it chose.
std::string RefusalBeforeRouting(int status) {
  switch (status) {
    case 414:
      return fmt::format("the request line is longer than {} bytes (the URI is too long)",
                         CPPHTTPLIB_REQUEST_URI_MAX_LENGTH);
    case 413: return "the request body is over the limit";
    case 400: return "malformed request (request line or headers)";
    default: return fmt::format("HTTP {}: the request could not be read", status);
  }
}

void Send(httplib::Response& res, const HttpReply& reply) {
  res.status = reply.status;
  for (const auto& [name, value] : reply.headers) res.set_header(name, value);
  res.set_content(reply.body, reply.content_type.c_str());
}

// At most `limit` holders at once; the rest wait. Remembers the most it saw at once.
class Semaphore {
 public:
  explicit Semaphore(size_t limit) : limit_(std::max<size_t>(limit, 1)) {}
  void Acquire() {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [this]() REQUIRES(mu_) { return held_ < limit_; });
    peak_ = std::max(peak_, ++held_);
  }
  void Release() {
    {
      MutexLock lock(mu_);
      --held_;
    }
    cv_.NotifyOne();
  }
  size_t peak() const {
    MutexLock lock(mu_);
    return peak_;
  }

 private:
  const size_t limit_;
  mutable Mutex mu_;
  CondVar cv_;
  size_t held_ GUARDED_BY(mu_) = 0;
  size_t peak_ GUARDED_BY(mu_) = 0;
};

// Holds one place of a Semaphore from Acquire() to its destruction.
class SemaphoreSlot {
 public:
  explicit SemaphoreSlot(Semaphore& s) : s_(s) {}
  ~SemaphoreSlot() {
    if (held_) s_.Release();
  }
  SemaphoreSlot(const SemaphoreSlot&) = delete;
  SemaphoreSlot& operator=(const SemaphoreSlot&) = delete;
  void Acquire() {
    if (held_) return;
    s_.Acquire();
    held_ = true;
  }

 private:
  Semaphore& s_;
  bool held_ = false;
};

bool LooksGzipped(std::string_view body) {
  return body.size() >= 18 && static_cast<unsigned char>(body[0]) == 0x1f && static_cast<unsigned char>(body[1]) == 0x8b;
}

// A body that inflates to this much or more waits for a place among the decompressions
// (the small bodies agents and Prometheus send are not held back).
constexpr size_t kLargeInflatedBytes = size_t{1} << 20;

// After a request that held this much, freed memory is handed back to the system.
constexpr size_t kTrimAfterBytes = size_t{8} << 20;

// Hands freed memory back to the system at the end of a request (its scope) that held
// at least kTrimAfterBytes: glibc keeps the freed blocks of its arenas, so a large body's
// would otherwise stay resident after the request.
class TrimAfter {
 public:
  explicit TrimAfter(size_t bytes) : bytes_(bytes) {}
  ~TrimAfter() {
#if defined(__GLIBC__)
    if (bytes_ >= kTrimAfterBytes) malloc_trim(0);
#endif
  }
  TrimAfter(const TrimAfter&) = delete;
  TrimAfter& operator=(const TrimAfter&) = delete;
  void Held(size_t bytes) { bytes_ = std::max(bytes_, bytes); }

 private:
  size_t bytes_;
};

}  // namespace

Result<std::pair<std::string, int>> ParseListenAddress(const std::string& listen) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument(fmt::format("listen address \"{}\": want host:port", listen));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return InvalidArgument(fmt::format("listen address \"{}\": no host", listen));
  std::string port_text = listen.substr(colon + 1);
  int port = -1;
  if (!port_text.empty() && port_text.size() <= 5 &&
      port_text.find_first_not_of("0123456789") == std::string::npos) {
    port = std::stoi(port_text);
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("listen address \"{}\": port must be 0..65535", listen));
  }
  return std::pair{host, port};
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

struct Server::Impl {
  Impl(ledger::Ledger& l, const Clock& c, ServerOptions o)
      : ledger(l), clock(c), options(std::move(o)), auth(options.tokens) {}

  ledger::Ledger& ledger;
  const Clock& clock;
  ServerOptions options;
  Authenticator auth;
  MetricsRegistry metrics;
  std::unique_ptr<GroupCommitter> committer;  // every batch goes through it
  std::unique_ptr<DcgmIngestor> ingestor;
  std::unique_ptr<Scraper> scraper;
  httplib::Server http;
  std::vector<RouteSpec> routes;  // what Route() registered with `http`, in order
  std::string host;
  int port = 0;
  std::thread listen_thread;
  std::thread maintenance_thread;
  Mutex stop_mu;
  CondVar stop_cv;
  bool stopping GUARDED_BY(stop_mu) = false;
  bool started = false;
  Mutex metrics_mu;
  std::optional<int64_t> fleet_metrics_at_ms GUARDED_BY(metrics_mu);  // steady clock
  Semaphore decompressions{options.max_concurrent_decompressions};
  std::unique_ptr<ConnectionGuard> guard;  // from Start
  // /api/v1/quotas/drift's reads of Slurm (null without options.slurm_runner).
  std::unique_ptr<SlurmLimitsCache> slurm_limits =
      options.slurm_runner ? std::make_unique<SlurmLimitsCache>(options.slurm_runner, options.sacctmgr, clock) : nullptr;

  // Whether the store's writes fail (the disk full, an I/O error): by what failed, since
  // when and why. Reads go on; /healthz says degraded.
  enum WriteKind { kIngest, kRefresh, kWriteKinds };
  struct WriteFailure {
    int64_t since_ms = 0;
    std::string why;
  };
  Mutex health_mu;
  std::array<std::optional<WriteFailure>, kWriteKinds> failing GUARDED_BY(health_mu);

  void ObserveWrite(WriteKind kind, const Status& st) {
    static constexpr const char* kNames[] = {"ingest", "refresh"};
    // A batch's own fault (malformed, a duplicate id) is not the store's.
    bool store_fault = st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kInternal;
    MutexLock lock(health_mu);
    auto& f = failing[kind];
    if (st.ok()) {
      f.reset();
    } else if (store_fault && !f) {
      f = WriteFailure{clock.NowMs(), st.message()};
      spdlog::error("event=store_writes_failing what={} error={:?}", kNames[kind], st.message());
    }
    metrics.Set(MetricId::kStoreWritesFailing, {kNames[kind]}, f ? 1 : 0);
  }

  // "ok", or "degraded: ..." naming what fails since when; always 200 (the server is alive
  // and serves reads: a liveness probe must not restart it for a full disk).
  std::string Health() {
    MutexLock lock(health_mu);
    std::string out;
    for (int k = 0; k < kWriteKinds; ++k) {
      if (!failing[static_cast<size_t>(k)]) continue;
      const WriteFailure& f = *failing[static_cast<size_t>(k)];
      out += fmt::format("{}{} failing since {}: {}", out.empty() ? "degraded: " : "; ",
                         k == kIngest ? "writes (ingest)" : "the rollup refresh", FormatTime(f.since_ms), f.why);
    }
    return out.empty() ? "ok\n" : out + "; reads are served\n";
  }

  // Ledger::Ingest's work split in two: the batch is validated on the request's thread
  // (no lock held), then applied in the next group commit. Returns once durable.
  Result<store::ApplyOutcome> Ingest(const Batch& batch, const BatchSender& sender) {
    return committer->Apply(batch, sender);
  }

  // The principal of a request, or a reply refusing it (401 without a valid token,
  // 403 for a role not in `allowed`).
  std::optional<Principal> Authorize(const httplib::Request& req, httplib::Response& res,
                                     std::span<const Role> allowed) {
    if (auth.empty()) return Principal{"anonymous", Role::kAdmin, {}};
    auto who = auth.Authenticate(req.get_header_value("Authorization"));
    if (!who.ok()) {
      res.set_header("WWW-Authenticate", "Bearer");
      Send(res, ErrorReply(who.status()));
      return std::nullopt;
    }
    if (std::find(allowed.begin(), allowed.end(), who->role) == allowed.end()) {
      Send(res, ErrorReply(403, "permission_denied",
                           fmt::format("role {} may not use {} {}", RoleName(who->role), req.method, req.path)));
      return std::nullopt;
    }
    return *who;
  }

  // Reads the body through `reader`, refusing more than the limit. nullopt: a reply
  // was set (413 or 400).
  std::optional<std::string> ReadBody(const httplib::Request& req, const httplib::ContentReader& reader,
                                      httplib::Response& res) {
    auto too_large = [&] {
      Send(res, ErrorReply(Status(StatusCode::kResourceExhausted,
                                  fmt::format("request body is over the limit of {} bytes",
                                              options.limits.max_body_bytes))));
    };
    std::string length = req.get_header_value("Content-Length");
    if (!length.empty() && length.find_first_not_of("0123456789") != std::string::npos) {
      // "-1", "abc": not a length (RFC 9110 8.6), so the body's end is unknown.
      res.set_header("Connection", "close");
      Send(res, ErrorReply(InvalidArgument(fmt::format("Content-Length \"{}\": want a number of bytes",
                                                       length.substr(0, 32)))));
      return std::nullopt;
    }
    if (!length.empty() && (length.size() > 18 || std::stoull(length) > options.limits.max_body_bytes)) {
      // A body up to kDrainFactor times the limit is read and dropped, so that the
      // client, still writing, gets to read the 413; a larger one is cut off.
      if (length.size() <= 18 && std::stoull(length) <= kDrainFactor * options.limits.max_body_bytes) {
        reader([](const char*, size_t) { return true; });
      } else {
        res.set_header("Connection", "close");
      }
      too_large();
      return std::nullopt;
    }
    std::string body;
    // One allocation for a body of announced length (its limit was checked above).
    if (!length.empty()) body.reserve(static_cast<size_t>(std::stoull(length)));
    bool too_big = false, too_slow = false;
    auto deadline = Clock_::now() + std::chrono::milliseconds(options.body_timeout_ms);
    bool ok = reader([&](const char* data, size_t n) {
      if (body.size() + n > options.limits.max_body_bytes) {
        too_big = true;
        return false;
      }
      if (Clock_::now() > deadline) {
        too_slow = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (too_big) {
      too_large();
      return std::nullopt;
    }
    if (too_slow) {
      res.set_header("Connection", "close");
      Send(res, ErrorReply(408, "request_timeout",
                           fmt::format("the request body was not read whole within {} ms (body_timeout_ms)",
                                       options.body_timeout_ms)));
      return std::nullopt;
    }
    if (!ok) {
      Send(res, ErrorReply(InvalidArgument("request body could not be read (truncated, or a bad "
                                           "Content-Encoding)")));
      return std::nullopt;
    }
    return body;
  }

  void CountIngest(std::string_view path, std::string_view outcome) {
    metrics.Add(MetricId::kIngestRequests, {std::string(path), std::string(outcome)});
  }
  static std::string_view OutcomeOf(const Status& st) {
    return st.code() == StatusCode::kInternal || st.code() == StatusCode::kUnavailable ? "error" : "rejected";
  }

  // Whether the body arrives compressed for cpp-httplib to inflate as it is read.
  static bool CompressedInTransit(const httplib::Request& req) {
    std::string enc = req.get_header_value("Content-Encoding");
    return enc.find("gzip") != std::string::npos || enc.find("deflate") != std::string::npos;
  }

  void HandleBatches(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    auto who = Authorize(req, res, kWriters);
    if (!who) return;
    // A small gzip body may inflate to max_body_bytes: few are inflated at once.
    SemaphoreSlot slot(decompressions);
    if (CompressedInTransit(req)) slot.Acquire();
    auto body = ReadBody(req, reader, res);
    if (!body) return CountIngest("native", "rejected");
    TrimAfter trim(body->size());
    if (LooksGzipped(*body)) {
      // gzip's trailer tells the inflated size (mod 2^32), which is what the request holds.
      const auto* end = reinterpret_cast<const unsigned char*>(body->data() + body->size());
      size_t inflated = static_cast<size_t>(end[-4]) | static_cast<size_t>(end[-3]) << 8 |
                        static_cast<size_t>(end[-2]) << 16 | static_cast<size_t>(end[-1]) << 24;
      if (inflated >= kLargeInflatedBytes || inflated < body->size()) slot.Acquire();  // (mod 2^32)
      trim.Held(inflated);
    }
    auto t0 = Clock_::now();
    auto batch = DecodeNativeBatch(*body, options.limits, clock.NowMs());
    if (batch.ok()) trim.Held(batch->samples.size() * sizeof(Sample));
    if (!batch.ok()) {
      CountIngest("native", "rejected");
      return Send(res, ErrorReply(batch.status()));
    }
    auto outcome = Ingest(*batch, who->AsSender());
    if (!outcome.ok()) {
      CountIngest("native", OutcomeOf(outcome.status()));
      return Send(res, ErrorReply(outcome.status()));
    }
    bool applied = *outcome == store::ApplyOutcome::kApplied;
    CountIngest("native", applied ? "applied" : "duplicate");
    metrics.Observe(MetricId::kIngestDuration, {"native"}, SecondsSince(t0));
    if (applied) metrics.Add(MetricId::kIngestSamples, {"native"}, static_cast<double>(batch->samples.size()));
    nlohmann::json j = {{"batch_id", batch->batch_id},
                        {"outcome", applied ? "applied" : "duplicate"},
                        {"samples", applied ? batch->samples.size() : 0}};
    Send(res, {200, "application/json", j.dump() + "\n"});
  }

  void HandleRemoteWrite(const httplib::Request& req, httplib::Response& res,
                         const httplib::ContentReader& reader) {
    auto who = Authorize(req, res, kWriters);
    if (!who) return;
    SemaphoreSlot slot(decompressions);
    if (CompressedInTransit(req)) slot.Acquire();
    auto body = ReadBody(req, reader, res);
    if (!body) return CountIngest("remote_write", "rejected");
    // Snappy's preamble tells the inflated size (a varint), decoded below.
    size_t inflated = 0;
    for (size_t i = 0, shift = 0; i < body->size() && i < 10 && shift < 64; ++i, shift += 7) {
      auto byte = static_cast<unsigned char>((*body)[i]);
      inflated |= static_cast<size_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) break;
    }
    if (inflated >= kLargeInflatedBytes) slot.Acquire();
    TrimAfter trim(std::max(inflated, body->size()));
    auto t0 = Clock_::now();
    int64_t now = clock.NowMs();
    prometheus::DecodeOptions decode;
    decode.max_compressed_bytes = options.limits.max_body_bytes;
    decode.max_uncompressed_bytes = std::max(options.limits.max_body_bytes, decode.max_uncompressed_bytes);
    decode.min_timestamp_ms = std::max<int64_t>(0, now - options.limits.max_sample_age_ms);
    decode.max_timestamp_ms = now + ledger.options().max_future_skew_ms;
    auto fail = [&](const Status& st) {
      CountIngest("remote_write", OutcomeOf(st));
      Send(res, ErrorReply(st.WithContext("remote-write")));
    };
    auto request = prometheus::DecodeWriteRequest(*body, decode);
    if (!request.ok()) return fail(request.status());
    size_t points = 0;
    for (const auto& ts : request->timeseries) points += ts.samples.size();
    if (points > options.limits.max_samples_per_batch * 64) {
      return fail(Status(StatusCode::kResourceExhausted,
                         fmt::format("{} points is over the limit of {} per request", points,
                                     options.limits.max_samples_per_batch * 64)));
    }
    auto mapped = ingestor->mapper().MapWriteRequest(*request);
    if (!mapped.ok()) return fail(mapped.status());
    if (mapped->samples.size() > options.limits.max_samples_per_batch) {
      return fail(Status(StatusCode::kResourceExhausted,
                         fmt::format("{} samples is over the limit of {} per batch", mapped->samples.size(),
                                     options.limits.max_samples_per_batch)));
    }
    uint64_t digest = wire::Fnv1a64(*body);
    auto r = ingestor->Apply(*mapped, fmt::format("rw-{:016x}", digest), digest, "remote_write", who->AsSender());
    if (!r.ok()) return fail(r.status());
    CountIngest("remote_write", r->applied ? "applied" : (r->duplicate ? "duplicate" : "empty"));
    metrics.Observe(MetricId::kIngestDuration, {"remote_write"}, SecondsSince(t0));
    if (r->applied) metrics.Add(MetricId::kIngestSamples, {"remote_write"}, static_cast<double>(r->samples));
    res.status = 204;
  }

  QueryParams Params(const httplib::Request& req) {
    QueryParams p;
    for (const auto& [k, v] : req.params) p[k] = v;
    return p;
  }

  // Runs a query handler for a viewer or an admin (the ledger is thread-safe: no lock).
  void Query(const httplib::Request& req, httplib::Response& res, std::span<const Role> roles,
             const std::function<HttpReply(const QueryContext&)>& fn) {
    auto who = Authorize(req, res, roles);
    if (!who) return;
    QueryContext q{ledger, *who, clock.NowMs(), ledger.options().staleness_override_ms, &options.goals,
                   options.dashboard_refresh_ms};
    if (auto data = ledger.Data(); data.ok()) {
      q.data_end_ms = data->end_ms;
      q.data_first_ms = data->first_ms;
    }
    q.limits = &options.query_limits;
    q.quotas = &options.quotas;
    Send(res, fn(q));
  }

  // Answers with the embedded dashboard file `name` (304 when the client has it).
  void ServeAsset(const httplib::Request& req, httplib::Response& res, const std::string& name) {
    const dashboard::Asset* a = dashboard::FindAsset(name);
    if (a == nullptr) {
      return Send(res, ErrorReply(404, "not_found", fmt::format("no such dashboard file: {}", name)));
    }
    res.set_header("ETag", std::string(a->etag));
    res.set_header("Cache-Control", "no-cache");
    res.set_header("Content-Security-Policy", std::string(dashboard::kContentSecurityPolicy));
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    if (req.get_header_value("If-None-Match") == a->etag) {
      res.status = 304;
      return;
    }
    res.set_content(a->body.data(), a->body.size(), std::string(a->content_type).c_str());
  }

  // Recomputes the store and fleet figures of /metrics when they are older than the
  // cache time.
  void RefreshFleetMetrics() {
    MutexLock mlock(metrics_mu);
    int64_t now_steady = std::chrono::duration_cast<std::chrono::milliseconds>(
                             Clock_::now().time_since_epoch()).count();
    if (fleet_metrics_at_ms && now_steady - *fleet_metrics_at_ms < options.metrics_cache_ms) return;
    fleet_metrics_at_ms = now_steady;
    if (auto st = ledger.Stats(); st.ok()) {
      metrics.Set(MetricId::kStoreBytes, {}, static_cast<double>(st->bytes));
      metrics.Set(MetricId::kStoreSamples, {}, static_cast<double>(st->samples));
      metrics.Set(MetricId::kStoreSampleRows, {}, static_cast<double>(st->sample_rows));
      metrics.Set(MetricId::kStoreDevices, {}, static_cast<double>(st->devices));
    }
    auto data = ledger.Data();
    if (!data.ok() || data->first_ms == 0) return;
    int64_t first = data->first_ms;
    // The figures end where the data ends (the fleet's latest sample, never after now).
    int64_t now = data->end_ms > 0 ? std::min(clock.NowMs(), data->end_ms) : clock.NowMs();
    int64_t settled = now - 5 * kMsPerMinute;
    metrics.Clear(MetricId::kFleetUtilization);
    if (first >= settled) return;
    if (auto hour = ledger.Usage({std::max(first, now - kMsPerHour), now}, {ledger::Dimension::kPool}); hour.ok()) {
      for (const auto& row : hour->rows) {
        metrics.Set(MetricId::kFleetUtilization, {row.key[0]}, row.effective_utilization());
      }
    } else {
      spdlog::warn("event=metrics_usage_failed error={:?}", hour.status().message());
    }
    if (auto all = ledger.Usage({first, settled}, {ledger::Dimension::kPool}); all.ok()) {
      for (Bucket b : kAllBuckets) {
        double seconds = static_cast<double>(all->total.gpu_ticks_ms[static_cast<size_t>(b)]) /
                         static_cast<double>(kShareScale * kMsPerSecond);
        metrics.Set(MetricId::kFleetGpuSeconds, {std::string(BucketName(b))}, seconds);
      }
    }
  }

  void Maintenance() {
    // The first look for a day to settle comes one interval after the start.
    auto next_settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.settle_interval_ms);
    auto next_retention = std::chrono::steady_clock::now();
    for (;;) {
      {
        MutexLock lock(stop_mu);
        if (stop_cv.WaitFor(stop_mu, std::chrono::milliseconds(options.maintenance_interval_ms),
                            [this]() REQUIRES(stop_mu) { return stopping; })) {
          return;
        }
      }
      // The writer path, beside ingest: queries never wait for it (they attribute the
      // hours still dirty themselves).
      auto refreshed = ledger.RefreshRollups();
      if (!refreshed.ok()) spdlog::warn("event=rollup_refresh_failed error={:?}", refreshed.status().message());
      ObserveWrite(kRefresh, refreshed.status());
      auto swept = ingestor->Sweep(clock.NowMs());
      if (!swept.ok()) spdlog::warn("event=hold_sweep_failed error={:?}", swept.status().message());
      if (std::chrono::steady_clock::now() >= next_retention) {
        next_retention = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.retention_interval_ms);
        auto pruned = ledger.ApplyRetention();
        if (!pruned.ok()) spdlog::warn("event=retention_failed error={:?}", pruned.status().message());
        if (pruned.ok() && *pruned > 0) spdlog::info("event=samples_pruned samples={}", *pruned);
      }
      if (options.settle_interval_ms > 0 && std::chrono::steady_clock::now() >= next_settle) {
        next_settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.settle_interval_ms);
        auto settled = ledger.SettleDays(1);
        if (!settled.ok()) spdlog::warn("event=settle_failed error={:?}", settled.status().message());
        for (int64_t day : settled.ok() ? *settled : std::vector<int64_t>{}) {
          spdlog::info("event=day_settled day={}", FormatTime(day));
        }
      }
    }
  }

  // Registers a route with `http` and lists it in `routes`: the list is the
  // registrations themselves, so it cannot drift from what the server answers.
  template <class Handler>
  void Get(const std::string& pattern, Handler handler) {
    routes.push_back({"GET", pattern});
    http.Get(pattern, std::move(handler));
  }
  template <class Handler>
  void Post(const std::string& pattern, Handler handler) {
    routes.push_back({"POST", pattern});
    http.Post(pattern, std::move(handler));
  }

  // Counts an answered request in /metrics. A handler that set a body but no status
  // answers 200 (cpp-httplib fills it in after the handler, as -1 until then).
  void Count(const std::string& route, httplib::Response& res) {
    if (res.status == -1) res.status = 200;
    metrics.Add(MetricId::kHttpRequests, {route, std::to_string(res.status)});
  }

  void Route() {
    auto route = [this](std::string name, auto fn) {
      return [this, name = std::move(name), fn](const httplib::Request& req, httplib::Response& res) {
        fn(req, res);
        Count(name, res);
      };
    };
    auto route_body = [this](std::string name, auto fn) {
      return [this, name = std::move(name), fn](const httplib::Request& req, httplib::Response& res,
                                                const httplib::ContentReader& reader) {
        fn(req, res, reader);
        Count(name, res);
      };
    };
    Post("/api/v1/batches", route_body("batches", [this](const auto& req, auto& res, const auto& reader) {
                HandleBatches(req, res, reader);
              }));
    Post("/api/v1/write", route_body("write", [this](const auto& req, auto& res, const auto& reader) {
                HandleRemoteWrite(req, res, reader);
              }));
    Get("/healthz", route("healthz", [this](const auto&, auto& res) { res.set_content(Health(), "text/plain"); }));
    Get("/metrics", route("metrics", [this](const auto& req, auto& res) {
               if (!Authorize(req, res, kReaders)) return;
               RefreshFleetMetrics();
               auto text = metrics.Render();
               if (!text.ok()) return Send(res, ErrorReply(text.status()));
               res.set_content(*text, "text/plain; version=0.0.4; charset=utf-8");
             }));
    Get("/api/v1/fleet", route("fleet", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return FleetReply(q); });
             }));
    Get("/api/v1/usage", route("usage", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return UsageReply(q, Params(req)); });
             }));
    Get("/api/v1/chargeback", route("chargeback", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return ChargebackReply(q, Params(req)); });
             }));
    Get("/api/v1/focus", route("focus", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return FocusReply(q, Params(req)); });
             }));
    Get("/api/v1/experiments", route("experiments", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return ExperimentsReply(q, Params(req)); });
             }));
    Get("/api/v1/jobs", route("jobs", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return JobsReply(q, Params(req)); });
             }));
    // The more specific job routes first: /jobs/(.+) would take them too. Job ids may hold
    // "/" (k8s/ns/pod), so the id is everything before the last /mfu or /serving.
    Get(R"(/api/v1/jobs/(.+)/mfu)", route("job_mfu", [this](const auto& req, auto& res) {
               std::string id = req.matches[1];
               Query(req, res, kReaders, [&](const QueryContext& q) { return JobMfuReply(q, id, Params(req)); });
             }));
    Get(R"(/api/v1/jobs/(.+)/serving)", route("job_serving", [this](const auto& req, auto& res) {
               std::string id = req.matches[1];
               Query(req, res, kReaders, [&](const QueryContext& q) { return JobServingReply(q, id, Params(req)); });
             }));
    Get("/api/v1/recommendations", route("recommendations", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return RecommendationsReply(q, Params(req)); });
             }));
    Get("/api/v1/reports/weekly", route("report_weekly", [this](const auto& req, auto& res) {
               Query(req, res, kAdmins, [&](const QueryContext& q) { return WeeklyReportReply(q, Params(req), options.objectives); });
             }));
    Get("/api/v1/reports/monthly", route("report_monthly", [this](const auto& req, auto& res) {
               Query(req, res, kAdmins, [&](const QueryContext& q) {
                 return MonthlyReportReply(q, Params(req), options.objectives, options.what_if.get());
               });
             }));
    Get("/api/v1/periods", route("periods", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return PeriodsReply(q); });
             }));
    Post(R"(/api/v1/periods/([^/]+)/close)", route("period_close", [this](const auto& req, auto& res) {
               std::string month = req.matches[1];
               Query(req, res, kAdmins, [&](const QueryContext& q) { return ClosePeriodReply(q, month); });
             }));
    Get(R"(/api/v1/jobs/(.+))", route("job", [this](const auto& req, auto& res) {
               std::string id = req.matches[1];
               Query(req, res, kReaders, [&](const QueryContext& q) { return JobReply(q, id); });
             }));
    // The dashboard's files: no data in them, so no token; the page asks the API with one.
    Get("/", route("dashboard", [this](const auto& req, auto& res) { ServeAsset(req, res, "index.html"); }));
    Get(R"(/assets/([A-Za-z0-9._-]+))", route("dashboard", [this](const auto& req, auto& res) {
               ServeAsset(req, res, req.matches[1].str());
             }));
    Get("/api/v1/info", route("info", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return InfoReply(q); });
             }));
    Get("/api/v1/series", route("series", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return SeriesReply(q, Params(req)); });
             }));
    Get("/api/v1/heatmap", route("heatmap", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return HeatmapReply(q, Params(req)); });
             }));
    Get("/api/v1/budgets", route("budgets", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return BudgetsReply(q, Params(req)); });
             }));
    Get("/api/v1/objectives", route("objectives", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return ObjectivesReply(q, Params(req), options.objectives); });
             }));
    Get("/api/v1/actions", route("actions", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return ActionsReply(q, Params(req)); });
             }));
    Get("/api/v1/quotas", route("quotas", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) { return QuotasReply(q, Params(req)); });
             }));
    Get("/api/v1/quotas/drift", route("quotas_drift", [this](const auto& req, auto& res) {
               Query(req, res, kReaders, [&](const QueryContext& q) {
                 return QuotaDriftReply(q, slurm_limits.get(), Params(req));
               });
             }));
    Get("/api/v1/waste", route("waste", [this](const auto& req, auto& res) {
               Query(req, res, kAdmins, [&](const QueryContext& q) { return WasteReply(q, Params(req)); });
             }));
    Get("/api/v1/whatif", route("whatif", [this](const auto& req, auto& res) {
               Query(req, res, kAdmins, [&](const QueryContext& q) { return WhatIfReply(q, Params(req), options.what_if.get()); });
             }));
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404) {
        metrics.Add(MetricId::kHttpRequests, {"(unmatched)", "404"});
        Send(res, ErrorReply(404, "not_found", fmt::format("no such endpoint: {} {}", req.method, req.path)));
      } else if (req.method.empty()) {
        // cpp-httplib refused the request before reading its request line whole.
        Send(res, ErrorReply(res.status, "http_error", RefusalBeforeRouting(res.status)));
      } else {
        Send(res, ErrorReply(res.status, "http_error", fmt::format("HTTP {} for {} {}", res.status, req.method, req.path)));
      }
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      Send(res, ErrorReply(Internal(what)));
    });
    // The slow-client guard learns where each connection's requests begin and end.
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
      if (guard) guard->RequestStarted(req.remote_addr, req.remote_port);
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      if (guard) guard->RequestDone(req.remote_addr, req.remote_port);
      if (!options.access_log) return;
      spdlog::info("event=http method={} path={:?} status={} bytes_in={} bytes_out={} remote={}",
                   req.method, req.path, res.status, req.body.size(), res.body.size(), req.remote_addr);
    });
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Create(ledger::Ledger& ledger, const Clock& clock,
                                               ServerOptions options) {
  GPULEDGER_ASSIGN_OR_RETURN(auto addr, ParseListenAddress(options.listen));
  if (options.tokens.empty() && !options.insecure && !IsLoopbackHost(addr.first)) {
    return FailedPrecondition(fmt::format(
        "refusing to listen on {} without any token configured: add [[server.token]] entries to the "
        "config, listen on a loopback address, or pass --insecure",
        options.listen));
  }
  for (const TokenEntry& t : options.tokens) {
    if (t.role == Role::kViewer && t.teams.empty()) {
      return InvalidArgument(fmt::format("token \"{}\": a viewer needs at least one team", t.name));
    }
  }
  auto impl = std::make_unique<Impl>(ledger, clock, std::move(options));
  impl->host = addr.first;
  impl->port = addr.second;
  Impl* raw = impl.get();
  raw->committer = std::make_unique<GroupCommitter>([raw] { return raw->ledger.BeginIngestGroup(); },
                                                    [raw](const Batch& b) { return raw->ledger.Validate(b); });
  raw->committer->ObserveCommits([raw](const Status& st) { raw->ObserveWrite(Impl::kIngest, st); });
  GPULEDGER_ASSIGN_OR_RETURN(
      raw->ingestor,
      DcgmIngestor::Create(raw->options.prometheus, *raw->committer,
                           &raw->metrics));
  GPULEDGER_RETURN_IF_ERROR(raw->ingestor->Recover(ledger, clock.NowMs()));
  // Serving and progress targets apply their batches through the same locked ingest.
  raw->scraper = std::make_unique<Scraper>(raw->options.scrape_targets, *raw->ingestor, clock, &raw->metrics,
                                           [raw](const Batch& b, const BatchSender& who) { return raw->Ingest(b, who); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::Start() {
  Impl& s = *impl_;
  if (s.started) return FailedPrecondition("server already started");
  s.http.new_task_queue = [threads = s.options.threads, max = s.options.max_threads] {
    return new ElasticPool(threads, max);
  };
  s.http.set_payload_max_length(kDrainFactor * s.options.limits.max_body_bytes);
  s.http.set_read_timeout(std::chrono::milliseconds(s.options.read_timeout_ms));
  s.http.set_write_timeout(std::chrono::milliseconds(s.options.write_timeout_ms));
  s.http.set_keep_alive_max_count(s.options.keep_alive_max_requests);
  s.http.set_keep_alive_timeout(std::max<time_t>(1, s.options.keep_alive_timeout_ms / kMsPerSecond));
  s.Route();
  if (s.port == 0) {
    int port = s.http.bind_to_any_port(s.host);
    if (port <= 0) return Unavailable(fmt::format("cannot bind {}: no free port", s.options.listen));
    s.port = port;
  } else if (!s.http.bind_to_port(s.host, s.port)) {
    return Unavailable(fmt::format("cannot bind {} (in use, or not an address of this host)", s.options.listen));
  }
  s.started = true;
  s.guard = std::make_unique<ConnectionGuard>(
      s.port, ConnectionGuard::Options{s.options.header_timeout_ms, s.options.max_connections_per_address});
  s.guard->Start();
  s.listen_thread = std::thread([&s] { s.http.listen_after_bind(); });
  s.maintenance_thread = std::thread([&s] { s.Maintenance(); });
  s.scraper->Start();
  spdlog::info("event=server_started url={} tokens={} scrape_targets={}", Url(), s.options.tokens.size(),
               s.options.scrape_targets.size());
  return Status::Ok();
}

int Server::Port() const { return impl_->port; }

std::string Server::Url() const {
  const std::string& h = impl_->host;
  std::string host = h.find(':') != std::string::npos ? "[" + h + "]" : h;
  if (host == "0.0.0.0") host = "127.0.0.1";
  return fmt::format("http://{}:{}", host, impl_->port);
}

void Server::Stop() {
  Impl& s = *impl_;
  if (!s.started) return;
  s.started = false;
  s.scraper->Stop();
  s.http.stop();  // stops accepting; listen_after_bind returns once the workers are done
  if (s.listen_thread.joinable()) s.listen_thread.join();
  if (s.guard) s.guard->Stop();
  {
    MutexLock lock(s.stop_mu);
    s.stopping = true;
  }
  s.stop_cv.NotifyAll();
  if (s.maintenance_thread.joinable()) s.maintenance_thread.join();
  auto r = s.ledger.RefreshRollups();
  if (!r.ok()) spdlog::warn("event=rollup_refresh_failed error={:?}", r.status().message());
  spdlog::info("event=server_stopped");
}

MetricsRegistry& Server::metrics() { return impl_->metrics; }

std::vector<RouteSpec> Server::Routes() const { return impl_->routes; }

size_t Server::PeakConcurrentDecompressions() const { return impl_->decompressions.peak(); }
int64_t Server::ConnectionsShutSlow() const { return impl_->guard ? impl_->guard->shut_slow() : 0; }
int64_t Server::ConnectionsShutExcess() const { return impl_->guard ? impl_->guard->shut_excess() : 0; }

}  // namespace gpuledger::server
