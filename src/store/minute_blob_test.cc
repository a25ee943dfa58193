#include "store/minute_blob.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/time.h"
#include "store/varint.h"

namespace gpuledger::store {
namespace {

constexpr int64_t kHour = 1'795'392'000'000;  // 2026-11-22T00:00:00Z
constexpr TimeRange kWholeHour{kHour, kHour + kMsPerHour};

using Minutes = std::map<int64_t, std::array<int64_t, kBucketCount>>;  // minute start -> buckets

RollupRow Row(int minute, std::array<int64_t, kBucketCount> ms) {
  RollupRow r;
  r.period_ms = kHour + minute * kMsPerMinute;
  r.ms = ms;
  return r;
}

Minutes Decoded(std::string_view blob, const TimeRange& range = kWholeHour, bool* ok = nullptr) {
  Minutes out;
  bool good = DecodeMinuteBlob(blob, kHour, 7, range, [&](const RollupRow& r) {
    EXPECT_EQ(r.device_id, 7);
    EXPECT_EQ(out.count(r.period_ms), 0u) << "a minute given twice";
    out[r.period_ms] = r.ms;
  });
  if (ok != nullptr) *ok = good;
  else EXPECT_TRUE(good);
  return out;
}

// The layout stores written before the compact format: 60 minutes x kBucketCount
// little-endian uint32, written here by hand as the old code did.
std::string LegacyBlob(const std::vector<RollupRow>& rows) {
  std::string blob(kLegacyMinuteBlobSize, '\0');
  for (const RollupRow& r : rows) {
    size_t minute = static_cast<size_t>((r.period_ms - kHour) / kMsPerMinute);
    for (size_t b = 0; b < kBucketCount; ++b) {
      auto v = static_cast<uint32_t>(r.ms[b]);
      for (size_t k = 0; k < 4; ++k) blob[(minute * kBucketCount + b) * 4 + k] = static_cast<char>(v >> (8 * k));
    }
  }
  return blob;
}

TEST(MinuteBlobTest, AnHourBusyThroughoutTakesThreeBytes) {
  std::vector<RollupRow> rows;
  for (int m = 0; m < 60; ++m) rows.push_back(Row(m, {60'000, 0, 0, 0, 0}));
  auto blob = EncodeMinuteBlob(kHour, rows);
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  EXPECT_EQ(blob->size(), 3u);  // tag, run of 60, pattern; the 60,000 is left out: the minute is whole
  Minutes got = Decoded(*blob);
  ASSERT_EQ(got.size(), 60u);
  for (const auto& [t, ms] : got) EXPECT_EQ(ms[0], 60'000) << FormatTime(t);
}

TEST(MinuteBlobTest, AMinuteSplitBetweenTwoBucketsKeepsOneFigure) {
  // 60 different minutes, each active for m+1 seconds and idle for the rest.
  std::vector<RollupRow> rows;
  for (int m = 0; m < 60; ++m) rows.push_back(Row(m, {(m + 1) * 1'000, 60'000 - (m + 1) * 1'000, 0, 0, 0}));
  rows.back().ms = {60'000, 0, 0, 0, 0};  // the last minute is active throughout
  auto blob = EncodeMinuteBlob(kHour, rows);
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  EXPECT_LE(blob->size(), 1u + 60u * 5u);
  Minutes got = Decoded(*blob);
  ASSERT_EQ(got.size(), 60u);
  for (const RollupRow& r : rows) EXPECT_EQ(got[r.period_ms], r.ms) << FormatTime(r.period_ms);
}

TEST(MinuteBlobTest, EmptyMinutesAreNotGivenAndTrailingOnesTakeNoSpace) {
  auto blob = EncodeMinuteBlob(kHour, {Row(3, {0, 0, 30'000, 0, 0}), Row(10, {1, 2, 3, 4, 5})});
  ASSERT_TRUE(blob.ok()) << blob.status().message();
  // tag; 3 empty minutes; minute 3 (not whole); 6 empty; minute 10 with five figures.
  EXPECT_EQ(blob->size(), 1u + (1 + 1) + (1 + 1 + 3) + (1 + 1) + (1 + 1 + 5));
  Minutes got = Decoded(*blob);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[kHour + 3 * kMsPerMinute], (std::array<int64_t, kBucketCount>{0, 0, 30'000, 0, 0}));
  EXPECT_EQ(got[kHour + 10 * kMsPerMinute], (std::array<int64_t, kBucketCount>{1, 2, 3, 4, 5}));
  auto none = EncodeMinuteBlob(kHour, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), 1u);
  EXPECT_TRUE(Decoded(*none).empty());
}

TEST(MinuteBlobTest, GivesOnlyTheMinutesInTheRange) {
  std::vector<RollupRow> rows;
  for (int m = 0; m < 60; ++m) rows.push_back(Row(m, {60'000, 0, 0, 0, 0}));
  auto blob = EncodeMinuteBlob(kHour, rows);
  ASSERT_TRUE(blob.ok());
  Minutes got = Decoded(*blob, {kHour + 5 * kMsPerMinute, kHour + 8 * kMsPerMinute});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got.begin()->first, kHour + 5 * kMsPerMinute);
}

// Random hours against the old fixed layout as the oracle: both decode to the same minutes,
// and the compact blob is always shorter than the fixed one.
TEST(MinuteBlobTest, RandomHoursDecodeAsTheFixedLayoutDoes) {
  std::mt19937_64 rng(20261202);
  for (int trial = 0; trial < 2'000; ++trial) {
    std::vector<RollupRow> rows;
    std::array<int64_t, kBucketCount> last{};
    for (int m = 0; m < 60; ++m) {
      int kind = static_cast<int>(rng() % 4);
      if (kind == 0) continue;  // no time this minute
      if (kind == 1 && m > 0) {
        rows.push_back(Row(m, last));  // repeats the minute before
        continue;
      }
      std::array<int64_t, kBucketCount> ms{};
      int64_t left = kind == 2 ? 60'000 : static_cast<int64_t>(rng() % 60'001);
      for (size_t b = 0; b + 1 < kBucketCount && left > 0; ++b) {
        if (rng() % 2) continue;
        ms[b] = static_cast<int64_t>(rng() % static_cast<uint64_t>(left + 1));
        left -= ms[b];
      }
      ms[kBucketCount - 1] = left;
      rows.push_back(Row(m, ms));
      last = ms;
    }
    auto blob = EncodeMinuteBlob(kHour, rows);
    ASSERT_TRUE(blob.ok()) << blob.status().message();
    ASSERT_LT(blob->size(), kLegacyMinuteBlobSize);
    ASSERT_EQ(Decoded(*blob), Decoded(LegacyBlob(rows))) << "trial " << trial;
  }
}

TEST(MinuteBlobTest, ReadsTheFixedLayoutOfOlderStores) {
  std::string legacy = LegacyBlob({Row(0, {60'000, 0, 0, 0, 0}), Row(59, {0, 0, 0, 0, 42})});
  Minutes got = Decoded(legacy);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[kHour + 59 * kMsPerMinute][4], 42);
}

TEST(MinuteBlobTest, RefusesRowsItCannotHold) {
  EXPECT_FALSE(EncodeMinuteBlob(kHour, {Row(60, {1, 0, 0, 0, 0})}).ok());  // the next hour
  EXPECT_FALSE(EncodeMinuteBlob(kHour, {Row(-1, {1, 0, 0, 0, 0})}).ok());
  EXPECT_FALSE(EncodeMinuteBlob(kHour, {Row(0, {60'001, 0, 0, 0, 0})}).ok());
  EXPECT_FALSE(EncodeMinuteBlob(kHour, {Row(0, {-1, 0, 0, 0, 0})}).ok());
}

std::string Blob(std::initializer_list<uint64_t> varints) {
  std::string out(1, '\x01');
  for (uint64_t v : varints) PutVarint(out, v);
  return out;
}

TEST(MinuteBlobTest, CorruptBlobsAreRefused) {
  auto refused = [](const std::string& blob) {
    bool ok = true;
    Decoded(blob, kWholeHour, &ok);
    return !ok;
  };
  auto good = EncodeMinuteBlob(kHour, {Row(0, {30'000, 30'000, 0, 0, 0}), Row(1, {5, 0, 0, 0, 0})});
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, Blob({1, 0x23, 30'000, 1, 0x01, 5}));  // the format as docs describe it
  EXPECT_FALSE(refused(*good));
  EXPECT_TRUE(refused(""));
  EXPECT_TRUE(refused("\x02" + good->substr(1)));          // an unknown format
  EXPECT_TRUE(refused(good->substr(0, good->size() - 1)));  // truncated
  EXPECT_TRUE(refused(Blob({61, 0x21})));                   // a run past the hour
  EXPECT_TRUE(refused(Blob({60, 0x21, 1, 0x21})));          // runs past the hour
  EXPECT_TRUE(refused(Blob({0, 0x21})));                    // an empty run
  EXPECT_TRUE(refused(Blob({1, 0x23, 60'000})));            // whole, but nothing left for the last
  EXPECT_TRUE(refused(Blob({1, 0x01, 0})));                 // a bucket said to hold time holds none
  EXPECT_TRUE(refused(Blob({1, 0x01, 60'001})));            // more than a minute
  EXPECT_TRUE(refused(Blob({1, 0x40})));                    // an unknown pattern bit
  EXPECT_TRUE(refused(Blob({1, 0x20})));                    // whole, with no bucket
  EXPECT_TRUE(refused(std::string(kLegacyMinuteBlobSize - 1, '\0')));
}

// A device-day's minutes: each hour's blob as it was, found again by its hour; a replaced
// hour takes its new blob, an emptied one goes, the others stay; the day decodes as its
// hours do, in time order, without the hours the reader leaves out.
TEST(DayMinutesTest, HoursAreReplacedOneByOneAndTheDayDecodesAsTheirBlobs) {
  const int64_t day = kHour;  // a midnight
  auto hour_blob = [&](int hour, int64_t active) {
    std::vector<RollupRow> rows;
    for (int m = 0; m < 60; m += 7) {
      RollupRow r = Row(m, {active, 60'000 - active, 0, 0, 0});
      r.period_ms += hour * kMsPerHour;
      rows.push_back(r);
    }
    return *EncodeMinuteBlob(day + hour * kMsPerHour, rows);
  };
  auto v = ReplaceDayMinutes("", {{5, hour_blob(5, 100)}, {0, hour_blob(0, 200)}, {23, LegacyBlob({})}});
  ASSERT_TRUE(v.ok()) << v.status().message();
  auto hours = SplitDayMinutes(*v);
  ASSERT_TRUE(hours.has_value());
  ASSERT_EQ(hours->size(), 3u);
  EXPECT_EQ(hours->at(0).hour, 0);
  EXPECT_EQ(hours->at(0).blob, hour_blob(0, 200));
  EXPECT_EQ(hours->at(1).hour, 5);
  EXPECT_EQ(hours->at(2).blob.size(), kLegacyMinuteBlobSize) << "an older store's layout, kept as it was";
  // Hour 5 replaced, hour 0 emptied, hour 9 added; the last of two replacements wins.
  auto w = ReplaceDayMinutes(*v, {{5, hour_blob(5, 1)}, {0, ""}, {9, hour_blob(9, 2)}, {5, hour_blob(5, 300)}});
  ASSERT_TRUE(w.ok());
  std::map<int64_t, int64_t> active;  // minute -> active ms
  int64_t last = -1;
  ASSERT_TRUE(DecodeDayMinutes(*w, day, 7, {day, day + kMsPerDay}, [](int64_t) { return false; },
                               [&](const RollupRow& r) {
                                 EXPECT_GT(r.period_ms, last) << "in time order";
                                 last = r.period_ms;
                                 active[r.period_ms] = r.ms[0];
                               }));
  EXPECT_EQ(active.size(), 18u);  // 9 minutes of hours 5 and 9; the legacy hour holds no time
  EXPECT_EQ(active.at(day + 5 * kMsPerHour), 300);
  EXPECT_EQ(active.at(day + 9 * kMsPerHour + 7 * kMsPerMinute), 2);
  // A range and a skipped hour.
  active.clear();
  ASSERT_TRUE(DecodeDayMinutes(*w, day, 7, {day + 5 * kMsPerHour + 30 * kMsPerMinute, day + kMsPerDay},
                               [&](int64_t hour) { return hour == day + 9 * kMsPerHour; },
                               [&](const RollupRow& r) { active[r.period_ms] = r.ms[0]; }));
  EXPECT_EQ(active.size(), 4u);  // minutes 35, 42, 49 and 56 of hour 5
  // Every hour emptied: no value at all.
  auto none = ReplaceDayMinutes(*w, {{5, ""}, {9, ""}, {23, ""}});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(DayMinutesTest, BrokenDaysAreCorrupt) {
  const std::string good = *ReplaceDayMinutes("", {{3, *EncodeMinuteBlob(kHour + 3 * kMsPerHour, {})}});
  for (const std::string& bad : {std::string(), std::string("\x01"), std::string("\x02\x18\x01\x01"),
                                 std::string("\x02\x03\x05\x01"), good + good.substr(1),
                                 std::string("\x02\x04\x01\x01\x03\x01\x01")}) {
    EXPECT_FALSE(SplitDayMinutes(bad).has_value()) << "size " << bad.size();
    if (!bad.empty()) {
      EXPECT_FALSE(ReplaceDayMinutes(bad, {}).ok());
    }
  }
  EXPECT_TRUE(SplitDayMinutes(good).has_value());
  EXPECT_FALSE(ReplaceDayMinutes("", {{24, "x"}}).ok()) << "an hour outside the day";
}

// PostgreSQL's rows of a device-day (schema 16): the folded value, and hour rows written
// since that take their hours' places, an empty one hiding its hour.
TEST(DayMinutesTest, HourRowsFoldIntoTheDaysValueInTheirPlaces) {
  const int64_t day = kHour;  // a midnight
  auto blob = [&](int hour, int64_t active) {
    RollupRow r = Row(0, {active, 60'000 - active, 0, 0, 0});
    r.period_ms += hour * kMsPerHour;
    return *EncodeMinuteBlob(day + hour * kMsPerHour, {r});
  };
  const std::string folded = *ReplaceDayMinutes("", {{1, blob(1, 10)}, {2, blob(2, 20)}, {3, blob(3, 30)}});
  const std::string b2 = blob(2, 99), b7 = blob(7, 70);
  const std::vector<DayMinutesRow> rows = {{-1, folded}, {2, b2}, {3, ""}, {7, b7}};
  auto v = FoldDayMinutes(rows);
  ASSERT_TRUE(v.ok()) << v.status().message();
  // The same, by ReplaceDayMinutes' road from the hours one by one.
  EXPECT_EQ(*v, *ReplaceDayMinutes("", {{1, blob(1, 10)}, {2, b2}, {7, b7}}));
  // In any order; a folded day alone is itself; hour rows alone are a day of them.
  EXPECT_EQ(*FoldDayMinutes(std::vector<DayMinutesRow>{{7, b7}, {3, ""}, {-1, folded}, {2, b2}}), *v);
  EXPECT_EQ(*FoldDayMinutes(std::vector<DayMinutesRow>{{-1, folded}}), folded);
  EXPECT_EQ(*FoldDayMinutes(std::vector<DayMinutesRow>{{7, b7}}), *ReplaceDayMinutes("", {{7, b7}}));
  // Nothing left: no value.
  EXPECT_TRUE(FoldDayMinutes(std::vector<DayMinutesRow>{{1, ""}})->empty());
  EXPECT_TRUE(FoldDayMinutes(std::vector<DayMinutesRow>{})->empty());
  // A corrupt folded value (alone or not) and an hour outside the day are errors.
  EXPECT_FALSE(FoldDayMinutes(std::vector<DayMinutesRow>{{-1, "\x02\x18\x01\x01"}}).ok());
  EXPECT_FALSE(FoldDayMinutes(std::vector<DayMinutesRow>{{-1, "\x02\x18\x01\x01"}, {2, b2}}).ok());
  EXPECT_FALSE(FoldDayMinutes(std::vector<DayMinutesRow>{{24, b2}}).ok());
  EXPECT_FALSE(FoldDayMinutes(std::vector<DayMinutesRow>{{-2, b2}}).ok());
}

}  // namespace
}  // namespace gpuledger::store
