#include "sim/trace.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "core/testing/missing_component.h"
#include "core/time.h"

namespace gpuledger::sim {
namespace {

const std::string kTestdata = std::string(GPULEDGER_SOURCE_DIR) + "/src/sim/testdata";
const std::string kTraces = std::string(GPULEDGER_SHARED_DATA_DIR) + "/traces";

TEST(TraceTest, GuessesEveryFormatFromItsHeader) {
  EXPECT_EQ(*GuessTraceFormat("timestamp,duration,num_gpus,gpu_time,cluster"), TraceFormat::kPhilly);
  EXPECT_EQ(*GuessTraceFormat("job_id,num_gpu,submit_time,iterations,model_name,duration,interval"),
            TraceFormat::kTiresias);
  EXPECT_EQ(*GuessTraceFormat("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                              "deletion_time,scheduled_time"),
            TraceFormat::kAlibaba2023);
  EXPECT_EQ(*GuessTraceFormat("instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,creation_time,"
                              "scheduled_time,deletion_time"),
            TraceFormat::kAlibaba2025);
  EXPECT_EQ(*GuessTraceFormat("job_id,submit,duration_s,gpus"), TraceFormat::kGpuledgerCsv);
  auto bad = GuessTraceFormat("a,b,c");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a,b,c"), std::string::npos);
}

TEST(TraceTest, ParsesFormatNames) {
  for (auto f : {TraceFormat::kPhilly, TraceFormat::kTiresias, TraceFormat::kAlibaba2023, TraceFormat::kAlibaba2025,
                 TraceFormat::kGpuledgerCsv}) {
    EXPECT_EQ(*ParseTraceFormat(TraceFormatName(f)), f);
  }
  EXPECT_FALSE(ParseTraceFormat("slurm").ok());
}

TEST(TraceTest, ReadsPhillyRows) {
  auto t = ReadTraceText(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\r\n"
      "2017-10-09 07:02:00,120.5,4,482.0,6214e9\n",
      "p.csv", TraceFormat::kPhilly, ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2U);
  EXPECT_EQ(t->jobs[0].submit_ms, *ParseTime("2017-10-09T07:01:55Z"));
  EXPECT_EQ(t->jobs[0].duration_ms, 66'000);
  EXPECT_EQ(t->jobs[0].queue, "11cb48");
  EXPECT_EQ(t->jobs[1].gpus, 4);
  EXPECT_EQ(t->jobs[1].duration_ms, 120'500);
  EXPECT_EQ(t->jobs[1].id, "philly-3");
}

TEST(TraceTest, MalformedLineFailsWithFileAndLine) {
  auto t = ReadTraceFile(kTestdata + "/bad_philly.csv", TraceFormat::kPhilly, ReadOptions());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("bad_philly.csv:3: column 'duration': not a number: 'abc'"), std::string::npos)
      << t.status().message();
}

TEST(TraceTest, SkipsMalformedLinesWhenAsked) {
  ReadOptions o;
  o.skip_bad_lines = true;
  auto t = ReadTraceFile(kTestdata + "/bad_philly.csv", TraceFormat::kPhilly, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->jobs.size(), 2U);
  EXPECT_EQ(t->skipped_bad_lines, 3U);
  ASSERT_EQ(t->errors.size(), 3U);
  EXPECT_NE(t->errors[0].find("bad_philly.csv:3:"), std::string::npos);
  EXPECT_NE(t->errors[1].find("bad_philly.csv:4: expected 5 fields, found 4"), std::string::npos) << t->errors[1];
  EXPECT_NE(t->errors[2].find("bad_philly.csv:5: column 'timestamp'"), std::string::npos) << t->errors[2];
}

TEST(TraceTest, MissingColumnNamesTheColumn) {
  auto t = ReadTraceText("timestamp,duration,cluster\n", "x.csv", TraceFormat::kPhilly, ReadOptions());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("x.csv:1: header lacks column 'num_gpus'"), std::string::npos);
}

TEST(TraceTest, ReadsOurOwnFormat) {
  auto t = ReadTraceFileGuessing(kTestdata + "/small.csv", ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 4U);
  const auto& j = t->jobs;
  EXPECT_EQ(j[0].gpus, 2);
  EXPECT_FLOAT_EQ(j[0].activity_ratio, 0.5F);
  EXPECT_EQ(j[0].kind, JobKind::kTraining);
  EXPECT_EQ(j[1].gpus, 0);
  EXPECT_EQ(j[1].share_ticks, 210);  // a quarter of 840
  EXPECT_EQ(j[1].priority, 1);
  EXPECT_EQ(j[1].kind, JobKind::kNotebook);
  EXPECT_EQ(j[2].submit_ms, 30'000);
  EXPECT_EQ(j[3].share_ticks, 360);  // 3g = 3/7
  EXPECT_LT(j[2].activity_ratio, 0);
}

TEST(TraceTest, OurFormatTakesRfc3339SubmitTimes) {
  auto t = ReadTraceText("job_id,submit,duration_s,gpus\na,2026-11-23T08:00:00Z,30,1\n", "t.csv",
                         TraceFormat::kGpuledgerCsv, ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->jobs[0].submit_ms, *ParseTime("2026-11-23T08:00:00Z"));
  t = ReadTraceText("job_id,submit,duration_s,gpus\na,2026-13-23T08:00:00Z,30,1\n", "t.csv",
                    TraceFormat::kGpuledgerCsv, ReadOptions());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("t.csv:2: column 'submit'"), std::string::npos) << t.status().message();
}

TEST(TraceTest, OurFormatRejectsBadValues) {
  const std::string header = "job_id,submit,duration_s,gpus\n";
  for (const char* row : {"a,0,0,1", "a,0,10,1.5", "a,x,10,1", "a,0,10,-1", ",0,10,1"}) {
    auto t = ReadTraceText(header + row + "\n", "o.csv", TraceFormat::kGpuledgerCsv, ReadOptions());
    ASSERT_FALSE(t.ok()) << row;
    EXPECT_NE(t.status().message().find("o.csv:2: "), std::string::npos) << t.status().message();
  }
}

TEST(TraceTest, ReadsAlibaba2023FractionsAndQos) {
  auto t = ReadTraceText(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "p0,12000,16384,1,1000,,LS,Running,0,100,0\n"
      "p1,6000,12288,1,460,,BE,Running,10,70,20\n"
      "p2,6000,12288,0,0,,BE,Running,10,70,20\n"
      "p3,88000,327680,8,1000,\"V100M16|V100M32\",Burstable,Succeeded,5,50,,\n",
      "a.csv", TraceFormat::kAlibaba2023, ReadOptions());
  ASSERT_FALSE(t.ok());  // p3 has one field too many
  EXPECT_NE(t.status().message().find("a.csv:5: expected 11 fields, found 12"), std::string::npos);
  t = ReadTraceText(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "p0,12000,16384,1,1000,,LS,Running,0,100,0\n"
      "p1,6000,12288,1,460,,BE,Running,10,70,20\n"
      "p2,6000,12288,0,0,,BE,Running,10,70,20\n"
      "p3,88000,327680,8,1000,\"V100M16|V100M32\",Burstable,Succeeded,5,50,\n",
      "a.csv", TraceFormat::kAlibaba2023, ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3U);
  EXPECT_EQ(t->filtered, 1U);  // the CPU-only pod
  EXPECT_EQ(t->jobs[0].gpus, 1);
  EXPECT_EQ(t->jobs[0].priority, 2);
  EXPECT_EQ(t->jobs[1].share_ticks, 387);  // ceil(460 x 840 / 1000)
  EXPECT_EQ(t->jobs[1].duration_ms, 50'000);  // deletion - scheduled
  EXPECT_EQ(t->jobs[1].submit_ms, 10'000);
  EXPECT_EQ(t->jobs[2].gpus, 8);
  EXPECT_EQ(t->jobs[2].duration_ms, 45'000);  // never scheduled: from creation
  EXPECT_EQ(t->jobs[2].queue, "Burstable");
}

TEST(TraceTest, Alibaba2025InstancesStillRunningEndWithTheTrace) {
  auto t = ReadTraceText(
      "instance_sn,role,app_name,gpu_request,creation_time,scheduled_time,deletion_time\n"
      "i0,HN,app_0,1,,,\n"
      "i1,HN,app_1,1,100.0,110.0,500.0\n"
      "i2,CN,app_1,0,100.0,110.0,500.0\n"
      "i3,HN,app_1,1,200.0,210.0,\n",
      "s.csv", TraceFormat::kAlibaba2025, ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 3U);
  EXPECT_EQ(t->filtered, 1U);
  EXPECT_EQ(t->jobs[0].submit_ms, 0);
  EXPECT_EQ(t->jobs[0].duration_ms, 500'000);
  EXPECT_EQ(t->jobs[1].duration_ms, 390'000);
  EXPECT_EQ(t->jobs[2].submit_ms, 200'000);
  EXPECT_EQ(t->jobs[2].duration_ms, 290'000);  // from its start at 210 to 500
  EXPECT_EQ(t->jobs[2].kind, JobKind::kServing);
}

TEST(TraceTest, ReadsUserAndStatusColumns) {
  const std::string csv =
      "job_id,submit,duration_s,gpus,user,status\n"
      "a,0,10,1,alice,Failed\n"
      "b,0,10,1,bob,Pass\n"
      "c,0,10,1,,killed\n";
  auto t = ReadTraceText(csv, "s.csv", TraceFormat::kGpuledgerCsv, ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->jobs[0].failed);
  EXPECT_EQ(t->jobs[0].user, "alice");
  EXPECT_FALSE(t->jobs[1].failed);
  EXPECT_FALSE(t->jobs[2].failed);  // killed by its user: a normal end
  auto bad = ReadTraceText("job_id,submit,duration_s,gpus,status\na,0,10,1,lost\n", "s.csv",
                           TraceFormat::kGpuledgerCsv, ReadOptions());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("s.csv:2: column 'status': 'lost'"), std::string::npos)
      << bad.status().message();
}

TEST(TraceTest, PhillyReadsAStatusColumnWhereItHasOne) {
  const std::string csv =
      "timestamp,duration,num_gpus,gpu_time,cluster,status,user\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48,Failed,u1\n"
      "2017-10-09 07:02:55,60.0,2,120.0,11cb48,Pass,u2\n";
  auto t = ReadTraceText(csv, "p.csv", TraceFormat::kPhilly, ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2U);
  EXPECT_TRUE(t->jobs[0].failed);
  EXPECT_EQ(t->jobs[0].user, "u1");
  EXPECT_FALSE(t->jobs[1].failed);
}

TEST(TraceTest, AnUnknownHeaderNamesTheTraceFormatFlag) {
  auto f = GuessTraceFormat("when,how_long,what");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("--trace-format"), std::string::npos) << f.status().message();
  EXPECT_EQ(f.status().message().find("--skip-bad-lines"), std::string::npos);
}

TEST(TraceTest, MigProfiles) {
  EXPECT_EQ(*MigProfileTicks("1g.18gb"), 120);
  EXPECT_EQ(*MigProfileTicks("7g.141gb"), 840);
  EXPECT_FALSE(MigProfileTicks("8g.1gb").ok());
  EXPECT_FALSE(MigProfileTicks("gpu").ok());
}

TEST(TraceTest, SyntheticTraceIsReproducible) {
  SyntheticSpec spec;
  spec.jobs = 500;
  spec.fractional_ratio = 0.3;
  Trace a = SyntheticTrace(spec, 7), b = SyntheticTrace(spec, 7), c = SyntheticTrace(spec, 8);
  ASSERT_EQ(a.jobs.size(), 500U);
  bool differs = false;
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].submit_ms, b.jobs[i].submit_ms);
    EXPECT_EQ(a.jobs[i].duration_ms, b.jobs[i].duration_ms);
    EXPECT_EQ(a.jobs[i].RequestTicks(), b.jobs[i].RequestTicks());
    differs |= a.jobs[i].duration_ms != c.jobs[i].duration_ms;
    EXPECT_GT(a.jobs[i].duration_ms, 0);
  }
  EXPECT_TRUE(differs);
}

// The shared traces: every one must read whole, without a bad line.
struct SharedTrace {
  const char* file;
  size_t min_jobs;
};
class SharedTraceTest : public ::testing::TestWithParam<SharedTrace> {};

TEST_P(SharedTraceTest, ReadsWithoutBadLines) {
  const std::string path = kTraces + "/" + GetParam().file;
  if (!std::filesystem::exists(path)) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "shared trace absent: " << path;
  }
  auto t = ReadTraceFileGuessing(path, ReadOptions());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GE(t->jobs.size(), GetParam().min_jobs);
  EXPECT_EQ(t->skipped_bad_lines, 0U);
  for (const auto& j : t->jobs) ASSERT_GT(j.duration_ms, 0) << j.id;
}

INSTANTIATE_TEST_SUITE_P(Shared, SharedTraceTest,
                         ::testing::Values(SharedTrace{"philly_pollux.csv", 82'246}, SharedTrace{"tiresias_60_job.csv", 60},
                                           SharedTrace{"alibaba_2023/openb_pod_list_default.csv", 7'000},
                                           SharedTrace{"alibaba_2023/openb_pod_list_gpushare40.csv", 1'000},
                                           SharedTrace{"alibaba_2025_dlrm_serving.csv", 7'000}));

}  // namespace
}  // namespace gpuledger::sim
