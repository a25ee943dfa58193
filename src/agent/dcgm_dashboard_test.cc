// A site replacing dcgm-exporter with the agent keeps its Grafana dashboard: a real
// Prometheus (Debian's /usr/bin/prometheus) scrapes the agent's /metrics, and every
// panel query of NVIDIA's dcgm-exporter dashboard (testdata/dcgm_exporter_dashboard.json,
// its published queries) gets an answer, with the dashboard's variables resolved as
// Grafana does for "All".
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/metrics_server.h"
#include "agent/test_util.h"
#include "core/testing/missing_component.h"
#include "nvml/test_support.h"
#include "server/test_support.h"

namespace gpuledger::agent {
namespace {

using nvml::testing::ScenarioClock;
using testing::TempDir;
using testing::WriteFile;

const std::string kTestdata = GPULEDGER_AGENT_TESTDATA_DIR;

// Debian's Prometheus on 127.0.0.1:`port`, scraping `target` every second; stopped on
// destruction.
class Prometheus {
 public:
  Prometheus(const TempDir& dir, int port, int target_port) : dir_(dir), port_(port) {
    WriteFile(dir / "prometheus.yml",
              fmt::format("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                          "  - job_name: gpuledger-agent\n    honor_labels: true\n    static_configs:\n"
                          "      - targets: ['127.0.0.1:{}']\n",
                          target_port));
    pid_ = ::fork();
    if (pid_ == 0) {
      std::string log = dir / "prometheus.log";
      FILE* f = std::freopen(log.c_str(), "w", stderr);
      (void)f;
      std::string config = "--config.file=" + (dir / "prometheus.yml");
      std::string storage = "--storage.tsdb.path=" + (dir / "tsdb");
      std::string listen = fmt::format("--web.listen-address=127.0.0.1:{}", port);
      ::execl("/usr/bin/prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(), nullptr);
      ::_exit(127);
    }
  }
  ~Prometheus() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  // GET /api/v1/<path> with `params`: the JSON answer, or null when there is none.
  nlohmann::json Api(const std::string& path, const httplib::Params& params) const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(std::chrono::seconds(5));
    auto res = client.Get("/api/v1/" + path, params, httplib::Headers{});
    if (!res || res->status != 200) return nullptr;
    return nlohmann::json::parse(res->body, nullptr, false);
  }
  std::string Log() const { return server::testing::ReadFileOrEmpty(dir_ / "prometheus.log"); }

 private:
  const TempDir& dir_;
  int port_;
  pid_t pid_ = -1;
};

// Grafana's value of a multi-value variable set to "All" without a custom all value:
// the values as one regex alternation.
std::string AllOf(const nlohmann::json& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : "|") + v.get<std::string>();
  return "(" + out + ")";
}

std::string Substitute(std::string expr, const std::string& var, const std::string& value) {
  for (size_t at = expr.find(var); at != std::string::npos; at = expr.find(var, at + value.size())) {
    expr.replace(at, var.size(), value);
  }
  return expr;
}

TEST(DcgmDashboardTest, EveryPanelOfNvidiasDashboardGetsAnAnswerFromTheAgent) {
  if (::access("/usr/bin/prometheus", X_OK) != 0) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "/usr/bin/prometheus not installed (Debian: prometheus)";
  }
  std::ifstream in(kTestdata + "/dcgm_exporter_dashboard.json");
  ASSERT_TRUE(in);
  nlohmann::json dashboard = nlohmann::json::parse(in);
  ASSERT_EQ(dashboard["panels"].size(), 8u);

  TempDir dir;
  ScenarioClock clock;
  clock.Set(0);
  auto lib = nvml::testing::LoadFakeFromPath(kTestdata + "/e2e_hour.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  AgentConfig config;
  config.node = "dgx-01";
  config.spool_dir = dir / "spool";
  config.proc_root = dir / "proc";
  config.kubernetes.enabled = false;
  auto agent = Agent::Create(config, AgentEnv{lib->get(), &clock, nullptr, nullptr});
  ASSERT_TRUE(agent.ok()) << agent.status().ToString();
  clock.Set(60'000);
  (*agent)->CollectOnce();
  clock.Set(61'000);
  (*agent)->CollectOnce();
  Agent* a = agent->get();
  auto metrics = MetricsServer::Start("127.0.0.1:0", [a] { return a->MetricsText(); });
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();

  Prometheus prom(dir, server::testing::FreeLoopbackPort(), (*metrics)->port());
  // The variables first, as Grafana resolves them.
  nlohmann::json hosts, gpus;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    nlohmann::json r = prom.Api("label/Hostname/values", {{"match[]", "DCGM_FI_DEV_FB_FREE"}});
    if (r.is_object() && r["status"] == "success" && !r["data"].empty()) {
      hosts = r["data"];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_EQ(hosts, nlohmann::json::array({"dgx-01"})) << "Prometheus log:\n" << prom.Log();
  std::string host_all = AllOf(hosts);
  nlohmann::json g = prom.Api("label/gpu/values", {{"match[]", "DCGM_FI_DEV_FB_FREE{Hostname=~\"" + host_all + "\"}"}});
  ASSERT_TRUE(g.is_object());
  gpus = g["data"];
  EXPECT_EQ(gpus, nlohmann::json::array({"0", "1", "2"}));
  std::string gpu_all = AllOf(gpus);

  for (const auto& panel : dashboard["panels"]) {
    for (const auto& target : panel["targets"]) {
      std::string title = panel["title"].get<std::string>();
      std::string expr = Substitute(Substitute(target["expr"].get<std::string>(), "$Hostname", host_all), "$gpu", gpu_all);
      SCOPED_TRACE(title + ": " + expr);
      nlohmann::json r = prom.Api("query", {{"query", expr}});
      ASSERT_TRUE(r.is_object()) << "no answer";
      EXPECT_EQ(r["status"], "success") << r.dump();
      EXPECT_FALSE(r["data"]["result"].empty()) << "the panel would be empty";
    }
  }
}

}  // namespace
}  // namespace gpuledger::agent
