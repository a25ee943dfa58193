#include "agent/slurm.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;

// One line of `scontrol show job -o` as Slurm 22.05 prints it (abridged).
constexpr const char* kLine =
    "JobId=17 JobName=bert-ft UserId=priya(1001) GroupId=priya(1001) MCS_label=N/A Priority=4294901759 "
    "Nice=0 Account=nlp QOS=normal JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 "
    "BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:03 TimeLimit=UNLIMITED TimeMin=N/A "
    "SubmitTime=2026-11-30T11:00:00 EligibleTime=2026-11-30T11:00:00 Partition=gpu-a AllocNode:Sid=n1:77 "
    "NodeList=n1 BatchHost=n1 NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* "
    "TRES=cpu=1,mem=1M,node=1,billing=1,gres/gpu=2 TresPerNode=gres:gpu:2 Command=/tmp/job.sh "
    "WorkDir=/tmp StdErr=/tmp/slurm-17.out\n";

TEST(ScontrolTest, ParsesOneLineOutput) {
  auto info = ParseScontrolJob(kLine);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->job_id, "17");
  EXPECT_EQ(info->name, "bert-ft");
  EXPECT_EQ(info->user, "priya");
  EXPECT_EQ(info->account, "nlp");
  EXPECT_EQ(info->partition, "gpu-a");
  EXPECT_EQ(info->state, "RUNNING");
  EXPECT_EQ(info->gpus, 2);
  EXPECT_THAT(ParseScontrolJob("slurm_load_jobs error: Invalid job id specified").status().message(),
              HasSubstr("no JobId"));
}

// A Slurm job labels itself through its comment, for intervention exemptions.
TEST(ScontrolTest, ACommentInTheGpuledgerFormGivesTheJobsLabels) {
  std::string line = kLine;
  line.insert(line.find(" Command="), " Comment=gpuledger:exempt=true,queue=dev");
  auto info = ParseScontrolJob(line);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->comment, "gpuledger:exempt=true,queue=dev");
  EXPECT_EQ(SlurmCommentLabels(info->comment), (JobMetadata{{"exempt", "true"}, {"queue", "dev"}}));
  EXPECT_EQ(SlurmCommentLabels("nightly run"), JobMetadata{}) << "another comment: no labels";
  EXPECT_EQ(SlurmCommentLabels(""), JobMetadata{});
  EXPECT_EQ(SlurmCommentLabels("gpuledger:novalue,=x,ok=1,(x)=2,bell=a\ab"), (JobMetadata{{"ok", "1"}}))
      << "entries the batch would refuse are left out";
  std::string many = "gpuledger:";
  for (int i = 0; i < 40; ++i) many += fmt::format("{}k{:02}=v", i ? "," : "", i);
  EXPECT_EQ(SlurmCommentLabels(many).size(), 32u);
}

TEST(ScontrolTest, CachesAnswersAndFailures) {
  ManualClock clock(1'000'000);
  int runs = 0;
  std::vector<std::string> last_argv;
  ScontrolResolver::Options options;
  options.scontrol = "/opt/slurm/bin/scontrol";
  ScontrolResolver r(clock, options, [&](const std::vector<std::string>& argv) -> Result<std::string> {
    ++runs;
    last_argv = argv;
    if (argv.back() == "17") return std::string(kLine);
    return Unavailable("scontrol exited with 1: slurm_load_jobs error: Invalid job id specified");
  });
  ASSERT_TRUE(r.Lookup("17").ok());
  EXPECT_EQ(last_argv, (std::vector<std::string>{"/opt/slurm/bin/scontrol", "show", "job", "-o", "17"}));
  ASSERT_TRUE(r.Lookup("17").ok());
  EXPECT_EQ(runs, 1);
  auto missing = r.Lookup("99");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.Lookup("99").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(runs, 2);
  clock.Advance(options.failure_ttl_ms);  // the failure expires, the answer does not
  (void)r.Lookup("99");
  (void)r.Lookup("17");
  EXPECT_EQ(runs, 3);
  clock.Advance(options.ttl_ms);
  (void)r.Lookup("17");
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(r.queries(), 4);
}

TEST(RunCommandTest, ReturnsOutputAndNamesFailures) {
  auto out = RunCommand({"/bin/echo", "hello"}, 5'000);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "hello\n");
  auto bad = RunCommand({"/bin/sh", "-c", "echo oops >&2; exit 3"}, 5'000);
  EXPECT_EQ(bad.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(bad.status().message(), HasSubstr("exited with 3: oops"));
  auto missing = RunCommand({"/nonexistent/scontrol"}, 5'000);
  EXPECT_THAT(missing.status().message(), HasSubstr("exited with 127"));
  auto slow = RunCommand({"/bin/sleep", "5"}, 200);
  EXPECT_THAT(slow.status().message(), HasSubstr("no answer within 200 ms"));
}

}  // namespace
}  // namespace gpuledger::agent
