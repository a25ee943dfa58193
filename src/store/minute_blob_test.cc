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

}  // namespace
}  // namespace gpuledger::store
