#include <gtest/gtest.h>

#include <vector>

#include "nvml/collector.h"

namespace gpuledger::nvml {
namespace {

// Samples every `period_ms` after `start_us`, with the given busy percentages.
std::vector<UtilizationSample> Samples(uint64_t start_us, int64_t period_ms,
                                       const std::vector<double>& values) {
  std::vector<UtilizationSample> out;
  for (size_t i = 0; i < values.size(); ++i) {
    out.push_back({start_us + (i + 1) * static_cast<uint64_t>(period_ms) * 1000, values[i]});
  }
  return out;
}

TEST(GapProfileTest, NoSamplesIsAnEmptyProfile) {
  EXPECT_EQ(ComputeGapProfile({}, 1000), GapProfile{});
}

TEST(GapProfileTest, ShortRepeatedGapsBetweenBursts) {
  // 1 s of 100 ms samples: busy, busy, idle, busy, busy, idle, idle, busy, busy, 50%.
  auto s = Samples(5'000'000, 100, {100, 100, 0, 100, 100, 0, 0, 100, 100, 50});
  GapProfile p = ComputeGapProfile(s, 5'000'000);
  EXPECT_EQ(p.sample_count, 10);
  EXPECT_EQ(p.covered_ms, 1000);
  EXPECT_EQ(p.sample_period_ms, 100);
  EXPECT_DOUBLE_EQ(p.busy_ratio, 0.65);
  EXPECT_EQ(p.gap_count, 2);
  EXPECT_EQ(p.gap_total_ms, 300);
  EXPECT_EQ(p.gap_max_ms, 200);
  EXPECT_EQ(p.gap_histogram[0], 2);  // both <= 250 ms
  EXPECT_EQ(p.leading_idle_ms, 0);
  EXPECT_EQ(p.trailing_idle_ms, 0);
}

TEST(GapProfileTest, AllIdleIsOneGapTouchingBothEnds) {
  auto s = Samples(0, 200, std::vector<double>(10, 0.0));
  GapProfile p = ComputeGapProfile(s, 0);
  EXPECT_EQ(p.gap_count, 1);
  EXPECT_EQ(p.gap_total_ms, 2000);
  EXPECT_EQ(p.gap_max_ms, 2000);
  EXPECT_EQ(p.gap_histogram[2], 1);  // (1 s, 5 s]
  EXPECT_EQ(p.leading_idle_ms, 2000);
  EXPECT_EQ(p.trailing_idle_ms, 2000);
  EXPECT_DOUBLE_EQ(p.busy_ratio, 0);
}

TEST(GapProfileTest, FirstSampleCoversTheTimeSinceTheLastSeen) {
  // The first sample came 150 ms after the last one seen; the others 100 ms apart.
  std::vector<UtilizationSample> s = {{1'150'000, 0}, {1'250'000, 0}, {1'350'000, 100}};
  GapProfile p = ComputeGapProfile(s, 1'000'000);
  EXPECT_EQ(p.covered_ms, 350);
  EXPECT_EQ(p.leading_idle_ms, 250);
  EXPECT_EQ(p.gap_max_ms, 250);
  // Far behind (a missed poll): the first sample counts one median period only.
  GapProfile late = ComputeGapProfile(s, 100'000);
  EXPECT_EQ(late.covered_ms, 300);
  EXPECT_EQ(late.leading_idle_ms, 200);
}

TEST(GapProfileTest, LongGapsLandInTheOpenBucket) {
  std::vector<double> v(400, 0.0);  // 40 s idle at 100 ms
  v.front() = 100;
  v.back() = 100;
  GapProfile p = ComputeGapProfile(Samples(0, 100, v), 0);
  EXPECT_EQ(p.gap_count, 1);
  EXPECT_EQ(p.gap_max_ms, 39'800);
  EXPECT_EQ(p.gap_histogram[4], 1);
}

}  // namespace
}  // namespace gpuledger::nvml
