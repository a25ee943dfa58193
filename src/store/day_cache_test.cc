#include "store/day_cache.h"

#include <gtest/gtest.h>

#include <set>

namespace gpuledger::store {
namespace {

std::shared_ptr<const CachedDay> Rows(size_t n, int64_t device = 1) {
  auto rows = std::make_shared<CachedDay>(n);
  for (size_t i = 0; i < n; ++i) (*rows)[i] = CachedDayRow{device, static_cast<int64_t>(i) + 1, {1, 2, 3, 4, 5}, 0, {}, 1};
  return rows;
}

// A day is found at the version it was put with, and at no other.
TEST(DayRowCacheTest, FindsADayOnlyAtItsVersion) {
  DayRowCache cache;
  EXPECT_EQ(cache.Find(0, 7), nullptr);
  cache.Put(0, 7, Rows(3));
  ASSERT_NE(cache.Find(0, 7), nullptr);
  EXPECT_EQ(cache.Find(0, 7)->size(), 3u);
  EXPECT_EQ(cache.Find(0, 8), nullptr);
  EXPECT_EQ(cache.Find(kMsPerDay, 7), nullptr);
  cache.Put(0, 8, Rows(5));  // the day rewritten: the new version replaces the old
  EXPECT_EQ(cache.Find(0, 7), nullptr);
  EXPECT_EQ(cache.Find(0, 8)->size(), 5u);
  EXPECT_EQ(cache.days(), 1u);
}

// Past its size the cache drops the days least recently used; a reader holding one keeps
// its rows; the bytes it counts are those of the days it holds.
TEST(DayRowCacheTest, DropsTheLeastRecentlyUsedDaysPastItsSize) {
  const size_t day_bytes = Rows(100)->size() * sizeof(CachedDayRow);
  DayRowCache cache(3 * day_bytes + 3 * 256);  // three days of 100 rows, and their entries
  for (int64_t d = 0; d < 3; ++d) cache.Put(d * kMsPerDay, d, Rows(100));
  EXPECT_EQ(cache.days(), 3u);
  auto held = cache.Find(0, 0);  // day 0 used last
  ASSERT_NE(held, nullptr);
  cache.Put(3 * kMsPerDay, 3, Rows(100));
  EXPECT_EQ(cache.days(), 3u);
  EXPECT_NE(cache.Find(0, 0), nullptr);
  EXPECT_EQ(cache.Find(kMsPerDay, 1), nullptr);  // the least recently used
  EXPECT_NE(cache.Find(2 * kMsPerDay, 2), nullptr);
  EXPECT_NE(cache.Find(3 * kMsPerDay, 3), nullptr);
  EXPECT_LE(cache.bytes(), 3 * day_bytes + 3 * 256);
  EXPECT_GE(cache.bytes(), 3 * day_bytes);
  // A day larger than the whole cache is not kept, and drops nothing.
  cache.Put(9 * kMsPerDay, 9, Rows(1000));
  EXPECT_EQ(cache.Find(9 * kMsPerDay, 9), nullptr);
  EXPECT_EQ(cache.days(), 3u);
  EXPECT_EQ(held->size(), 100u);
}

// Versions are drawn at random: a thousand draws do not repeat.
TEST(DayRowCacheTest, DrawsVersionsThatDoNotRepeat) {
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(NewDayVersion());
  EXPECT_EQ(seen.size(), 1000u);
}

// The summer adds rows per (device, job) in the order first met, takes the last idle cause
// as the rest of allocated_idle, and leaves out a pair whose hour rows cancel out.
TEST(RollupSummerTest, SumsPerDeviceAndJobAndDropsPairsWithNoHourRows) {
  RollupSummer summer;
  using Ms = std::array<int64_t, kBucketCount>;
  using Named = std::array<int64_t, kIdleCauseCount - 1>;
  summer.Add(2, 5, Ms{10, 8, 0, 0, 0}, 3, Named{1, 2, 3}, 2);
  summer.Add(1, 5, Ms{1, 0, 0, 0, 0}, 0, Named{}, 1);
  summer.Add(2, 5, Ms{5, 4, 0, 0, 0}, 1, Named{1, 1, 1}, 1);
  summer.Add(2, 9, Ms{7, 0, 0, 0, 0}, 0, Named{}, 1);
  summer.Add(2, 9, Ms{-7, 0, 0, 0, 0}, 0, Named{}, -1);  // a dirty hour taken back out
  summer.Add(int64_t{1} << 40, 1, Ms{4, 0, 0, 0, 0}, 0, Named{}, 1);  // a sparse id
  std::vector<RollupSum> out = std::move(summer).Finish();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].device_id, 2);
  EXPECT_EQ(out[0].job_id, 5);
  EXPECT_EQ(out[0].ms, (Ms{15, 12, 0, 0, 0}));
  EXPECT_EQ(out[0].coarse_ms, 4);
  EXPECT_EQ(out[0].idle_causes, (std::array<int64_t, kIdleCauseCount>{2, 3, 4, 3}));
  EXPECT_EQ(out[1].device_id, 1);
  EXPECT_EQ(out[2].device_id, int64_t{1} << 40);
  EXPECT_EQ(out[2].ms[0], 4);
}

}  // namespace
}  // namespace gpuledger::store
