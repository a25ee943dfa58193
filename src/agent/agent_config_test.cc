#include "agent/agent_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/test_util.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;
using testing::WriteFile;

// Reads `path` as gpuledger.toml and applies its [agent] section over the defaults, as
// `gpuledger agent --config` does.
Result<AgentConfig> Load(const std::string& path) {
  auto c = config::Load(path);
  if (!c.ok()) return c.status();
  AgentConfig a;
  ApplyAgentConfig(c->agent, a);
  return a;
}

// Every key of [agent] reaches AgentConfig.
TEST(AgentConfigTest, EveryKeyReachesTheAgentConfig) {
  TempDir dir;
  WriteFile(dir / "token", "tok-123\n");
  WriteFile(dir / "c.toml", R"(db = "ignored by the agent"
[agent]
server_url = "http://ledger:8080"
token = "inline"
token_file = ")" + (dir / "token") + R"("
node = "trn-07"
pool = "training"
capacity_type = "reserved"
interval = "500ms"
push_interval = "20s"
spool_dir = "/srv/gpuledger/spool"
spool_size = "256MiB"
listen = "127.0.0.1:9400"
mapping_file = "map.toml"
hpc_job_mapping_dir = "/run/hpc"
nvml_library = "libfake-nvml.so"
proc_root = "/host/proc"
slurm = false
scontrol = "/opt/slurm/bin/scontrol"
)");
  auto c = Load(dir / "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->token, "inline");
  ASSERT_TRUE(FinishAgentConfig(*c).ok());
  EXPECT_EQ(c->server_url, "http://ledger:8080");
  EXPECT_EQ(c->token, "tok-123") << "token_file wins over token";
  EXPECT_EQ(c->token_file, dir / "token");
  EXPECT_EQ(c->node, "trn-07");
  EXPECT_EQ(c->pool, "training");
  EXPECT_EQ(c->capacity_type, CapacityType::kReserved);
  EXPECT_EQ(c->interval_ms, 500);
  EXPECT_EQ(c->push_interval_ms, 20'000);
  EXPECT_EQ(c->spool_dir, "/srv/gpuledger/spool");
  EXPECT_EQ(c->spool_max_bytes, 256u << 20);
  EXPECT_EQ(c->listen_address, "127.0.0.1:9400");
  EXPECT_EQ(c->mapping_file, "map.toml");
  EXPECT_EQ(c->hpc_job_mapping_dir, "/run/hpc");
  EXPECT_EQ(c->nvml_library, "libfake-nvml.so");
  EXPECT_EQ(c->proc_root, "/host/proc");
  EXPECT_FALSE(c->slurm);
  EXPECT_EQ(c->scontrol, "/opt/slurm/bin/scontrol");
}

TEST(AgentConfigTest, AbsentKeysKeepTheAgentDefaults) {
  TempDir dir;
  WriteFile(dir / "c.toml", "[agent]\nnode = \"n\"\n");
  auto c = Load(dir / "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const AgentConfig defaults;
  EXPECT_EQ(c->node, "n");
  EXPECT_EQ(c->interval_ms, defaults.interval_ms);
  EXPECT_EQ(c->spool_dir, defaults.spool_dir);
  EXPECT_EQ(c->proc_root, defaults.proc_root);
  EXPECT_EQ(c->slurm, defaults.slurm);
}

TEST(AgentConfigTest, NamesTheBadKeyAndItsLine) {
  TempDir dir;
  WriteFile(dir / "c.toml", "[agent]\nnode = \"n\"\nintervall = \"1s\"\n");
  EXPECT_THAT(Load(dir / "c.toml").status().message(), HasSubstr("c.toml:3: agent.intervall: unknown key"));
  WriteFile(dir / "d.toml", "[agent]\nspool_size = \"1 parsec\"\n");
  EXPECT_THAT(Load(dir / "d.toml").status().message(), HasSubstr("d.toml:2: agent.spool_size"));
}

// The checks across keys run after the flags; a value from the file is named by its line,
// one from a flag by the flag, a default by its key.
TEST(AgentConfigTest, FinishNamesWhereTheValueWasSet) {
  TempDir dir;
  WriteFile(dir / "c.toml", "[agent]\nnode = \"n\"\n\ninterval = \"50ms\"\n");
  auto c = Load(dir / "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_THAT(FinishAgentConfig(*c).message(), StartsWith(dir / "c.toml" + ":4: agent.interval: must be at least 100ms"));
  c->interval_ms = 1000;
  c->where.SetFlag("interval", "--interval");
  c->push_interval_ms = 500;
  EXPECT_THAT(FinishAgentConfig(*c).message(), StartsWith("agent.push_interval: must be at least the collection interval"));
  c->push_interval_ms = 5'000;
  c->spool_max_bytes = 1000;
  c->where.SetFlag("spool_size", "--spool-size");
  EXPECT_THAT(FinishAgentConfig(*c).message(), StartsWith("--spool-size: must be at least 1MiB"));
  AgentConfig d;
  d.node = "n";
  d.interval_ms = 50;
  EXPECT_THAT(FinishAgentConfig(d).message(), StartsWith("agent.interval: must be at least 100ms"));
}

// [agent.kubernetes] and exposition_labels reach the config; rule lists replace the
// defaults field by field.
TEST(AgentConfigTest, KubernetesRulesReplaceTheDefaultsFieldByField) {
  TempDir dir;
  WriteFile(dir / "c.toml", R"([agent]
exposition_labels = "lint"
[agent.kubernetes]
enabled = true
pod_resources_socket = "/run/kubelet.sock"
api_server = "none"
stale_after = "2m"
team = ["annotation:cost-center", "namespace"]
keep = ["label:example.com/exempt", "annotation:example.com/*"]
[[agent.kubernetes.kind]]
kind = "serving"
when = "label:app"
equals = "vllm"
)");
  auto c = Load(dir / "c.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(FinishAgentConfig(*c).ok());
  EXPECT_EQ(c->exposition_labels, ExpositionLabels::kLint);
  EXPECT_EQ(c->kubernetes.enabled, std::optional<bool>(true));
  EXPECT_EQ(c->kubernetes.pod_resources_socket, "/run/kubelet.sock");
  EXPECT_EQ(c->kubernetes.api_server, "none");
  EXPECT_EQ(c->kubernetes.stale_after_ms, 120'000);
  ASSERT_EQ(c->kubernetes.rules.team.size(), 2u);
  EXPECT_EQ(c->kubernetes.rules.team[0].ToString(), "annotation:cost-center");
  EXPECT_EQ(c->kubernetes.rules.project.size(), kube::PodRules::Defaults().project.size()) << "not set: defaults";
  ASSERT_EQ(c->kubernetes.rules.keep.size(), 2u);
  EXPECT_EQ(c->kubernetes.rules.keep[0].ToString(), "label:example.com/exempt");
  EXPECT_EQ(c->kubernetes.rules.keep[1].ToString(), "annotation:example.com/*");
  ASSERT_EQ(c->kubernetes.rules.kinds.size(), 1u);
  EXPECT_EQ(c->kubernetes.rules.kinds[0].kind, JobKind::kServing);
  EXPECT_EQ(c->kubernetes.rules.kinds[0].equals, std::optional<std::string>("vllm"));
}

TEST(AgentConfigTest, KubernetesMistakesNameTheFileLineAndKey) {
  TempDir dir;
  struct Case {
    std::string toml;
    std::string error;
  };
  for (const Case& k : std::vector<Case>{
           {"[agent.kubernetes]\nsocket = \"/x\"\n", "c.toml:2: agent.kubernetes.socket: unknown key"},
           {"[agent.kubernetes]\n\nteam = [\"labels:team\"]\n", "c.toml:3: agent.kubernetes.team: source \"labels:team\""},
           {"[agent.kubernetes]\nkeep = [\"label:gpuledger.io/*\", \"tag:x\"]\n",
            "c.toml:2: agent.kubernetes.keep: \"tag:x\": want label:KEY or annotation:KEY (KEY may end in *)"},
           {"[agent.kubernetes]\n\nkeep = [\"annotation:*\"]\n",
            "c.toml:3: agent.kubernetes.keep: \"annotation:*\": a prefix before the *"},
           {"[agent.kubernetes]\n[[agent.kubernetes.kind]]\nkind = \"inference\"\nwhen = \"pod\"\n",
            "c.toml:3: agent.kubernetes.kind.kind: "},
           {"[agent.kubernetes]\n[[agent.kubernetes.kind]]\nkind = \"batch\"\nwhen = \"owner:\"\n",
            "c.toml:4: agent.kubernetes.kind.when: source \"owner:\": a key after"},
           {"[agent.kubernetes]\n[[agent.kubernetes.kind]]\nkind = \"batch\"\n", "c.toml:2: [[agent.kubernetes.kind]]: needs kind and when"},
           {"[agent]\nexposition_labels = \"camel\"\n", "c.toml:2: agent.exposition_labels: \"camel\": want \"dcgm\""},
       }) {
    SCOPED_TRACE(k.toml);
    WriteFile(dir / "c.toml", k.toml);
    auto c = Load(dir / "c.toml");
    Status st = c.ok() ? FinishAgentConfig(*c) : c.status();
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(st.message(), HasSubstr(k.error));
  }
}

}  // namespace
}  // namespace gpuledger::agent
