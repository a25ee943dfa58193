// The agent end to end: the fake NVML -> the agent -> HTTP -> a real ledger, compared
// with the scenario's ground truth; and the faults: an unreachable server, lost
// acknowledgements, a restart, an NVML call that blocks for 10 s.
#include "agent/agent.h"

#include <httplib.h>

#include <gmock/gmock.h>

#include "server/auth.h"
#include "server/server.h"
#include "store/store.h"
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "agent/real_server.h"
#include "agent/test_server.h"
#include "agent/test_util.h"
#include "ledger/ledger.h"
#include "nvml/test_support.h"
#include "ledger/store_access.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using nvml::testing::kScenarioEpochMs;
using nvml::testing::ScenarioClock;
using testing::TempDir;
using testing::TestLedgerServer;
using testing::EnvironText;
using testing::WriteFile;

const std::string kTestdata = GPULEDGER_AGENT_TESTDATA_DIR;
constexpr int64_t kHourMs = 3'600'000;

// A node running e2e_hour.toml, its processes' /proc entries faked, and a server.
struct Node {
  TempDir dir;
  ScenarioClock clock;
  std::unique_ptr<nvml::NvmlLibrary> lib;
  std::unique_ptr<TestLedgerServer> server;
  std::unique_ptr<BatchSink> sink;
  std::unique_ptr<Agent> agent;
  AgentConfig config;

  explicit Node(const std::string& scenario = "e2e_hour.toml") {
    WriteFile(dir / "proc/5001/environ",
              EnvironText({"GPULEDGER_JOB=train-1", "GPULEDGER_TEAM=nlp", "GPULEDGER_KIND=training"}));
    WriteFile(dir / "proc/5002/environ", EnvironText({"GPULEDGER_JOB=nb-2", "GPULEDGER_TEAM=research"}));
    WriteFile(dir / "proc/5003/environ", EnvironText({"GPULEDGER_JOB=serve-3", "GPULEDGER_TEAM=search"}));
    auto node = testing::StartScenarioNode(dir.path(), kTestdata + "/" + scenario, clock);
    if (!node.ok()) {
      ADD_FAILURE() << node.status().ToString();
      return;
    }
    lib = std::move(node->lib);
    server = std::move(node->server);
    sink = std::move(node->sink);
    config.node = "e2e-node";
    config.pool = "training";
    config.spool_dir = dir / "spool";
    config.proc_root = dir / "proc";
    config.listen_address = "";
    EXPECT_TRUE(FinishAgentConfig(config).ok());
    NewAgent();
  }
  ~Node() {
    agent.reset();
    if (server) server->Stop();
  }
  void NewAgent() {
    agent.reset();
    auto created = Agent::Create(config, AgentEnv{lib.get(), &clock, sink.get(), nullptr});
    if (!created.ok()) {
      ADD_FAILURE() << created.status().ToString();
      return;
    }
    agent = std::move(created).value();
  }
  bool ok() const { return agent != nullptr; }

  // Collects every second up to `end_ms` (scenario time), closing a batch every 10 s
  // and, when `push`, trying to send.
  void RunUntil(int64_t end_ms, bool push) {
    for (int64_t t = clock.t_ms() + 1'000; t <= end_ms; t += 1'000) {
      clock.Set(t);
      agent->CollectOnce();
      if (t % 10'000 == 0) {
        Status st = agent->FlushBatch();
        EXPECT_TRUE(st.ok()) << st.ToString();
        if (push) agent->PushOnce();
      }
    }
  }
};

struct Truth {
  std::map<std::string, std::array<double, kBucketCount>> by_device;  // GPU-seconds
  std::map<std::string, std::array<double, kBucketCount>> by_job;
};

// What e2e_hour.toml says happened over its hour, in capacity-weighted GPU-seconds
// (active, allocated_idle, unallocated, unavailable, unmonitored).
Truth HourTruth() {
  constexpr double kMig3 = 3.0 / 7, kMig4 = 4.0 / 7;
  Truth t;
  t.by_device["GPU-e1000000-0000-4000-8000-000000000000"] = {1800 * 0.6, 1800 * 0.4, 1800, 0, 0};
  t.by_device["GPU-e2000000-0000-4000-8000-000000000000"] = {3000 * 0.125, 3000 * 0.875, 600, 0, 0};
  t.by_device["MIG-e3000000-0000-4000-8000-00000000000a"] = {3600 * 0.4 * kMig3, 3600 * 0.6 * kMig3, 0, 0, 0};
  t.by_device["MIG-e3000000-0000-4000-8000-00000000000b"] = {0, 0, 3600 * kMig4, 0, 0};
  t.by_job["train-1"] = {1800 * 0.6, 1800 * 0.4, 0, 0, 0};
  t.by_job["nb-2"] = {3000 * 0.125, 3000 * 0.875, 0, 0, 0};
  t.by_job["serve-3"] = {3600 * 0.4 * kMig3, 3600 * 0.6 * kMig3, 0, 0, 0};
  return t;
}

// Within 1% per bucket; a bucket that should be empty may hold 0.1% of the capacity
// (the first second before any sample is unmonitored).
void ExpectRows(const ledger::UsageReport& report, const std::map<std::string, std::array<double, kBucketCount>>& want,
                double capacity_seconds) {
  std::map<std::string, const ledger::UsageRow*> rows;
  for (const ledger::UsageRow& r : report.rows) rows[r.key.at(0)] = &r;
  for (const auto& [key, buckets] : want) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(rows.contains(key)) << "no usage row";
    for (Bucket b : kAllBuckets) {
      double got = rows[key]->gpu_hours(b) * 3600.0;
      double expected = buckets[static_cast<size_t>(b)];
      double tolerance = std::max(0.01 * expected, 0.001 * capacity_seconds);
      EXPECT_NEAR(got, expected, tolerance) << BucketName(b);
    }
  }
}

void ExpectHourTruth(ledger::Ledger& l) {
  auto rebuilt = l.RefreshRollups();
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().ToString();
  TimeRange hour{kScenarioEpochMs, kScenarioEpochMs + kHourMs};
  Truth truth = HourTruth();
  auto by_device = l.Usage(hour, {ledger::Dimension::kDevice});
  ASSERT_TRUE(by_device.ok()) << by_device.status().ToString();
  ExpectRows(*by_device, truth.by_device, 3600);
  auto by_job = l.Usage(hour, {ledger::Dimension::kJob});
  ASSERT_TRUE(by_job.ok()) << by_job.status().ToString();
  ExpectRows(*by_job, truth.by_job, 3600);
  auto jobs = ledger::internal_StoreOf(l).ListJobs();
  ASSERT_TRUE(jobs.ok());
  std::map<std::string, Job> job_by_id;
  for (const auto& j : *jobs) job_by_id[j.job.id] = j.job;
  EXPECT_EQ(job_by_id["train-1"].team, "nlp");
  EXPECT_EQ(job_by_id["train-1"].kind, JobKind::kTraining);
  EXPECT_EQ(job_by_id["serve-3"].team, "search");
}

TEST(AgentEndToEndTest, LedgerMatchesTheScenarioWithinOnePercent) {
  Node node;
  ASSERT_TRUE(node.ok());
  node.RunUntil(kHourMs, /*push=*/true);
  EXPECT_EQ(node.agent->spool_batches(), 0u);
  EXPECT_EQ(node.server->applied(), 360);
  EXPECT_EQ(node.server->duplicates(), 0);
  EXPECT_THAT(node.server->errors(), ::testing::IsEmpty());
  EXPECT_EQ(node.agent->counters().samples_dropped, 0);
  ExpectHourTruth(node.server->ledger());
}

// The same hour through the real `gpuledger serve` (server::Server over a SQLite store
// with FULL sync), with an agent-role bearer token.
TEST(AgentEndToEndTest, ThroughTheRealServerTheLedgerMatchesToo) {
  Node node;  // its fake NVML, /proc and spool; its stand-in server is not used
  ASSERT_TRUE(node.ok());
  auto opened = store::OpenSqliteStore(node.dir / "served.db", {.synchronous_full = true});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ledger::Ledger served(std::move(*opened), node.clock);
  auto started = testing::StartRealServer(served, node.clock, "e2e-node", "agent-secret");
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<server::Server> real = std::move(started).value();
  auto sink = MakeHttpBatchSink(real->Url(), "agent-secret", 2'000);
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  node.sink = std::move(sink).value();
  node.NewAgent();
  ASSERT_TRUE(node.ok());
  node.RunUntil(kHourMs, /*push=*/true);
  EXPECT_EQ(node.agent->spool_batches(), 0u);
  EXPECT_EQ(node.agent->counters().samples_dropped, 0);
  real->Stop();
  ExpectHourTruth(served);
}

TEST(AgentEndToEndTest, ServerUnreachableForAnHourLosesAndDoublesNothing) {
  Node node;
  ASSERT_TRUE(node.ok());
  node.server->Stop();  // the port stays ours to restart on
  int port = node.server->port();
  node.RunUntil(kHourMs, /*push=*/true);
  // Every batch waits in the spool; attempts backed off instead of hammering.
  EXPECT_EQ(node.agent->spool_batches(), 360u);
  const PushStats& stats = node.agent->pusher()->stats();
  EXPECT_GT(stats.failures, 5);
  EXPECT_LT(stats.failures, 40);
  EXPECT_EQ(node.agent->pusher()->current_backoff_ms(), 5 * kMsPerMinute);

  ASSERT_TRUE(node.server->Start(port));
  node.server->set_drop_acks(2);  // and two acknowledgements get lost on the way back
  for (int i = 0; i < 4 && node.agent->spool_batches() > 0; ++i) {
    node.clock.Advance(5 * kMsPerMinute);
    node.agent->PushOnce();
  }
  EXPECT_EQ(node.agent->spool_batches(), 0u);
  EXPECT_EQ(node.server->applied(), 360);
  EXPECT_EQ(node.server->duplicates(), 2);
  EXPECT_THAT(node.server->errors(), ::testing::IsEmpty());
  std::vector<std::string> ids = node.server->applied_ids();
  ASSERT_EQ(ids.size(), 360u);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_LT(std::stoi(ids[i - 1].substr(ids[i - 1].rfind('-') + 1)), std::stoi(ids[i].substr(ids[i].rfind('-') + 1)))
        << "resent out of order";
  }
  ExpectHourTruth(node.server->ledger());
}

TEST(AgentEndToEndTest, ARestartedAgentResumesFromItsSpool) {
  Node node;
  ASSERT_TRUE(node.ok());
  node.server->Stop();
  int port = node.server->port();
  node.RunUntil(1'200'000, /*push=*/true);  // 20 minutes, nothing delivered
  EXPECT_EQ(node.agent->spool_batches(), 120u);
  node.NewAgent();  // the agent restarts (same spool, same state file)
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(node.agent->spool_batches(), 120u);
  ASSERT_TRUE(node.server->Start(port));
  node.RunUntil(kHourMs, /*push=*/true);
  EXPECT_EQ(node.agent->spool_batches(), 0u);
  EXPECT_EQ(node.server->applied(), 360);
  EXPECT_THAT(node.server->errors(), ::testing::IsEmpty());
  ExpectHourTruth(node.server->ledger());
}

TEST(AgentFaultTest, BlockedNvmlCallNeitherSlowsScrapesNorPilesUpCycles) {
  Node node("blocking_10s.toml");
  ASSERT_TRUE(node.ok());
  node.config.listen_address = "127.0.0.1:0";
  node.config.interval_ms = 1'000;
  node.NewAgent();
  ASSERT_TRUE(node.ok());
  node.clock.Set(1'000);
  node.agent->CollectOnce();  // a complete snapshot before the driver hangs
  node.clock.Set(6'000);      // the power call now blocks for 10 s, once
  ASSERT_TRUE(node.agent->Start().ok());
  httplib::Client client("127.0.0.1", node.agent->metrics_port());
  client.set_read_timeout(2, 0);
  // Scrape for 9 s while the collection thread is stuck inside NVML.
  std::vector<double> latencies_ms;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(9);
  while (std::chrono::steady_clock::now() < until) {
    auto t0 = std::chrono::steady_clock::now();
    auto res = client.Get("/metrics");
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    ASSERT_EQ(res->status, 200);
    EXPECT_THAT(res->body, HasSubstr("gpuledger_agent_collections_total{Hostname=\"e2e-node\"} 1\n"));
    latencies_ms.push_back(ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::sort(latencies_ms.begin(), latencies_ms.end());
  ASSERT_GT(latencies_ms.size(), 20u);
  EXPECT_LT(latencies_ms.back(), 100.0) << "slowest scrape while NVML hung";
  // The stuck collection ends after 10 s; the cycles it covered are skipped, not run
  // back to back.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (node.agent->counters().collections < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  AgentCounters after_block = node.agent->counters();
  ASSERT_GE(after_block.collections, 2);
  EXPECT_GE(after_block.cycles_skipped, 8);
  std::this_thread::sleep_for(std::chrono::milliseconds(1'500));
  AgentCounters later = node.agent->counters();
  EXPECT_LE(later.collections - after_block.collections, 3) << "cycles piled up after the block";
  node.agent->Stop();
}

}  // namespace
}  // namespace gpuledger::agent
