// Idle causes checked end to end, from the bottom: the fake NVML replays driver
// utilization samples whose truth is known (causes_e2e.toml), the real agent collects
// and pushes them to the real server (server::Server over SQLite), and the ledger behind
// it must report the stall that was put in, and advise on it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "agent/agent.h"
#include "agent/test_server.h"
#include "agent/test_util.h"
#include "ledger/ledger.h"
#include "ledger/rightsizing.h"
#include "agent/real_server.h"
#include "nvml/test_support.h"
#include "store/store.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using nvml::testing::kScenarioEpochMs;
using nvml::testing::ScenarioClock;
using testing::EnvironText;
using testing::TempDir;
using testing::WriteFile;

const std::string kTestdata = GPULEDGER_AGENT_TESTDATA_DIR;
constexpr int64_t kRunMs = 65 * kMsPerMinute;

class CausesEndToEndTest : public ::testing::Test {
 protected:
  // Runs the scenario for 65 minutes through the agent and the real server, once.
  static void SetUpTestSuite() {
    s_ = new Run();
    Run& r = *s_;
    WriteFile(r.dir / "proc/6001/environ",
              EnvironText({"GPULEDGER_JOB=ft-input", "GPULEDGER_TEAM=nlp", "GPULEDGER_KIND=training"}));
    WriteFile(r.dir / "proc/6002/environ",
              EnvironText({"GPULEDGER_JOB=ckpt-1", "GPULEDGER_TEAM=nlp", "GPULEDGER_KIND=training"}));
    // The batch job holds GPU-c3 by the scheduler's word alone: nothing runs on it.
    WriteFile(r.dir / "mapping.toml",
              "[[device]]\nuuid = \"GPU-c3000000-0000-4000-8000-000000000000\"\njob = \"held-1\"\n"
              "team = \"platform\"\nkind = \"batch\"\n");
    auto node = testing::StartScenarioNode(r.dir.path(), kTestdata + "/causes_e2e.toml", r.clock);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    r.lib = std::move(node->lib);
    node->server->Stop();
    auto opened = store::OpenSqliteStore(r.dir / "served.db");
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    r.ledger = std::make_unique<ledger::Ledger>(std::move(*opened), r.clock);
    auto real = testing::StartRealServer(*r.ledger, r.clock, "causes-node", "agent-secret");
    ASSERT_TRUE(real.ok()) << real.status().ToString();
    auto sink = MakeHttpBatchSink((*real)->Url(), "agent-secret", 2'000);
    ASSERT_TRUE(sink.ok()) << sink.status().ToString();
    AgentConfig config;
    config.node = "causes-node";
    config.pool = "training";
    config.spool_dir = r.dir / "spool";
    config.proc_root = r.dir / "proc";
    config.mapping_file = r.dir / "mapping.toml";
    config.listen_address = "";
    ASSERT_TRUE(FinishAgentConfig(config).ok());
    auto agent = Agent::Create(config, AgentEnv{r.lib.get(), &r.clock, sink->get(), nullptr});
    ASSERT_TRUE(agent.ok()) << agent.status().ToString();
    for (int64_t t = r.clock.t_ms() + 1'000; t <= kRunMs; t += 1'000) {
      r.clock.Set(t);
      (*agent)->CollectOnce();
      if (t % 10'000 == 0) {
        ASSERT_TRUE((*agent)->FlushBatch().ok());
        (*agent)->PushOnce();
      }
    }
    EXPECT_EQ((*agent)->spool_batches(), 0u);
    agent->reset();
    (*real)->Stop();
    ASSERT_TRUE(r.ledger->RefreshRollups().ok());
    auto usage = r.ledger->Usage(Window(), {ledger::Dimension::kJob});
    ASSERT_TRUE(usage.ok()) << usage.status().ToString();
    for (const auto& row : usage->rows) r.rows[row.key[0]] = row;
    auto recs = ledger::Recommend(*r.ledger, Window());
    ASSERT_TRUE(recs.ok()) << recs.status().ToString();
    r.recs = std::move(*recs);
  }
  static void TearDownTestSuite() { delete s_; }

  static TimeRange Window() { return {kScenarioEpochMs, kScenarioEpochMs + kRunMs}; }
  static double HeldSeconds(const ledger::UsageRow& row) {
    return (row.gpu_hours(Bucket::kActive) + row.gpu_hours(Bucket::kAllocatedIdle)) * 3600;
  }
  static double CauseSeconds(const ledger::UsageRow& row, IdleCause c) {
    return row.idle_cause_gpu_hours(c) * 3600;
  }
  static const ledger::Recommendation* Find(ledger::RecommendationKind kind, const std::string& job) {
    for (const auto& r : s_->recs) {
      if (r.kind == kind && r.job_id == job) return &r;
    }
    return nullptr;
  }

  struct Run {
    TempDir dir;
    ScenarioClock clock;
    std::unique_ptr<nvml::NvmlLibrary> lib;
    std::unique_ptr<ledger::Ledger> ledger;
    std::map<std::string, ledger::UsageRow> rows;
    std::vector<ledger::Recommendation> recs;
  };
  static Run* s_;
};
CausesEndToEndTest::Run* CausesEndToEndTest::s_ = nullptr;

// 600 ms of kernels, 400 ms waiting, repeated: 40 +/- 5% input stall.
TEST_F(CausesEndToEndTest, BurstsWithShortGapsAreReportedAsFortyPercentInputStall) {
  ASSERT_TRUE(s_->rows.contains("ft-input"));
  const ledger::UsageRow& row = s_->rows["ft-input"];
  EXPECT_NEAR(HeldSeconds(row), 65 * 60, 65 * 60 * 0.01);
  EXPECT_NEAR(CauseSeconds(row, IdleCause::kInputStall) / HeldSeconds(row), 0.40, 0.05);
  EXPECT_NEAR(CauseSeconds(row, IdleCause::kCheckpointStall), 0, 1);
  const auto* advice = Find(ledger::RecommendationKind::kInputBound, "ft-input");
  ASSERT_NE(advice, nullptr);
  EXPECT_THAT(advice->action, HasSubstr("the data pipeline starves the GPUs"));
}

// Checkpoints of 3 minutes every 30: 6 minutes of checkpoint stall in 65, found with
// their interval and duration.
TEST_F(CausesEndToEndTest, LongPeriodicGapsAreReportedAsCheckpointStall) {
  ASSERT_TRUE(s_->rows.contains("ckpt-1"));
  const ledger::UsageRow& row = s_->rows["ckpt-1"];
  EXPECT_NEAR(CauseSeconds(row, IdleCause::kCheckpointStall), 6 * 60, 6 * 60 * 0.05);
  EXPECT_NEAR(CauseSeconds(row, IdleCause::kInputStall), 0, 0.01 * HeldSeconds(row));
  const auto* advice = Find(ledger::RecommendationKind::kCheckpointBound, "ckpt-1");
  ASSERT_NE(advice, nullptr);
  EXPECT_THAT(advice->action, HasSubstr("for 3.0 min every 30 min"));
}

// A GPU held with no process on it: all of its held time is held idle, and the job is
// told to release it.
TEST_F(CausesEndToEndTest, AGpuHeldWithNoProcessIsReportedAsHeldIdle) {
  ASSERT_TRUE(s_->rows.contains("held-1"));
  const ledger::UsageRow& row = s_->rows["held-1"];
  EXPECT_GT(HeldSeconds(row), 60 * 60);
  EXPECT_NEAR(CauseSeconds(row, IdleCause::kHeldIdle) / HeldSeconds(row), 1.0, 0.01);
  EXPECT_NE(Find(ledger::RecommendationKind::kHeldNothingRunning, "held-1"), nullptr);
}

}  // namespace
}  // namespace gpuledger::agent
