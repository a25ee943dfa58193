#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <signal.h>
#include <sys/resource.h>

#include "cli/commands.h"
#include "demo/demo_fleet.h"
#include "report/usage_format.h"
#include "server/auth.h"
#include "server/client.h"
#include "server/objectives_loop.h"
#include "server/server.h"
#include "store/pg_store.h"
#include "store/store.h"
#include "wire/batch.h"

namespace gpuledger::cli {

sigset_t BlockStopSignals();  // serve_command.cc
void UseOneMallocArena();     // serve_command.cc

namespace {

constexpr std::string_view kDemoConfigHeader = "# Written by gpuledger demo";

// Whether the file at `config` was written by the demo (its first line says so).
bool WrittenByDemo(const std::string& config) {
  std::ifstream f(config, std::ios::binary);
  std::string first;
  std::getline(f, first);
  return first.rfind(kDemoConfigHeader, 0) == 0;
}

// A config file the demo may overwrite: none yet, or one it wrote.
Status CheckReplaceableConfig(const std::string& config) {
  if (!std::filesystem::exists(config) || WrittenByDemo(config)) return Status::Ok();
  return FailedPrecondition(fmt::format(
      "{}: a file that gpuledger demo did not write; the demo writes its config there, so give --write-config "
      "a new path or remove this file yourself",
      config));
}

// The demo fills a PostgreSQL database only while it is empty: it never mixes its fleet
// into a real ledger, and it drops nothing.
Status CheckEmpty(ledger::Ledger& ledger) {
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, ledger.Devices());
  if (devices.empty()) return Status::Ok();
  return FailedPrecondition(fmt::format(
      "--db: the database already holds {} devices; the demo fills an empty database only (create a new one, "
      "or drop this one yourself)",
      devices.size()));
}

// Whether `db` may be replaced by a fresh demo store: nothing is there, or the demo made
// it (its config beside it says so). Anything else is someone's ledger: refused.
Status CheckReplaceable(const std::string& db, const std::string& config) {
  if (!std::filesystem::exists(db) || WrittenByDemo(config)) return Status::Ok();
  return FailedPrecondition(fmt::format(
      "--db {}: a store that gpuledger demo did not make (no {} beside it written by the demo); "
      "the demo replaces its store, so give it a new path or remove this one yourself",
      db, config));
}

// The live feed sends every kLiveTickMs of real time; the batches cover whole sample
// intervals, and a device whose latest sample is older than 3 intervals reads as
// unmonitored. So between two sends simulated time may pass at most 2 intervals.
constexpr int64_t kLiveTickMs = 200;
double MaxLiveSpeed(int64_t sample_interval_ms) {
  return 2.0 * static_cast<double>(sample_interval_ms) / static_cast<double>(kLiveTickMs);
}

// The objectives and rules the demo runs, rules in dry-run: `gpuledger slo status` and the
// backtest show a newcomer alerts and proposed actions on the demo's week (docs/objectives.md).
constexpr std::string_view kDemoObjectives = R"toml(
[[objective]]
name = "training-utilization"
kind = "utilization"
scope = "pool:training"
target = "65%"
window = "7d"

[[objective]]
name = "serving-utilization"         # serving keeps headroom on purpose: a lower target
kind = "utilization"
scope = "pool:serving"
target = "40%"
window = "7d"

[[objective]]
name = "dev-allocated-efficiency"
kind = "utilization"
scope = "pool:dev"
measure = "allocated_efficiency"
target = "30%"
window = "1d"

[[objective]]
name = "gpus-within-10m"
kind = "availability"
scope = "fleet"
target = "95%"
start_within = "10m"
window = "7d"

[[objective]]
name = "nlp-budget"
kind = "budget"
scope = "team:nlp"
window = "7d"

[[intervention]]
name = "idle-notebooks"              # dry-run: proposes, never acts (mode = "enforce" acts)
action = "stop"
kind = "notebook"
idle_below = "5%"
idle_for = "2h"
grace = "30m"

[[intervention]]
name = "fill-idle-training-gpus"
action = "reprioritize"
pool = "training"
raise_to = 1000
)toml";

// The demo's config beside its store: the store's path, the fleet's prices, targets and
// budgets, and the objectives and rules above. The demo's server reads it like `serve --config`, and the commands it suggests
// take it, so that the report, `usage --by pool` and the dashboard judge by the same
// targets (docs/configuration.md, "Targets and budgets").
Status WriteDemoConfig(const demo::DemoFleet& fleet, const CommonOptions& mine) {
  std::error_code ec;
  auto parent = std::filesystem::path(mine.config_path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream f(mine.config_path, std::ios::binary | std::ios::trunc);
  // The demo's prices are list prices of cloud GPUs in US dollars, and its config says so
  // ([prices] currency): a ledger with no [prices] has an unnamed unit, never USD.
  f << kDemoConfigHeader << ": its fleet's prices, targets and budgets.\n"
    << config::WriteGoalsAndPrices(fleet.FleetGoals(), fleet.Prices().entries(),
                                   store::IsPostgresUrl(mine.db_path)
                                       ? mine.db_path
                                       : std::filesystem::absolute(mine.db_path).lexically_normal().string(),
                                   Currency::Iso4217("USD").value())
    << kDemoObjectives;
  if (!f.flush()) return Unavailable(fmt::format("cannot write {}", mine.config_path));
  return Status::Ok();
}

// The live demo: a server on a fresh store, fed by the simulated fleet's agents (over
// HTTP, as real agents would) as simulated time passes `speed` times faster than real
// time, after `history` of it has been sent at once. Stops on SIGINT or SIGTERM.
int RunLive(const demo::DemoOptions& d, const CommonOptions& mine, const std::string& listen, double speed,
            int64_t history_ms) {
  UseOneMallocArena();  // a server, as `serve` runs it
  sigset_t stop = BlockStopSignals();
  ManualClock sim_clock(d.start_ms + history_ms);
  demo::DemoFleet fleet(d);
  Status st = WriteDemoConfig(fleet, mine);
  if (!st.ok()) return Fail(st);
  Config config;
  auto ledger = OpenLedger(mine, sim_clock, &config);
  if (!ledger.ok()) return Fail(ledger.status());
  std::string token = server::NewToken();
  server::TokenEntry admin;
  admin.name = "demo-admin";
  admin.role = server::Role::kAdmin;
  st = server::ParseTokenHash(server::HashToken(token), admin);
  if (!st.ok()) return Fail(st);
  server::ServerOptions options;
  options.listen = listen;
  options.tokens = {admin};
  options.access_log = false;
  options.goals = config.goals;
  options.objectives = config.objectives;
  options.quotas = config.quotas;
  PrintTargets(options.goals);
  options.what_if = WhatIfForServer();
  options.dashboard_refresh_ms = 10'000;
  // The fleet's data are as old as the simulated history; nothing is refused for age.
  options.limits.max_sample_age_ms = d.duration_ms + kMsPerDay;
  auto srv = server::Server::Create(**ledger, sim_clock, options);
  if (!srv.ok()) return Fail(srv.status());
  st = (*srv)->Start();
  if (!st.ok() && listen == "127.0.0.1:8080") {
    // The default port is taken: any free one will do.
    options.listen = "127.0.0.1:0";
    srv = server::Server::Create(**ledger, sim_clock, options);
    if (!srv.ok()) return Fail(srv.status());
    st = (*srv)->Start();
  }
  if (!st.ok()) return Fail(st);
  std::string url = (*srv)->Url();
  server::HttpRequestOptions post;
  post.token = token;
  int64_t batches = 0;
  // History goes in hour-long batches; the live feed in a batch per node and sample
  // interval (see MaxLiveSpeed).
  auto send = [&](int64_t until, int64_t span) -> Status {
    for (const Batch& b : fleet.Advance(until, span)) {
      auto r = server::HttpPost(url, "/api/v1/batches", wire::WriteBatch(b), "application/json", post);
      if (!r.ok()) return r.status();
      if (r->status != 200) {
        return InvalidArgument(fmt::format("batch {}: HTTP {}: {}", b.batch_id, r->status, server::ErrorMessageOf(*r)));
      }
      ++batches;
    }
    return Status::Ok();
  };
  std::fprintf(stderr, "demo: sending %s of history, %s to %s ...\n", FormatDuration(history_ms).c_str(),
               FormatTime(d.start_ms).c_str(), FormatTime(d.start_ms + history_ms).c_str());
  st = send(d.start_ms + history_ms, kMsPerHour);
  if (!st.ok()) return Fail(st);
  std::printf("gpuledger demo: serving %s (store %s, config %s)\n  token (admin): %s\n"
              "  dashboard: open %s/ in a browser and paste the token\n"
              "  try: curl -H 'Authorization: Bearer %s' '%s/api/v1/usage?window=1d&by=team'\n"
              "       gpuledger usage --server %s --token %s --window 1d\n"
              "       gpuledger report weekly --config %s (the same targets as the dashboard)\n"
              "       gpuledger slo status --config %s (objectives)\n"
              "       gpuledger actions --config %s (the dry-run rules' proposed actions, in the audit log)\n"
              "  simulated time runs %gx real time; Ctrl-C stops\n",
              url.c_str(), mine.db_path.c_str(), mine.config_path.c_str(), token.c_str(), url.c_str(), token.c_str(),
              url.c_str(), url.c_str(), token.c_str(), mine.config_path.c_str(), mine.config_path.c_str(),
              mine.config_path.c_str(), speed);
  std::fflush(stdout);
  // The demo's objectives and dry-run rules, judged as serve judges them (docs/objectives.md).
  auto objectives = server::ObjectivesLoop::Create(**ledger, sim_clock, (*srv)->metrics(), config);
  if (!objectives.ok()) return Fail(objectives.status());
  if (*objectives) (*objectives)->Start();
  auto t0 = std::chrono::steady_clock::now();
  int64_t sim0 = d.start_ms + history_ms;
  timespec tick{0, kLiveTickMs * 1'000'000};
  for (;;) {
    if (sigtimedwait(&stop, nullptr, &tick) > 0) break;
    double real_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    int64_t sim_now = std::min(fleet.end_ms(), sim0 + static_cast<int64_t>(real_ms * speed));
    sim_clock.Set(sim_now);
    st = send(sim_now, d.sample_interval_ms);
    if (!st.ok()) {
      if (*objectives) (*objectives)->Stop();
      (*srv)->Stop();
      return Fail(st);
    }
  }
  if (*objectives) (*objectives)->Stop();
  std::fprintf(stderr, "\ndemo: stopping (%lld batches sent; simulated time %s)\n", static_cast<long long>(batches),
               FormatTime(sim_clock.NowMs()).c_str());
  (*srv)->Stop();
  return 0;
}

// The fleet's whole span streamed to running servers instead of a store of its own (a
// fleet generator for benchmarks, docs/benchmarks.md): hour by hour, by `senders` threads,
// sender i to urls[i % urls.size()]. Each node's batches go through one sender, in order,
// as its agent sends them (a batch may name a job an earlier one of its node declared); a
// batch whose connection fails is sent again (up to 5 times, 1 s apart; its id makes that
// safe); any other answer than 200 stops the run. Prints what was sent, the wall time and
// this process's CPU time.
int StreamToServers(const demo::DemoOptions& d, const std::vector<std::string>& urls, const std::string& token,
                    int senders) {
  auto t0 = std::chrono::steady_clock::now();
  demo::DemoFleet fleet(d);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<Batch>> queues(static_cast<size_t>(senders));
  size_t queued = 0;
  bool done = false;
  Status failed = Status::Ok();
  std::atomic<int64_t> samples{0}, sent{0}, resent{0};
  auto sender = [&](size_t i) {
    server::HttpRequestOptions post;
    post.token = token;
    const std::string& url = urls[i % urls.size()];
    for (;;) {
      Batch b;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return done || !queues[i].empty() || !failed.ok(); });
        if (queues[i].empty() || !failed.ok()) return;
        b = std::move(queues[i].front());
        queues[i].pop_front();
        --queued;
      }
      cv.notify_all();
      std::string body = wire::WriteBatch(b);
      auto r = server::HttpPost(url, "/api/v1/batches", body, "application/json", post);
      for (int attempt = 1; !r.ok() && attempt < 5; ++attempt) {
        ++resent;
        std::this_thread::sleep_for(std::chrono::seconds(1));
        r = server::HttpPost(url, "/api/v1/batches", body, "application/json", post);
      }
      Status st = !r.ok() ? r.status()
                  : r->status != 200 ? InvalidArgument(fmt::format("HTTP {}: {}", r->status, server::ErrorMessageOf(*r)))
                                     : Status::Ok();
      if (!st.ok()) {
        std::lock_guard lock(mu);
        if (failed.ok()) failed = st.WithContext(fmt::format("batch {} to {}", b.batch_id, url));
        cv.notify_all();
        return;
      }
      samples += static_cast<int64_t>(b.samples.size());
      ++sent;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < senders; ++i) threads.emplace_back(sender, static_cast<size_t>(i));
  std::map<std::string, size_t> sender_of;  // node -> its sender, in the order nodes first send
  for (int64_t hour = d.start_ms; hour < fleet.end_ms(); hour += kMsPerHour) {
    std::vector<Batch> batches = fleet.Advance(hour + kMsPerHour);
    std::unique_lock lock(mu);
    // At most two hours of batches waiting: the generator does not run ahead of the servers.
    cv.wait(lock, [&] { return queued < 2 * batches.size() || !failed.ok(); });
    if (!failed.ok()) break;
    for (Batch& b : batches) {
      auto [it, unused] = sender_of.try_emplace(b.source, sender_of.size() % queues.size());
      queues[it->second].push_back(std::move(b));
      ++queued;
    }
    cv.notify_all();
  }
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& t : threads) t.join();
  if (!failed.ok()) return Fail(failed);
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  double cpu = static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
               1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  std::printf("demo: sent %lld batches, %lld samples from %zu GPUs and slices (%d clusters) to %zu server%s in "
              "%.1f s: %.0f samples/s; %lld resent; this process's CPU %.1f s\n",
              static_cast<long long>(sent.load()), static_cast<long long>(samples.load()), fleet.devices().size(),
              fleet.clusters(), urls.size(), urls.size() == 1 ? "" : "s", wall,
              static_cast<double>(samples.load()) / wall, static_cast<long long>(resent.load()), cpu);
  return 0;
}

}  // namespace

void AddDemoCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    uint64_t seed = 42;
    std::string start;
    int days = 7;
    std::string interval = "60s";
    bool once = false;
    double speed = 60;
    std::string listen = "127.0.0.1:8080";
    std::string history = "1d";
    int64_t gpus = 0;
    std::vector<std::string> servers;
    std::string token;
    int senders = 4;
    std::string write_config;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "demo", "Run the server on a fresh store, fed live by a simulated 32-node fleet (--once: "
              "simulate a week, print the fleet summary and exit). The store at --db (default: demo.db "
              "beside the default ledger) is replaced; one the demo did not make is refused");
  AddCommonOptions(*sub, common);
  sub->add_flag("--once", o->once, "simulate the whole span at once, print the summary and exit (for scripts)");
  sub->add_option("--speed", o->speed,
                  "live: simulated seconds per real second (60: a minute per second; at most 2 sample "
                  "intervals per 0.2 s, so that the fleet stays monitored: 600 with --interval 60s)")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  sub->add_option("--listen", o->listen, "live: the server's address (a free port if the default is taken)")
      ->capture_default_str();
  sub->add_option("--history", o->history, "live: simulated time sent at once before the live feed starts")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "random seed; the same seed and start give the same fleet")
      ->capture_default_str();
  sub->add_option("--start", o->start,
                  "first hour of the simulated span (RFC 3339); default: the Monday that starts "
                  "the last complete ISO week (the span ends before now)");
  sub->add_option("--days", o->days, "length of the simulated span")
      ->check(CLI::Range(1, 62))
      ->capture_default_str();
  sub->add_option("--interval", o->interval, "agents' sampling interval")->capture_default_str();
  sub->add_option("--gpus", o->gpus,
                  "at least this many GPUs: the 43-node cluster (344 GPUs) copied under new names, each "
                  "copy drawn with the next seed (for benchmarks: docs/benchmarks.md)")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000}));
  sub->add_option("--server", o->servers,
                  "with --once: send the whole span to these running servers (comma-separated URLs) "
                  "instead of a store of the demo's own, as agents would")
      ->delimiter(',');
  sub->add_option("--write-config", o->write_config,
                  "with a postgresql:// --db: where the demo writes its config, which names the database "
                  "(default: demo-postgresql.toml beside the default ledger)");
  sub->add_option("--token", o->token, "with --server: an agent or admin token")->envname("GPULEDGER_TOKEN");
  sub->add_option("--senders", o->senders, "with --server: batches in flight at once (sender i to server i mod n)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  out.push_back({sub, [o, &common]() -> int {
                   SystemClock clock;
                   demo::DemoOptions d;
                   d.seed = o->seed;
                   d.gpus = o->gpus;
                   d.duration_ms = o->days * kMsPerDay;
                   auto interval = ParseDuration(o->interval);
                   if (!interval.ok()) return Fail(interval.status());
                   if (kMsPerHour % *interval != 0) {
                     return Fail(InvalidArgument("--interval must divide an hour"));
                   }
                   d.sample_interval_ms = *interval;
                   if (o->start.empty()) {
                     d.start_ms = demo::DefaultStart(clock.NowMs(), d.duration_ms);
                   } else {
                     auto start = ParseTime(o->start);
                     if (!start.ok()) return Fail(start.status());
                     if (*start % kMsPerHour != 0) return Fail(InvalidArgument("--start must be a whole hour"));
                     d.start_ms = *start;
                   }
                   if (!o->servers.empty()) {
                     if (!o->once) return Fail(InvalidArgument("--server needs --once (the live demo runs its own server)"));
                     return StreamToServers(d, o->servers, o->token, o->senders);
                   }
                   // A fresh store each run: the demo's, not the user's ledger.
                   CommonOptions mine = common;
                   if (mine.db_path.empty()) {
                     mine.db_path = (std::filesystem::path(DefaultDbPath()).parent_path() / "demo.db").string();
                   }
                   const bool postgresql = store::IsPostgresUrl(mine.db_path);
                   if (postgresql) {
                     // A database has no folder to put the config beside: --write-config names
                     // the file the demo writes, and the database must be empty (checked once open).
                     if (!o->once) {
                       return Fail(InvalidArgument("--db postgresql://...: the demo fills a PostgreSQL store "
                                                   "with --once only (the live demo keeps its own SQLite file)"));
                     }
                     mine.config_path =
                         !o->write_config.empty()
                             ? o->write_config
                             : (std::filesystem::path(DefaultDbPath()).parent_path() / "demo-postgresql.toml").string();
                     if (Status st = CheckReplaceableConfig(mine.config_path); !st.ok()) return Fail(st);
                   } else {
                     // Its own config beside the store (replacing a --config given: the demo's
                     // fleet has its own prices and targets).
                     std::filesystem::path db(mine.db_path);
                     mine.config_path = db.extension() == ".toml" ? mine.db_path + ".config.toml"
                                                                   : db.replace_extension(".toml").string();
                     if (Status st = CheckReplaceable(mine.db_path, mine.config_path); !st.ok()) return Fail(st);
                     for (const char* suffix : {"", "-wal", "-shm"}) {
                       std::filesystem::remove(mine.db_path + suffix);
                     }
                   }
                   if (!o->once) {
                     // Live: the span starts `history` before the current hour, so the
                     // simulated present is the real one when the feed starts.
                     auto history = ParseDuration(o->history);
                     if (!history.ok()) return Fail(history.status().WithContext("--history"));
                     if (*history % kMsPerHour != 0 || *history >= d.duration_ms) {
                       return Fail(InvalidArgument("--history must be whole hours, shorter than --days"));
                     }
                     if (o->speed > MaxLiveSpeed(d.sample_interval_ms)) {
                       return Fail(InvalidArgument(fmt::format(
                           "--speed {}: the live fleet would read as unmonitored between two sends; at most {} "
                           "with --interval {} (a longer interval allows more)",
                           o->speed, MaxLiveSpeed(d.sample_interval_ms), o->interval)));
                     }
                     if (o->start.empty()) d.start_ms = FloorTo(clock.NowMs(), kMsPerHour) - *history;
                     return RunLive(d, mine, o->listen, o->speed, *history);
                   }
                   // The demo's clock stands at the end of the simulated span.
                   ManualClock sim_clock(d.start_ms + d.duration_ms);
                   auto t0 = std::chrono::steady_clock::now();
                   demo::DemoFleet fleet(d);
                   if (Status st = WriteDemoConfig(fleet, mine); !st.ok()) return Fail(st);
                   Config config;
                   auto ledger = OpenLedger(mine, sim_clock, &config);
                   if (!ledger.ok()) return Fail(ledger.status());
                   if (postgresql) {
                     if (Status st = CheckEmpty(**ledger); !st.ok()) return Fail(st);
                   }
                   int64_t samples = 0, batches = 0;
                   // An hour at a time (a large fleet's day of batches would not fit in
                   // memory), in one group commit, as a server commits what arrives together.
                   for (int64_t hour = d.start_ms; hour < fleet.end_ms(); hour += kMsPerHour) {
                     auto group = (*ledger)->BeginIngestGroup();
                     if (!group.ok()) return Fail(group.status());
                     for (const Batch& b : fleet.Advance(hour + kMsPerHour)) {
                       Status valid = (*ledger)->Validate(b);
                       if (!valid.ok()) return Fail(valid);
                       auto r = (*group)->Apply(b);
                       if (!r.ok()) return Fail(r.status());
                       samples += static_cast<int64_t>(b.samples.size());
                       ++batches;
                     }
                     if (Status st = (*group)->Commit(); !st.ok()) return Fail(st);
                     if ((hour + kMsPerHour - d.start_ms) % kMsPerDay == 0 || hour + kMsPerHour >= fleet.end_ms()) {
                       std::fprintf(stderr, "\rdemo: simulated %s ... ",
                                    FormatTime(std::min(hour + kMsPerHour, fleet.end_ms())).c_str());
                     }
                   }
                   auto t1 = std::chrono::steady_clock::now();
                   auto rebuilt = (*ledger)->RefreshRollups();
                   if (!rebuilt.ok()) return Fail(rebuilt.status());
                   auto t2 = std::chrono::steady_clock::now();
                   // The days over laid out as a server settles them, one a few minutes
                   // (PostgreSQL only; store.h, SettleDays).
                   auto settled = (*ledger)->SettleDays(std::numeric_limits<size_t>::max());
                   if (!settled.ok()) return Fail(settled.status());
                   auto t3 = std::chrono::steady_clock::now();
                   std::fprintf(stderr,
                                "\rdemo: %lld batches, %lld samples from %zu GPUs and slices, %zu "
                                "jobs; ingest %.1f s, %lld rollup hours %.1f s",
                                static_cast<long long>(batches), static_cast<long long>(samples),
                                fleet.devices().size(), fleet.jobs().size(),
                                std::chrono::duration<double>(t1 - t0).count(),
                                static_cast<long long>(*rebuilt),
                                std::chrono::duration<double>(t2 - t1).count());
                   if (!settled->empty()) {
                     std::fprintf(stderr, ", %zu days settled %.1f s", settled->size(),
                                  std::chrono::duration<double>(t3 - t2).count());
                   }
                   std::fputc('\n', stderr);
                   TimeRange window{d.start_ms, d.start_ms + d.duration_ms};
                   auto by_pool = (*ledger)->Usage(window, {ledger::Dimension::kPool});
                   if (!by_pool.ok()) return Fail(by_pool.status());
                   auto by_team = (*ledger)->Usage(window, {ledger::Dimension::kTeam});
                   if (!by_team.ok()) return Fail(by_team.status());
                   auto waste = (*ledger)->TopWaste(window, 5);
                   if (!waste.ok()) return Fail(waste.status());
                   std::fputs(report::RenderFleetSummary(*by_pool, *by_team, *waste).c_str(), stdout);
                   // The objectives and dry-run rules judged as serve judges them, once a
                   // grace period before the span's end (the rules warn) and at its end (they
                   // propose what enforce would do): their decisions go to the audit log
                   // (`gpuledger actions`), quietly (serve logs each one).
                   int64_t grace = 0;
                   for (const InterventionRule& r : config.interventions) grace = std::max(grace, r.grace_ms);
                   server::MetricsRegistry metrics;
                   sim_clock.Set(window.end_ms - grace);
                   auto level = spdlog::get_level();
                   spdlog::set_level(spdlog::level::warn);
                   auto objectives = server::ObjectivesLoop::Create(**ledger, sim_clock, metrics, config);
                   Status judged = objectives.ok() ? Status::Ok() : objectives.status();
                   for (int64_t at : {window.end_ms - grace, window.end_ms}) {
                     if (!judged.ok() || !*objectives) break;
                     sim_clock.Set(at);
                     judged = (*objectives)->EvaluateOnce();
                   }
                   spdlog::set_level(level);
                   if (!judged.ok()) return Fail(judged);
                   sim_clock.Set(window.end_ms);
                   std::printf("\nThe store is %s and its config %s: try\n"
                               "  gpuledger usage --config %s --from %s --to %s --by team,project\n"
                               "  gpuledger actions --config %s (what the dry-run rules proposed at the end)\n",
                               store::StoreDisplayName(mine.db_path).c_str(), mine.config_path.c_str(),
                               mine.config_path.c_str(), FormatTime(window.begin_ms).c_str(), FormatTime(window.end_ms).c_str(),
                               mine.config_path.c_str());
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
