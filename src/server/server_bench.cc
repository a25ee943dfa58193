// End-to-end benchmarks of the server, printed side by side in one run (release build):
//   taskset -c 1 build/<release dir>/src/server/server_bench [--quick]
//       [--only=native,remote_write,usage,usage_pg,mixed,largest] [--usage-gpus=N]
// Each ingest figure comes with its wall time and the CPU time (user + system) the
// process spent meanwhile, server and clients together: on a shared machine the wall
// time moves with the load, the CPU time much less.
// 1. Native ingest over HTTP: batches of 10,000 samples (100 GPUs x 100 samples) POSTed by
//    4 clients to a server on a durable store (synchronous=FULL): samples/s. Again with
//    16 clients (6 batches each), where more requests wait for each group commit.
// 2. Remote-write ingest: the same stream of remote-write requests (100 GPUs x 8 DCGM
//    series x 10 instants each, 4 senders) sent to gpuledger and to VictoriaMetrics
//    (Debian's victoria-metrics, started here on loopback): points/s of each and the ratio.
// 3. GET /api/v1/usage for 30 days by team over 1,000 GPUs (--usage-gpus): p50 and p99
//    latency. The store holds 30 days of hour rollups written directly (as in
//    ledger_bench: importing 260M raw samples would take too long to set up), and the day
//    rollups WriteRollups keeps beside them. usage_pg (not in the default set): the same
//    on the test harness's PostgreSQL, in builds with tests.
// 4. Native ingest while readers loop on the heaviest dashboard queries.
// 5. The largest query the default query budget allows: time and peak RSS.
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "server/client.h"
#include "server/test_support.h"
#include "wire/batch.h"
#include "wire/prometheus/remote_write.h"
#include "ledger/store_access.h"
#ifdef GPULEDGER_BENCH_POSTGRESQL
#include "store/pg_store.h"
#include "store/testing/pg_server.h"
#endif

namespace gpuledger::server {
namespace {

using Steady = std::chrono::steady_clock;
double Seconds(Steady::time_point t0) { return std::chrono::duration<double>(Steady::now() - t0).count(); }

// CPU seconds (user + system) used so far by this process (who == RUSAGE_SELF) or by
// its waited-for children (RUSAGE_CHILDREN). The machine is shared, so the benchmark
// reports CPU time beside wall time: the wall time moves with the load, the CPU time
// much less.
double CpuSeconds(int who = RUSAGE_SELF) {
  rusage u{};
  getrusage(who, &u);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

// Runs `senders` threads, each POSTing its bodies in order; returns the wall time, or a
// negative value when any request failed.
double PostAll(const std::string& url, const std::string& path, const std::vector<std::vector<std::string>>& bodies,
               const std::string& type, const std::vector<std::pair<std::string, std::string>>& headers,
               int want_status) {
  std::atomic<int> failures{0}, resent{0};
  auto t0 = Steady::now();
  std::vector<std::thread> threads;
  for (const auto& mine : bodies) {
    threads.emplace_back([&] {
      HttpRequestOptions o;
      o.headers = headers;
      for (const std::string& body : mine) {
        auto r = HttpPost(url, path, body, type, o);
        // A connection that failed is sent again, as agents and Prometheus do: both
        // endpoints are idempotent (batch ids, content-derived ids for remote-write).
        if (!r.ok()) {
          ++resent;
          r = HttpPost(url, path, body, type, o);
        }
        if (!r.ok() || r->status != want_status) {
          if (failures++ == 0) {
            std::fprintf(stderr, "POST %s%s: %s\n", url.c_str(), path.c_str(),
                         r.ok() ? (std::to_string(r->status) + " " + r->body).c_str() : r.status().ToString().c_str());
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double s = Seconds(t0);
  if (resent) std::printf("  (%d requests resent after a failed connection)\n", resent.load());
  return failures ? -1 : s;
}

void NativeIngest(int clients, int batches_per_client) {
  testing::TempDir dir;
  SystemClock clock;
  testing::Harness h(dir.File("native.db"), clock);
  if (!h.error.empty()) return (void)std::fprintf(stderr, "%s\n", h.error.c_str());
  // 100 minutes per batch: the stream ends well before now.
  int64_t t0 = FloorTo(clock.NowMs(), kMsPerHour) - (batches_per_client + 2) * 100 * kMsPerMinute;
  std::vector<std::vector<std::string>> bodies(static_cast<size_t>(clients));
  size_t samples = 0;
  for (int c = 0; c < clients; ++c) {
    for (int i = 0; i < batches_per_client; ++i) {
      Batch b = testing::MakeBatch(fmt::format("c{}-{}", c, i), fmt::format("bench{}", c), 100,
                                   t0 + i * 100 * kMsPerMinute, 100, "team", true);
      // Batches after the first extend the allocation opened by the first.
      if (i > 0) b.allocations.clear();
      samples += b.samples.size();
      bodies[static_cast<size_t>(c)].push_back(wire::WriteBatch(b));
    }
  }
  double cpu0 = CpuSeconds();
  double s = PostAll(h.url(), "/api/v1/batches", bodies, "application/json", {}, 200);
  double cpu = CpuSeconds() - cpu0;
  if (s < 0) return;
  // The rollups of what was ingested are rebuilt in the background every 2 s, so a run
  // pays for some of them or not depending on when it ends: the second figure counts
  // the rest too (Stop() brings the rollups up to date).
  auto t1 = Steady::now();
  double cpu1 = CpuSeconds();
  h.server->Stop();
  double rollups = Seconds(t1), rollups_cpu = CpuSeconds() - cpu1;
  std::printf("%-58s %12.0f samples/s  (%zu samples, %.2f s wall, %.2f s CPU server+clients)\n",
              fmt::format("native ingest, HTTP, 10k-sample batches, {} clients", clients).c_str(),
              static_cast<double>(samples) / s, samples, s, cpu);
  std::printf("%-58s %12.0f samples/s  (+%.2f s wall, +%.2f s CPU)\n", "  the same until the rollups are current",
              static_cast<double>(samples) / (s + rollups), rollups, rollups_cpu);
}

// Remote-write requests: sender `c`'s 100 GPUs, 8 DCGM series each, 10 instants 10 s apart.
std::vector<std::vector<std::string>> RemoteWriteStream(int64_t t0, int requests_per_sender, size_t* points) {
  const char* families[] = {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
                            "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                            "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP"};
  std::vector<std::vector<std::string>> out(4);
  *points = 0;
  for (int c = 0; c < 4; ++c) {
    for (int r = 0; r < requests_per_sender; ++r) {
      prometheus::WriteRequest w;
      for (int g = 0; g < 100; ++g) {
        for (const char* f : families) {
          prometheus::TimeSeries ts;
          ts.labels = {{"Hostname", fmt::format("rw{}-{}", c, g / 8)},
                       {"UUID", fmt::format("GPU-rw{}-{}", c, g)},
                       {"__name__", f},
                       {"gpu", std::to_string(g % 8)},
                       {"modelName", "NVIDIA H100 80GB HBM3"}};
          std::sort(ts.labels.begin(), ts.labels.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
          for (int k = 0; k < 10; ++k) {
            int64_t t = t0 + (r * 10 + k) * 10 * kMsPerSecond;
            double v = std::string_view(f) == "DCGM_FI_DEV_GPU_UTIL" ? 37 + (k + g) % 50
                       : std::string_view(f).starts_with("DCGM_FI_PROF") ? 0.01 * ((k * 7 + g) % 100)
                                                                        : 1000 + k + g;
            ts.samples.push_back({v, t});
            ++*points;
          }
          w.timeseries.push_back(std::move(ts));
        }
      }
      out[static_cast<size_t>(c)].push_back(prometheus::EncodeWriteRequest(w));
    }
  }
  return out;
}

void RemoteWrite(int requests_per_sender) {
  testing::TempDir dir;
  SystemClock clock;
  int64_t t0 = FloorTo(clock.NowMs(), kMsPerHour) - kMsPerDay;
  size_t points = 0;
  auto stream = RemoteWriteStream(t0, requests_per_sender, &points);
  const std::vector<std::pair<std::string, std::string>> headers = {{"Content-Encoding", "snappy"},
                                                                    {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
  testing::Harness h(dir.File("rw.db"), clock);
  if (!h.error.empty()) return (void)std::fprintf(stderr, "%s\n", h.error.c_str());
  double cpu0 = CpuSeconds();
  double ours = PostAll(h.url(), "/api/v1/write", stream, "application/x-protobuf", headers, 204);
  double cpu_ours = CpuSeconds() - cpu0;
  if (ours < 0) return;
  double p_ours = static_cast<double>(points) / ours;
  std::printf("%-58s %12.0f points/s   (%zu points, %.2f s wall, %.2f s CPU server+senders)\n",
              "remote-write, gpuledger (durable, FULL sync)", p_ours, points, ours, cpu_ours);
  // VictoriaMetrics acknowledges a write before it reaches the disk (it flushes its
  // buffers every few seconds): the same stream into gpuledger at synchronous=NORMAL,
  // whose acknowledged batches survive a crash of the server but not of the machine.
  double p_normal = 0;
  {
    testing::TempDir normal_dir;
    testing::Harness n(normal_dir.File("rw.db"), clock, {}, /*durable=*/false);
    if (!n.error.empty()) return (void)std::fprintf(stderr, "%s\n", n.error.c_str());
    double c0 = CpuSeconds();
    double t = PostAll(n.url(), "/api/v1/write", stream, "application/x-protobuf", headers, 204);
    if (t < 0) return;
    p_normal = static_cast<double>(points) / t;
    std::printf("%-58s %12.0f points/s   (%zu points, %.2f s wall, %.2f s CPU server+senders)\n",
                "remote-write, gpuledger (NORMAL sync, acked before fsync)", p_normal, points, t,
                CpuSeconds() - c0);
  }

  testing::VictoriaMetricsProcess vm_process(dir.File("vm"));
  if (vm_process.url().empty()) {
    std::printf("%-58s skipped: %s\n", "remote-write, VictoriaMetrics", vm_process.error().c_str());
    return;
  }
  const std::string& vm = vm_process.url();
  // VictoriaMetrics's CPU time is read after it exits: it includes its start-up and
  // shutdown, so it is an upper bound of what the stream cost it.
  double senders0 = CpuSeconds(), vm0 = CpuSeconds(RUSAGE_CHILDREN);
  double theirs = PostAll(vm, "/api/v1/write", stream, "application/x-protobuf", headers, 204);
  double senders = CpuSeconds() - senders0;
  vm_process.Stop();
  double vm_cpu = CpuSeconds(RUSAGE_CHILDREN) - vm0;
  if (theirs < 0) return;
  double p_theirs = static_cast<double>(points) / theirs;
  std::printf(
      "%-58s %12.0f points/s   (%zu points, %.2f s wall, %.2f s CPU server (whole life)+%.2f "
      "senders)\n",
      "remote-write, VictoriaMetrics 1.79 (same bodies)", p_theirs, points, theirs, vm_cpu,
      senders);
  std::printf("%-58s %12.2f\n", "remote-write ratio gpuledger / VictoriaMetrics", p_ours / p_theirs);
  std::printf("%-58s %12.2f\n", "  the same, both acknowledging before fsync", p_normal / p_theirs);
}

// `nodes` nodes x 8 GPUs for `days` days from `base`, as hour rollups written directly
// through WriteRollups (which keeps the day rollups too); false (and a message) when the
// setup failed. `*write_seconds`: the wall time WriteRollups took.
bool SetUpRollupFleet(ledger::Ledger& l, int64_t base, int days, int nodes, double* write_seconds) {
  (void)l.SetPrices(*PriceBook::Create(
      {PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromMicros(2'490'000), {0, kForever}}}));
  // Per GPU a job a day for one of 20 teams, idle the last 2 hours of each day.
  for (int node = 0; node < nodes; ++node) {
    Batch b = testing::MakeBatch(fmt::format("setup-{}", node), fmt::format("n{}", node), 8, base, 1, "x", true);
    b.allocations.clear();
    for (int day = 0; day < days; ++day) {
      for (int g = 0; g < 8; ++g) {
        Job j;
        j.id = fmt::format("job-{}-{}-{}", node, g, day);
        j.team = fmt::format("team-{}", (node * 8 + g + day) % 20);
        b.jobs.push_back(j);
      }
    }
    if (!l.Ingest(b).ok()) return std::fprintf(stderr, "setup ingest failed\n") < 0;
    // A last sample at the end of the 30 days: reports end where the data ends.
    Batch last = testing::MakeBatch(fmt::format("setup-end-{}", node), fmt::format("n{}", node), 8,
                                    base + days * kMsPerDay, 1, "x", true);
    last.allocations.clear();
    last.jobs.clear();
    if (!l.Ingest(last).ok()) return std::fprintf(stderr, "setup ingest failed\n") < 0;
  }
  (void)l.RefreshRollups();
  std::map<std::string, int64_t> job_id;
  auto jobs = ledger::internal_StoreOf(l).ListJobs();
  auto devices = ledger::internal_StoreOf(l).ListDevices();
  if (!jobs.ok() || !devices.ok()) return std::fprintf(stderr, "setup listing failed\n") < 0;
  for (const auto& j : *jobs) job_id[j.job.id] = j.id;
  std::vector<store::RollupUpdate> updates;
  for (const auto& d : *devices) {
    // uuid "GPU-n<node>-<gpu>" (testing::MakeBatch).
    std::string rest = d.device.uuid.substr(std::min<size_t>(d.device.uuid.size(), 5));
    size_t dash = rest.rfind('-');
    if (dash == std::string::npos) continue;
    std::string node = rest.substr(0, dash);
    std::string gpu = rest.substr(dash + 1);
    for (int hour = 0; hour < days * 24; ++hour) {
      store::RollupUpdate u;
      u.dirty = {d.id, base + hour * kMsPerHour, 0};
      int64_t active = (hour * 7919 + d.id * 104729) % kMsPerHour;
      int64_t job = hour % 24 < 22 ? job_id[fmt::format("job-{}-{}-{}", node, gpu, hour / 24)] : 0;
      u.hour_rows.push_back({u.dirty.hour_ms, d.id, job,
                             job ? std::array<int64_t, kBucketCount>{active, kMsPerHour - active, 0, 0, 0}
                                 : std::array<int64_t, kBucketCount>{0, 0, kMsPerHour, 0, 0},
                             0});
      updates.push_back(std::move(u));
    }
    if (updates.size() >= 20'000) {
      auto t0 = Steady::now();
      Status st = ledger::internal_StoreOf(l).WriteRollups(updates);
      *write_seconds += Seconds(t0);
      if (!st.ok()) return std::fprintf(stderr, "setup rollups: %s\n", st.ToString().c_str()) < 0;
      updates.clear();
    }
  }
  auto t0 = Steady::now();
  Status st = ledger::internal_StoreOf(l).WriteRollups(updates);
  *write_seconds += Seconds(t0);
  if (!st.ok()) return std::fprintf(stderr, "setup rollups: %s\n", st.ToString().c_str()) < 0;
  return true;
}

// The usage query over a ledger on `store`, served by a server of its own: setup time,
// then p50/p99 and the range of the wall times, and the median CPU time per query
// (server and client in this process: it moves less with the machine's load).
void UsageLatency(int queries, int gpus, const std::string& backend, std::unique_ptr<store::Store> store) {
  const int64_t base = 1'790'208'000'000;  // 2026-09-24T00:00:00Z
  ManualClock clock(base + 31 * kMsPerDay);
  ledger::Ledger l(std::move(store), clock);
  ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.access_log = false;
  auto server = Server::Create(l, clock, std::move(options));
  if (!server.ok()) return (void)std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
  if (Status st = (*server)->Start(); !st.ok()) return (void)std::fprintf(stderr, "%s\n", st.ToString().c_str());
  auto t_setup = Steady::now();
  double write_s = 0;
  if (!SetUpRollupFleet(l, base, 30, gpus / 8, &write_s)) return;
  double setup_s = Seconds(t_setup);
  std::string path = fmt::format("/api/v1/usage?from={}&to={}&by=team", UrlEncode(FormatTime(base)),
                                 UrlEncode(FormatTime(base + 30 * kMsPerDay)));
  std::vector<double> ms, cpu_ms;
  for (int i = 0; i < queries + 3; ++i) {
    auto t0 = Steady::now();
    double c0 = CpuSeconds();
    auto r = HttpGet((*server)->Url(), path);
    double took = Seconds(t0) * 1000, cpu = (CpuSeconds() - c0) * 1000;
    if (!r.ok() || r->status != 200) return (void)std::fprintf(stderr, "usage query failed\n");
    if (i >= 3) {  // the first ones warm the database's page cache
      ms.push_back(took);
      cpu_ms.push_back(cpu);
    }
  }
  (*server)->Stop();
  std::sort(ms.begin(), ms.end());
  std::sort(cpu_ms.begin(), cpu_ms.end());
  auto pct = [](const std::vector<double>& v, double p) {
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
  };
  std::printf("%-58s p50 %.1f ms, p99 %.1f ms, range %.1f-%.1f ms, CPU p50 %.1f ms  (%d queries)\n",
              fmt::format("GET usage 30d by team, {} GPUs, {}", gpus, backend).c_str(), pct(ms, 0.5), pct(ms, 0.99),
              ms.front(), ms.back(), pct(cpu_ms, 0.5), queries);
  std::printf("%-58s %.1f s, of which WriteRollups %.1f s (%d device-hours)\n", "  its setup", setup_s, write_s,
              gpus * 30 * 24);
}

void UsageLatencySqlite(int queries, int gpus) {
  testing::TempDir dir;
  auto store = store::OpenSqliteStore(dir.File("usage.db"), {.synchronous_full = true});
  if (!store.ok()) return (void)std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
  UsageLatency(queries, gpus, "SQLite", std::move(*store));
}

#ifdef GPULEDGER_BENCH_POSTGRESQL
// On the test harness's PostgreSQL (store/testing/pg_server.h), a database of its own.
void UsageLatencyPostgres(int queries, int gpus) {
  auto server = store::pgtest::PgTestServer::Shared();
  if (!server.ok()) return (void)std::printf("%-58s skipped: %s\n", "GET usage, PostgreSQL", server.status().ToString().c_str());
  auto db = (*server)->CreateDatabase(fmt::format("usage{}", gpus));
  if (!db.ok()) return (void)std::fprintf(stderr, "%s\n", db.status().ToString().c_str());
  auto store = store::OpenPgStore((*server)->Url(*db));
  if (!store.ok()) return (void)std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
  UsageLatency(queries, gpus, "PostgreSQL", std::move(*store));
}
#endif

// 5. The largest query the default budget allows (docs/server.md, "Limits"): 1,000 GPUs
//    over 60 days (1,440,000 device-hours of the 1,500,000 allowed; --quick: 10 days), as a series by device
//    with a daily step (60,000 cells) and as a heatmap with a daily step: time and the
//    process's peak RSS during the query (VmHWM, reset before it through clear_refs).
int64_t KbOf(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t kb = -1;
  while (std::fgets(line, sizeof line, f)) {
    if (std::string_view(line).starts_with(field)) kb = std::atoll(line + std::strlen(field));
  }
  std::fclose(f);
  return kb;
}

void LargestQuery(int days) {
  testing::TempDir dir;
  const int64_t base = 1'790'208'000'000;  // 2026-09-24T00:00:00Z
  ManualClock clock(base + (days + 1) * kMsPerDay);
  testing::Harness h(dir.File("largest.db"), clock);
  if (!h.error.empty()) return (void)std::fprintf(stderr, "%s\n", h.error.c_str());
  double write_s = 0;
  if (!SetUpRollupFleet(*h.ledger, base, days, 125, &write_s)) return;
  std::string window = fmt::format("from={}&to={}", UrlEncode(FormatTime(base)),
                                   UrlEncode(FormatTime(base + days * kMsPerDay)));
  for (const char* what : {"series", "heatmap"}) {
    std::string path = fmt::format("/api/v1/{}?{}&step=24h{}", what, window,
                                   std::string_view(what) == "series" ? "&by=device" : "");
    if (std::FILE* clear = std::fopen("/proc/self/clear_refs", "w")) {  // resets VmHWM
      std::fputs("5", clear);
      std::fclose(clear);
    }
    int64_t rss_before = KbOf("VmRSS:");
    auto t0 = Steady::now();
    HttpRequestOptions patient;
    patient.timeout_ms = 900'000;
    auto r = HttpGet(h.url(), path, patient);
    double took = Seconds(t0);
    if (!r.ok() || r->status != 200) {
      return (void)std::fprintf(stderr, "%s failed: %s\n", what, r.ok() ? r->body.c_str() : r.status().ToString().c_str());
    }
    std::printf("%-58s %.1f s, peak RSS %.0f MB (%.0f MB before), answer %.1f MB\n",
                fmt::format("GET {} {}d by device, step 24h, 1,000 GPUs", what, days).c_str(), took,
                static_cast<double>(KbOf("VmHWM:")) / 1024, static_cast<double>(rss_before) / 1024,
                static_cast<double>(r->body.size()) / (1 << 20));
  }
}

// 4. Native ingest (4 clients, 10k-sample batches) alone, then again while 2 readers loop
//    on the heaviest dashboard queries over the same store (usage by device and hour over
//    the whole span, the 30-day series by team, the heatmap): ingest samples/s and batch
//    latency with and without queries, and the queries answered meanwhile. The ledger has
//    no server-wide lock: queries read snapshots and never wait for a group commit.
void IngestDuringQueries(int batches_per_client) {
  SystemClock clock;
  int64_t t0 = FloorTo(clock.NowMs(), kMsPerHour) - (2 * batches_per_client + 4) * 100 * kMsPerMinute;
  auto run = [&](bool with_queries) {
    testing::TempDir dir;
    testing::Harness h(dir.File("mixed.db"), clock);
    if (!h.error.empty()) return (void)std::fprintf(stderr, "%s\n", h.error.c_str());
    // A first half already stored, so that the queries have weeks of work to read.
    for (int c = 0; c < 4; ++c) {
      for (int i = 0; i < batches_per_client; ++i) {
        Batch b = testing::MakeBatch(fmt::format("old{}-{}", c, i), fmt::format("bench{}", c), 100,
                                     t0 + i * 100 * kMsPerMinute, 100, "team", true);
        if (i > 0) b.allocations.clear();
        (void)h.ledger->Ingest(b);
      }
    }
    (void)h.ledger->RefreshRollups();
    std::vector<std::vector<std::string>> bodies(4);
    size_t samples = 0;
    for (int c = 0; c < 4; ++c) {
      for (int i = batches_per_client; i < 2 * batches_per_client; ++i) {
        Batch b = testing::MakeBatch(fmt::format("new{}-{}", c, i), fmt::format("bench{}", c), 100,
                                     t0 + i * 100 * kMsPerMinute, 100, "team", true);
        b.allocations.clear();
        samples += b.samples.size();
        bodies[static_cast<size_t>(c)].push_back(wire::WriteBatch(b));
      }
    }
    std::atomic<bool> done{false};
    std::atomic<int> queries{0}, query_failures{0};
    std::vector<std::thread> readers;
    std::string span = fmt::format("from={}&to={}", UrlEncode(FormatTime(t0)), UrlEncode(FormatTime(clock.NowMs())));
    const std::vector<std::string> paths = {"/api/v1/usage?" + span + "&by=device,hour",
                                            "/api/v1/series?" + span + "&by=team", "/api/v1/heatmap?" + span};
    if (with_queries) {
      for (int r = 0; r < 2; ++r) {
        readers.emplace_back([&, r] {
          for (size_t k = static_cast<size_t>(r); !done; ++k) {
            auto q = HttpGet(h.url(), paths[k % paths.size()]);
            if (!q.ok() || q->status != 200) ++query_failures;
            ++queries;
          }
        });
      }
    }
    std::vector<double> latency_ms;
    std::mutex latency_mu;
    auto start = Steady::now();
    std::vector<std::thread> clients;
    for (const auto& mine : bodies) {
      clients.emplace_back([&] {
        for (const std::string& body : mine) {
          auto b0 = Steady::now();
          auto r = HttpPost(h.url(), "/api/v1/batches", body, "application/json", {});
          double took = Seconds(b0) * 1000;
          if (!r.ok() || r->status != 200) std::fprintf(stderr, "ingest failed\n");
          std::lock_guard lock(latency_mu);
          latency_ms.push_back(took);
        }
      });
    }
    for (auto& t : clients) t.join();
    double s = Seconds(start);
    done = true;
    for (auto& t : readers) t.join();
    std::sort(latency_ms.begin(), latency_ms.end());
    auto pct = [&](double p) {
      return latency_ms[std::min(latency_ms.size() - 1, static_cast<size_t>(p * static_cast<double>(latency_ms.size())))];
    };
    std::printf("%-58s %12.0f samples/s  (batch p50 %.0f ms, p99 %.0f ms, max %.0f ms; %d queries answered, %d failed)\n",
                with_queries ? "native ingest, 4 clients, while 2 readers query" : "native ingest, 4 clients, no queries",
                static_cast<double>(samples) / s, pct(0.5), pct(0.99), latency_ms.back(), queries.load(),
                query_failures.load());
  };
  run(false);
  run(true);
}

}  // namespace
}  // namespace gpuledger::server

// server_bench [--quick] [--only=native,remote_write,usage,usage_pg,mixed,largest] [--usage-gpus=N]
int main(int argc, char** argv) {
  bool quick = false;
  int usage_gpus = 1000;  // the usage parts' fleet (8 GPUs a node)
  std::string only = "native,remote_write,usage,mixed,largest";
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a.starts_with("--only=")) {
      only = a.substr(7);
    } else if (a.starts_with("--usage-gpus=")) {
      usage_gpus = std::max(8, std::atoi(std::string(a.substr(13)).c_str()));
    } else {
      std::fprintf(stderr,
                   "usage: server_bench [--quick] [--only=native,remote_write,usage,usage_pg,mixed,largest]"
                   " [--usage-gpus=N]\n");
      return 2;
    }
  }
  auto wanted = [&](std::string_view part) {
    return ("," + only + ",").find(fmt::format(",{},", part)) != std::string::npos;
  };
  std::printf("server_bench (%s)\n", quick ? "quick" : "full");
  if (wanted("native")) {
    gpuledger::server::NativeIngest(4, quick ? 2 : 25);
    gpuledger::server::NativeIngest(16, quick ? 1 : 6);
  }
  if (wanted("remote_write")) gpuledger::server::RemoteWrite(quick ? 2 : 25);
  if (wanted("usage")) gpuledger::server::UsageLatencySqlite(quick ? 5 : 200, usage_gpus);
#ifdef GPULEDGER_BENCH_POSTGRESQL
  if (wanted("usage_pg")) gpuledger::server::UsageLatencyPostgres(quick ? 5 : 50, usage_gpus);
#endif
  if (wanted("mixed")) gpuledger::server::IngestDuringQueries(quick ? 2 : 12);
  // Quick: a sixth of the allowed device-hours (the time grows with them).
  if (wanted("largest")) gpuledger::server::LargestQuery(quick ? 10 : 60);
  return 0;
}
