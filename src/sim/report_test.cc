#include "sim/report.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuledger::sim {
namespace {

std::vector<SimResult> TwoRuns() {
  ClusterSpec cluster = UniformCluster(1, 4, Money::FromUnits(2));
  std::vector<SimJob> jobs;
  auto add = [&](const char* id, int64_t submit_s, int64_t duration_s, int32_t gpus) {
    SimJob j;
    j.id = id;
    j.queue = "q1";
    j.submit_ms = submit_s * 1000;
    j.duration_ms = duration_s * 1000;
    j.gpus = gpus;
    jobs.push_back(j);
  };
  add("a", 0, 100, 2);
  add("b", 10, 50, 4);
  add("c", 20, 10, 1);
  add("d", 30, 200, 1);
  std::vector<SimResult> runs;
  for (const char* policy : {"fifo", "backfill"}) {
    auto r = Simulate(cluster, jobs, policy, SimOptions());
    EXPECT_TRUE(r.ok());
    runs.push_back(std::move(*r));
  }
  return runs;
}

TEST(ReportTest, HumanDurations) {
  EXPECT_EQ(HumanDuration(850), "850ms");
  EXPECT_EQ(HumanDuration(12'500), "12.5s");
  EXPECT_EQ(HumanDuration(250'000), "4m 10s");
  EXPECT_EQ(HumanDuration(2 * 3'600'000 + 5 * 60'000), "2h 05m");
  EXPECT_EQ(HumanDuration(3 * 86'400'000LL + 4 * 3'600'000), "3d 4h");
  EXPECT_EQ(HumanDuration(-1500), "-1.5s");
}

TEST(ReportTest, TableHasOneColumnPerRunAndStatesDifferences) {
  const std::string table = RenderTable(TwoRuns());
  EXPECT_NE(table.find("run"), std::string::npos);
  EXPECT_NE(table.find("fifo"), std::string::npos);
  EXPECT_NE(table.find("backfill"), std::string::npos);
  EXPECT_NE(table.find("wait p95"), std::string::npos);
  EXPECT_NE(table.find("SLO q1"), std::string::npos);
  EXPECT_NE(table.find("conservation"), std::string::npos);
  // FIFO waits 0, 90, 130, 120 (mean 85 s); backfill 0, 90, 0, 120 (mean 52.5 s).
  EXPECT_NE(table.find("backfill against fifo: mean wait 1m 25s -> 52.5s (-38.2%)"), std::string::npos) << table;
}

TEST(ReportTest, JsonCarriesEveryRun) {
  auto doc = nlohmann::json::parse(RenderJson(TwoRuns()));
  ASSERT_EQ(doc["runs"].size(), 2U);
  EXPECT_EQ(doc["runs"][0]["policy"], "fifo");
  EXPECT_EQ(doc["runs"][1]["wait"]["p95_seconds"], 120.0);
  EXPECT_EQ(doc["runs"][0]["cost"], "0.338889");
  EXPECT_EQ(doc["runs"][0]["queues"][0]["name"], "q1");
  EXPECT_EQ(doc["runs"][0]["conservation"], "ok");
  EXPECT_EQ(doc["differences"].size(), 1U);
}

TEST(ReportTest, CsvOutputs) {
  const auto runs = TwoRuns();
  const std::string summary = RenderSummaryCsv(runs);
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 3);
  EXPECT_EQ(summary.rfind("cluster,policy,placement,jobs", 0), 0U);
  const std::string ts = RenderTimeseriesCsv(runs);
  EXPECT_EQ(ts.rfind("run,policy,placement,pool,bin_start", 0), 0U);
  // One-hour bins from 1970-01-01T00:00Z; FIFO's 610 GPU-seconds fall in the first.
  EXPECT_NE(ts.find("0,fifo,topology,main,1970-01-01T00:00:00Z,0.169,4,0.042361,"), std::string::npos) << ts;
}

TEST(ReportTest, ParsesOutputFormats) {
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  EXPECT_FALSE(ParseOutputFormat("xml").ok());
}

}  // namespace
}  // namespace gpuledger::sim
