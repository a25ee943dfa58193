#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "cli/commands.h"
#include "demo/demo_fleet.h"
#include "report/usage_format.h"
#include "store/store.h"

namespace gpuledger::cli {

void AddDemoCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    uint64_t seed = 42;
    std::string start;
    int days = 7;
    std::string interval = "60s";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "demo", "Simulate a 32-node fleet for a week into a fresh store and print the fleet summary");
  AddCommonOptions(*sub, common);
  sub->add_option("--seed", o->seed, "random seed; the same seed and start give the same fleet")
      ->capture_default_str();
  sub->add_option("--start", o->start,
                  "first hour of the simulated span (RFC 3339); default: the Monday that starts "
                  "the last complete ISO week (the span ends before now)");
  sub->add_option("--days", o->days, "length of the simulated span")
      ->check(CLI::Range(1, 62))
      ->capture_default_str();
  sub->add_option("--interval", o->interval, "agents' sampling interval")->capture_default_str();
  out.push_back({sub, [o, &common]() -> int {
                   SystemClock clock;
                   demo::DemoOptions d;
                   d.seed = o->seed;
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
                   // A fresh store each run: the demo's, not the user's ledger.
                   CommonOptions mine = common;
                   if (mine.db_path.empty()) {
                     mine.db_path = (std::filesystem::path(DefaultDbPath()).parent_path() / "demo.db").string();
                   }
                   for (const char* suffix : {"", "-wal", "-shm"}) {
                     std::filesystem::remove(mine.db_path + suffix);
                   }
                   // The demo's clock stands at the end of the simulated span.
                   ManualClock sim_clock(d.start_ms + d.duration_ms);
                   auto ledger = OpenLedger(mine, sim_clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto t0 = std::chrono::steady_clock::now();
                   demo::DemoFleet fleet(d);
                   Status st = (*ledger)->store().SavePriceBook(fleet.Prices());
                   if (!st.ok()) return Fail(st);
                   int64_t samples = 0, batches = 0;
                   for (int64_t day = d.start_ms; day < fleet.end_ms(); day += kMsPerDay) {
                     for (const Batch& b : fleet.Advance(day + kMsPerDay)) {
                       auto r = (*ledger)->Ingest(b);
                       if (!r.ok()) return Fail(r.status());
                       samples += static_cast<int64_t>(b.samples.size());
                       ++batches;
                     }
                     std::fprintf(stderr, "\rdemo: simulated %s ... ",
                                  FormatTime(std::min(day + kMsPerDay, fleet.end_ms())).c_str());
                   }
                   auto t1 = std::chrono::steady_clock::now();
                   auto rebuilt = (*ledger)->RefreshRollups();
                   if (!rebuilt.ok()) return Fail(rebuilt.status());
                   auto t2 = std::chrono::steady_clock::now();
                   std::fprintf(stderr,
                                "\rdemo: %lld batches, %lld samples from %zu GPUs and slices, %zu "
                                "jobs; ingest %.1f s, %lld rollup hours %.1f s\n",
                                static_cast<long long>(batches), static_cast<long long>(samples),
                                fleet.devices().size(), fleet.jobs().size(),
                                std::chrono::duration<double>(t1 - t0).count(),
                                static_cast<long long>(*rebuilt),
                                std::chrono::duration<double>(t2 - t1).count());
                   TimeRange window{d.start_ms, d.start_ms + d.duration_ms};
                   auto by_pool = (*ledger)->Usage(window, {ledger::Dimension::kPool});
                   if (!by_pool.ok()) return Fail(by_pool.status());
                   auto by_team = (*ledger)->Usage(window, {ledger::Dimension::kTeam});
                   if (!by_team.ok()) return Fail(by_team.status());
                   auto waste = (*ledger)->TopWaste(window, 5);
                   if (!waste.ok()) return Fail(waste.status());
                   std::fputs(report::RenderFleetSummary(*by_pool, *by_team, *waste).c_str(), stdout);
                   std::printf("\nThe store is %s: try\n  gpuledger usage --db %s --from %s --to %s --by team,project\n",
                               mine.db_path.c_str(), mine.db_path.c_str(),
                               FormatTime(window.begin_ms).c_str(), FormatTime(window.end_ms).c_str());
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
