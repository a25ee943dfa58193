#include "sim/simulate_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

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
  o.output = "json";
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
  LedgerJobLoader loader = [&](int64_t window_ms) -> Result<std::vector<Job>> {
    asked_window = window_ms;
    std::vector<Job> jobs(2);
    jobs[0].id = "j0";
    jobs[0].team = "vision";
    jobs[0].requested_gpus = 2;
    jobs[0].start_ms = 0;
    jobs[0].end_ms = 3'600'000;
    jobs[1].id = "j1";
    jobs[1].team = "nlp";
    jobs[1].requested_gpus = 1;
    jobs[1].start_ms = 60'000;
    jobs[1].end_ms = 120'000;
    return jobs;
  };
  SimulateOptions o;
  o.gpus = 8;
  o.from_ledger = true;
  o.window = "7d";
  o.output = "csv";
  std::ostringstream out, err;
  Status st = RunSimulate(o, loader, out, err, false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(asked_window, 7 * 86'400'000LL);
  EXPECT_NE(out.str().find(",fifo,topology,2,2,0,"), std::string::npos) << out.str();
  EXPECT_FALSE(RunSimulate(o, {}, out, err, false).ok());  // no loader wired
}

TEST(SimulateCommandTest, RegistersTheSubcommand) {
  CLI::App app("gpuledger");
  AddSimulateCommand(app, [](int64_t) -> Result<std::vector<Job>> { return std::vector<Job>(); });
  CLI::App* sim = app.get_subcommand("simulate");
  ASSERT_NE(sim, nullptr);
  for (const char* flag : {"--cluster", "--trace", "--format", "--policy", "--placement", "--seed", "--skip-bad-lines",
                           "--output", "--timeseries", "--from-ledger", "--window", "--gpus"}) {
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

}  // namespace
}  // namespace gpuledger::sim
