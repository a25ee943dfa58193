// ValidateBatch on batches built in memory, as the dcgm-exporter mapping, the scrapes
// and the demo build them: what the v1 parser refuses in text is refused here too, with
// the field named the way the format spells it.
#include "core/batch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace gpuledger {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kNow = 1'795'392'000'000;  // 2026-11-23T00:00:00Z

// A batch every check passes: one GPU with a job, two samples, a process and a progress
// report.
Batch GoodBatch() {
  Batch b;
  b.batch_id = "n1-7";
  Device d;
  d.uuid = "GPU-1";
  d.node = "n1";
  d.model = "NVIDIA H200";
  d.memory_mib = 143'771;
  d.sample_interval_ms = 10'000;
  b.devices.push_back(d);
  Job j;
  j.id = "4711";
  j.team = "nlp";
  b.jobs.push_back(j);
  b.allocations.push_back({"GPU-1", "4711", kNow - 60'000, std::nullopt});
  for (int64_t t : {kNow - 20'000, kNow - 10'000}) {
    Sample s;
    s.device_uuid = "GPU-1";
    s.t_ms = t;
    s.sm_active = 0.5;
    s.gpu_util = 0.9;
    s.fb_used_mib = 4096;
    s.power_watts = 300;
    s.processes.push_back({48121, "4711", 4000, 0.5});
    s.gaps = IdleGaps{10'000, 2'000, 1'000};
    b.samples.push_back(s);
  }
  b.progress.push_back({"4711", kNow - 10'000, 10'000, 1e6, std::nullopt});
  return b;
}

TEST(ValidateBatchTest, AcceptsAWellFormedBatch) {
  Status st = ValidateBatch(GoodBatch(), kNow);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

struct BadCase {
  std::string name;
  std::function<void(Batch&)> spoil;
  std::string message;  // what the refusal must say, field first
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class ValidateBatchRefusesTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ValidateBatchRefusesTest, NamingTheField) {
  Batch b = GoodBatch();
  GetParam().spoil(b);
  Status st = ValidateBatch(b, kNow);
  ASSERT_FALSE(st.ok()) << GetParam().name << " was accepted";
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr(GetParam().message));
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    InMemory, ValidateBatchRefusesTest,
    ::testing::Values(
        // Ids.
        BadCase{"NoBatchId", [](Batch& b) { b.batch_id.clear(); }, "batch_id: missing"},
        BadCase{"DeviceWithoutUuid", [](Batch& b) { b.devices[0].uuid.clear(); },
                "batch n1-7: devices[0].uuid: missing"},
        BadCase{"JobWithoutId", [](Batch& b) { b.jobs[0].id.clear(); },
                "batch n1-7: jobs[0].id: missing"},
        BadCase{"AllocationWithoutDevice", [](Batch& b) { b.allocations[0].device_uuid.clear(); },
                "batch n1-7: allocations[0].device: missing"},
        BadCase{"AllocationWithoutJob", [](Batch& b) { b.allocations[0].job_id.clear(); },
                "batch n1-7: allocations[0].job: missing"},
        BadCase{"SampleWithoutDevice", [](Batch& b) { b.samples[1].device_uuid.clear(); },
                "batch n1-7: samples[1].device: missing"},
        BadCase{"ProgressWithoutJob", [](Batch& b) { b.progress[0].job_id.clear(); },
                "batch n1-7: progress[0].job: missing"},
        // The ledger's own keys cannot be forged (issue: a job called "(no job)" read as
        // the fleet's unheld capacity).
        BadCase{"JobCalledNoJob", [](Batch& b) { b.jobs[0].id = "(no job)"; },
                "batch n1-7: jobs[0].id: is reserved: names in parentheses are the ledger's own"},
        BadCase{"TeamCalledUnset", [](Batch& b) { b.jobs[0].team = "(unset)"; },
                "jobs[0].team: is reserved"},
        BadCase{"PoolCalledTotal", [](Batch& b) { b.devices[0].pool = "(total)"; },
                "devices[0].pool: is reserved"},
        // Ratios.
        BadCase{"NaNActivity", [](Batch& b) { b.samples[0].sm_active = kNaN; },
                "batch n1-7: samples[0].sm_active: must be a number, not NaN"},
        BadCase{"UtilizationAboveOne", [](Batch& b) { b.samples[1].gpu_util = 1.5; },
                "batch n1-7: samples[1].gpu_util: must be within 0..1, not 1.5"},
        BadCase{"NegativeOccupancy", [](Batch& b) { b.samples[0].sm_occupancy = -0.1; },
                "samples[0].sm_occupancy: must be within 0..1"},
        BadCase{"TensorAboveOne", [](Batch& b) { b.samples[0].tensor_active = 1.01; },
                "samples[0].tensor_active: must be within 0..1"},
        BadCase{"NaNDram", [](Batch& b) { b.samples[0].dram_active = kNaN; },
                "samples[0].dram_active: must be a number"},
        BadCase{"ProcessShareAboveOne", [](Batch& b) { b.samples[0].processes[0].sm_share = 1.5; },
                "batch n1-7: samples[0].processes[0].sm_share: must be within 0..1, not 1.5"},
        // Amounts.
        BadCase{"NegativePower", [](Batch& b) { b.samples[0].power_watts = -3; },
                "samples[0].power_watts: must not be negative"},
        BadCase{"InfiniteMemory", [](Batch& b) { b.samples[0].fb_used_mib = kInf; },
                "samples[0].fb_used_mib: must be finite"},
        BadCase{"NaNProcessMemory", [](Batch& b) { b.samples[1].processes[0].fb_used_mib = kNaN; },
                "samples[1].processes[0].fb_used_mib: must be a number, not NaN"},
        BadCase{"NaNTokens", [](Batch& b) { b.progress[0].tokens = kNaN; },
                "progress[0].tokens: must be a number"},
        BadCase{"NegativeProcessCount", [](Batch& b) { b.samples[0].process_count = -1; },
                "samples[0].process_count: must not be negative"},
        BadCase{"ShortIdleBeyondIdle", [](Batch& b) { b.samples[0].gaps->short_idle_ms = 3'000; },
                "samples[0].gaps.short_idle_ms: must be within 0..idle_ms"},
        BadCase{"IdleBeyondInterval", [](Batch& b) { b.samples[0].gaps->idle_ms = 20'000; },
                "samples[0].gaps.idle_ms: must be within 0..interval_ms"},
        BadCase{"NotAShare",
                [](Batch& b) {
                  b.devices[0].share = {8, 7};
                },
                "devices[0].share: 8/7 is not a share"},
        BadCase{"NegativeInterval", [](Batch& b) { b.devices[0].sample_interval_ms = -1; },
                "devices[0].sample_interval_ms: must not be negative"},
        // What it checked before.
        BadCase{"HealthyWithoutActivity",
                [](Batch& b) {
                  b.samples[0].sm_active.reset();
                  b.samples[0].gpu_util.reset();
                },
                "samples[0]: a healthy sample needs an activity figure"},
        BadCase{"TimeBackwards", [](Batch& b) { std::swap(b.samples[0].t_ms, b.samples[1].t_ms); },
                "samples[1].t: time goes backwards"},
        // A job's labels and annotations, as an agent or a hostile client sends them.
        BadCase{"LabelValueWithControlChar",
                [](Batch& b) { b.jobs[0].labels = JobMetadata{{"gpuledger.io/exempt", "yes\x1b[2J"}}; },
                "batch n1-7: jobs[0].labels[\"gpuledger.io/exempt\"]: contains a control character"},
        BadCase{"LabelKeyWithControlChar",
                [](Batch& b) { b.jobs[0].labels = JobMetadata{{"a\nb", "x"}}; },
                "batch n1-7: jobs[0].labels: a key contains a control character"},
        BadCase{"EmptyAnnotationKey",
                [](Batch& b) { b.jobs[0].annotations = JobMetadata{{"", "x"}}; },
                "batch n1-7: jobs[0].annotations: a key is empty"},
        BadCase{"HundredLabels",
                [](Batch& b) {
                  JobMetadata m;
                  for (int i = 0; i < 100; ++i) m["l" + std::to_string(i)] = "v";
                  b.jobs[0].labels = m;
                },
                "batch n1-7: jobs[0].labels: more than 32 entries (100)"},
        BadCase{"MebibyteAnnotation",
                [](Batch& b) { b.jobs[0].annotations = JobMetadata{{"note", std::string(1 << 20, 'a')}}; },
                "batch n1-7: jobs[0].annotations[\"note\"]: longer than 256 bytes (1048576 bytes)"},
        BadCase{"LabelsAndAnnotationsTooLargeTogether",
                [](Batch& b) {
                  JobMetadata m;
                  for (int i = 0; i < 20; ++i) m["k" + std::to_string(i)] = std::string(250, 'v');
                  b.jobs[0].labels = m;
                  b.jobs[0].annotations = m;
                },
                "batch n1-7: jobs[0]: labels and annotations take more than 8192 bytes (10100)"},
        BadCase{"QuoteInKeyIsEscaped",
                [](Batch& b) { b.jobs[0].labels = JobMetadata{{"a\"b", "(none)"}}; },
                "jobs[0].labels[\"a\\\"b\"]: is reserved"}),
    [](const ::testing::TestParamInfo<BadCase>& param) { return param.param.name; });

// Absent figures are not refused: only present ones must be numbers in range.
TEST(ValidateBatchTest, AbsentFiguresAreFine) {
  Batch b = GoodBatch();
  for (Sample& s : b.samples) {
    s.sm_occupancy.reset();
    s.fb_used_mib.reset();
    s.power_watts.reset();
    s.gaps.reset();
    s.processes[0].sm_share.reset();
    s.processes[0].job_id.clear();  // a process the agent could not attribute
  }
  Status st = ValidateBatch(b, kNow);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// Labels and annotations within the limits pass, an empty set too (it says "none now").
TEST(ValidateBatchTest, AcceptsLabelsWithinTheLimits) {
  Batch b = GoodBatch();
  JobMetadata full;
  for (size_t i = 0; i < kMaxJobMetadataEntries; ++i) full["gpuledger.io/k" + std::to_string(i)] = "v";
  b.jobs[0].labels = full;
  b.jobs[0].annotations = JobMetadata{};
  Status st = ValidateBatch(b, kNow);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace gpuledger
