#include "agent/agent_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/test_util.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;
using testing::WriteFile;

TEST(AgentConfigTest, ReadsTheAgentSection) {
  TempDir dir;
  WriteFile(dir / "token", "tok-123\n");
  WriteFile(dir / "c.toml", R"(db = "ignored by the agent"
[agent]
server_url = "http://ledger:8080"
token_file = ")" + (dir / "token") + R"("
node = "trn-07"
pool = "training"
capacity_type = "reserved"
interval = "2s"
push_interval = "20s"
spool_dir = "/tmp/spool"
spool_size = "256MiB"
listen = "127.0.0.1:9400"
hpc_job_mapping_dir = "/run/hpc"
slurm = false
)");
  auto c = LoadAgentConfig(dir / "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(FinishAgentConfig(*c).ok());
  EXPECT_EQ(c->server_url, "http://ledger:8080");
  EXPECT_EQ(c->token, "tok-123");
  EXPECT_EQ(c->node, "trn-07");
  EXPECT_EQ(c->capacity_type, CapacityType::kReserved);
  EXPECT_EQ(c->interval_ms, 2'000);
  EXPECT_EQ(c->push_interval_ms, 20'000);
  EXPECT_EQ(c->spool_max_bytes, 256u << 20);
  EXPECT_EQ(c->hpc_job_mapping_dir, "/run/hpc");
  EXPECT_FALSE(c->slurm);
  EXPECT_EQ(c->proc_root, "/proc");  // default kept
}

TEST(AgentConfigTest, NamesTheBadKey) {
  TempDir dir;
  WriteFile(dir / "c.toml", "[agent]\nnode = \"n\"\nintervall = \"1s\"\n");
  EXPECT_THAT(LoadAgentConfig(dir / "c.toml").status().message(), HasSubstr("c.toml:3: agent.intervall: unknown key"));
  WriteFile(dir / "d.toml", "[agent]\nspool_size = \"1 parsec\"\n");
  EXPECT_THAT(LoadAgentConfig(dir / "d.toml").status().message(), HasSubstr("d.toml:2: agent.spool_size"));
  AgentConfig c;
  c.node = "n";
  c.interval_ms = 50;
  EXPECT_THAT(FinishAgentConfig(c).message(), HasSubstr("agent.interval"));
  c.interval_ms = 1000;
  c.push_interval_ms = 500;
  EXPECT_THAT(FinishAgentConfig(c).message(), HasSubstr("agent.push_interval"));
}

TEST(AgentConfigTest, ParsesDurations) {
  EXPECT_EQ(*ParseAgentDuration("500ms"), 500);
  EXPECT_EQ(*ParseAgentDuration("10s"), 10'000);
  EXPECT_EQ(*ParseAgentDuration("5m"), 300'000);
  EXPECT_FALSE(ParseAgentDuration("0ms").ok());
  EXPECT_FALSE(ParseAgentDuration("fast").ok());
}

TEST(AgentConfigTest, ParsesByteSizes) {
  EXPECT_EQ(*ParseByteSize("1GiB"), uint64_t{1} << 30);
  EXPECT_EQ(*ParseByteSize("512 MiB"), uint64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("1000"), 1000u);
  EXPECT_EQ(*ParseByteSize("2GB"), 2'000'000'000u);
  EXPECT_FALSE(ParseByteSize("GiB").ok());
  EXPECT_FALSE(ParseByteSize("99999999999TiB").ok());
}

}  // namespace
}  // namespace gpuledger::agent
