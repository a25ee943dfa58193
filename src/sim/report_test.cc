#include "sim/report.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuledger::sim {
namespace {

// backfill_easy.test's jobs: FIFO waits 0, 90, 130, 120; backfill 0, 90, 0, 120.
std::vector<SimJob> FourJobs(const std::string& queue = "q1") {
  std::vector<SimJob> jobs;
  auto add = [&](const char* id, int64_t submit_s, int64_t duration_s, int32_t gpus) {
    SimJob j;
    j.id = id;
    j.queue = queue;
    j.submit_ms = submit_s * 1000;
    j.duration_ms = duration_s * 1000;
    j.gpus = gpus;
    jobs.push_back(j);
  };
  add("a", 0, 100, 2);
  add("b", 10, 50, 4);
  add("c", 20, 10, 1);
  add("d", 30, 200, 1);
  return jobs;
}

std::vector<SimResult> TwoRuns(const std::vector<SimJob>& jobs = FourJobs()) {
  ClusterSpec cluster = UniformCluster(1, 4, Money::FromUnits(2));
  std::vector<SimResult> runs;
  for (const char* policy : {"fifo", "backfill"}) {
    auto r = Simulate(cluster, jobs, policy, SimOptions());
    EXPECT_TRUE(r.ok());
    runs.push_back(std::move(*r));
  }
  return runs;
}

// The table with each run of spaces as one: cells are padded to their column's widest.
std::string Squeezed(const std::string& table) {
  std::string out;
  for (char c : table) {
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out += c;
  }
  return out;
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
  EXPECT_NE(table.find("conservation"), std::string::npos);
  EXPECT_NE(table.find("starved (left pending)"), std::string::npos);
  EXPECT_NE(table.find("durations known"), std::string::npos);
  // Each queue: its SLO, and its wait, completion and slowdown (mean / p95).
  EXPECT_NE(table.find("q1 SLO"), std::string::npos);
  // FIFO completions 100, 140, 140, 320 (mean 175 s); slowdowns 1, 2.8, 14, 1.6.
  EXPECT_NE(Squeezed(table).find("q1 completion mean/p95 2m 55s / 5m 20s"), std::string::npos) << table;
  EXPECT_NE(table.find("q1 slowdown mean/p95"), std::string::npos);
  EXPECT_NE(table.find("4.85 / 14.00"), std::string::npos) << table;
  // FIFO waits 0, 90, 130, 120 (mean 85 s); backfill 0, 90, 0, 120 (mean 52.5 s).
  EXPECT_NE(table.find("backfill against fifo: mean wait 1m 25s -> 52.5s (-38.2%)"), std::string::npos) << table;
}

// An SLO row says what it was held to, not only "MISSED".
TEST(ReportTest, SloRowsStateTheirTarget) {
  EXPECT_EQ(SloLabel(10 * 60'000), "SLO (GPUs started within 10m)");
  EXPECT_EQ(SloLabel(90'000), "SLO (GPUs started within 1m 30s)");
  EXPECT_EQ(SloText(2.0 / 3.0, 0.95, false), "66.7%, target 95%: MISSED");
  EXPECT_EQ(SloText(1.0, 0.9, true), "100.0%, target 90%: met");
  // FIFO grants a, c and d within 10 min and b at 90 s: every GPU in time (the default SLO).
  const std::string table = RenderTable(TwoRuns());
  EXPECT_NE(Squeezed(table).find("q1 SLO (GPUs started within 10m) 100.0%, target 95%: met 100.0%, target 95%: met\n"),
            std::string::npos)
      << table;
}

TEST(ReportTest, JsonCarriesEveryRun) {
  auto doc = nlohmann::json::parse(RenderJson(TwoRuns()));
  ASSERT_EQ(doc["runs"].size(), 2U);
  EXPECT_EQ(doc["runs"][0]["policy"], "fifo");
  EXPECT_EQ(doc["runs"][1]["wait"]["p95_seconds"], 120.0);
  EXPECT_EQ(doc["runs"][0]["cost"], "0.338889");
  EXPECT_EQ(doc["runs"][0]["queues"][0]["name"], "q1");
  EXPECT_EQ(doc["runs"][0]["queues"][0]["completion"]["mean_seconds"], 175.0);
  EXPECT_EQ(doc["runs"][0]["queues"][0]["slowdown"]["p95"], 14.0);
  EXPECT_EQ(doc["runs"][0]["durations"], nullptr);
  EXPECT_EQ(doc["runs"][1]["durations"], "oracle");
  EXPECT_EQ(doc["runs"][0]["conservation"], "ok");
  EXPECT_EQ(doc["differences"].size(), 1U);
}

TEST(ReportTest, CsvOutputs) {
  const auto runs = TwoRuns();
  const std::string summary = RenderSummaryCsv(runs);
  // The header, then per run its row and one per queue.
  EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 5);
  EXPECT_EQ(summary.rfind("scope,cluster,policy,durations,placement,queue,jobs,completed,failed,restarts,"
                          "unschedulable,starved,",
                          0),
            0U);
  EXPECT_NE(summary.find("\nqueue,1x4,fifo,,topology,q1,4,"), std::string::npos) << summary;
  // Every field goes through the one CSV writer: a queue named with a comma is quoted.
  const std::string quoted = RenderSummaryCsv(TwoRuns(FourJobs("ml, research")));
  EXPECT_NE(quoted.find(",\"ml, research\",4,"), std::string::npos) << quoted;
  const std::string ts = RenderTimeseriesCsv(runs);
  EXPECT_EQ(ts.rfind("run,policy,placement,pool,bin_start", 0), 0U);
  // One-hour bins from 1970-01-01T00:00Z; FIFO's 610 GPU-seconds fall in the first.
  EXPECT_NE(ts.find("0,fifo,topology,main,1970-01-01T00:00:00Z,0.169,4,0.042361,"), std::string::npos) << ts;
}

TEST(ReportTest, PerJobOutcomesInCsvAndNdjson) {
  const auto jobs = FourJobs();
  const auto runs = TwoRuns();
  const std::string csv = RenderJobsCsv(jobs, runs);
  EXPECT_EQ(csv.rfind("run,cluster,policy,placement,job_id,queue,gpus,submit,start,end,wait_s,completion_s,slowdown,"
                      "preemptions,restarts,status,pool,nodes\n",
                      0),
            0U);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 9);  // header + 4 jobs x 2 runs
  // Under FIFO c waits for b: submitted at 20, runs 150-160.
  EXPECT_NE(csv.find("fifo,1x4,fifo,topology,c,q1,1,1970-01-01T00:00:20Z,1970-01-01T00:02:30Z,"
                     "1970-01-01T00:02:40Z,130.000,140.000,14.0000,0,0,completed,main,0\n"),
            std::string::npos)
      << csv;
  const std::string nd = RenderJobsNdjson(jobs, runs);
  EXPECT_EQ(std::count(nd.begin(), nd.end(), '\n'), 8);
  auto first = nlohmann::json::parse(nd.substr(0, nd.find('\n')));
  EXPECT_EQ(first["job_id"], "a");
  EXPECT_EQ(first["wait_s"], 0.0);
  EXPECT_EQ(first["status"], "completed");
  EXPECT_EQ(first["nodes"], "0");
}

TEST(ReportTest, ParsesOutputFormats) {
  EXPECT_EQ(*ParseOutputFormat("json"), OutputFormat::kJson);
  EXPECT_FALSE(ParseOutputFormat("xml").ok());
}

}  // namespace
}  // namespace gpuledger::sim
