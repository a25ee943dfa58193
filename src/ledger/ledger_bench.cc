// Benchmarks of the ledger on the embedded store (release preset):
//   build/release/src/ledger/ledger_bench
// BM_ImportJson: v1 batch text -> parse -> validate -> SQLite, samples per second.
// BM_ApplyBatch: the ingest plan and the store's part, without parsing.
// BM_Usage30dByTeam: `usage --window 30d --by team` over 1,000 GPUs, with the hour
//   rollups of 30 days at 10 s sampling written directly (importing 260M raw samples
//   would take too long to set up in a benchmark); the query reads only rollups.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "ledger/ingest_plan.h"
#include "ledger/ledger.h"
#include "wire/batch.h"
#include "ledger/store_access.h"

namespace gpuledger::ledger {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kBase = 1'790'208'000'000;  // 2026-09-24T00:00:00Z, a whole hour

fs::path FreshDb(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("gpuledger-bench-" + std::to_string(::getpid()) + "-" + name);
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(p.string() + s);
  return p;
}

// One agent batch: `gpus` devices of one node, `per_device` samples each at 10 s.
Batch NodeBatch(int node, int gpus, int per_device, int64_t t0, int seq) {
  Batch b;
  b.batch_id = "n" + std::to_string(node) + "-" + std::to_string(seq);
  b.source = "node-" + std::to_string(node);
  for (int g = 0; g < gpus; ++g) {
    Device d;
    d.uuid = "GPU-" + std::to_string(node) + "-" + std::to_string(g);
    d.node = b.source;
    d.model = "NVIDIA H100 80GB HBM3";
    d.pool = "training";
    d.sample_interval_ms = 10'000;
    b.devices.push_back(d);
  }
  std::mt19937 gen(static_cast<unsigned>(seq * 131 + node));
  auto rng = [&]() { return static_cast<int>(gen() % 100'000); };
  for (int k = 0; k < per_device; ++k) {
    for (int g = 0; g < gpus; ++g) {
      Sample s;
      s.device_uuid = b.devices[static_cast<size_t>(g)].uuid;
      s.t_ms = t0 + k * 10'000;
      s.sm_active = (rng() % 1000) / 1000.0;
      s.sm_occupancy = (rng() % 1000) / 1000.0;
      s.tensor_active = (rng() % 1000) / 1000.0;
      s.dram_active = (rng() % 1000) / 1000.0;
      s.gpu_util = 1.0;
      s.fb_used_mib = 70'000 + rng() % 5000;
      s.power_watts = 300 + rng() % 400;
      b.samples.push_back(s);
    }
  }
  return b;
}

// Batches of 8 GPUs x 1250 samples (10k samples each), as an agent spool would send.
void BM_ImportJson(benchmark::State& state) {
  fs::path db = FreshDb("import");
  ManualClock clock(kBase + 400 * kMsPerDay);
  auto store = store::OpenSqliteStore(db.string());
  Ledger ledger(std::move(*store), clock);
  int seq = 0;
  int64_t samples = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::string> docs;
    for (int n = 0; n < 10; ++n) {
      docs.push_back(wire::WriteBatch(NodeBatch(n, 8, 1250, kBase + seq * 1250LL * 10'000, seq)));
    }
    ++seq;
    state.ResumeTiming();
    for (const std::string& doc : docs) {
      auto b = wire::ParseBatch(doc);
      auto r = ledger.Ingest(*b);
      if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
      samples += static_cast<int64_t>(b->samples.size());
    }
  }
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(db.string() + s);
}
BENCHMARK(BM_ImportJson)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);

void BM_ApplyBatch(benchmark::State& state) {
  fs::path db = FreshDb("apply");
  auto store = store::OpenSqliteStore(db.string());
  int seq = 0;
  int64_t samples = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<Batch> batches;
    for (int n = 0; n < 10; ++n) batches.push_back(NodeBatch(n, 8, 1250, kBase + seq * 1250LL * 10'000, seq));
    ++seq;
    state.ResumeTiming();
    for (const Batch& b : batches) {
      auto r = (*store)->ApplyBatch(*PlanIngest(b));
      if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
      samples += static_cast<int64_t>(b.samples.size());
    }
  }
  state.counters["samples_per_s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(db.string() + s);
}
BENCHMARK(BM_ApplyBatch)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);

// 1,000 GPUs (125 nodes), 30 days: each GPU runs a new job every day for one of 20
// teams, and is unallocated for the last two hours of each day.
class UsageFixture {
 public:
  UsageFixture() : clock_(kBase + 31 * kMsPerDay) {
    db_ = FreshDb("usage");
    auto store = store::OpenSqliteStore(db_.string());
    ledger_ = std::make_unique<Ledger>(std::move(*store), clock_);
    (void)ledger_->SetPrices(*PriceBook::Create(
        {PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromMicros(2'490'000), {0, kForever}}}));
    // Devices and jobs through the normal ingest path; one sample puts each in service.
    for (int node = 0; node < 125; ++node) {
      Batch b = NodeBatch(node, 8, 1, kBase, 0);
      for (int day = 0; day < 30; ++day) {
        for (int g = 0; g < 8; ++g) {
          Job j;
          j.id = "job-" + std::to_string(node) + "-" + std::to_string(g) + "-" + std::to_string(day);
          j.team = "team-" + std::to_string((node * 8 + g + day) % 20);
          j.project = "p" + std::to_string(day % 3);
          j.kind = JobKind::kTraining;
          b.jobs.push_back(j);
        }
      }
      (void)ledger_->Ingest(b);
      // A last sample at the end of the 30 days: reports end where the data ends.
      (void)ledger_->Ingest(NodeBatch(node, 8, 1, kBase + 30 * kMsPerDay, 1));
    }
    (void)ledger_->RefreshRollups();
    auto devices = *ledger::internal_StoreOf(*ledger_).ListDevices();
    auto jobs = *ledger::internal_StoreOf(*ledger_).ListJobs();
    std::map<std::string, int64_t> job_id;
    for (const auto& j : jobs) job_id[j.job.id] = j.id;
    std::vector<store::RollupUpdate> updates;
    for (const auto& d : devices) {
      std::string node = d.device.node.substr(5);
      std::string gpu = d.device.uuid.substr(d.device.uuid.rfind('-') + 1);
      for (int h = 0; h < 30 * 24; ++h) {
        store::RollupUpdate u;
        u.dirty = {d.id, kBase + h * kMsPerHour, 0};
        int day = h / 24;
        if (h % 24 < 22) {
          int64_t active = (h * 7919 + d.id * 104729) % kMsPerHour;
          u.hour_rows.push_back({u.dirty.hour_ms, d.id,
                                 job_id["job-" + node + "-" + gpu + "-" + std::to_string(day)],
                                 {active, kMsPerHour - active, 0, 0, 0}, 0});
        } else {
          u.hour_rows.push_back({u.dirty.hour_ms, d.id, 0, {0, 0, kMsPerHour, 0, 0}, 0});
        }
        updates.push_back(std::move(u));
        if (updates.size() >= 20'000) {
          (void)ledger::internal_StoreOf(*ledger_).WriteRollups(updates);
          updates.clear();
        }
      }
    }
    (void)ledger::internal_StoreOf(*ledger_).WriteRollups(updates);
  }
  ~UsageFixture() {
    ledger_.reset();
    for (const char* s : {"", "-wal", "-shm"}) fs::remove(db_.string() + s);
  }
  Ledger& ledger() { return *ledger_; }

 private:
  fs::path db_;
  ManualClock clock_;
  std::unique_ptr<Ledger> ledger_;
};

UsageFixture& Fixture();

void BM_Usage30dByTeam(benchmark::State& state) {
  UsageFixture* fixture = &Fixture();
  TimeRange window{kBase, kBase + 30 * kMsPerDay};
  for (auto _ : state) {
    auto r = fixture->ledger().Usage(window, {Dimension::kTeam});
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r);
    if (r.ok() && r->rows.size() != 21) state.SkipWithError("expected 20 teams and (no job)");
  }
}
BENCHMARK(BM_Usage30dByTeam)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);

UsageFixture& Fixture() {
  static UsageFixture* fixture = new UsageFixture();
  return *fixture;
}

// The dashboard's fleet chart: 30 days by hour and team (what /api/v1/series draws).
void BM_Series30dByHourAndTeam(benchmark::State& state) {
  TimeRange window{kBase, kBase + 30 * kMsPerDay};
  for (auto _ : state) {
    auto r = Fixture().ledger().Usage(window, {Dimension::kHour, Dimension::kTeam});
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Series30dByHourAndTeam)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);

// The dashboard's GPU heatmap: 7 days by hour and device, 1,000 GPUs (168,000 cells).
void BM_Heatmap7dByHourAndDevice(benchmark::State& state) {
  TimeRange window{kBase + 23 * kMsPerDay, kBase + 30 * kMsPerDay};
  for (auto _ : state) {
    auto r = Fixture().ledger().Usage(window, {Dimension::kHour, Dimension::kDevice});
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r);
    if (r.ok() && r->rows.size() != 168'000) state.SkipWithError("expected 1,000 x 168 cells");
  }
}
BENCHMARK(BM_Heatmap7dByHourAndDevice)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);

}  // namespace
}  // namespace gpuledger::ledger

BENCHMARK_MAIN();
