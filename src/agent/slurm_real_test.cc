// Attribution against a real Slurm: munged, slurmctld and slurmd from Debian on
// localhost (testdata/slurm/slurm_harness.sh), a job submitted with
// `sbatch --gres=gpu:2 -A nlp`, the fake NVML reporting that job's process on two GPUs,
// the agent, and a real ledger behind the test server. Needs root and the Debian
// packages slurmctld, slurmd, slurm-client and munge; skipped with a message elsewhere.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "agent/agent.h"
#include "agent/local_slurm.h"
#include "agent/test_server.h"
#include "agent/test_util.h"
#include "core/testing/missing_component.h"
#include "nvml/test_support.h"
#include "ledger/store_access.h"

namespace gpuledger::agent {
namespace {

using nvml::testing::kScenarioEpochMs;
using nvml::testing::ScenarioClock;
using testing::TempDir;
using testing::TestLedgerServer;
using testing::WriteFile;

// Starts the cluster; stops it (and cancels the job) at the end of the test.
struct Cluster {
  TempDir dir;
  std::string job_id;
  local_slurm::Cluster slurm{dir / "slurm"};
  ~Cluster() {
    if (!job_id.empty()) (void)RunCommand({"scancel", job_id}, 10'000);
  }
};

TEST(SlurmRealTest, SbatchJobIsAttributedAndEnrichedFromSlurm) {
  if (std::string why = local_slurm::Missing(); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  Cluster cluster;
  if (!cluster.slurm.error().empty()) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "the local Slurm cluster did not start here: "
                                   << cluster.slurm.error();
  }

  std::string pid_file = cluster.dir / "job.pid";
  auto submitted = RunCommand({"sbatch", "--parsable", "--gres=gpu:2", "-A", "nlp", "-J", "bert-ft",
                               "--comment=gpuledger:exempt=true,queue=dev", "-o",
                               cluster.dir / "job.out", "--wrap", "echo $$ > " + pid_file + "; exec sleep 300"},
                              30'000);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  cluster.job_id = submitted->substr(0, submitted->find_first_of(";\n"));
  uint32_t pid = 0;
  for (int i = 0; i < 200 && pid == 0; ++i) {
    std::ifstream in(pid_file);
    if (!(in >> pid)) pid = 0;
    if (pid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(pid, 0u) << "the job never started; see " << cluster.dir.path();

  // The fake NVML reports the job's process on both GPUs.
  std::string scenario = cluster.dir / "two_gpus.toml";
  std::string text = "[driver]\nepoch_ms = 1800000000000\n";
  for (int g = 0; g < 2; ++g) {
    text += fmt::format(
        "[[gpu]]\nuuid = \"GPU-5{}000000-0000-4000-8000-000000000000\"\nname = \"NVIDIA H100 80GB HBM3\"\n"
        "  [[gpu.phase]]\n  gpu_util = 1.0\n  sm_active = 0.7\n  power_watts = 600\n",
        g);
  }
  for (int g = 0; g < 2; ++g) {
    text += fmt::format("[[process]]\npid = {}\ndevice = \"GPU-5{}000000-0000-4000-8000-000000000000\"\n"
                        "memory_mib = 20000\nsm_share = 0.7\n",
                        pid, g);
  }
  WriteFile(scenario, text);
  ScenarioClock clock;
  clock.Set(0);
  auto lib = nvml::testing::LoadFakeFromPath(scenario, clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  TestLedgerServer server(cluster.dir / "ledger.db", clock);
  ASSERT_TRUE(server.Start());
  auto sink = MakeHttpBatchSink(server.url(), "agent-token");
  ASSERT_TRUE(sink.ok());
  SystemClock wall;
  ScontrolResolver slurm(wall, {});
  AgentConfig config;
  config.node = "glnode";
  config.spool_dir = cluster.dir / "spool";
  config.listen_address = "";
  ASSERT_TRUE(FinishAgentConfig(config).ok());
  auto agent = Agent::Create(config, AgentEnv{lib->get(), &clock, sink->get(), &slurm});
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  for (int64_t t = 1'000; t <= 60'000; t += 1'000) {
    clock.Set(t);
    (*agent)->CollectOnce();
    if (t % 10'000 == 0) {
      ASSERT_TRUE((*agent)->FlushBatch().ok());
      (*agent)->PushOnce();
    }
  }
  EXPECT_EQ((*agent)->spool_batches(), 0u);
  EXPECT_THAT(server.errors(), ::testing::IsEmpty());
  EXPECT_EQ(slurm.queries(), 1) << "scontrol is asked once per job, then cached";

  ledger::Ledger& l = server.ledger();
  ASSERT_TRUE(l.RefreshRollups().ok());
  auto jobs = ledger::internal_StoreOf(l).ListJobs();
  ASSERT_TRUE(jobs.ok());
  std::map<int64_t, Job> by_id;
  for (const auto& j : *jobs) by_id[j.id] = j.job;
  ASSERT_EQ(by_id.size(), 1u);
  const Job& job = by_id.begin()->second;
  EXPECT_EQ(job.id, cluster.job_id);
  EXPECT_EQ(job.team, "nlp");         // the Slurm account
  EXPECT_EQ(job.pool, "gpu-a");       // the partition
  EXPECT_EQ(job.experiment, "bert-ft");
  EXPECT_EQ(job.user, "root");
  EXPECT_EQ(job.labels, (JobMetadata{{"exempt", "true"}, {"queue", "dev"}}));  // from --comment
  auto allocations = ledger::internal_StoreOf(l).AllocationsOverlapping({kScenarioEpochMs, kScenarioEpochMs + 60'000});
  ASSERT_TRUE(allocations.ok());
  EXPECT_EQ(allocations->size(), 2u);  // both GPUs
  // From the first sample on (before it, nothing was monitored).
  auto usage = l.Usage({kScenarioEpochMs + 1'000, kScenarioEpochMs + 60'000}, {ledger::Dimension::kJob});
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  bool found = false;
  for (const auto& row : usage->rows) {
    if (row.key.at(0) != cluster.job_id) continue;
    found = true;
    // Two GPUs for 59 s, at SM activity 0.7.
    EXPECT_NEAR(row.gpu_hours(Bucket::kActive) * 3600, 2 * 59 * 0.7, 2 * 59 * 0.7 * 0.01);
    EXPECT_NEAR(row.gpu_hours(Bucket::kAllocatedIdle) * 3600, 2 * 59 * 0.3, 2 * 59 * 0.3 * 0.01);
  }
  EXPECT_TRUE(found) << "no usage row for Slurm job " << cluster.job_id;
}

}  // namespace
}  // namespace gpuledger::agent
