// Where the idle time goes, on synthetic workloads whose truth is known.
#include <gtest/gtest.h>

#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

// One GPU held by one job for `hours`, sampled every 10 s; `make` fills each sample.
template <typename Fn>
UsageRow RunJob(JobKind kind, int hours, Fn&& make) {
  testing::TempLedger t;
  Batch b;
  b.batch_id = "job";
  b.devices.push_back(Device{.uuid = "GPU-1", .model = "NVIDIA H100", .pool = "p",
                             .sample_interval_ms = 10'000});
  b.jobs.push_back(Job{.id = "j", .team = "t", .kind = kind});
  const int64_t end = kBaseMs + hours * kMsPerHour;
  b.allocations.push_back({"GPU-1", "j", kBaseMs, end});
  for (int64_t at = kBaseMs; at <= end; at += 10'000) {
    Sample s;
    s.device_uuid = "GPU-1";
    s.t_ms = at;
    make(at - kBaseMs, s);
    b.samples.push_back(s);
  }
  EXPECT_TRUE(t.ledger().Ingest(b).ok());
  auto r = t.ledger().Usage({kBaseMs, end}, {Dimension::kJob});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r->rows.at(0);
}

double Share(const UsageRow& r, IdleCause c) {
  int64_t held = r.gpu_ticks_ms[0] + r.gpu_ticks_ms[1];
  return static_cast<double>(r.idle_cause_ticks_ms[static_cast<size_t>(c)]) / static_cast<double>(held);
}

void ExpectCausesAddUp(const UsageRow& r) {
  int64_t sum = 0;
  for (int64_t v : r.idle_cause_ticks_ms) sum += v;
  EXPECT_EQ(sum, r.gpu_ticks_ms[static_cast<size_t>(Bucket::kAllocatedIdle)]);
  Money cost;
  for (Money m : r.idle_cause_cost) cost += m;
  EXPECT_EQ(cost, r.cost[static_cast<size_t>(Bucket::kAllocatedIdle)]);
}

// Bursts of work with the GPU waiting on its data loader 40% of the time: 400 ms gaps
// after every 600 ms of kernels, which the agent's gap profile shows as short gaps.
TEST(IdleCausesTest, InputStallOfFortyPercentIsFound) {
  UsageRow r = RunJob(JobKind::kTraining, 3, [](int64_t, Sample& s) {
    s.sm_active = 0.6;
    s.process_count = 1;
    s.gaps = IdleGaps{10'000, 4'000, 4'000};
  });
  EXPECT_NEAR(Share(r, IdleCause::kInputStall), 0.40, 0.05);
  EXPECT_NEAR(Share(r, IdleCause::kOther), 0.0, 0.01);
  ExpectCausesAddUp(r);
}

// Checkpoints every 30 minutes for 3 minutes; in between 95% busy with short gaps.
TEST(IdleCausesTest, PeriodicCheckpointsAreFoundAsSuch) {
  UsageRow r = RunJob(JobKind::kTraining, 4, [](int64_t since, Sample& s) {
    bool checkpoint = since % (30 * kMsPerMinute) > 0 && since % (30 * kMsPerMinute) <= 3 * kMsPerMinute;
    s.process_count = 1;
    s.sm_active = checkpoint ? 0.0 : 0.95;
    s.gaps = IdleGaps{10'000, checkpoint ? 10'000 : 500, checkpoint ? 0 : 500};
  });
  EXPECT_NEAR(Share(r, IdleCause::kCheckpointStall), 0.10, 0.01);
  EXPECT_NEAR(Share(r, IdleCause::kInputStall), 0.9 * 0.05, 0.01);
  EXPECT_NEAR(Share(r, IdleCause::kHeldIdle), 0.0, 1e-9);
  ExpectCausesAddUp(r);
}

// A single pause of three minutes does not recur: it is not called a checkpoint.
TEST(IdleCausesTest, ALonePauseIsNotACheckpoint) {
  UsageRow r = RunJob(JobKind::kTraining, 2, [](int64_t since, Sample& s) {
    bool pause = since > 40 * kMsPerMinute && since <= 43 * kMsPerMinute;
    s.sm_active = pause ? 0.0 : 0.9;
  });
  EXPECT_EQ(r.idle_cause_ticks_ms[static_cast<size_t>(IdleCause::kCheckpointStall)], 0);
  ExpectCausesAddUp(r);
}

// A notebook worked on for half an hour, then left open with nothing running for hours.
TEST(IdleCausesTest, AForgottenNotebookIsHeldIdle) {
  UsageRow r = RunJob(JobKind::kNotebook, 4, [](int64_t since, Sample& s) {
    bool working = since <= 30 * kMsPerMinute;
    s.sm_active = working ? 0.3 : 0.0;
    s.process_count = 1;
  });
  // 3.5 of 4 hours held idle; the half hour of work's idle part is "other" (no gap profile).
  EXPECT_NEAR(Share(r, IdleCause::kHeldIdle), 3.5 / 4.0, 0.01);
  EXPECT_NEAR(Share(r, IdleCause::kOther), 0.7 * 0.5 / 4.0, 0.01);
  ExpectCausesAddUp(r);
}

// The agent saw no process at all: whatever idled was held idle, even briefly.
TEST(IdleCausesTest, NoProcessMeansHeldIdle) {
  UsageRow r = RunJob(JobKind::kNotebook, 1, [](int64_t since, Sample& s) {
    s.sm_active = 0.0;
    s.process_count = since < 5 * kMsPerMinute ? 0 : 1;
  });
  EXPECT_NEAR(Share(r, IdleCause::kHeldIdle), 1.0, 1e-9);  // the run is an hour long anyway
  ExpectCausesAddUp(r);
}

// Causes, like buckets, do not depend on where a window cuts.
TEST(IdleCausesTest, WindowsCutAnywhereAgree) {
  testing::TempLedger t;
  Batch b;
  b.batch_id = "job";
  b.devices.push_back(Device{.uuid = "GPU-1", .pool = "p", .sample_interval_ms = 10'000});
  b.jobs.push_back(Job{.id = "j", .kind = JobKind::kTraining});
  b.allocations.push_back({"GPU-1", "j", kBaseMs, std::nullopt});
  for (int64_t at = kBaseMs; at <= kBaseMs + 5 * kMsPerHour; at += 10'000) {
    int64_t since = at - kBaseMs;
    bool checkpoint = since % (30 * kMsPerMinute) > 0 && since % (30 * kMsPerMinute) <= 4 * kMsPerMinute;
    Sample s;
    s.device_uuid = "GPU-1";
    s.t_ms = at;
    s.sm_active = checkpoint ? 0.0 : 0.8;
    s.gaps = IdleGaps{10'000, 2'000, checkpoint ? 0 : 1'000};
    b.samples.push_back(s);
  }
  ASSERT_TRUE(t.ledger().Ingest(b).ok());
  TimeRange whole{kBaseMs + 17 * kMsPerMinute + 3'000, kBaseMs + 4 * kMsPerHour + 11 * kMsPerMinute};
  int64_t mid = kBaseMs + 2 * kMsPerHour + 7 * kMsPerMinute + 500;
  auto all = *t.ledger().Usage(whole, {Dimension::kJob});
  auto left = *t.ledger().Usage({whole.begin_ms, mid}, {Dimension::kJob});
  auto right = *t.ledger().Usage({mid, whole.end_ms}, {Dimension::kJob});
  for (size_t c = 0; c < kIdleCauseCount; ++c) {
    EXPECT_NEAR(static_cast<double>(left.total.idle_cause_ticks_ms[c] + right.total.idle_cause_ticks_ms[c]),
                static_cast<double>(all.total.idle_cause_ticks_ms[c]), 2.0 * kShareScale)
        << IdleCauseName(kAllIdleCauses[c]);
  }
  EXPECT_GT(all.total.idle_cause_ticks_ms[static_cast<size_t>(IdleCause::kCheckpointStall)], 0);
}

}  // namespace
}  // namespace gpuledger::ledger
