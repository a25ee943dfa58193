#include "ledger/attribution.h"

#include <gtest/gtest.h>

namespace gpuledger::ledger {
namespace {

constexpr int64_t kT = 1'795'392'000'000;

std::array<int64_t, kBucketCount> Totals(const DeviceTimeline& t) {
  std::array<int64_t, kBucketCount> out{};
  Attribute(t, [&](const Piece& p) {
    EXPECT_GT(p.ms, 0);
    EXPECT_EQ(FloorTo(p.minute_ms, kMsPerMinute), p.minute_ms);
    out[static_cast<size_t>(p.bucket)] += p.ms;
  });
  return out;
}

Sample At(int64_t t, double sm) {
  Sample s;
  s.t_ms = t;
  s.sm_active = sm;
  return s;
}

TEST(AttributionTest, NoSamplesMeansUnmonitored) {
  std::vector<Sample> none;
  std::vector<store::AllocationRecord> allocs;
  DeviceTimeline t{{kT, kT + kMsPerHour}, 30'000, none, allocs, nullptr};
  EXPECT_EQ(Totals(t), (std::array<int64_t, kBucketCount>{0, 0, 0, 0, kMsPerHour}));
}

TEST(AttributionTest, ASampleCoversTheTimeSinceThePreviousOne) {
  std::vector<Sample> s = {At(kT, 0), At(kT + 10'000, 0.25)};
  std::vector<store::AllocationRecord> allocs = {{1, 7, kT - kMsPerHour, std::nullopt}};
  DeviceTimeline t{{kT, kT + 20'000}, 30'000, s, allocs, nullptr};
  // [T, T+10s) from the second sample; [T+10s, T+20s) has no sample yet: unmonitored.
  EXPECT_EQ(Totals(t), (std::array<int64_t, kBucketCount>{2'500, 7'500, 0, 0, 10'000}));
}

TEST(AttributionTest, PiecesAreCutAtMinutesAndAllocationEdges) {
  std::vector<Sample> s = {At(kT + 50'000, 1), At(kT + 70'000, 1)};
  std::vector<store::AllocationRecord> allocs = {{1, 7, kT + 55'000, kT + 65'000}};
  DeviceTimeline t{{kT, kT + kMsPerMinute * 2}, 30'000, s, allocs, nullptr};
  std::vector<Piece> pieces;
  Attribute(t, [&](const Piece& p) { pieces.push_back(p); });
  int64_t sum = 0;
  for (const auto& p : pieces) sum += p.ms;
  EXPECT_EQ(sum, 2 * kMsPerMinute);
  // The held part [55 s, 65 s) crosses the minute: two active pieces of 5 s.
  int held_pieces = 0;
  for (const auto& p : pieces) {
    if (p.job_id == 7) {
      EXPECT_EQ(p.ms, 5'000);
      EXPECT_EQ(p.bucket, Bucket::kActive);
      ++held_pieces;
    }
  }
  EXPECT_EQ(held_pieces, 2);
}

TEST(AttributionTest, StalenessLimitFollowsTheInterval) {
  Device d;
  EXPECT_EQ(StalenessLimitMs(d, 0), 5 * kMsPerMinute);
  d.sample_interval_ms = 10'000;
  EXPECT_EQ(StalenessLimitMs(d, 0), 30'000);
  d.sample_interval_ms = 5 * kMsPerMinute;
  EXPECT_EQ(StalenessLimitMs(d, 0), 5 * kMsPerMinute);
  EXPECT_EQ(StalenessLimitMs(d, 42'000), 42'000);
}

}  // namespace
}  // namespace gpuledger::ledger
