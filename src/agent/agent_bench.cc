// The agent's own costs on a busy node: the fake NVML with 8 H200s x 7 MIG slices and
// 50 processes (testdata/bench_8x7.toml).
//   BM_CollectionCycle   thread CPU per collection: all of it (the fake NVML runs in
//                        this thread, as a real driver's calls would), and the agent's
//                        part alone (attribution, batching, publishing)
//   BM_PushInterval      closing one 10 s batch into the spool (JSON + fsync), per batch
//   BM_MetricsScrape     /metrics over HTTP at ~10k series: p50/p99 latency
// Resident memory (VmRSS, VmHWM of this process) is reported with each.
#include <time.h>

#include <benchmark/benchmark.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "agent/agent.h"
#include "agent/exporter.h"
#include "agent/metrics_server.h"
#include "nvml/test_support.h"

namespace gpuledger::agent {
namespace {

const std::string kTestdata = GPULEDGER_AGENT_TESTDATA_DIR;

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// kB of a line ("VmRSS:", "VmHWM:") of /proc/self/status.
double StatusKb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size()));
  }
  return 0;
}

void ReportMemory(benchmark::State& state) {
  state.counters["rss_MiB"] = StatusKb("VmRSS:") / 1024.0;
  state.counters["hwm_MiB"] = StatusKb("VmHWM:") / 1024.0;
}

struct BenchNode {
  std::string dir;
  nvml::testing::ScenarioClock clock;
  std::unique_ptr<nvml::NvmlLibrary> lib;
  std::unique_ptr<Agent> agent;

  BenchNode() {
    dir = (std::filesystem::temp_directory_path() / fmt::format("gpuledger-agent-bench-{}", ::getpid())).string();
    // Half the processes name their job; the other half are unattributed.
    for (int p = 0; p < 50; ++p) {
      std::filesystem::create_directories(fmt::format("{}/proc/{}", dir, 6000 + p));
      std::ofstream env(fmt::format("{}/proc/{}/environ", dir, 6000 + p), std::ios::binary);
      if (p % 2 == 0) env << "GPULEDGER_JOB=bench-" << p << '\0' << "GPULEDGER_TEAM=t" << (p % 5) << '\0';
      env << "PATH=/bin" << '\0';
    }
    clock.Set(0);
    auto loaded = nvml::testing::LoadFakeFromPath(kTestdata + "/bench_8x7.toml", clock);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    lib = std::move(loaded).value();
    AgentConfig config;
    config.node = "bench";
    config.spool_dir = dir + "/spool";
    config.proc_root = dir + "/proc";
    config.listen_address = "";
    auto created = Agent::Create(config, AgentEnv{lib.get(), &clock, nullptr, nullptr});
    if (!created.ok()) {
      std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
      std::abort();
    }
    agent = std::move(created).value();
  }
  ~BenchNode() {
    agent.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

void BM_CollectionCycle(benchmark::State& state) {
  BenchNode node;
  double total_cpu = 0, nvml_cpu = 0;
  int64_t cycles = 0;
  for (auto _ : state) {
    state.PauseTiming();
    node.clock.Advance(1'000);  // writes the fake's clock file: not the agent's cost
    state.ResumeTiming();
    double c0 = ThreadCpuSeconds();
    node.agent->CollectOnce();
    total_cpu += ThreadCpuSeconds() - c0;
    ++cycles;
    if (cycles % 10 == 0) {
      state.PauseTiming();
      (void)node.agent->FlushBatch();
      state.ResumeTiming();
    }
  }
  // The collector's share: Collect() alone on the same node, outside the agent.
  auto collector = nvml::Collector::Create(*node.lib, node.clock);
  for (int i = 0; i < 200 && collector.ok(); ++i) {
    node.clock.Advance(1'000);
    double c0 = ThreadCpuSeconds();
    benchmark::DoNotOptimize((*collector)->Collect());
    nvml_cpu += ThreadCpuSeconds() - c0;
  }
  double per_cycle_ms = total_cpu / static_cast<double>(cycles) * 1e3;
  double collect_ms = nvml_cpu / 200.0 * 1e3;
  state.counters["devices"] = static_cast<double>(node.agent->devices().size());
  state.counters["cpu_ms_per_cycle"] = per_cycle_ms;
  state.counters["collect_cpu_ms"] = collect_ms;
  state.counters["agent_cpu_ms"] = per_cycle_ms - collect_ms;
  ReportMemory(state);
}
BENCHMARK(BM_CollectionCycle)->Unit(benchmark::kMicrosecond)->Iterations(2000);

void BM_PushInterval(benchmark::State& state) {
  BenchNode node;
  double cpu = 0;
  int64_t batches = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < 10; ++i) {
      node.clock.Advance(1'000);
      node.agent->CollectOnce();
    }
    state.ResumeTiming();
    double c0 = ThreadCpuSeconds();
    Status st = node.agent->FlushBatch();
    cpu += ThreadCpuSeconds() - c0;
    if (!st.ok()) state.SkipWithError(st.ToString().c_str());
    ++batches;
  }
  state.counters["cpu_ms_per_batch"] = cpu / static_cast<double>(batches) * 1e3;
  ReportMemory(state);
}
BENCHMARK(BM_PushInterval)->Unit(benchmark::kMillisecond)->Iterations(100);

// A snapshot of the bench node with `extra` processes spread over its instances, so
// that the exposition holds ~10k series.
ExportState BigState(BenchNode& node, int extra) {
  node.clock.Advance(1'000);
  ExportState s;
  s.node = "bench";
  s.devices = std::make_shared<const std::vector<nvml::DeviceInfo>>(node.agent->devices());
  auto collector = nvml::Collector::Create(*node.lib, node.clock);
  node.clock.Advance(1'000);
  s.snapshot = (*collector)->Collect();
  s.gap_totals.resize(s.devices->size());
  for (int p = 0; p < extra; ++p) {
    size_t d = 1 + static_cast<size_t>(p) % (s.devices->size() - 1);
    if (!(*s.devices)[d].is_mig()) d = (d + 1) % s.devices->size();
    nvml::ProcessSnapshot ps;
    ps.pid = static_cast<uint32_t>(100'000 + p);
    ps.fb_used_mib = 1234;
    ps.sm_share = 0.25;
    ps.sm_share_timestamp_us = 1'800'000'000'000'000;
    ps.device_uuid = (*s.devices)[d].uuid;
    s.snapshot.devices[d].processes.push_back(ps);
    s.processes.push_back({ps.device_uuid, ps.pid, fmt::format("job-{}", p % 300), "environment"});
  }
  return s;
}

void BM_MetricsScrape(benchmark::State& state) {
  BenchNode node;
  ExportState big = BigState(node, 2'200);
  auto t0 = std::chrono::steady_clock::now();
  auto text = std::make_shared<const std::string>(RenderMetrics(big));
  double render_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  size_t series = 0;
  for (char c : *text) series += c == '\n';
  for (size_t pos = 0; (pos = text->find("# ", pos)) != std::string::npos; ++pos) --series;
  auto server = MetricsServer::Start("127.0.0.1:0", [text] { return text; });
  if (!server.ok()) {
    state.SkipWithError(server.status().ToString().c_str());
    return;
  }
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_keep_alive(true);
  std::vector<double> ms;
  for (auto _ : state) {
    auto a = std::chrono::steady_clock::now();
    auto res = client.Get("/metrics");
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    if (!res || res->status != 200 || res->body.size() != text->size()) state.SkipWithError("bad scrape");
  }
  std::sort(ms.begin(), ms.end());
  state.counters["series"] = static_cast<double>(series);
  state.counters["bytes"] = static_cast<double>(text->size());
  state.counters["render_ms"] = render_ms;
  state.counters["p50_ms"] = ms[ms.size() / 2];
  state.counters["p99_ms"] = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
  ReportMemory(state);
}
BENCHMARK(BM_MetricsScrape)->Unit(benchmark::kMillisecond)->Iterations(2000);

}  // namespace
}  // namespace gpuledger::agent

BENCHMARK_MAIN();
