#include "store/rollup_days.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "core/time.h"

namespace gpuledger::store {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kDay = 1'795'392'000'000;  // 2026-11-23T00:00:00Z

// A row as the readers give it: the last idle cause is the rest of allocated_idle.
RollupRow Row(int hour, int64_t job, std::array<int64_t, kBucketCount> ms, int64_t coarse = 0,
              std::array<int64_t, kIdleCauseCount - 1> named = {}, int64_t device = 7) {
  RollupRow r;
  r.period_ms = kDay + hour * kMsPerHour;
  r.device_id = device;
  r.job_id = job;
  r.ms = ms;
  r.coarse_ms = coarse;
  int64_t sum = 0;
  for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) {
    r.idle_causes[c] = named[c];
    sum += named[c];
  }
  r.idle_causes[kIdleCauseCount - 1] = ms[static_cast<size_t>(Bucket::kAllocatedIdle)] - sum;
  return r;
}

using Key = std::tuple<int64_t, int64_t, int64_t>;  // hour, device, job
Key KeyOf(const RollupRow& r) { return {r.period_ms, r.device_id, r.job_id}; }

bool Same(const RollupRow& a, const RollupRow& b) {
  return KeyOf(a) == KeyOf(b) && a.ms == b.ms && a.coarse_ms == b.coarse_ms && a.idle_causes == b.idle_causes;
}

std::vector<RollupRow> Decoded(std::string_view blob, int64_t device = 7, bool* ok = nullptr) {
  std::vector<RollupRow> out;
  bool good = DecodeDayHours(blob, kDay, device, [&](const RollupRow& r) { out.push_back(r); });
  if (ok != nullptr) *ok = good;
  else EXPECT_TRUE(good);
  return out;
}

TEST(DayHoursTest, AnEmptyDayIsItsTagAlone) {
  auto blob = EncodeDayHours(kDay, {});
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(*blob, std::string(1, '\x01'));
  EXPECT_TRUE(Decoded(*blob).empty());
}

// Rows given in any order come back by hour, then job, with every figure, the first
// hour and the last included.
TEST(DayHoursTest, RowsComeBackByHourThenJobWithEveryFigure) {
  std::vector<RollupRow> rows = {
      Row(23, 5, {0, 0, 0, 0, 3'600'000}),
      Row(0, 9, {1'000'000, 2'000'000, 0, 0, 0}, 400'000, {1'500'000, 0, 100'000}),
      Row(0, 0, {0, 0, 600'000, 0, 0}),
      Row(12, 70'000, {1, 2, 3, 4, 5}, 1, {0, 1, 0}),
  };
  auto blob = EncodeDayHours(kDay, rows);
  ASSERT_TRUE(blob.ok()) << blob.status().ToString();
  std::vector<RollupRow> want = {rows[2], rows[1], rows[3], rows[0]};
  std::vector<RollupRow> got = Decoded(*blob);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(Same(got[i], want[i])) << "row " << i;
}

// A device busy for one job the whole hour, every hour: 4 bytes a row, as the header
// says; an hour split between two buckets leaves its last one out too.
TEST(DayHoursTest, AWholeHourLeavesItsLastBucketOut) {
  std::vector<RollupRow> rows;
  for (int h = 0; h < 23; ++h) rows.push_back(Row(h, 12'345, {3'600'000, 0, 0, 0, 0}));
  rows.push_back(Row(23, 12'345, {1'000'000, 2'600'000, 0, 0, 0}, 0, {2'600'000, 0, 0}));
  auto blob = EncodeDayHours(kDay, rows);
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(blob->size(), 1u + 23u * 4u + (4u + 3u + 4u + 1u + 1u));
  std::vector<RollupRow> got = Decoded(*blob);
  ASSERT_EQ(got.size(), rows.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(Same(got[i], rows[i])) << "row " << i;
}

// Random days against the rows themselves: what goes in comes out, in order.
TEST(DayHoursTest, RandomDaysRoundTrip) {
  std::mt19937_64 rng(20261203);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    std::map<std::pair<int64_t, int64_t>, RollupRow> by_key;  // (hour, job)
    int n = static_cast<int>(pick(0, 60));
    for (int i = 0; i < n; ++i) {
      int hour = static_cast<int>(pick(0, 23));
      int64_t job = pick(0, 3) == 0 ? 0 : pick(1, 1'000'000'000);
      std::array<int64_t, kBucketCount> ms{};
      for (int64_t& v : ms) v = pick(0, 2) == 0 ? 0 : pick(1, kMsPerHour);
      std::array<int64_t, kIdleCauseCount - 1> named{};
      int64_t left = ms[static_cast<size_t>(Bucket::kAllocatedIdle)];
      for (int64_t& v : named) left -= (v = pick(0, 1) == 0 ? 0 : pick(0, left));
      by_key[{hour, job}] = Row(hour, job, ms, pick(0, 1) ? 0 : pick(0, ms[0]), named);
    }
    std::vector<RollupRow> rows;
    for (const auto& [key, r] : by_key) rows.push_back(r);
    std::vector<RollupRow> shuffled = rows;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    auto blob = EncodeDayHours(kDay, shuffled);
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    std::vector<RollupRow> got = Decoded(*blob);
    ASSERT_EQ(got.size(), rows.size()) << "trial " << trial;
    for (size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(Same(got[i], rows[i])) << "trial " << trial << " row " << i;
  }
}

TEST(DayHoursTest, RowsThatDoNotBelongToTheDayAreRefused) {
  auto outside = EncodeDayHours(kDay, {Row(24, 1, {1, 0, 0, 0, 0})});
  EXPECT_EQ(outside.status().code(), StatusCode::kInternal);
  EXPECT_THAT(outside.status().message(), HasSubstr("lies outside the day"));
  RollupRow before = Row(0, 1, {1, 0, 0, 0, 0});
  before.period_ms -= kMsPerHour;
  EXPECT_FALSE(EncodeDayHours(kDay, {before}).ok());
  RollupRow off = Row(3, 1, {1, 0, 0, 0, 0});
  off.period_ms += 1;
  EXPECT_FALSE(EncodeDayHours(kDay, {off}).ok());
  auto twice = EncodeDayHours(kDay, {Row(3, 1, {1, 0, 0, 0, 0}), Row(3, 1, {2, 0, 0, 0, 0})});
  EXPECT_THAT(twice.status().message(), HasSubstr("two hour rollups"));
  EXPECT_FALSE(EncodeDayHours(kDay, {Row(3, 1, {-1, 0, 0, 0, 0})}).ok());
  EXPECT_FALSE(EncodeDayHours(kDay, {Row(3, -2, {1, 0, 0, 0, 0})}).ok());
  EXPECT_FALSE(EncodeDayHours(kDay, {Row(3, 1, {0, 5, 0, 0, 0}, 0, {-1, 0, 0})}).ok());
  // Past what the decoder takes for a figure: refused here rather than read as corrupt.
  EXPECT_FALSE(EncodeDayHours(kDay, {Row(3, 1, {int64_t{1} << 40, 0, 0, 0, 0})}).ok());
  EXPECT_FALSE(EncodeDayHours(kDay, {Row(3, int64_t{1} << 40, {1, 0, 0, 0, 0})}).ok());
  EXPECT_TRUE(EncodeDayHours(kDay, {Row(3, (int64_t{1} << 40) - 1, {(int64_t{1} << 40) - 1, 0, 0, 0, 0})}).ok());
}

// Every cut of a good blob, and blobs broken on purpose, read as corrupt (never as fewer
// rows without saying so).
TEST(DayHoursTest, BrokenBlobsAreCorrupt) {
  auto blob = EncodeDayHours(kDay, {Row(1, 300, {5'000, 7'000, 0, 0, 0}, 10, {1'000, 0, 0}), Row(2, 1, {9, 0, 0, 0, 0})});
  ASSERT_TRUE(blob.ok());
  for (size_t cut = 2; cut < blob->size(); ++cut) {
    bool ok = true;
    std::vector<RollupRow> rows = Decoded(blob->substr(0, cut), 7, &ok);
    // A cut between two rows is a shorter day, which no check can see; any other is corrupt.
    if (ok) {
      EXPECT_EQ(rows.size(), 1u) << "cut at " << cut;
    }
  }
  bool ok = true;
  Decoded("", 7, &ok);
  EXPECT_FALSE(ok) << "no tag";
  Decoded(std::string("\x02", 1), 7, &ok);
  EXPECT_FALSE(ok) << "an unknown tag";
  Decoded(std::string("\x01\x18\x01\x01\x05", 5), 7, &ok);
  EXPECT_FALSE(ok) << "hour 24";
  Decoded(std::string("\x01\x02\x01\x01\x05\x01\x01\x01\x05", 9), 7, &ok);
  EXPECT_FALSE(ok) << "hour 1 after hour 2";
  Decoded(std::string("\x01\x02\x01\x01\x05\x02\x01\x01\x05", 9), 7, &ok);
  EXPECT_FALSE(ok) << "the same (hour, job) twice";
  Decoded(std::string("\x01\x02\x01\x80", 4), 7, &ok);
  EXPECT_FALSE(ok) << "a whole hour in no bucket";
  Decoded(std::string("\x01\x02\x01\x83\x80\xdd\xdb\x01", 8), 7, &ok);  // 3,600,000 in the first of two
  EXPECT_FALSE(ok) << "a whole hour whose first bucket leaves nothing for the last";
}

// A day's devices, read by device, come out by hour, then device, then job; a new day
// hands on the previous one first.
TEST(DayHoursTest, AScanOfWholeDaysGoesByHourThenDevice) {
  std::vector<Key> seen;
  std::function<Status(const RollupRow&)> fn = [&](const RollupRow& r) {
    seen.push_back(KeyOf(r));
    return Status::Ok();
  };
  DayHoursScan scan(fn);
  auto put = [&](int64_t day, int64_t device, std::vector<RollupRow> rows) {
    for (RollupRow& r : rows) {
      r.device_id = device;
      r.period_ms += day - kDay;
    }
    return scan.Add(day, device, *EncodeDayHours(day, rows));
  };
  ASSERT_TRUE(put(kDay, 1, {Row(0, 4, {1, 0, 0, 0, 0}), Row(5, 4, {1, 0, 0, 0, 0})}).ok());
  ASSERT_TRUE(put(kDay, 3, {Row(0, 2, {1, 0, 0, 0, 0}), Row(0, 1, {1, 0, 0, 0, 0}), Row(1, 0, {0, 0, 1, 0, 0})}).ok());
  ASSERT_TRUE(put(kDay + kMsPerDay, 2, {Row(0, 8, {1, 0, 0, 0, 0})}).ok());
  EXPECT_EQ(seen.size(), 5u) << "the first day is handed on when the second begins";
  ASSERT_TRUE(scan.Finish().ok());
  const int64_t h = kMsPerHour;
  EXPECT_EQ(seen, (std::vector<Key>{{kDay, 1, 4},
                                    {kDay, 3, 1},
                                    {kDay, 3, 2},
                                    {kDay + h, 3, 0},
                                    {kDay + 5 * h, 1, 4},
                                    {kDay + kMsPerDay, 2, 8}}));
  Status back = put(kDay + kMsPerDay, 2, {});
  EXPECT_EQ(back.code(), StatusCode::kInvalidArgument) << "the same device again";
  Status corrupt = scan.Add(kDay + 2 * kMsPerDay, 9, "\x01\x18");
  EXPECT_EQ(corrupt.code(), StatusCode::kInternal);
  EXPECT_THAT(corrupt.message(), HasSubstr("rollup_day_hours row of device 9"));
}

// The reader's first error stops the scan and is returned.
TEST(DayHoursTest, AScanStopsAtItsReadersError) {
  int calls = 0;
  std::function<Status(const RollupRow&)> fn = [&](const RollupRow&) {
    return ++calls == 2 ? Internal("enough") : Status::Ok();
  };
  DayHoursScan scan(fn);
  ASSERT_TRUE(scan.Add(kDay, 1, *EncodeDayHours(kDay, {Row(0, 1, {1, 0, 0, 0, 0}, 0, {}, 1),
                                                       Row(1, 1, {1, 0, 0, 0, 0}, 0, {}, 1),
                                                       Row(2, 1, {1, 0, 0, 0, 0}, 0, {}, 1)}))
                  .ok());
  Status st = scan.Finish();
  EXPECT_THAT(st.message(), HasSubstr("enough"));
  EXPECT_EQ(calls, 2);
}

// A device-day's day rows, by job: each figure the sum of the job's hour rows (written
// out by hand here), and how many rows they sum; the rows may come in any order.
TEST(DayRowsTest, EachJobSumsItsHourRowsAndCountsThem) {
  const std::vector<RollupRow> rows = {Row(5, 9, {600, 3000, 0, 0, 0}, 10, {100, 200, 300}),
                                       Row(0, 0, {0, 0, 3600000, 0, 0}),
                                       Row(2, 9, {1000, 2600000, 0, 0, 0}, 0, {5, 0, 7}),
                                       Row(5, 4, {0, 0, 0, 0, 3596400})};
  const std::vector<DayRow> days = SumDayRows(rows);
  ASSERT_EQ(days.size(), 3u);
  EXPECT_EQ(days[0].sum.job_id, 0);
  EXPECT_EQ(days[0].hour_rows, 1);
  EXPECT_EQ(days[0].sum.ms, (std::array<int64_t, kBucketCount>{0, 0, 3600000, 0, 0}));
  EXPECT_EQ(days[1].sum.job_id, 4);
  EXPECT_EQ(days[1].sum.ms[4], 3596400);
  const DayRow& j9 = days[2];
  EXPECT_EQ(std::tie(j9.sum.device_id, j9.sum.job_id, j9.hour_rows), std::make_tuple(int64_t{7}, int64_t{9}, int64_t{2}));
  EXPECT_EQ(j9.sum.ms, (std::array<int64_t, kBucketCount>{1600, 2603000, 0, 0, 0}));
  EXPECT_EQ(j9.sum.coarse_ms, 10);
  EXPECT_EQ(j9.sum.idle_causes, (std::array<int64_t, kIdleCauseCount>{105, 200, 307, 2603000 - 612}));
  EXPECT_TRUE(SumDayRows({}).empty());
}

// A refresh's updates by device-day: each device-day once, in (device, day) order, its
// updates in the order given.
TEST(ReplaceHoursTest, UpdatesAreGroupedByDeviceDayInTheirOrder) {
  auto update = [](int64_t device, int64_t hour) { return RollupUpdate{{device, kDay + hour * kMsPerHour, 0}, {}, {}}; };
  const std::vector<RollupUpdate> updates = {update(2, 30), update(1, 5), update(2, 3), update(1, 2), update(2, 26)};
  const std::vector<DeviceDayUpdates> days = UpdatesByDeviceDay(updates);
  ASSERT_EQ(days.size(), 3u);
  EXPECT_EQ(std::tie(days[0].device_id, days[0].day_ms), std::make_tuple(int64_t{1}, kDay));
  EXPECT_EQ(days[0].updates, (std::vector<const RollupUpdate*>{&updates[1], &updates[3]}));
  EXPECT_EQ(std::tie(days[1].device_id, days[1].day_ms), std::make_tuple(int64_t{2}, kDay));
  EXPECT_EQ(days[1].updates, (std::vector<const RollupUpdate*>{&updates[2]}));
  EXPECT_EQ(std::tie(days[2].device_id, days[2].day_ms), std::make_tuple(int64_t{2}, kDay + kMsPerDay));
  EXPECT_EQ(days[2].updates, (std::vector<const RollupUpdate*>{&updates[0], &updates[4]}));
  EXPECT_TRUE(UpdatesByDeviceDay({}).empty());
}

// What WriteRollups stores for a device-day, against an oracle that keeps a map of hour to
// rows: random stored days, random updates of random hours (some named twice, some
// emptying an hour), and the result encoded and decoded as the stores do.
TEST(ReplaceHoursTest, RefreshedHoursReplaceTheirRowsAndTheRestStay) {
  std::mt19937 rng(20261207);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto random_rows = [&](int hour) {
    std::vector<RollupRow> rows;
    for (int64_t job = 0; job < 4; ++job) {
      if (pick(0, 2) != 0) continue;
      rows.push_back(Row(hour, job, {pick(0, 900000), pick(0, 900000), 0, 0, pick(0, 900000)}, 0, {pick(0, 100), 0, 0}));
    }
    return rows;
  };
  for (int trial = 0; trial < 300; ++trial) {
    std::map<int, std::vector<RollupRow>> oracle;  // hour -> rows
    std::vector<RollupRow> stored;
    for (int hour = 0; hour < 24; ++hour) {
      if (pick(0, 1) == 0) continue;
      oracle[hour] = random_rows(hour);
      stored.insert(stored.end(), oracle[hour].begin(), oracle[hour].end());
    }
    std::shuffle(stored.begin(), stored.end(), rng);  // stored rows in any order
    std::vector<RollupUpdate> updates;
    for (int n = pick(1, 6); n > 0; --n) {
      const int hour = pick(0, 23);
      updates.push_back({{7, kDay + hour * kMsPerHour, 0}, random_rows(hour), {}});
      oracle[hour] = updates.back().hour_rows;
    }
    std::vector<const RollupUpdate*> of_day;
    for (const RollupUpdate& u : updates) of_day.push_back(&u);
    std::vector<RollupRow> want;
    for (const auto& [hour, rows] : oracle) want.insert(want.end(), rows.begin(), rows.end());
    const std::vector<RollupRow> have = ReplaceHours(stored, of_day);
    ASSERT_EQ(have.size(), want.size()) << "trial " << trial;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(Same(have[i], want[i])) << "trial " << trial << ", row " << i;
    auto blob = EncodeDayHours(kDay, have);
    ASSERT_TRUE(blob.ok()) << blob.status().ToString();
    const std::vector<RollupRow> back = Decoded(*blob);
    ASSERT_EQ(back.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(Same(back[i], want[i]));
  }
}

// A day hours row that does not decode is an error naming its device and day.
TEST(ReplaceHoursTest, ACorruptStoredDayIsAnErrorNamingIt) {
  auto rows = DayHourRows("\x01\x30", kDay, 7);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kInternal);
  EXPECT_THAT(rows.status().message(), HasSubstr("rollup_day_hours row of device 7 on 2026-11-23T00:00:00Z is corrupt"));
  auto good = DayHourRows(*EncodeDayHours(kDay, {Row(3, 1, {3600000, 0, 0, 0, 0})}), kDay, 7);
  ASSERT_TRUE(good.ok());
  ASSERT_EQ(good->size(), 1u);
  EXPECT_TRUE(Same(good->at(0), Row(3, 1, {3600000, 0, 0, 0, 0})));
}

}  // namespace
}  // namespace gpuledger::store
