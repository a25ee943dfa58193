// Simulator benchmarks: the whole Philly trace under FIFO and fair-share, and a
// synthetic million-job trace on 10,000 GPUs with the memory it takes per job.
// Run a release build: build/<dir>/src/sim/sim_bench
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <string>

#include <benchmark/benchmark.h>

#include "sim/cluster.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpuledger::sim {
namespace {

const std::string kPhilly = std::string(GPULEDGER_SHARED_DATA_DIR) + "/traces/philly_pollux.csv";

// Peak resident memory of this process so far, in bytes.
double PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// The validation cluster of docs/simulator.md (testdata/philly_640.toml): 80 nodes of 8
// GPUs with strict locality. The trace's demand averages 374 GPUs with long bursts above
// 640, so queues build up and policies differ.
ClusterSpec PhillyCluster() {
  ClusterSpec c = UniformCluster(80, 8, Money::FromUnits(2));
  c.name = "philly-640";
  c.pools[0].strict_locality = true;
  return c;
}

// Reading and parsing the whole trace.
void BM_PhillyRead(benchmark::State& state) {
  size_t jobs = 0;
  for (auto _ : state) {
    auto trace = ReadTraceFile(kPhilly, TraceFormat::kPhilly, ReadOptions());
    if (!trace.ok()) {
      state.SkipWithError(("needs " + kPhilly + ": " + trace.status().message()).c_str());
      return;
    }
    jobs = trace->jobs.size();
  }
  state.counters["jobs"] = static_cast<double>(jobs);
}
BENCHMARK(BM_PhillyRead)->Unit(benchmark::kMillisecond);

void BM_Philly(benchmark::State& state, const char* policy) {
  auto trace = ReadTraceFile(kPhilly, TraceFormat::kPhilly, ReadOptions());
  if (!trace.ok()) {
    state.SkipWithError(("needs " + kPhilly + ": " + trace.status().message()).c_str());
    return;
  }
  const ClusterSpec cluster = PhillyCluster();
  SimOptions options;
  options.keep_job_outcomes = false;
  double util = 0, wait = 0;
  for (auto _ : state) {
    auto r = Simulate(cluster, trace->jobs, policy, options);
    if (!r.ok() || !r->conservation.ok()) {
      state.SkipWithError("simulation failed");
      return;
    }
    util = r->allocated_ratio;
    wait = r->wait.mean_ms / 1000.0;
    benchmark::DoNotOptimize(r->cost);
  }
  state.counters["jobs"] = static_cast<double>(trace->jobs.size());
  state.counters["jobs_per_s"] =
      benchmark::Counter(static_cast<double>(trace->jobs.size()), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["allocated_ratio"] = util;
  state.counters["mean_wait_s"] = wait;
}
BENCHMARK_CAPTURE(BM_Philly, fifo, "fifo")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Philly, fair_share, "fair-share")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Philly, sjf, "sjf")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Philly, backfill, "backfill")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Philly, las, "las")->Unit(benchmark::kMillisecond);

// One million synthetic jobs on 10,000 GPUs (1,250 nodes of 8), offered 98% of capacity
// on average, so that queues form in the arrival bursts. Memory is the peak RSS growth
// over the run divided by the jobs, trace included.
void BM_Synthetic1M(benchmark::State& state, const char* policy) {
  const double rss_before = PeakRssBytes();
  SyntheticSpec spec;
  spec.jobs = 1'000'000;
  spec.min_duration_ms = 60'000;
  spec.max_duration_ms = 24 * 3'600'000LL;
  // Offered load = mean duration x mean GPUs / (inter-arrival x GPUs). The log-uniform
  // mean is (max - min) / ln(max / min); the mix, clipped at 8 GPUs, averages 1.252.
  const double mean_ms = static_cast<double>(spec.max_duration_ms - spec.min_duration_ms) /
                         std::log(static_cast<double>(spec.max_duration_ms) / static_cast<double>(spec.min_duration_ms));
  spec.mean_interarrival_ms = static_cast<int64_t>(mean_ms * 1.252 / (10'000 * 0.98));
  spec.queues = 8;
  spec.priorities = 3;
  const Trace trace = SyntheticTrace(spec, 42);
  const ClusterSpec cluster = UniformCluster(1250, 8, Money::FromUnits(2));
  SimOptions options;
  options.keep_job_outcomes = false;
  double util = 0, wait = 0, preemptions = 0;
  for (auto _ : state) {
    auto r = Simulate(cluster, trace.jobs, policy, options);
    if (!r.ok() || !r->conservation.ok()) {
      state.SkipWithError("simulation failed");
      return;
    }
    util = r->allocated_ratio;
    wait = r->wait.mean_ms / 1000.0;
    preemptions = static_cast<double>(r->preemptions);
  }
  state.counters["mean_wait_s"] = wait;
  state.counters["preemptions"] = preemptions;
  state.counters["jobs_per_s"] =
      benchmark::Counter(static_cast<double>(spec.jobs), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_rss_bytes_per_job"] = (PeakRssBytes() - rss_before) / static_cast<double>(spec.jobs);
  state.counters["allocated_ratio"] = util;
}
BENCHMARK_CAPTURE(BM_Synthetic1M, fifo, "fifo")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Synthetic1M, fair_share, "fair-share")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Synthetic1M, priority, "priority")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Synthetic1M, sjf, "sjf")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Synthetic1M, backfill, "backfill")->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(BM_Synthetic1M, las, "las")->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace gpuledger::sim

BENCHMARK_MAIN();
