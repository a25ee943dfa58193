#include "objectives/availability.h"

#include <gtest/gtest.h>

#include <random>

namespace gpuledger::objectives {
namespace {

constexpr int64_t kMin = kMsPerMinute;

Job Request(std::string id, int64_t submit, std::optional<int64_t> start, int32_t gpus = 1,
            std::string pool = "training", int32_t priority = 0) {
  Job j;
  j.id = std::move(id);
  j.pool = std::move(pool);
  j.priority = priority;
  j.requested_gpus = gpus;
  j.submit_ms = submit;
  j.start_ms = start;
  return j;
}

TEST(AvailabilityTest, ARequestIsJudgedWhenItsOutcomeIsKnown) {
  const int64_t now = 100 * kMin;
  std::vector<Job> jobs = {
      Request("in-time", 10 * kMin, 15 * kMin, 4),      // waited 5m: good at 15m
      Request("late", 20 * kMin, 50 * kMin, 2),         // waited 30m: bad at 30m
      Request("stuck", 40 * kMin, std::nullopt, 8),     // 60m so far: bad at 50m
      Request("young", 95 * kMin, std::nullopt, 1),     // 5m so far: undecided
      Request("future", 20 * kMin, 120 * kMin, 1),      // starts after now: 80m so far, bad
  };
  jobs.push_back(Job{.id = "no-submit", .pool = "training"});
  AvailabilityReport r = JudgeAvailability(jobs, {}, {0, now}, now, 10 * kMin);
  EXPECT_EQ(r.all.requests, 4);
  EXPECT_DOUBLE_EQ(r.all.gpus, 4 + 2 + 8 + 1);
  EXPECT_DOUBLE_EQ(r.all.gpus_in_time, 4);
  EXPECT_EQ(r.all.waiting, 3);  // stuck, young, future (not started by now)
  EXPECT_EQ(r.without_submit, 1);
  // Waits 5, 30, 60, 5, 80 minutes: nearest rank p50 is the 3rd of 5.
  EXPECT_EQ(r.all.p50_ms, 30 * kMin);
  EXPECT_EQ(r.all.max_ms, 80 * kMin);
  EXPECT_EQ(r.all.mean_ms, 36 * kMin);
  // A window that ends before the late one was known late leaves it out.
  AvailabilityReport early = JudgeAvailability(jobs, {}, {0, 25 * kMin}, 25 * kMin, 10 * kMin);
  EXPECT_EQ(early.all.requests, 1);
  EXPECT_EQ(early.all.waiting, 2);  // late and future, submitted at 20m: 5m so far
}

TEST(AvailabilityTest, ReportsPerPoolPriorityAndSize) {
  std::vector<Job> jobs = {Request("a", 0, kMin, 1, "dev", 5), Request("b", 0, 20 * kMin, 16, "training", 10),
                           Request("c", 0, 2 * kMin, 3, "training", 10)};
  AvailabilityReport r = JudgeAvailability(jobs, {}, {0, kMsPerHour}, kMsPerHour, 10 * kMin);
  EXPECT_EQ(r.by.at("pool").at("dev").attainment(), 1.0);
  EXPECT_DOUBLE_EQ(*r.by.at("pool").at("training").attainment(), 3.0 / 19.0);
  EXPECT_EQ(r.by.at("priority").at("10").requests, 2);
  EXPECT_EQ(r.by.at("size").at("9+ GPUs").attainment(), 0.0);
  EXPECT_EQ(r.by.at("size").at("2-4 GPUs").attainment(), 1.0);
  // A scope keeps only its jobs.
  AvailabilityReport dev = JudgeAvailability(jobs, {ObjectiveScope::Of::kPool, "dev"}, {0, kMsPerHour}, kMsPerHour,
                                             10 * kMin);
  EXPECT_EQ(dev.all.requests, 1);
}

// The percentiles by another road: the smallest wait that at least p of the waits do not
// exceed, found by counting rather than by sorting and indexing.
TEST(AvailabilityTest, PercentilesAgreeWithACountingOracle) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<Job> jobs;
    std::vector<int64_t> waits;
    size_t n = 1 + rng() % 300;
    for (size_t i = 0; i < n; ++i) {
      int64_t wait = static_cast<int64_t>(rng() % (rng() % 3 == 0 ? 3'600'000 : 120'000));
      jobs.push_back(Request("j" + std::to_string(i), 0, wait));
      waits.push_back(wait);
    }
    AvailabilityReport r = JudgeAvailability(jobs, {}, {0, 2 * kMsPerHour}, 2 * kMsPerHour, 10 * kMin);
    for (auto [p, got] : {std::pair{0.5, r.all.p50_ms}, {0.9, r.all.p90_ms}, {0.99, r.all.p99_ms}}) {
      int64_t want = INT64_MAX;
      for (int64_t candidate : waits) {
        size_t at_or_below = std::count_if(waits.begin(), waits.end(), [&](int64_t w) { return w <= candidate; });
        if (static_cast<double>(at_or_below) >= p * static_cast<double>(n) - 1e-9) want = std::min(want, candidate);
      }
      EXPECT_EQ(got, want) << "trial " << trial << " p" << p * 100;
    }
  }
}

}  // namespace
}  // namespace gpuledger::objectives
