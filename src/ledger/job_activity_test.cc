// A job's activity per step (JobActivityOf): only its own GPUs' time, attributed from the
// samples as the rollups are, so the steps of an hour add up to the hour's usage.
#include "ledger/job_activity.h"

#include <gtest/gtest.h>

#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

constexpr int64_t kMinute = kMsPerMinute;
constexpr int64_t kGpuMinute = kMinute * kShareScale;

Device Gpu(const std::string& uuid) {
  return Device{.uuid = uuid, .node = "n1", .model = "H100", .memory_mib = 81920, .pool = "training",
                .sample_interval_ms = kMinute};
}

// Two hours: train-1 holds GPU-A and GPU-B, busy (80%) for its first 30 minutes and
// idle after; eval-1 holds GPU-C, which is none of train-1's business.
Batch TwoHours() {
  Batch b;
  b.batch_id = "b1";
  b.devices = {Gpu("GPU-A"), Gpu("GPU-B"), Gpu("GPU-C")};
  b.jobs = {Job{.id = "train-1", .team = "nlp", .kind = JobKind::kTraining},
            Job{.id = "eval-1", .team = "vision", .kind = JobKind::kBatch}};
  b.allocations = {{"GPU-A", "train-1", kBaseMs, std::nullopt},
                   {"GPU-B", "train-1", kBaseMs, std::nullopt},
                   {"GPU-C", "eval-1", kBaseMs, std::nullopt}};
  for (const char* uuid : {"GPU-A", "GPU-B", "GPU-C"}) {
    for (int64_t t = kBaseMs; t <= kBaseMs + 2 * kMsPerHour; t += kMinute) {
      Sample s{.device_uuid = uuid, .t_ms = t, .sm_active = t <= kBaseMs + 30 * kMinute ? 0.8 : 0.0};
      s.process_count = 1;
      b.samples.push_back(s);
    }
  }
  return b;
}

TEST(JobActivityTest, StepsFollowTheJobsOwnGpusMinuteByMinute) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(TwoHours()).ok());
  auto a = JobActivityOf(t.ledger(), "train-1", {kBaseMs, kBaseMs + 2 * kMsPerHour}, 5 * kMinute, 1000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->times_ms.size(), 24u);
  EXPECT_EQ(a->times_ms[1], kBaseMs + 5 * kMinute);
  // The first step: its samples at 1..5 min cover [0, 5 min) at 80%, on two GPUs.
  EXPECT_EQ(a->active_ticks_ms[0], 2 * 5 * kGpuMinute * 8 / 10);
  EXPECT_EQ(a->active_ticks_ms[0] + a->idle_ticks_ms[0], 2 * 5 * kGpuMinute);
  // After the first half hour (and the sample at 30 min, covering [29, 30)): held, idle.
  EXPECT_EQ(a->active_ticks_ms[7], 0);
  EXPECT_EQ(a->idle_ticks_ms[7], 2 * 5 * kGpuMinute);
  EXPECT_EQ(a->window, (TimeRange{kBaseMs, kBaseMs + 2 * kMsPerHour}));
  EXPECT_EQ(a->device_hours, 4);
}

TEST(JobActivityTest, TheStepsOfAnHourAddUpToItsUsage) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(TwoHours()).ok());
  ASSERT_TRUE(t.ledger().RefreshRollups().ok());
  auto a = JobActivityOf(t.ledger(), "train-1", {kBaseMs, kBaseMs + 2 * kMsPerHour}, kMinute, 1000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto usage = t.ledger().Usage({kBaseMs, kBaseMs + 2 * kMsPerHour}, {Dimension::kHour, Dimension::kJob});
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  for (size_t hour = 0; hour < 2; ++hour) {
    int64_t active = 0, idle = 0;
    for (size_t i = hour * 60; i < hour * 60 + 60; ++i) {
      active += a->active_ticks_ms[i];
      idle += a->idle_ticks_ms[i];
    }
    const UsageRow* row = nullptr;
    for (const auto& r : usage->rows) {
      if (r.key[0] == FormatTime(kBaseMs + static_cast<int64_t>(hour) * kMsPerHour) && r.key[1] == "train-1") row = &r;
    }
    ASSERT_NE(row, nullptr) << "hour " << hour;
    EXPECT_EQ(active, row->gpu_ticks_ms[static_cast<size_t>(Bucket::kActive)]) << "hour " << hour;
    EXPECT_EQ(idle, row->gpu_ticks_ms[static_cast<size_t>(Bucket::kAllocatedIdle)]) << "hour " << hour;
  }
}

TEST(JobActivityTest, AWindowOverTheLimitKeepsItsLatestSteps) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(TwoHours()).ok());
  // Two GPUs for two hours is 4 device-hours; a limit of 1 keeps the last 30 minutes.
  auto a = JobActivityOf(t.ledger(), "train-1", {kBaseMs, kBaseMs + 2 * kMsPerHour}, 10 * kMinute, 1);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->window, (TimeRange{kBaseMs + 90 * kMinute, kBaseMs + 2 * kMsPerHour}));
  EXPECT_EQ(a->requested, (TimeRange{kBaseMs, kBaseMs + 2 * kMsPerHour}));
  ASSERT_EQ(a->times_ms.size(), 3u);
  EXPECT_EQ(a->idle_ticks_ms[2], 2 * 10 * kGpuMinute);
}

TEST(JobActivityTest, AnUnknownJobIsNotFound) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(TwoHours()).ok());
  auto a = JobActivityOf(t.ledger(), "nope", {kBaseMs, kBaseMs + kMsPerHour}, kMinute, 10);
  EXPECT_EQ(a.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(JobActivityOf(t.ledger(), "train-1", {kBaseMs, kBaseMs + kMsPerHour}, 90'000, 10).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuledger::ledger
