#include "sim/simulate_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/trace.h"

namespace gpuledger::sim {
namespace {

const std::string kTestdata = std::string(GPULEDGER_SOURCE_DIR) + "/src/sim/testdata";

TEST(SimulateCommandTest, ComparesPoliciesOnOurOwnTrace) {
  SimulateOptions o;
  o.clusters = {kTestdata + "/shared_pool.toml"};
  o.trace = kTestdata + "/small.csv";
  o.policies = {"fifo", "fair-share"};
  std::ostringstream out, err;
  Status st = RunSimulate(o, {}, out, err, false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(out.str().find("fair-share against fifo"), std::string::npos) << out.str();
  EXPECT_TRUE(err.str().empty()) << err.str();
}

TEST(SimulateCommandTest, WritesJsonAndTimeSeries) {
  SimulateOptions o;
  o.gpus = 64;
  o.trace = "synthetic:300";
  o.policies = {"fifo", "sjf"};
  o.placements = {"topology", "spread"};
  o.report_format = "json";
  const auto ts = std::filesystem::temp_directory_path() / "gpuledger_sim_command_test_ts.csv";
  o.timeseries_path = ts.string();
  std::ostringstream out, err;
  Status st = RunSimulate(o, {}, out, err, false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(out.str().find("\"runs\""), std::string::npos);
  std::ifstream in(ts);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header.rfind("run,policy", 0), 0U);
  std::filesystem::remove(ts);
}

TEST(SimulateCommandTest, MalformedTraceFailsUnlessSkipping) {
  SimulateOptions o;
  o.gpus = 8;
  o.trace = kTestdata + "/bad_philly.csv";
  std::ostringstream out, err;
  Status st = RunSimulate(o, {}, out, err, false);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bad_philly.csv:3:"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--skip-bad-lines"), std::string::npos);
  o.skip_bad_lines = true;
  st = RunSimulate(o, {}, out, err, false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(err.str().find("skipped 3 malformed lines"), std::string::npos) << err.str();
}

TEST(SimulateCommandTest, DrawsAProgressBarWhenAsked) {
  SimulateOptions o;
  o.gpus = 64;
  o.trace = "synthetic:200000";
  std::ostringstream out, err;
  ASSERT_TRUE(RunSimulate(o, {}, out, err, true).ok());
  EXPECT_NE(err.str().find("fifo topology"), std::string::npos);
  EXPECT_NE(err.str().find("100%"), std::string::npos);
  EXPECT_NE(err.str().find("\r\033[K"), std::string::npos);  // erased at the end
  std::ostringstream quiet;
  ASSERT_TRUE(RunSimulate(o, {}, out, quiet, false).ok());
  EXPECT_TRUE(quiet.str().empty());
}

TEST(SimulateCommandTest, UnknownNamesFail) {
  SimulateOptions o;
  o.gpus = 8;
  o.trace = "synthetic:10";
  std::ostringstream out, err;
  o.policies = {"lottery"};
  EXPECT_FALSE(RunSimulate(o, {}, out, err, false).ok());
  o.policies = {"fifo"};
  o.placements = {"random"};
  EXPECT_FALSE(RunSimulate(o, {}, out, err, false).ok());
  o.placements = {"topology"};
  o.trace = "synthetic:x";
  EXPECT_FALSE(RunSimulate(o, {}, out, err, false).ok());
  o.trace = kTestdata + "/no-such-file.csv";
  EXPECT_EQ(RunSimulate(o, {}, out, err, false).code(), StatusCode::kNotFound);
}

TEST(SimulateCommandTest, ReplaysTheLedgerThroughTheLoader) {
  int64_t asked_window = 0;
  LedgerWorkloadLoader loader = [&](int64_t window_ms) -> Result<Workload> {
    asked_window = window_ms;
    Workload w;
    w.jobs.resize(2);
    w.jobs[0].id = "j0";
    w.jobs[0].team = "vision";
    w.jobs[0].gpus = 2;
    w.jobs[0].start_ms = 0;
    w.jobs[0].end_ms = 3'600'000;
    w.jobs[1].id = "j1";
    w.jobs[1].team = "nlp";
    w.jobs[1].gpus = 1;
    w.jobs[1].start_ms = 60'000;
    w.jobs[1].submit_ms = 60'000;
    w.jobs[1].end_ms = 120'000;
    w.left_out = 1;
    return w;
  };
  SimulateOptions o;
  o.gpus = 8;
  o.from_ledger = true;
  o.window = "7d";
  o.report_format = "csv";
  std::ostringstream out, err;
  Status st = RunSimulate(o, loader, out, err, false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(asked_window, 7 * 86'400'000LL);
  EXPECT_NE(out.str().find("run,1x8,fifo,,topology,,2,2,0,"), std::string::npos) << out.str();
  EXPECT_NE(err.str().find("1 recorded jobs lack"), std::string::npos) << err.str();
  EXPECT_FALSE(RunSimulate(o, {}, out, err, false).ok());  // no loader wired
}

TEST(SimulateCommandTest, GpusBuildsExactlyWhatWasAskedOrRefuses) {
  auto c = PlainCluster(2504, 8);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->TotalGpus(), 2504);
  // 2,500 is not a whole number of 8-GPU nodes: refused, naming the sizes that work
  // (it used to build 2,504 silently).
  auto bad = PlainCluster(2500, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("give --gpus 2496 or 2504"), std::string::npos) << bad.status().message();
  auto fours = PlainCluster(2500, 4);
  ASSERT_TRUE(fours.ok());
  EXPECT_EQ(fours->TotalGpus(), 2500);
  // At most one node: one node of exactly that many; a large single node is allowed.
  EXPECT_EQ(PlainCluster(3, 8)->TotalGpus(), 3);
  auto one = PlainCluster(6500, 6500);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->pools[0].nodes, 1);
  EXPECT_EQ(one->pools[0].gpus_per_node, 6500);
  EXPECT_FALSE(PlainCluster(kMaxPoolGpus + 8, 8).ok());
  EXPECT_FALSE(PlainCluster(0, 8).ok());
}

TEST(SimulateCommandTest, JobsLeftPendingWithGpusFreeFailTheRunUnlessAllowed) {
  const auto dir = std::filesystem::temp_directory_path() / "gpuledger_sim_starved_test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream c(dir / "c.toml");
    c << "[[pool]]\nname = \"main\"\nnodes = 1\ngpus_per_node = 4\n\n[[queue]]\nname = \"q\"\nmax_gpus = 1\n";
    std::ofstream t(dir / "t.csv");
    t << "job_id,submit,duration_s,gpus,queue\nsmall,0,10,1,q\nwide,0,10,2,q\n";
  }
  SimulateOptions o;
  o.clusters = {(dir / "c.toml").string()};
  o.trace = (dir / "t.csv").string();
  o.policies = {"fair-share"};
  std::ostringstream out, err;
  Status st = RunSimulate(o, {}, out, err, false);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("--allow-starved"), std::string::npos);
  EXPECT_NE(err.str().find("warning: run fair-share@cluster: 1 of 2 jobs never finished"), std::string::npos)
      << err.str();
  o.allow_starved = true;
  std::ostringstream err2;
  EXPECT_TRUE(RunSimulate(o, {}, out, err2, false).ok());
  EXPECT_NE(err2.str().find("warning:"), std::string::npos);  // still warned
  std::filesystem::remove_all(dir);
}

TEST(SimulateCommandTest, AnUnreadableHeaderDoesNotSuggestSkippingLines) {
  const auto path = std::filesystem::temp_directory_path() / "gpuledger_sim_header_test.csv";
  {
    std::ofstream f(path);
    f << "when,how_long\n1,2\n";
  }
  SimulateOptions o;
  o.gpus = 8;
  o.trace = path.string();
  std::ostringstream out, err;
  Status st = RunSimulate(o, {}, out, err, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find("--skip-bad-lines"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("--trace-format"), std::string::npos) << st.message();
  std::filesystem::remove(path);
}

TEST(SimulateCommandTest, WritesPerJobOutcomes) {
  const auto path = std::filesystem::temp_directory_path() / "gpuledger_sim_jobs_test.ndjson";
  SimulateOptions o;
  o.clusters = {kTestdata + "/shared_pool.toml"};
  o.trace = kTestdata + "/small.csv";
  o.policies = {"fifo", "firstfit"};
  o.jobs_out_path = path.string();
  std::ostringstream out, err;
  Status st = RunSimulate(o, {}, out, err, false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::ifstream in(path);
  std::string line;
  size_t lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    EXPECT_EQ(line.front(), '{') << line;  // NDJSON, from the extension
  }
  auto small = ReadTraceFileGuessing(kTestdata + "/small.csv", ReadOptions());
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(lines, 2 * small->jobs.size());
  o.jobs_format = "xml";
  EXPECT_FALSE(RunSimulate(o, {}, out, err, false).ok());
  std::filesystem::remove(path);
}

TEST(SimulateCommandTest, RegistersTheSubcommand) {
  CLI::App app("gpuledger");
  AddSimulateCommand(app, [](int64_t) -> Result<Workload> { return Workload(); });
  CLI::App* sim = app.get_subcommand("simulate");
  ASSERT_NE(sim, nullptr);
  // The old names --format and --output stay as aliases for one release.
  for (const char* flag : {"--cluster", "--trace", "--trace-format", "--format", "--policy", "--placement", "--seed",
                           "--skip-bad-lines", "--report-format", "--output", "--timeseries", "--from-ledger",
                           "--window", "--gpus", "--gpus-per-node", "--jobs-out", "--jobs-format", "--estimate",
                           "--failure-rate", "--max-restarts", "--allow-starved"}) {
    EXPECT_NO_THROW(sim->get_option(flag)) << flag;
  }
  const std::string help = sim->help();
  EXPECT_NE(help.find("fair-share"), std::string::npos);
  // Parsing runs the command: a bad policy exits with status 1.
  ::testing::internal::CaptureStderr();
  EXPECT_THROW(app.parse("simulate --gpus 8 --trace synthetic:5 --policy nope", false), CLI::RuntimeError);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("error: invalid argument: unknown policy 'nope'"),
            std::string::npos);
}

// Two jobs on one 2-GPU pool; the second waits an hour for the first.
Workload TwoJobWorkload() {
  Workload w;
  w.window = {0, 2 * 3'600'000};
  w.pools.push_back({"main", "GPU", 2, Money::FromUnits(2)});
  for (int i = 0; i < 2; ++i) {
    RecordedJob j;
    j.id = "j" + std::to_string(i);
    j.team = i == 0 ? "vision" : "nlp";
    j.pool = "main";
    j.gpus = 2;
    j.submit_ms = 0;
    j.start_ms = i * 3'600'000;
    j.end_ms = j.start_ms + 3'600'000;
    j.price_per_gpu_hour = Money::FromUnits(2);
    w.jobs.push_back(j);
  }
  return w;
}

TEST(WhatIfCommandTest, AnswersFromTheLoaderAndRefusesBadOptions) {
  int64_t asked = 0;
  LedgerWorkloadLoader loader = [&](int64_t window_ms) -> Result<Workload> {
    asked = window_ms;
    return TwoJobWorkload();
  };
  WhatIfCommandOptions o;
  o.window = "7d";
  o.questions = {"fleet"};
  o.report_format = "json";
  std::ostringstream out;
  Status st = RunWhatIf(o, loader, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(asked, 7 * 86'400'000LL);
  auto doc = nlohmann::json::parse(out.str());
  ASSERT_EQ(doc["answers"].size(), 1U);
  // The second job waits an hour: meeting the SLO takes 4 GPUs, 8.00 an hour for 2 h.
  EXPECT_EQ(doc["answers"][0]["scenarios"][1]["gpus"], 4);
  EXPECT_EQ(doc["answers"][0]["scenarios"][1]["fleet_cost"], "16.000000");
  std::ostringstream ignored;
  o.questions = {"weather"};
  EXPECT_EQ(RunWhatIf(o, loader, ignored).code(), StatusCode::kInvalidArgument);
  o.questions = {"fleet"};
  o.slo_target_ratio = 0;
  EXPECT_EQ(RunWhatIf(o, loader, ignored).code(), StatusCode::kInvalidArgument);
  o.slo_target_ratio = 0.95;
  o.report_format = "xml";
  EXPECT_EQ(RunWhatIf(o, loader, ignored).code(), StatusCode::kInvalidArgument);
  o.report_format = "table";
  EXPECT_EQ(RunWhatIf(o, {}, ignored).code(), StatusCode::kFailedPrecondition);
  CLI::App app("gpuledger");
  AddWhatIfCommand(app, loader);
  CLI::App* cmd = app.get_subcommand("whatif");
  for (const char* flag : {"--window", "--question", "--policy", "--slo-wait", "--slo-target", "--report-format"}) {
    EXPECT_NO_THROW(cmd->get_option(flag)) << flag;
  }
}

TEST(SimulateCommandTest, OldFlagNamesStillWork) {
  CLI::App app("gpuledger");
  AddSimulateCommand(app);
  ::testing::internal::CaptureStdout();
  EXPECT_NO_THROW(app.parse("simulate --gpus 8 --trace synthetic:5 --output json", false));
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("\"runs\""), std::string::npos);
}

}  // namespace
}  // namespace gpuledger::sim
