#include "server/server_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "server/test_support.h"

namespace gpuledger::server {
namespace {

// Reads `toml` as gpuledger.toml (config::Load) and applies its [server] section, as
// `gpuledger serve` does.
Status Load(const std::string& toml, ServerOptions& o) {
  testing::TempDir dir;
  std::ofstream(dir.File("c.toml")) << toml;
  auto c = config::Load(dir.File("c.toml"));
  if (!c.ok()) return c.status();
  return ApplyServerConfig(c->server, o);
}

// Every key of [server] and its tables reaches ServerOptions.
TEST(ServerConfigTest, EveryKeyReachesTheServerOptions) {
  ServerOptions o;
  std::string hash = HashToken("tok");
  Status st = Load(R"toml(db = "x.db"
[server]
listen = "0.0.0.0:9000"
insecure = true
max_body_bytes = 1048576
max_samples_per_batch = 5000
max_sample_age = "7d"
read_timeout = "20s"
write_timeout = "500ms"
threads = 4
header_timeout = "3s"
body_timeout = "20s"
max_threads = 64
max_connections_per_address = 8
keep_alive_max_requests = 50
keep_alive_timeout = "2s"
max_concurrent_decompressions = 2
settle_interval = "90s"
[server.query_limits]
max_device_hours = 1000
max_rows = 500
max_series_cells = 600
max_heatmap_cells = 700
max_rows_in_flight = 80
max_job_sample_device_hours = 90
[server.remote_write]
pool = "k8s"
capacity_type = "reserved"
hold_timeout = "90s"
[[server.label_rule]]
label = "namespace"
regex = "team-(.+)"
team = "$1"
project = "$1-jobs"
[[server.label_rule]]
label = "cluster"
equals = "lab"
team = "research"
[[server.token]]
name = "dash"
role = "viewer"
teams = ["nlp", "vision"]
hash = ")toml" + hash + R"toml("
[[server.token]]
name = "rack-7"
role = "agent"
nodes = ["rack7-*"]
hash = ")toml" + HashToken("agent") + R"toml("
[[server.scrape]]
url = "http://10.0.0.7:9400/metrics"
interval = "1m30s"
timeout = "750ms"
)toml",
                   o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(o.listen, "0.0.0.0:9000");
  EXPECT_TRUE(o.insecure);
  EXPECT_EQ(o.limits.max_body_bytes, 1048576u);
  EXPECT_EQ(o.limits.max_samples_per_batch, 5000u);
  EXPECT_EQ(o.limits.max_sample_age_ms, 7 * kMsPerDay);
  EXPECT_EQ(o.read_timeout_ms, 20'000);
  EXPECT_EQ(o.write_timeout_ms, 500);
  EXPECT_EQ(o.threads, 4u);
  EXPECT_EQ(o.header_timeout_ms, 3'000);
  EXPECT_EQ(o.body_timeout_ms, 20'000);
  EXPECT_EQ(o.max_threads, 64u);
  EXPECT_EQ(o.max_connections_per_address, 8u);
  EXPECT_EQ(o.keep_alive_max_requests, 50u);
  EXPECT_EQ(o.keep_alive_timeout_ms, 2'000);
  EXPECT_EQ(o.max_concurrent_decompressions, 2u);
  EXPECT_EQ(o.settle_interval_ms, 90'000);
  EXPECT_EQ(o.query_limits.max_device_hours, 1000);
  EXPECT_EQ(o.query_limits.max_rows, 500);
  EXPECT_EQ(o.query_limits.max_series_cells, 600);
  EXPECT_EQ(o.query_limits.max_heatmap_cells, 700);
  EXPECT_EQ(o.query_limits.max_rows_in_flight, 80);
  EXPECT_EQ(o.query_limits.max_job_sample_device_hours, 90);
  EXPECT_EQ(o.prometheus.pool, "k8s");
  EXPECT_EQ(o.prometheus.capacity_type, CapacityType::kReserved);
  EXPECT_EQ(o.prometheus.hold_timeout_ms, 90 * kMsPerSecond);
  ASSERT_EQ(o.prometheus.mapping.rules.size(), 2u);
  EXPECT_EQ(o.prometheus.mapping.rules[0].match, prometheus::LabelRule::Match::kRegex);
  EXPECT_EQ(o.prometheus.mapping.rules[0].label, "namespace");
  EXPECT_EQ(o.prometheus.mapping.rules[0].pattern, "team-(.+)");
  EXPECT_EQ(o.prometheus.mapping.rules[0].team, "$1");
  EXPECT_EQ(o.prometheus.mapping.rules[0].project, "$1-jobs");
  EXPECT_EQ(o.prometheus.mapping.rules[1].match, prometheus::LabelRule::Match::kEquals);
  EXPECT_EQ(o.prometheus.mapping.rules[1].pattern, "lab");
  EXPECT_EQ(o.prometheus.mapping.rules[1].team, "research");
  ASSERT_EQ(o.tokens.size(), 2u);
  EXPECT_EQ(o.tokens[1].nodes, (std::vector<std::string>{"rack7-*"}));
  EXPECT_EQ(o.tokens[0].name, "dash");
  EXPECT_EQ(o.tokens[0].role, Role::kViewer);
  EXPECT_EQ(o.tokens[0].teams, (std::vector<std::string>{"nlp", "vision"}));
  EXPECT_TRUE(Authenticator(o.tokens).Authenticate("Bearer tok").ok());
  EXPECT_EQ(Authenticator(o.tokens).Authenticate("Bearer agent")->AsSender().nodes, o.tokens[1].nodes);
  ASSERT_EQ(o.scrape_targets.size(), 1u);
  EXPECT_EQ(o.scrape_targets[0].url, "http://10.0.0.7:9400/metrics");
  EXPECT_EQ(o.scrape_targets[0].interval_ms, 90 * kMsPerSecond);
  EXPECT_EQ(o.scrape_targets[0].timeout_ms, 750);
}

TEST(ServerConfigTest, AbsentKeysKeepTheServerDefaults) {
  ServerOptions o;
  const ServerOptions defaults;
  ASSERT_TRUE(Load("db = \"x\"\n[server]\nlisten = \"127.0.0.1:0\"\n", o).ok());
  EXPECT_EQ(o.listen, "127.0.0.1:0");
  EXPECT_EQ(o.limits.max_body_bytes, defaults.limits.max_body_bytes);
  EXPECT_EQ(o.read_timeout_ms, defaults.read_timeout_ms);
  EXPECT_EQ(o.threads, defaults.threads);
  EXPECT_EQ(o.prometheus.hold_timeout_ms, defaults.prometheus.hold_timeout_ms);
  EXPECT_TRUE(o.tokens.empty());
  EXPECT_EQ(o.settle_interval_ms, 300'000);
  ServerOptions off;
  ASSERT_TRUE(Load("[server]\nsettle_days = false\n", off).ok());
  EXPECT_EQ(off.settle_interval_ms, 0) << "never";
}

TEST(ServerConfigTest, ErrorsNameTheLineAndKey) {
  struct Case {
    std::string toml, want;
  };
  for (const Case& c : std::vector<Case>{
           {"[server]\nlisten = 8080\n", ":2: server.listen: want a string"},
           {"[server]\nlisen = \"x\"\n", ":2: server.lisen: unknown key"},
           {"[server]\n[[server.token]]\nname = \"a\"\nrole = \"root\"\nhash = \"x\"\n",
            ":4: server.token.role: role \"root\""},
           {"[server]\n[[server.token]]\nname = \"a\"\nrole = \"admin\"\nhash = \"sha256:00:11\"\n",
            ":5: server.token.hash: "},
           {"[server]\n[[server.token]]\nname = \"a\"\nrole = \"viewer\"\nhash = \"" + HashToken("x") + "\"\n",
            ":2: [[server.token]]: a viewer token needs teams"},
           {"[[server.token]]\nname = \"a\"\nrole = \"admin\"\nhash = \"" + HashToken("x") +
                "\"\n[[server.token]]\nname = \"a\"\nrole = \"admin\"\nhash = \"" + HashToken("y") + "\"\n",
            ":5: [[server.token]]: needs a unique name"},
           {"[[server.label_rule]]\nlabel = \"ns\"\nregex = \"(\"\nteam = \"$1\"\n", ":3: server.label_rule.regex: "},
           {"[[server.scrape]]\nurl = \"https://x/metrics\"\n", ":2: server.scrape.url: "},
           {"[server.remote_write]\nhold_timeout = \"soon\"\n", ":2: server.remote_write.hold_timeout: duration"},
           {"[server.query_limits]\nmax_rows = 0\n", ":2: server.query_limits.max_rows: "},
           {"[server.query_limits]\nmax_cells = 5\n", ":2: server.query_limits.max_cells: unknown key"},
           {"[server]\nthreads = 32\nmax_threads = 8\n", "max_threads (8) is below threads (32)"},
           {"[server]\nheader_timeout = \"soon\"\n", ":2: server.header_timeout: duration"},
           {"[[server.token]]\nname = \"a\"\nrole = \"viewer\"\nteams = [\"t\"]\nnodes = [\"n1\"]\nhash = \"" +
                HashToken("x") + "\"\n",
            ":5: server.token.nodes: only an agent token is bound to nodes"},
           {"[[server.token]]\nname = \"a\"\nrole = \"agent\"\nnodes = [\"*\"]\nhash = \"" + HashToken("x") + "\"\n",
            "binds to no node or to every node"},
       }) {
    ServerOptions o;
    Status st = Load(c.toml, o);
    ASSERT_FALSE(st.ok()) << c.toml;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.ToString();
  }
  ServerOptions o;
  EXPECT_TRUE(Load("db = \"x\"\n", o).ok()) << "no [server] table: defaults";
  EXPECT_EQ(o.listen, "127.0.0.1:8080");
}

TEST(ServerConfigTest, ReadsJobBoundScrapeTargets) {
  ServerOptions o;
  Status st = Load(R"toml([server]
[[server.scrape]]
url = "http://10.0.0.7:9400/metrics"
[[server.scrape]]
url = "http://10.0.0.8:8000/metrics"
kind = "vllm"
job = "chat-1"
[[server.scrape]]
url = "http://10.0.0.9:8002/metrics"
kind = "triton"
job = "rank-2"
interval = "30s"
[[server.scrape]]
url = "http://10.0.0.9:9090"
kind = "progress"
job = "train-1"
tokens_metric = "trainer_tokens_seen_total"
model_flops_metric = ""
)toml",
                   o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(o.scrape_targets.size(), 4u);
  EXPECT_EQ(o.scrape_targets[0].kind, ScrapeKind::kDcgm);
  EXPECT_EQ(o.scrape_targets[0].job, "");
  EXPECT_EQ(o.scrape_targets[1].kind, ScrapeKind::kServing);
  EXPECT_EQ(o.scrape_targets[1].job, "chat-1");
  EXPECT_EQ(o.scrape_targets[2].kind, ScrapeKind::kServing);
  EXPECT_EQ(o.scrape_targets[2].interval_ms, 30 * kMsPerSecond);
  const ScrapeTarget& p = o.scrape_targets[3];
  EXPECT_EQ(p.kind, ScrapeKind::kProgress);
  EXPECT_EQ(p.job, "train-1");
  EXPECT_EQ(p.progress_metrics.tokens, "trainer_tokens_seen_total");
  EXPECT_EQ(p.progress_metrics.model_flops, "");
  EXPECT_EQ(o.scrape_targets[1].progress_metrics.tokens, "gpuledger_job_tokens_total");
}

TEST(ServerConfigTest, BadScrapeTargetsNameTheLineAndKey) {
  struct Case {
    std::string toml, want;
  };
  const std::string head = "[server]\n[[server.scrape]]\nurl = \"http://h:1/metrics\"\n";
  for (const Case& c : std::vector<Case>{
           {head + "kind = \"prometheus\"\n", ":4: server.scrape.kind: kind \"prometheus\": want dcgm, serving"},
           {head + "kind = 3\n", ":4: server.scrape.kind: want a string"},
           {head + "kind = \"serving\"\n", ":2: [[server.scrape]]: kind \"serving\" needs job"},
           {head + "kind = \"progress\"\njob = \"\"\n", ":2: [[server.scrape]]: kind \"progress\" needs job"},
           {head + "job = \"chat-1\"\n", ":4: server.scrape.job: only for kind = \"serving\" or \"progress\""},
           {head + "kind = \"vllm\"\njob = \"c\"\ntokens_metric = \"x_total\"\n",
            ":6: server.scrape.tokens_metric: only for kind = \"progress\""},
           {head + "kind = \"progress\"\njob = \"t\"\ntokens_metric = \"tokens seen\"\n",
            ":6: server.scrape.tokens_metric: \"tokens seen\" is not a metric name"},
           {head + "kind = \"progress\"\njob = \"t\"\ntokens_metric = \"\"\nmodel_flops_metric = \"\"\n",
            ":2: [[server.scrape]]: kind \"progress\" needs tokens_metric or model_flops_metric"},
           {head + "kind = \"progress\"\njob = \"t\"\n[[server.scrape]]\nurl = \"http://h:2/\"\n"
                   "kind = \"progress\"\njob = \"t\"\n",
            ":9: server.scrape.job: job \"t\" has a progress target already"},
           {head + "kind = \"vllm\"\njob = \"c\"\n[[server.scrape]]\nurl = \"http://h:2/\"\n"
                   "kind = \"triton\"\njob = \"c\"\n",
            ":9: server.scrape.job: job \"c\" has a serving target already (one per job: give each replica its own job)"},
           {head + "jobs = \"t\"\n", ":4: server.scrape.jobs: unknown key"},
       }) {
    ServerOptions o;
    Status st = Load(c.toml, o);
    ASSERT_FALSE(st.ok()) << c.toml;
    EXPECT_NE(st.message().find(c.want), std::string::npos) << st.ToString();
  }
}

}  // namespace
}  // namespace gpuledger::server
