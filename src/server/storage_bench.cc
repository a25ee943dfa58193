// How many bytes the store takes per device-day (issue 13's aim: at most 60 KB all in, at
// 10 s sampling), side by side with VictoriaMetrics given the same figures. Not a test:
// sizes are measured, never asserted.
//
//   build/release/src/server/storage_bench [--days D] [--interval 10s] [--batch-span 1h]
//       [--refresh-every 1m] [--vacuum-every 1h] [--no-sqlite] [--no-postgresql] [--no-victoriametrics]
//       [--keep-sqlite FILE]   (a copy of the measured SQLite store, for a closer look)
//
// One pass over the demo fleet (demo::DemoFleet: its GPUs and MIG slices and their
// work, as `gpuledger demo --once` makes them) for D days (default 1) at the interval,
// each node sending one batch per batch span (default an hour, as `demo --once` does; a
// live agent sends every 10-60 s, so its chunks hold a few samples each):
//  1. into a SQLite store through the ledger, as `demo --once` does, rollups refreshed,
//     then checkpointed and VACUUMed: the file's bytes, and each table's (dbstat);
//  2. into PostgreSQL (the test harness's server, store/testing/pg_server.h), rollups
//     refreshed: pg_total_relation_size of every table with its partitions, indexes and
//     TOAST, after a plain VACUUM (as autovacuum runs it) before and after its days are
//     settled (Store::SettleDays, the clock a day on), and after VACUUM FULL;
//  3. the same samples' seven figures as remote-write series, with dcgm-exporter's family
//     and label names (gpu, UUID, device, modelName, Hostname), into VictoriaMetrics
//     (Debian's victoria-metrics, on loopback), flushed (/internal/force_flush), merged
//     (/internal/force_merge) and stopped: its data directory's bytes.
// The figures are sent at the precision the store keeps them (ratios to 1e-4, memory to
// the MiB, power to 0.1 W), so that neither side is charged for digits the other drops.
// VictoriaMetrics holds only those series; the store also holds the jobs, allocations,
// processes, hour and minute rollups that attribution needs.
//
// By default the rollups are refreshed once, at the end. With --refresh-every the run is
// live instead: the clock follows the simulated time, and every that much of it the
// stores' rollups are refreshed (a server refreshes every 2 s), and PostgreSQL looks for a
// day to settle every 5 minutes (the server's default settle interval) and is VACUUMed
// every --vacuum-every (default an hour; standing in for autovacuum, whose timing depends
// on the tables' sizes and the wall clock). The WAL PostgreSQL writes over the whole run
// is given, as is each store's size after it: what a store that has been running for D
// days holds, with the dead space its later days could reuse. The tests' server runs with
// full_page_writes off, so that WAL holds no full-page images: a server with it on (the
// default) also writes each page whole the first time it changes after a checkpoint.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "core/time.h"
#include "demo/demo_fleet.h"
#include "ledger/ledger.h"
#include "server/client.h"
#include "server/test_support.h"
#include "store/pg_store.h"
#include "store/store.h"
#include "store/testing/pg_server.h"
#include "wire/prometheus/dcgm_mapping.h"
#include "wire/prometheus/remote_write.h"

namespace gpuledger::server {
namespace {

using Steady = std::chrono::steady_clock;

double Seconds(Steady::time_point since) { return std::chrono::duration<double>(Steady::now() - since).count(); }

// The seven figures the store keeps, as dcgm-exporter exports them.
struct Family {
  const char* name;
  std::optional<double> Sample::*field;
  double to_exported;  // the store's unit to the exporter's (a ratio to a percent: 100)
  double precision;    // what the store keeps, in its own unit
};
constexpr Family kFamilies[] = {
    {"DCGM_FI_PROF_SM_ACTIVE", &Sample::sm_active, 1, 1e-4},
    {"DCGM_FI_PROF_SM_OCCUPANCY", &Sample::sm_occupancy, 1, 1e-4},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", &Sample::tensor_active, 1, 1e-4},
    {"DCGM_FI_PROF_DRAM_ACTIVE", &Sample::dram_active, 1, 1e-4},
    {"DCGM_FI_DEV_GPU_UTIL", &Sample::gpu_util, 100, 1e-4},
    {"DCGM_FI_DEV_FB_USED", &Sample::fb_used_mib, 1, 1},
    {"DCGM_FI_DEV_POWER_USAGE", &Sample::power_watts, 1, 0.1},
};

// The families above, checked against the mapping the server reads remote-write with, so
// that the two sides are given the same figures.
bool FamiliesAgreeWithTheMapping() {
  const prometheus::DcgmField fields[] = {
      prometheus::DcgmField::kSmActive,   prometheus::DcgmField::kSmOccupancy, prometheus::DcgmField::kTensorActive,
      prometheus::DcgmField::kDramActive, prometheus::DcgmField::kGpuUtil,     prometheus::DcgmField::kFbUsedMib,
      prometheus::DcgmField::kPowerWatts};
  for (size_t i = 0; i < std::size(kFamilies); ++i) {
    const prometheus::DcgmFieldSpec* spec = prometheus::FindDcgmField(kFamilies[i].name);
    if (spec == nullptr || spec->field != fields[i]) {
      std::fprintf(stderr, "%s does not map to the figure it stands for here\n", kFamilies[i].name);
      return false;
    }
  }
  return true;
}

// One remote-write body per batch: a series per device and family. `gpu_index`: each
// device's place on its node, dcgm-exporter's `gpu` label.
std::string RemoteWriteOf(const Batch& b, const std::map<std::string, const Device*>& devices,
                          const std::map<std::string, int>& gpu_index, size_t* points) {
  std::map<std::pair<std::string, size_t>, prometheus::TimeSeries> series;
  for (const Sample& s : b.samples) {
    for (size_t f = 0; f < std::size(kFamilies); ++f) {
      const auto& v = s.*kFamilies[f].field;
      if (!v) continue;
      auto [it, added] = series.try_emplace({s.device_uuid, f});
      if (added) {
        const Device* d = devices.at(s.device_uuid);
        int gpu = gpu_index.at(s.device_uuid);
        it->second.labels = {{"Hostname", d->node},
                             {"UUID", d->uuid},
                             {"__name__", kFamilies[f].name},
                             {"device", fmt::format("nvidia{}", gpu)},
                             {"gpu", std::to_string(gpu)},
                             {"modelName", d->model}};
      }
      double kept = std::round(*v / kFamilies[f].precision) * kFamilies[f].precision;
      it->second.samples.push_back({kept * kFamilies[f].to_exported, s.t_ms});
      ++*points;
    }
  }
  prometheus::WriteRequest w;
  for (auto& [key, ts] : series) w.timeseries.push_back(std::move(ts));
  return prometheus::EncodeWriteRequest(w);
}

// The bytes of every table in the public schema with its partitions, indexes and TOAST,
// after `vacuum` (VACUUM FULL, or VACUUM as autovacuum runs it); -1 on failure. `tables`:
// per table (its partitions summed), the heap with TOAST and the indexes.
int64_t PostgresBytes(const std::string& url, const char* vacuum,
                      std::map<std::string, std::pair<int64_t, int64_t>>* tables) {
  PGconn* c = PQconnectdb(url.c_str());
  int64_t out = -1;
  if (PQstatus(c) == CONNECTION_OK) {
    PQclear(PQexec(c, vacuum));
    PGresult* t = PQexec(c,
                         "SELECT c.relname, CASE c.relkind WHEN 'p' THEN"
                         " (SELECT sum(pg_table_size(relid)) FROM pg_partition_tree(c.oid)) ELSE pg_table_size(c.oid) END,"
                         " CASE c.relkind WHEN 'p' THEN (SELECT sum(pg_indexes_size(relid)) FROM pg_partition_tree(c.oid))"
                         " ELSE pg_indexes_size(c.oid) END FROM pg_class c"
                         " JOIN pg_namespace n ON n.oid = c.relnamespace"
                         " WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = 'public'");
    if (PQresultStatus(t) == PGRES_TUPLES_OK) {
      for (int i = 0; i < PQntuples(t); ++i) {
        (*tables)[PQgetvalue(t, i, 0)] = {std::atoll(PQgetvalue(t, i, 1)), std::atoll(PQgetvalue(t, i, 2))};
      }
    }
    PQclear(t);
    PGresult* r = PQexec(c,
                         "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                         " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND n.nspname = 'public'");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) out = std::atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  if (out < 0) std::fprintf(stderr, "PostgreSQL sizes: %s\n", PQerrorMessage(c));
  PQfinish(c);
  return out;
}

int64_t DirectoryBytes(const std::filesystem::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); it != std::filesystem::end(it); ++it) {
    if (it->is_regular_file(ec)) total += static_cast<int64_t>(it->file_size(ec));
  }
  return total;
}

// Each table's bytes (dbstat) and the file's, after a checkpoint and a VACUUM.
std::map<std::string, int64_t> SqliteBytes(const std::string& path, int64_t* file_bytes) {
  std::map<std::string, int64_t> out;
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return out;
  sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); VACUUM; PRAGMA wal_checkpoint(TRUNCATE);", nullptr, nullptr,
               nullptr);
  sqlite3_stmt* q = nullptr;
  sqlite3_prepare_v2(db, "SELECT name, SUM(pgsize) FROM dbstat GROUP BY name", -1, &q, nullptr);
  while (q != nullptr && sqlite3_step(q) == SQLITE_ROW) {
    out[reinterpret_cast<const char*>(sqlite3_column_text(q, 0))] = sqlite3_column_int64(q, 1);
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  *file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
  return out;
}

void PrintRow(const char* what, int64_t bytes, double device_days) {
  std::printf("%-52s %14s bytes  %9.1f KB per device-day\n", what, fmt::format("{}", bytes).c_str(),
              static_cast<double>(bytes) / device_days / 1000.0);
}

struct Args {
  int days = 1;
  int64_t interval_ms = 10'000;
  int64_t batch_span_ms = kMsPerHour;
  int64_t refresh_every_ms = 0;  // 0: once, at the end
  int64_t vacuum_every_ms = kMsPerHour;
  bool sqlite = true;
  bool postgresql = true;
  bool victoriametrics = true;
  std::string keep_sqlite;
};

// The server's default settle interval (server.h, settle_interval_ms).
constexpr int64_t kSettleEveryMs = 5 * kMsPerMinute;

// What PostgreSQL's server has written to its WAL: its position, and of pg_stat_wal the
// records and full-page images (none of them -1 unless it failed, the error printed).
struct Wal {
  int64_t bytes = -1, records = -1, full_pages = -1;
};
Wal WalSoFar(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  Wal out;
  PGresult* r = PQexec(c, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, wal_records, wal_fpi"
                          " FROM pg_stat_wal");
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
    out = {std::atoll(PQgetvalue(r, 0, 0)), std::atoll(PQgetvalue(r, 0, 1)), std::atoll(PQgetvalue(r, 0, 2))};
  }
  if (out.bytes < 0) std::fprintf(stderr, "PostgreSQL WAL position: %s\n", PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
  return out;
}

// The tables that rows were updated in, with how many of those updates were HOT (no
// index entry written; the old version pruned from its page without a vacuum).
void PrintUpdates(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  PGresult* r = PQexec(c, "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables"
                          " WHERE n_tup_upd > 0 ORDER BY n_tup_upd DESC");
  if (PQresultStatus(r) == PGRES_TUPLES_OK) {
    std::printf("PostgreSQL rows updated (pg_stat_user_tables):\n");
    for (int i = 0; i < PQntuples(r); ++i) {
      std::printf("  %-28s %12s inserted %12s updated, %5.1f%% of them HOT %12s deleted\n", PQgetvalue(r, i, 0),
                  PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                  100.0 * std::atof(PQgetvalue(r, i, 3)) / std::max(1.0, std::atof(PQgetvalue(r, i, 2))),
                  PQgetvalue(r, i, 4));
    }
  }
  PQclear(r);
  PQfinish(c);
}

bool Vacuum(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  PGresult* r = PQexec(c, "VACUUM");
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) std::fprintf(stderr, "PostgreSQL VACUUM: %s\n", PQerrorMessage(c));
  PQclear(r);
  PQfinish(c);
  return ok;
}

int Main(const Args& args) {
  if (!FamiliesAgreeWithTheMapping()) return 1;
  const int64_t start = 1'793'577'600'000;  // 2026-11-02T00:00:00Z, a Monday
  demo::DemoOptions options{.start_ms = start, .duration_ms = args.days * kMsPerDay,
                            .sample_interval_ms = args.interval_ms};
  demo::DemoFleet fleet(options);
  std::map<std::string, const Device*> devices;
  std::map<std::string, int> gpu_index, on_node;
  for (const Device& d : fleet.devices()) {
    devices[d.uuid] = &d;
    gpu_index[d.uuid] = on_node[d.node]++;
  }
  const double device_days = static_cast<double>(devices.size()) * args.days;
  const bool live = args.refresh_every_ms > 0;

  testing::TempDir dir;
  // Live, the clock follows the simulated time; otherwise it stands at the end throughout.
  ManualClock clock(live ? start : start + options.duration_ms);
  std::unique_ptr<ledger::Ledger> sqlite_ledger;
  if (args.sqlite) {
    auto sqlite_store = store::OpenSqliteStore(dir.File("ledger.db"));
    if (!sqlite_store.ok()) return std::fprintf(stderr, "%s\n", sqlite_store.status().ToString().c_str()), 1;
    sqlite_ledger = std::make_unique<ledger::Ledger>(std::move(*sqlite_store), clock);
    if (!sqlite_ledger->SetPrices(fleet.Prices()).ok()) return 1;
  }

  std::unique_ptr<ledger::Ledger> pg_ledger;
  std::string pg_url;
  Wal wal_start;
  if (args.postgresql) {
    auto server = store::pgtest::PgTestServer::Shared();
    if (!server.ok()) return std::fprintf(stderr, "PostgreSQL: %s\n", server.status().ToString().c_str()), 1;
    auto db = (*server)->CreateDatabase("storage");
    if (!db.ok()) return std::fprintf(stderr, "%s\n", db.status().ToString().c_str()), 1;
    pg_url = (*server)->Url(*db);
    auto pg = store::OpenPgStore(pg_url);
    if (!pg.ok()) return std::fprintf(stderr, "%s\n", pg.status().ToString().c_str()), 1;
    pg_ledger = std::make_unique<ledger::Ledger>(std::move(*pg), clock);
    if (!pg_ledger->SetPrices(fleet.Prices()).ok()) return 1;
    if ((wal_start = WalSoFar(pg_url)).bytes < 0) return 1;
  }

  std::unique_ptr<testing::VictoriaMetricsProcess> vm;
  if (args.victoriametrics) {
    vm = std::make_unique<testing::VictoriaMetricsProcess>(dir.File("vm"));
    if (vm->url().empty()) return std::fprintf(stderr, "VictoriaMetrics: %s\n", vm->error().c_str()), 1;
  }
  HttpRequestOptions rw;
  rw.headers = {{"Content-Encoding", "snappy"}, {"X-Prometheus-Remote-Write-Version", "0.1.0"}};

  size_t samples = 0, points = 0, refreshes = 0, vacuums = 0, settled_live = 0;
  double t_sqlite = 0, t_pg = 0, t_vm = 0, t_settle = 0, t_settle_max = 0;
  auto refresh = [&]() -> bool {
    ++refreshes;
    auto t0 = Steady::now();
    if (sqlite_ledger) {
      if (auto n = sqlite_ledger->RefreshRollups(); !n.ok()) {
        return std::fprintf(stderr, "SQLite: %s\n", n.status().ToString().c_str()), false;
      }
      t_sqlite += Seconds(t0);
    }
    if (pg_ledger) {
      t0 = Steady::now();
      if (auto n = pg_ledger->RefreshRollups(); !n.ok()) {
        return std::fprintf(stderr, "PostgreSQL: %s\n", n.status().ToString().c_str()), false;
      }
      t_pg += Seconds(t0);
    }
    return true;
  };
  const int64_t step = live ? args.refresh_every_ms : kMsPerDay;
  for (int64_t t = start; t < fleet.end_ms(); t += step) {
    const int64_t until = std::min(t + step, fleet.end_ms());
    if (live) clock.Set(until);
    for (const Batch& b : fleet.Advance(until, args.batch_span_ms)) {
      samples += b.samples.size();
      auto t0 = Steady::now();
      if (sqlite_ledger) {
        if (auto r = sqlite_ledger->Ingest(b); !r.ok()) {
          return std::fprintf(stderr, "SQLite: %s\n", r.status().ToString().c_str()), 1;
        }
        t_sqlite += Seconds(t0);
      }
      if (pg_ledger) {
        t0 = Steady::now();
        if (auto r = pg_ledger->Ingest(b); !r.ok()) {
          return std::fprintf(stderr, "PostgreSQL: %s\n", r.status().ToString().c_str()), 1;
        }
        t_pg += Seconds(t0);
      }
      if (vm) {
        std::string body = RemoteWriteOf(b, devices, gpu_index, &points);
        t0 = Steady::now();
        auto r = HttpPost(vm->url(), "/api/v1/write", body, "application/x-protobuf", rw);
        if (!r.ok() || r->status != 204) {
          return std::fprintf(stderr, "VictoriaMetrics refused a write: %s\n",
                              r.ok() ? r->body.c_str() : r.status().ToString().c_str()),
                 1;
        }
        t_vm += Seconds(t0);
      }
    }
    if (!live) {
      std::fprintf(stderr, "\rstorage_bench: simulated %s ... ", FormatTime(until).c_str());
      continue;
    }
    if (!refresh()) return 1;
    if (pg_ledger && until % kSettleEveryMs < step) {
      auto t0 = Steady::now();
      auto settled = pg_ledger->SettleDays(1);
      if (!settled.ok()) return std::fprintf(stderr, "PostgreSQL: %s\n", settled.status().ToString().c_str()), 1;
      const double took = Seconds(t0);
      t_pg += took;
      t_settle += took;
      t_settle_max = std::max(t_settle_max, took);
      settled_live += settled->size();
    }
    if (pg_ledger && until % args.vacuum_every_ms < step) {
      if (!Vacuum(pg_url)) return 1;
      ++vacuums;
    }
    if (until % kMsPerHour < step) {
      std::fprintf(stderr, "\rstorage_bench: simulated %s ... ", FormatTime(until).c_str());
    }
  }
  if (!live && !refresh()) return 1;
  std::fprintf(stderr, "\n");
  if (vm) {
    // VictoriaMetrics: what it buffers written out, its parts merged, then stopped (which
    // writes out the rest); its caches are left out of its size, as they are rebuilt.
    (void)HttpGet(vm->url(), "/internal/force_flush", {.timeout_ms = 600'000});
    (void)HttpGet(vm->url(), "/internal/force_merge", {.timeout_ms = 600'000});
    std::this_thread::sleep_for(std::chrono::seconds(5));
    vm->Stop();
  }

  std::printf("demo fleet: %zu GPUs and slices, %d day(s) at %s, a batch per node every %s: %s samples\n",
              devices.size(), args.days, fmt::format("{} s", args.interval_ms / 1000).c_str(),
              fmt::format("{} s", args.batch_span_ms / 1000).c_str(), fmt::format("{}", samples).c_str());
  if (live) {
    std::printf("live: the clock following the simulated time, rollups refreshed every %s s (%zu times), PostgreSQL"
                " settling every %s s and VACUUMed every %s s (%zu times)\n",
                fmt::format("{}", args.refresh_every_ms / 1000).c_str(), refreshes,
                fmt::format("{}", kSettleEveryMs / 1000).c_str(),
                fmt::format("{}", args.vacuum_every_ms / 1000).c_str(), vacuums);
    if (pg_ledger) {
      std::printf("PostgreSQL settling (folding minutes, clustering chunks): %zu day(s) settled, %.1f s in all,"
                  " the longest look %.2f s\n",
                  settled_live, t_settle, t_settle_max);
    }
  }
  std::printf("ingest + rollups: SQLite %.1f s, PostgreSQL %.1f s; VictoriaMetrics writes %.1f s (%s figures)\n\n",
              t_sqlite, t_pg, t_vm, fmt::format("{}", points).c_str());

  int64_t sqlite_file = 0;
  if (sqlite_ledger) {
    sqlite_ledger.reset();  // closes the store before the file is measured
    std::map<std::string, int64_t> tables = SqliteBytes(dir.File("ledger.db"), &sqlite_file);
    std::printf("gpuledger on SQLite, by table (dbstat):\n");
    for (const auto& [name, bytes] : tables) {
      if (bytes >= 4096 * 16) PrintRow(("  " + name).c_str(), bytes, device_days);
    }
    PrintRow("gpuledger on SQLite, the file", sqlite_file, device_days);
    if (!args.keep_sqlite.empty()) std::filesystem::copy_file(dir.File("ledger.db"), args.keep_sqlite);
  }

  int64_t pg_bytes = 0;
  if (pg_ledger) {
    const Wal wal_end = WalSoFar(pg_url);
    if (wal_end.bytes < 0) return 1;
    PrintRow("PostgreSQL WAL written over the run", wal_end.bytes - wal_start.bytes, device_days);
    std::printf("  %s records, %s of them full-page images\n",
                fmt::format("{}", wal_end.records - wal_start.records).c_str(),
                fmt::format("{}", wal_end.full_pages - wal_start.full_pages).c_str());
    std::map<std::string, std::pair<int64_t, int64_t>> pg_tables;
    const int64_t at_end = PostgresBytes(pg_url, "VACUUM", &pg_tables);
    const int64_t end_chunks = pg_tables["sample_chunks"].first + pg_tables["sample_chunks"].second;
    clock.Set(fleet.end_ms() + kMsPerDay);  // a day on: every simulated day is over
    auto settled = pg_ledger->SettleDays(std::numeric_limits<size_t>::max());
    if (!settled.ok()) return std::fprintf(stderr, "PostgreSQL: %s\n", settled.status().ToString().c_str()), 1;
    const int64_t live_settled = PostgresBytes(pg_url, "VACUUM", &pg_tables);
    const int64_t settled_chunks = pg_tables["sample_chunks"].first + pg_tables["sample_chunks"].second;
    if (at_end < 0 || live_settled < 0) return 1;
    PrintRow(live ? "gpuledger on PostgreSQL, VACUUM, at the end of the run" 
                  : "gpuledger on PostgreSQL, VACUUM, days not settled",
             at_end, device_days);
    PrintRow("  of which sample_chunks with indexes", end_chunks, device_days);
    PrintRow(fmt::format("gpuledger on PostgreSQL, VACUUM, a day on, {} settled",
                         settled->size())
                 .c_str(),
             live_settled, device_days);
    PrintRow("  of which sample_chunks with indexes", settled_chunks, device_days);
    for (const auto& [name, bytes] : pg_tables) {
      if (name != "sample_chunks" && bytes.first + bytes.second >= 4096 * 16) {
        PrintRow(("  " + name + " with indexes").c_str(), bytes.first + bytes.second, device_days);
      }
    }
    pg_ledger.reset();  // its connections closed, so their backends send their statistics
    if (live) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      PrintUpdates(pg_url);
    }
    pg_tables.clear();
    pg_bytes = PostgresBytes(pg_url, "VACUUM FULL", &pg_tables);
    if (pg_bytes < 0) return 1;
    std::printf("gpuledger on PostgreSQL, by table with its partitions (pg_table_size with TOAST; indexes):\n");
    for (const auto& [name, bytes] : pg_tables) {
      if (bytes.first >= 4096 * 16) PrintRow(("  " + name).c_str(), bytes.first, device_days);
      if (bytes.second >= 4096 * 16) PrintRow(("  " + name + ", indexes").c_str(), bytes.second, device_days);
    }
    PrintRow("gpuledger on PostgreSQL, VACUUM FULL (pg_total_relation_size)", pg_bytes, device_days);
  }

  if (vm) {
    const int64_t vm_all = DirectoryBytes(dir.File("vm"));
    const int64_t vm_cache = DirectoryBytes(dir.File("vm") + "/cache");
    PrintRow("VictoriaMetrics, the data directory", vm_all, device_days);
    PrintRow("VictoriaMetrics, less its caches", vm_all - vm_cache, device_days);
    if (sqlite_file > 0) {
      std::printf("\nratio gpuledger SQLite / VictoriaMetrics (less caches): %.2f\n",
                  static_cast<double>(sqlite_file) / static_cast<double>(vm_all - vm_cache));
    }
    if (pg_bytes > 0) {
      std::printf("ratio gpuledger PostgreSQL / VictoriaMetrics (less caches): %.2f\n",
                  static_cast<double>(pg_bytes) / static_cast<double>(vm_all - vm_cache));
    }
  }
  return 0;
}

}  // namespace
}  // namespace gpuledger::server

int main(int argc, char** argv) {
  gpuledger::server::Args args;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--days" && i + 1 < argc) {
      args.days = std::atoi(argv[++i]);
    } else if (a == "--interval" && i + 1 < argc) {
      auto d = gpuledger::ParseDuration(argv[++i]);
      if (!d.ok()) return std::fprintf(stderr, "--interval: %s\n", d.status().ToString().c_str()), 2;
      args.interval_ms = *d;
    } else if (a == "--batch-span" && i + 1 < argc) {
      auto d = gpuledger::ParseDuration(argv[++i]);
      if (!d.ok()) return std::fprintf(stderr, "--batch-span: %s\n", d.status().ToString().c_str()), 2;
      args.batch_span_ms = *d;
    } else if ((a == "--refresh-every" || a == "--vacuum-every") && i + 1 < argc) {
      auto d = gpuledger::ParseDuration(argv[++i]);
      if (!d.ok()) return std::fprintf(stderr, "%s: %s\n", a.data(), d.status().ToString().c_str()), 2;
      (a == "--refresh-every" ? args.refresh_every_ms : args.vacuum_every_ms) = *d;
    } else if (a == "--no-sqlite") {
      args.sqlite = false;
    } else if (a == "--no-postgresql") {
      args.postgresql = false;
    } else if (a == "--no-victoriametrics") {
      args.victoriametrics = false;
    } else if (a == "--keep-sqlite" && i + 1 < argc) {
      args.keep_sqlite = argv[++i];
    } else {
      std::fprintf(stderr, "usage: storage_bench [--days D] [--interval 10s] [--batch-span 1h] [--refresh-every 1m]"
                           " [--vacuum-every 1h] [--no-sqlite] [--no-postgresql] [--no-victoriametrics]"
                           " [--keep-sqlite FILE]\n");
      return 2;
    }
  }
  if (args.days < 1) return std::fprintf(stderr, "--days: at least 1\n"), 2;
  // DemoFleet::Advance's precondition, checked here as the input it is.
  if (args.interval_ms <= 0 || args.batch_span_ms <= 0 || gpuledger::kMsPerHour % args.batch_span_ms != 0 ||
      args.batch_span_ms % args.interval_ms != 0) {
    return std::fprintf(stderr, "--batch-span: must divide an hour and be a multiple of --interval\n"), 2;
  }
  // Each refresh follows whole batches, and settling and VACUUM fall on refreshes.
  if (args.refresh_every_ms < 0 || (args.refresh_every_ms > 0 && (args.refresh_every_ms % args.batch_span_ms != 0 ||
                                                                   gpuledger::kMsPerDay % args.refresh_every_ms != 0))) {
    return std::fprintf(stderr, "--refresh-every: must divide a day and be a multiple of --batch-span\n"), 2;
  }
  if (args.vacuum_every_ms <= 0 || (args.refresh_every_ms > 0 && args.vacuum_every_ms % args.refresh_every_ms != 0)) {
    return std::fprintf(stderr, "--vacuum-every: must be a multiple of --refresh-every\n"), 2;
  }
  if (!args.sqlite && !args.postgresql) return std::fprintf(stderr, "nothing to measure: no store\n"), 2;
  if (!args.keep_sqlite.empty() && !args.sqlite) return std::fprintf(stderr, "--keep-sqlite: not with --no-sqlite\n"), 2;
  return gpuledger::server::Main(args);
}
