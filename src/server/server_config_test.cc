#include "server/server_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "server/test_support.h"

namespace gpuledger::server {
namespace {

Status Load(const std::string& toml, ServerOptions& o) {
  testing::TempDir dir;
  std::ofstream(dir.File("c.toml")) << toml;
  return LoadServerConfig(dir.File("c.toml"), o);
}

TEST(ServerConfigTest, ReadsTheServerTable) {
  ServerOptions o;
  std::string hash = HashToken("tok");
  Status st = Load(R"toml(db = "x.db"
[server]
listen = "0.0.0.0:9000"
max_body_bytes = 1048576
max_sample_age = "7d"
[server.remote_write]
pool = "k8s"
capacity_type = "reserved"
hold_timeout = "90s"
[[server.label_rule]]
label = "namespace"
regex = "team-(.+)"
team = "$1"
[[server.token]]
name = "dash"
role = "viewer"
teams = ["nlp", "vision"]
hash = ")toml" + hash + R"toml("
[[server.scrape]]
url = "http://10.0.0.7:9400/metrics"
interval = "15s"
)toml",
                   o);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(o.listen, "0.0.0.0:9000");
  EXPECT_EQ(o.limits.max_body_bytes, 1048576u);
  EXPECT_EQ(o.limits.max_sample_age_ms, 7 * kMsPerDay);
  EXPECT_EQ(o.prometheus.pool, "k8s");
  EXPECT_EQ(o.prometheus.capacity_type, CapacityType::kReserved);
  EXPECT_EQ(o.prometheus.hold_timeout_ms, 90 * kMsPerSecond);
  ASSERT_EQ(o.prometheus.mapping.rules.size(), 1u);
  EXPECT_EQ(o.prometheus.mapping.rules[0].match, prometheus::LabelRule::Match::kRegex);
  ASSERT_EQ(o.tokens.size(), 1u);
  EXPECT_EQ(o.tokens[0].teams, (std::vector<std::string>{"nlp", "vision"}));
  EXPECT_TRUE(Authenticator(o.tokens).Authenticate("Bearer tok").ok());
  ASSERT_EQ(o.scrape_targets.size(), 1u);
  EXPECT_EQ(o.scrape_targets[0].interval_ms, 15 * kMsPerSecond);
}

TEST(ServerConfigTest, ErrorsNameTheLineAndKey) {
  struct Case {
    std::string toml, want;
  };
  for (const Case& c : std::vector<Case>{
           {"[server]\nlisten = 8080\n", ":2: listen: want a string"},
           {"[server]\nlisen = \"x\"\n", ":2: server.lisen: unknown key"},
           {"[server]\n[[server.token]]\nname = \"a\"\nrole = \"root\"\nhash = \"x\"\n", "role \"root\""},
           {"[server]\n[[server.token]]\nname = \"a\"\nrole = \"admin\"\nhash = \"sha256:00:11\"\n", "digest"},
           {"[server]\n[[server.token]]\nname = \"a\"\nrole = \"viewer\"\nhash = \"" + HashToken("x") + "\"\n",
            "needs teams"},
           {"[[server.label_rule]]\nlabel = \"ns\"\nregex = \"(\"\nteam = \"$1\"\n", "label_rule"},
           {"[[server.scrape]]\nurl = \"https://x/metrics\"\n", "only http://"},
           {"[server.remote_write]\nhold_timeout = \"soon\"\n", "hold_timeout"},
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

}  // namespace
}  // namespace gpuledger::server
