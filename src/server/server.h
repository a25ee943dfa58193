// The central server: an HTTP server (cpp-httplib, kept out of this header) over a
// Ledger. Ingest: native batches (POST /api/v1/batches), Prometheus remote-write
// (POST /api/v1/write) and a scraper of listed endpoints. Queries: JSON under /api/v1/
// (docs/openapi.yaml). Its own metrics: GET /metrics. Bearer-token roles (auth.h).
//
// Consistency: each batch is validated on its request's thread, then applied with the
// batches waiting beside it in one group commit (each under its own savepoint, one
// durable commit for all) before it is acknowledged. Queries call the ledger directly,
// with no lock of the server's: each reads a store snapshot (ledger/ledger.h), so it
// never sees half of a group and never waits for one; rollups are refreshed beside both.
// The dashboard (docs/dashboard.md) is served at /.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/goals.h"
#include "core/objective.h"
#include "actuators/actuators.h"
#include "core/quota.h"
#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "server/auth.h"
#include "server/ingest.h"
#include "server/metrics.h"
#include "server/query_limits.h"
#include "server/scrape.h"

namespace gpuledger::server {

class WhatIfService;  // server/whatif_api.h

struct ServerOptions {
  // "host:port"; port 0 takes a free port (Port() tells which).
  std::string listen = "127.0.0.1:8080";
  // Without tokens every request is an admin's; that is refused on a non-loopback
  // address unless `insecure`.
  std::vector<TokenEntry> tokens;
  bool insecure = false;
  IngestLimits limits;
  // What one query may cost (server/query_limits.h; docs/server.md "Limits").
  QueryLimits query_limits;
  DcgmIngestOptions prometheus;
  std::vector<ScrapeTarget> scrape_targets;
  // Slow clients (docs/server.md "Limits"): one read or write waiting longer than these
  // ends the connection; so does a request head not read whole within
  // header_timeout_ms of the connection's accept (or of its previous request's end), and
  // a body not read whole within body_timeout_ms.
  int64_t read_timeout_ms = 30'000;
  int64_t write_timeout_ms = 30'000;
  int64_t header_timeout_ms = 10'000;
  int64_t body_timeout_ms = 60'000;
  // Connections are served by a pool of `threads` threads that grows to `max_threads`
  // (one per connection: past it, connections wait their turn).
  size_t threads = 16;
  size_t max_threads = 256;
  // Connections of one client address beyond this, not in a request, are closed.
  size_t max_connections_per_address = 64;
  // A kept-alive connection serves at most this many requests, idle at most this long.
  size_t keep_alive_max_requests = 100;
  int64_t keep_alive_timeout_ms = 5'000;
  // Bodies inflating to 1 MiB or more (gzip, snappy) handled at once; more wait their
  // turn. Each may take max_body_bytes.
  size_t max_concurrent_decompressions = 4;
  // How often rollups are refreshed and silent holds are closed in the background.
  int64_t maintenance_interval_ms = 2'000;
  // How often a day of raw samples that is over is looked for and settled, one at a time
  // (Ledger::SettleDays; PostgreSQL: docs/store-postgresql.md, "Settled days"); 0: never.
  int64_t settle_interval_ms = 300'000;
  // How often raw samples past the ledger's raw_retention are pruned ([ledger]
  // raw_retention; Ledger::ApplyRetention): at the first maintenance pass, then this often.
  int64_t retention_interval_ms = kMsPerHour;
  // The fleet figures of /metrics are recomputed at most this often.
  int64_t metrics_cache_ms = 15'000;
  // Log one structured line per request (spdlog, info level).
  bool access_log = true;
  // Utilization targets and team budgets (the config's [targets] and [budgets]): shown by
  // /api/v1/info, /api/v1/series, /api/v1/budgets, the usage API and the dashboard.
  Goals goals;
  // The config's [[objective]]s, judged by /api/v1/objectives (the dashboard's "SLOs and
  // actions" page); the objectives loop (server/objectives_loop.h) alerts on the same.
  std::vector<ObjectiveSpec> objectives;
  // The config's quotas ([[quota]] and [budgets] as soft monthly budgets): /api/v1/quotas.
  std::vector<QuotaSpec> quotas;
  // What Slurm enforces for the hard quotas, for GET /api/v1/quotas/drift (docs/quotas.md):
  // the runner sacctmgr is run through (serve: the real command, 30 s at most) and the
  // sacctmgr it runs. Null: the route answers 501.
  actuators::CommandRunner slurm_runner;
  std::string sacctmgr = "sacctmgr";
  // How often the dashboard refreshes itself.
  int64_t dashboard_refresh_ms = 30'000;
  // /api/v1/whatif's replay (server/whatif_api.h), injected by the CLI, which links the
  // simulator; null: the route answers 501.
  std::shared_ptr<WhatIfService> what_if;
};

// "127.0.0.1:8080" -> {"127.0.0.1", 8080}; "[::1]:0" -> {"::1", 0}.
Result<std::pair<std::string, int>> ParseListenAddress(const std::string& listen);
// 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

// One route the server answers: its HTTP method and its path pattern as registered
// (cpp-httplib's: a literal path, or a regular expression whose groups are the path's
// parameters, e.g. "/api/v1/jobs/(.+)/mfu" for docs/openapi.yaml's /api/v1/jobs/{id}/mfu).
struct RouteSpec {
  std::string method;  // "GET", "POST"
  std::string pattern;
  bool operator==(const RouteSpec&) const = default;
};

class Server {
 public:
  // `ledger` and `clock` must outlive the server. Fails on a bad listen address, a
  // non-loopback address without tokens (unless insecure), or a malformed label rule.
  static Result<std::unique_ptr<Server>> Create(ledger::Ledger& ledger, const Clock& clock,
                                                ServerOptions options);
  ~Server();  // Stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves on background threads; returns once the port is bound (so that a
  // request sent after it returns is answered). Fails when the address cannot be bound.
  Status Start();
  // The bound port (after Start).
  int Port() const;
  // "http://host:port".
  std::string Url() const;
  // Stops accepting, lets requests in flight finish (their batches are durable or
  // refused, never half-applied), stops the scraper and the background work, and
  // refreshes rollups once more. Idempotent.
  void Stop();

  MetricsRegistry& metrics();

  // Every route Start() registered, in the order it tried them (the first match
  // answers); empty before Start.
  std::vector<RouteSpec> Routes() const;

  // For tests: the most gzip bodies that were being inflated at once, and the
  // connections the slow-client guard shut down (for being slow, for being too many).
  size_t PeakConcurrentDecompressions() const;
  int64_t ConnectionsShutSlow() const;
  int64_t ConnectionsShutExcess() const;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger::server
