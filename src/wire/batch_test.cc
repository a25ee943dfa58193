#include "wire/batch.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/time.h"

namespace gpuledger::wire {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kNow = 1'795'420'800'000;  // 2026-11-23T08:00:00Z

const char* kGood = R"({
  "version": 1, "batch_id": "node-a-17", "source": "node-a", "sent_at": "2026-11-23T08:00:10Z",
  "devices": [
    {"uuid": "GPU-a0", "node": "node-a", "model": "NVIDIA H200", "memory_mib": 143771,
     "pool": "training", "capacity_type": "reserved", "sample_interval_ms": 10000},
    {"uuid": "MIG-a0-3", "node": "node-a", "model": "NVIDIA H200", "pool": "dev",
     "parent": "GPU-a0", "share": "3/7", "mig_profile": "3g.71gb"}
  ],
  "jobs": [{"id": "j1", "team": "vision", "project": "detr", "experiment": "lr-sweep-3",
            "user": "ana", "kind": "training", "pool": "training", "priority": 5,
            "requested_gpus": 8, "submit": "2026-11-23T07:00:00Z", "start": 1795417200000}],
  "allocations": [{"device": "GPU-a0", "job": "j1", "from": "2026-11-23T07:00:00Z"}],
  "samples": [
    {"device": "GPU-a0", "t": 1795420790000, "sm_active": 0.71, "sm_occupancy": 0.4,
     "tensor_active": 0.3, "dram_active": 0.2, "gpu_util": 1, "fb_used_mib": 70000,
     "power_watts": 512.5},
    {"device": "GPU-a0", "t": "2026-11-23T08:00:00Z", "gpu_util": 0.5, "health": "degraded",
     "process_count": 1, "gaps": {"interval_ms": 10000, "idle_ms": 5000, "short_idle_ms": 3000},
     "processes": [{"pid": 4242, "job": "j1", "fb_used_mib": 69000, "sm_share": 0.5}]}
  ]
})";

TEST(BatchTest, ParsesAFullDocument) {
  auto b = ParseBatch(kGood);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->batch_id, "node-a-17");
  ASSERT_EQ(b->devices.size(), 2u);
  EXPECT_EQ(b->devices[1].share, (Share{3, 7}));
  EXPECT_EQ(b->devices[1].parent_uuid, "GPU-a0");
  EXPECT_EQ(b->devices[0].capacity_type, CapacityType::kReserved);
  ASSERT_EQ(b->jobs.size(), 1u);
  EXPECT_EQ(b->jobs[0].kind, JobKind::kTraining);
  EXPECT_EQ(*b->jobs[0].start_ms, 1795417200000);
  EXPECT_FALSE(b->allocations[0].to_ms.has_value());
  ASSERT_EQ(b->samples.size(), 2u);
  EXPECT_DOUBLE_EQ(*b->samples[0].sm_active, 0.71);
  EXPECT_EQ(b->samples[1].t_ms, kNow);
  EXPECT_EQ(b->samples[1].activity_source(), ActivitySource::kGpuUtil);
  EXPECT_EQ(b->samples[1].health, Health::kDegraded);
  EXPECT_EQ(b->samples[1].processes[0].pid, 4242);
  EXPECT_EQ(b->samples[1].process_count, 1);
  ASSERT_TRUE(b->samples[1].gaps.has_value());
  EXPECT_EQ(b->samples[1].gaps->short_idle_ms, 3000);
  EXPECT_TRUE(ValidateBatch(*b, kNow).ok());
}

TEST(BatchTest, WriteThenParseRoundTrips) {
  auto b = ParseBatch(kGood);
  ASSERT_TRUE(b.ok());
  std::string text = WriteBatch(*b);
  auto again = ParseBatch(text);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << text;
  EXPECT_EQ(WriteBatch(*again), text);
  EXPECT_EQ(again->samples[0].power_watts, b->samples[0].power_watts);
}

struct BadCase {
  const char* name;
  std::string json;
  const char* expected;  // a substring of the error
};

std::string WithSample(const std::string& sample) {
  return R"({"version":1,"batch_id":"b-9","devices":[{"uuid":"GPU-1"}],"samples":[)" + sample +
         "]}";
}

TEST(BatchTest, BadInputGetsAnErrorNamingBatchAndField) {
  std::vector<BadCase> cases = {
      {"malformed", R"({"version":1,"batch_id":"b-9",)", "malformed JSON"},
      {"not an object", "[1,2]", "must be an object"},
      {"no id", R"({"version":1})", "batch_id: missing"},
      {"unknown version", R"({"version":2,"batch_id":"b-9"})",
       "batch b-9: version: unsupported version 2"},
      {"unknown field", R"({"version":1,"batch_id":"b-9","smaples":[]})",
       "batch b-9: smaples: unknown field"},
      {"negative ratio", WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":-0.1})"),
       "batch b-9: samples[0].sm_active: must be within 0..1"},
      {"ratio above one", WithSample(R"({"device":"GPU-1","t":1795420800000,"gpu_util":100})"),
       "samples[0].gpu_util: must be within 0..1"},
      {"negative power",
       WithSample(R"({"device":"GPU-1","t":1795420800000,"gpu_util":1,"power_watts":-3})"),
       "samples[0].power_watts"},
      {"string figure", WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":"NaN"})"),
       "samples[0].sm_active: must be a number"},
      {"seconds not ms", WithSample(R"({"device":"GPU-1","t":1795420800,"sm_active":0.1})"),
       "samples[0].t: 1795420800 is not a plausible time"},
      {"time text out of range",
       R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","submit":"4052-11-23T07:41:00Z"}]})",
       "jobs[0].submit: 4052-11-23T07:41:00Z is outside 2000..2200"},
      {"bad time text", WithSample(R"({"device":"GPU-1","t":"yesterday","sm_active":0.1})"),
       "samples[0].t: time \"yesterday\""},
      {"missing device", WithSample(R"({"t":1795420800000,"sm_active":0.1})"),
       "samples[0].device: missing"},
      {"control char in id",
       R"({"version":1,"batch_id":"b-9","jobs":[{"id":"a\nb"}]})", "jobs[0].id: contains a control"},
      {"bad kind", R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","kind":"fun"}]})",
       "jobs[0].kind"},
      {"bad share",
       R"({"version":1,"batch_id":"b-9","devices":[{"uuid":"M","parent":"G","share":"8/7"}]})",
       "devices[0].share"},
      {"mig without share", R"({"version":1,"batch_id":"b-9","devices":[{"uuid":"M","parent":"G"}]})",
       "devices[0]: a MIG instance needs"},
      {"gaps longer than their interval",
       WithSample(R"({"device":"GPU-1","t":1795420800000,"gpu_util":1,"gaps":{"interval_ms":1000,"idle_ms":2000}})"),
       "samples[0].gaps.idle_ms: longer than interval_ms"},
      {"gaps without an interval",
       WithSample(R"({"device":"GPU-1","t":1795420800000,"gpu_util":1,"gaps":{"idle_ms":2}})"),
       "samples[0].gaps.interval_ms: missing"},
      {"label value not a string",
       R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","labels":{"gpuledger.io/exempt":true}}]})",
       "jobs[0].labels[\"gpuledger.io/exempt\"]: must be a string"},
      {"labels not an object", R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","labels":["a"]}]})",
       "jobs[0].labels: must be an object"},
      {"control char in a label value",
       R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","labels":{"team":"a\u0007b"}}]})",
       "jobs[0].labels[\"team\"]: contains a control character"},
      {"control char in an annotation key",
       R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","annotations":{"a\tb":"x"}}]})",
       "jobs[0].annotations: a key contains a control character"},
      {"label declared twice",
       R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","labels":{"a":"1","a":"2"}}]})",
       "jobs[0].labels[\"a\"]: declared twice"},
      {"bad process", WithSample(R"({"device":"GPU-1","t":1795420800000,"gpu_util":1,"processes":[{"job":"x"}]})"),
       "samples[0].processes[0].pid: missing"},
  };
  for (const auto& c : cases) {
    auto r = ParseBatch(c.json);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.name;
  }
}

TEST(BatchTest, NanAndInfinityAreNotJson) {
  auto r = ParseBatch(WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":NaN})"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("malformed JSON"));
}

TEST(BatchTest, ValidationNamesTheProblem) {
  auto check = [](const std::string& json, const char* expected) {
    auto b = ParseBatch(json);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    Status st = ValidateBatch(*b, kNow);
    ASSERT_FALSE(st.ok()) << json;
    EXPECT_THAT(st.message(), HasSubstr(expected));
  };
  check(WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":0.1},
                      {"device":"GPU-1","t":1795420790000,"sm_active":0.1})"),
        "batch b-9: samples[1].t: time goes backwards for device GPU-1");
  check(WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":0.1},
                      {"device":"GPU-1","t":1795420800000,"sm_active":0.2})"),
        "samples[1].t: duplicate sample for device GPU-1");
  check(WithSample(R"({"device":"GPU-1","t":1795424400000,"sm_active":0.1})"),
        "samples[0].t: 2026-11-23T09:00:00Z is in the future");
  check(WithSample(R"({"device":"GPU-1","t":1795420800000})"), "needs an activity figure");
  check(R"({"version":1,"batch_id":"b-9","allocations":[{"device":"G","job":"j","from":1795420800000,"to":1795420800000}]})",
        "allocations[0].to: must be after");
  check(R"({"version":1,"batch_id":"b-9","devices":[{"uuid":"G"},{"uuid":"G"}]})",
        "devices[1].uuid: declared twice");
}

TEST(BatchTest, LimitsAreEnforced) {
  BatchLimits limits;
  limits.max_samples = 1;
  auto r = ParseBatch(WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":0.1},
                                   {"device":"GPU-1","t":1795420810000,"sm_active":0.1})"),
                      limits);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("samples: more than 1 entries"));
}

TEST(BatchTest, DigestDiffersForDifferentContent) {
  auto a = ParseBatch(WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":0.1})"));
  auto b = ParseBatch(WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":0.2})"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->content_digest, b->content_digest);
}

// Negative zero, however it is spelled, is read as 0: written back as "-0" it would be
// read the second time as the integer 0, so the canonical form (and the digest that
// makes a retry idempotent) would depend on how often the batch was re-serialized.
TEST(BatchTest, NegativeZeroReadsAsZero) {
  auto zero = ParseBatch(WithSample(R"({"device":"GPU-1","t":1795420800000,"sm_active":0})"));
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  for (const char* spelling : {"-0.0", "-0e5", "-1e-400", "-0"}) {
    auto b = ParseBatch(WithSample(fmt::format(R"({{"device":"GPU-1","t":1795420800000,"sm_active":{}}})", spelling)));
    ASSERT_TRUE(b.ok()) << spelling << ": " << b.status().message();
    ASSERT_TRUE(b->samples[0].sm_active.has_value());
    EXPECT_FALSE(std::signbit(*b->samples[0].sm_active)) << spelling;
    EXPECT_EQ(b->content_digest, zero->content_digest) << spelling;
    auto again = ParseBatch(WriteBatch(*b));
    ASSERT_TRUE(again.ok()) << spelling;
    EXPECT_EQ(WriteBatch(*again), WriteBatch(*b)) << spelling;
  }
}

// A job's labels and annotations travel as JSON objects of strings; an empty object is
// kept apart from an absent one (the job has none now, against "says nothing").
TEST(BatchTest, JobLabelsAndAnnotationsRoundTrip) {
  auto b = ParseBatch(R"({"version":1,"batch_id":"b-1","jobs":[
      {"id":"nb-7","labels":{"gpuledger.io/exempt":"true","app":"jupyter"},"annotations":{}},
      {"id":"nb-8"}]})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->jobs[0].labels, (JobMetadata{{"app", "jupyter"}, {"gpuledger.io/exempt", "true"}}));
  EXPECT_EQ(b->jobs[0].annotations, JobMetadata{});
  EXPECT_FALSE(b->jobs[1].labels.has_value());
  EXPECT_FALSE(b->jobs[1].annotations.has_value());
  std::string text = WriteBatch(*b);
  EXPECT_THAT(text, HasSubstr(R"("labels":{"app":"jupyter","gpuledger.io/exempt":"true"},"annotations":{})"));
  auto again = ParseBatch(text);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->jobs[0].labels, b->jobs[0].labels);
  EXPECT_EQ(again->jobs[0].annotations, b->jobs[0].annotations);
  EXPECT_FALSE(again->jobs[1].labels.has_value());
}

// Hostile sizes are refused while parsing, before anything is built of them.
TEST(BatchTest, HostileLabelsAreRefusedNamingTheField) {
  std::string many = R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","labels":{)";
  for (int i = 0; i < 100; ++i) many += fmt::format("{}\"l{}\":\"v\"", i ? "," : "", i);
  many += "}}]}";
  auto r = ParseBatch(many);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("batch b-9: jobs[0].labels: more than 32 entries"));

  std::string huge = R"({"version":1,"batch_id":"b-9","jobs":[{"id":"j","annotations":{"note":")" +
                     std::string(1 << 20, 'a') + R"("}}]})";
  r = ParseBatch(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("batch b-9: jobs[0].annotations[\"note\"]: longer than 256 bytes"));
}

}  // namespace
}  // namespace gpuledger::wire
