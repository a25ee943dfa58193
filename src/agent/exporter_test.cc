#include "agent/exporter.h"

#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "agent/agent.h"
#include "agent/metrics_server.h"
#include "agent/test_util.h"
#include "core/testing/missing_component.h"
#include "nvml/test_support.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nvml::testing::ScenarioClock;
using testing::TempDir;
using testing::WriteFile;

const std::string kTestdata = GPULEDGER_AGENT_TESTDATA_DIR;

// The exposition of an agent on e2e_hour.toml after two collections (t = 20 s, 21 s).
std::string Exposition(ExpositionLabels label_names = ExpositionLabels::kDcgm) {
  const std::string scenario = "e2e_hour.toml";
  TempDir dir;
  WriteFile(dir / "proc/5003/environ", testing::EnvironText({"GPULEDGER_JOB=serve-3"}));
  ScenarioClock clock;
  clock.Set(0);
  auto lib = nvml::testing::LoadFakeFromPath(kTestdata + "/" + scenario, clock);
  if (!lib.ok()) {
    ADD_FAILURE() << lib.status().ToString();
    return "";
  }
  AgentConfig config;
  config.node = "n1";
  config.spool_dir = dir / "spool";
  config.proc_root = dir / "proc";
  config.exposition_labels = label_names;
  config.kubernetes.enabled = false;
  auto agent = Agent::Create(config, AgentEnv{lib->get(), &clock, nullptr, nullptr});
  if (!agent.ok()) {
    ADD_FAILURE() << agent.status().ToString();
    return "";
  }
  clock.Set(700'000);
  (*agent)->CollectOnce();
  clock.Set(701'000);
  (*agent)->CollectOnce();
  return *(*agent)->MetricsText();
}

TEST(ExporterTest, ExpositionParsesAndCarriesDcgmNamesAndLabels) {
  std::string text = Exposition();
  auto parsed = prometheus::ParseText(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  std::set<std::string> families;
  for (const auto& f : parsed->families) families.insert(f.name);
  for (const AgentMetric& m : AgentMetricCatalog()) EXPECT_TRUE(families.contains(m.spec.name)) << m.spec.name;
  // A whole GPU: dcgm-exporter's labels, modelName included; a MIG instance: its GPU's
  // UUID and GPU_I_ID.
  EXPECT_THAT(text, HasSubstr("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-e1000000-0000-4000-8000-000000000000\","
                              "device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"n1\"} 0.6\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_PROF_SM_ACTIVE{gpu=\"2\",UUID=\"GPU-e3000000-0000-4000-8000-000000000000\","
                              "device=\"nvidia2\",modelName=\"NVIDIA H200\",Hostname=\"n1\",GPU_I_PROFILE=\"3g.71gb\","
                              "GPU_I_ID=\"1\",mig_uuid=\"MIG-e3000000-0000-4000-8000-00000000000a\"} 0.4\n"));
  // gpuledger's own families keep the lint-clean name.
  EXPECT_THAT(text, HasSubstr("gpuledger_device_healthy{gpu=\"0\",UUID=\"GPU-e1000000-0000-4000-8000-000000000000\","
                              "device=\"nvidia0\",model_name=\"NVIDIA H100 80GB HBM3\""));
  // Off Kubernetes, no pod labels.
  EXPECT_THAT(text, Not(HasSubstr("pod=")));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\""));
  // Processes: attributed or not, each listed with its source.
  EXPECT_THAT(text, HasSubstr("pid=\"5003\",job=\"serve-3\",source=\"environment\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("pid=\"5001\",job=\"\",source=\"none\"} 1\n"));
  // The per-process SM share comes with the driver's timestamp of its sample.
  EXPECT_THAT(text, HasSubstr("gpuledger_process_sm_share_ratio{gpu=\"0\""));
  EXPECT_THAT(text, HasSubstr("gpuledger_process_sm_share_timestamp_seconds{gpu=\"0\""));
  // GPU-e2 works in 500 ms bursts: the gap profile sees the gaps.
  EXPECT_THAT(text, HasSubstr("gpuledger_gap_duration_seconds_bucket{gpu=\"1\""));
  for (const auto& f : parsed->families) {
    if (f.name != "gpuledger_gap_duration_seconds") continue;
    double gaps_gpu1 = 0;
    for (const auto& s : f.samples) {
      if (s.role == prometheus::SampleRole::kCount && prometheus::FindLabel(s.labels, "gpu") == "1") gaps_gpu1 = s.value;
    }
    EXPECT_GE(gaps_gpu1, 1.0);
  }
}

// promtool check metrics on `text`: its exit status and what it printed.
std::pair<int, std::string> Promtool(const std::string& text) {
  TempDir dir;
  WriteFile(dir / "metrics.prom", text);
  std::string cmd = "/usr/bin/promtool check metrics < " + (dir / "metrics.prom") + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return {::pclose(p), out};
}

TEST(ExporterTest, PromtoolAcceptsTheLintCleanExposition) {
  if (!std::filesystem::exists("/usr/bin/promtool")) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "promtool not installed (Debian: prometheus)";
  }
  std::string text = Exposition(ExpositionLabels::kLint);
  EXPECT_THAT(text, Not(HasSubstr("modelName")));
  auto [rc, out] = Promtool(text);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "");
}

TEST(ExporterTest, PromtoolFindsOnlyDcgmExportersCamelCaseLabelInTheDefaultExposition) {
  if (!std::filesystem::exists("/usr/bin/promtool")) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "promtool not installed (Debian: prometheus)";
  }
  auto [rc, out] = Promtool(Exposition());
  EXPECT_NE(rc, 0);
  std::istringstream lines(out);
  int complaints = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    ++complaints;
    EXPECT_THAT(line, ::testing::StartsWith("DCGM_FI_")) << line;
    EXPECT_THAT(line, HasSubstr("label names should be written in 'snake_case' not 'camelCase'")) << line;
  }
  EXPECT_GT(complaints, 0);
}

TEST(MetricsServerTest, ParsesListenAddresses) {
  EXPECT_EQ(*ParseListenAddress("0.0.0.0:9400"), (std::pair<std::string, int>{"0.0.0.0", 9400}));
  EXPECT_EQ(*ParseListenAddress(":9400"), (std::pair<std::string, int>{"0.0.0.0", 9400}));
  EXPECT_EQ(*ParseListenAddress("[::1]:0"), (std::pair<std::string, int>{"::1", 0}));
  EXPECT_THAT(ParseListenAddress("9400").status().message(), HasSubstr("want host:port"));
  EXPECT_THAT(ParseListenAddress("h:99999").status().message(), HasSubstr("port must be 0..65535"));
}

TEST(MetricsServerTest, AnswersBeforeTheFirstCollectionWith503) {
  auto server = MetricsServer::Start("127.0.0.1:0", [] { return std::shared_ptr<const std::string>(); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_GT((*server)->port(), 0);
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto busy = MetricsServer::Start(fmt::format("127.0.0.1:{}", (*server)->port()), [] { return nullptr; });
  EXPECT_THAT(busy.status().message(), HasSubstr("cannot listen"));
}

TEST(ExporterTest, DocsListEveryFamilyOfTheCatalog) {
  std::ifstream in(std::string(GPULEDGER_SOURCE_DIR) + "/docs/agent.md");
  ASSERT_TRUE(in) << "docs/agent.md missing";
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(docs, HasSubstr(MetricsTableMarkdown())) << "docs/agent.md's families table differs from the catalog";
  for (const AgentMetric& m : AgentMetricCatalog()) {
    EXPECT_TRUE(prometheus::ValidateMetricSpec(m.spec).ok()) << m.spec.name;
  }
}

}  // namespace
}  // namespace gpuledger::agent
