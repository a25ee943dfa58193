// How many bytes the store takes per device-day (issue 13's aim: at most 60 KB all in, at
// 10 s sampling), side by side with VictoriaMetrics given the same figures. Not a test:
// sizes are measured, never asserted.
//
//   build/release/src/server/storage_bench [--days D] [--interval 10s] [--batch-span 1h]
//       [--no-postgresql] [--keep-sqlite FILE]   (a copy of the measured SQLite store, for a closer look)
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
#include <fmt/format.h>
#include <libpq-fe.h>
#include <sqlite3.h>

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
  bool postgresql = true;
  std::string keep_sqlite;
};

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

  testing::TempDir dir;
  ManualClock clock(start + options.duration_ms);
  auto sqlite_store = store::OpenSqliteStore(dir.File("ledger.db"));
  if (!sqlite_store.ok()) return std::fprintf(stderr, "%s\n", sqlite_store.status().ToString().c_str()), 1;
  auto sqlite_ledger = std::make_unique<ledger::Ledger>(std::move(*sqlite_store), clock);
  if (!sqlite_ledger->SetPrices(fleet.Prices()).ok()) return 1;

  std::unique_ptr<ledger::Ledger> pg_ledger;
  std::string pg_url;
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
  }

  testing::VictoriaMetricsProcess vm(dir.File("vm"));
  if (vm.url().empty()) return std::fprintf(stderr, "VictoriaMetrics: %s\n", vm.error().c_str()), 1;
  HttpRequestOptions rw;
  rw.headers = {{"Content-Encoding", "snappy"}, {"X-Prometheus-Remote-Write-Version", "0.1.0"}};

  size_t samples = 0, points = 0;
  double t_sqlite = 0, t_pg = 0, t_vm = 0;
  for (int64_t day = start; day < fleet.end_ms(); day += kMsPerDay) {
    for (const Batch& b : fleet.Advance(day + kMsPerDay, args.batch_span_ms)) {
      samples += b.samples.size();
      auto t0 = Steady::now();
      if (auto r = sqlite_ledger->Ingest(b); !r.ok()) {
        return std::fprintf(stderr, "SQLite: %s\n", r.status().ToString().c_str()), 1;
      }
      t_sqlite += Seconds(t0);
      if (pg_ledger) {
        t0 = Steady::now();
        if (auto r = pg_ledger->Ingest(b); !r.ok()) {
          return std::fprintf(stderr, "PostgreSQL: %s\n", r.status().ToString().c_str()), 1;
        }
        t_pg += Seconds(t0);
      }
      std::string body = RemoteWriteOf(b, devices, gpu_index, &points);
      t0 = Steady::now();
      auto r = HttpPost(vm.url(), "/api/v1/write", body, "application/x-protobuf", rw);
      if (!r.ok() || r->status != 204) {
        return std::fprintf(stderr, "VictoriaMetrics refused a write: %s\n",
                            r.ok() ? r->body.c_str() : r.status().ToString().c_str()),
               1;
      }
      t_vm += Seconds(t0);
    }
    std::fprintf(stderr, "\rstorage_bench: simulated %s ... ", FormatTime(std::min(day + kMsPerDay, fleet.end_ms())).c_str());
  }
  auto t0 = Steady::now();
  if (auto n = sqlite_ledger->RefreshRollups(); !n.ok()) return 1;
  t_sqlite += Seconds(t0);
  if (pg_ledger) {
    t0 = Steady::now();
    if (auto n = pg_ledger->RefreshRollups(); !n.ok()) return 1;
    t_pg += Seconds(t0);
  }
  std::fprintf(stderr, "\n");
  // VictoriaMetrics: what it buffers written out, its parts merged, then stopped (which
  // writes out the rest); its caches are left out of its size, as they are rebuilt.
  (void)HttpGet(vm.url(), "/internal/force_flush", {.timeout_ms = 600'000});
  (void)HttpGet(vm.url(), "/internal/force_merge", {.timeout_ms = 600'000});
  std::this_thread::sleep_for(std::chrono::seconds(5));
  vm.Stop();

  std::printf("demo fleet: %zu GPUs and slices, %d day(s) at %s, a batch per node every %s: %s samples, %s figures\n",
              devices.size(), args.days, fmt::format("{} s", args.interval_ms / 1000).c_str(),
              fmt::format("{} s", args.batch_span_ms / 1000).c_str(), fmt::format("{}", samples).c_str(),
              fmt::format("{}", points).c_str());
  std::printf("ingest + rollups: SQLite %.1f s, PostgreSQL %.1f s; VictoriaMetrics writes %.1f s\n\n", t_sqlite,
              t_pg, t_vm);

  int64_t sqlite_file = 0;
  sqlite_ledger.reset();  // closes the store before the file is measured
  std::map<std::string, int64_t> tables = SqliteBytes(dir.File("ledger.db"), &sqlite_file);
  std::printf("gpuledger on SQLite, by table (dbstat):\n");
  for (const auto& [name, bytes] : tables) {
    if (bytes >= 4096 * 16) PrintRow(("  " + name).c_str(), bytes, device_days);
  }
  PrintRow("gpuledger on SQLite, the file", sqlite_file, device_days);
  if (!args.keep_sqlite.empty()) std::filesystem::copy_file(dir.File("ledger.db"), args.keep_sqlite);

  int64_t pg_bytes = 0;
  if (pg_ledger) {
    std::map<std::string, std::pair<int64_t, int64_t>> pg_tables;
    const int64_t live = PostgresBytes(pg_url, "VACUUM", &pg_tables);
    const int64_t live_chunks = pg_tables["sample_chunks"].first + pg_tables["sample_chunks"].second;
    clock.Advance(kMsPerDay);  // a day on: every simulated day is over
    auto settled = pg_ledger->SettleDays(std::numeric_limits<size_t>::max());
    if (!settled.ok()) return std::fprintf(stderr, "PostgreSQL: %s\n", settled.status().ToString().c_str()), 1;
    const int64_t live_settled = PostgresBytes(pg_url, "VACUUM", &pg_tables);
    const int64_t settled_chunks = pg_tables["sample_chunks"].first + pg_tables["sample_chunks"].second;
    if (live < 0 || live_settled < 0) return 1;
    PrintRow("gpuledger on PostgreSQL, VACUUM, days not settled", live, device_days);
    PrintRow("  of which sample_chunks with indexes", live_chunks, device_days);
    PrintRow(fmt::format("gpuledger on PostgreSQL, VACUUM, {} day(s) settled", settled->size()).c_str(),
             live_settled, device_days);
    PrintRow("  of which sample_chunks with indexes", settled_chunks, device_days);
    for (const auto& [name, bytes] : pg_tables) {
      if (name != "sample_chunks" && bytes.first + bytes.second >= 4096 * 16) {
        PrintRow(("  " + name + " with indexes").c_str(), bytes.first + bytes.second, device_days);
      }
    }
    pg_ledger.reset();
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

  int64_t vm_all = DirectoryBytes(dir.File("vm"));
  int64_t vm_cache = DirectoryBytes(dir.File("vm") + "/cache");
  PrintRow("VictoriaMetrics, the data directory", vm_all, device_days);
  PrintRow("VictoriaMetrics, less its caches", vm_all - vm_cache, device_days);
  std::printf("\nratio gpuledger SQLite / VictoriaMetrics (less caches): %.2f\n",
              static_cast<double>(sqlite_file) / static_cast<double>(vm_all - vm_cache));
  if (pg_bytes > 0) {
    std::printf("ratio gpuledger PostgreSQL / VictoriaMetrics (less caches): %.2f\n",
                static_cast<double>(pg_bytes) / static_cast<double>(vm_all - vm_cache));
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
    } else if (a == "--no-postgresql") {
      args.postgresql = false;
    } else if (a == "--keep-sqlite" && i + 1 < argc) {
      args.keep_sqlite = argv[++i];
    } else {
      std::fprintf(stderr, "usage: storage_bench [--days D] [--interval 10s] [--batch-span 1h] [--no-postgresql]"
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
  return gpuledger::server::Main(args);
}
