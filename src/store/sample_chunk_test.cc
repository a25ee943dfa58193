#include "store/sample_chunk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/time.h"
#include "store/store.h"
#include "store/testing/chunk_samples.h"
#include "store/testing/legacy_sample_chunk.h"
#include "store/varint.h"

namespace gpuledger::store {
namespace {

constexpr int64_t kT0 = 1'795'392'000'000;  // 2026-11-22T00:00:00Z

Sample Full(int64_t t) {
  Sample s;
  s.t_ms = t;
  s.sm_active = 0.4321;
  s.sm_occupancy = 0.25;
  s.tensor_active = 0.0;
  s.dram_active = 1.0;
  s.gpu_util = 0.97;
  s.fb_used_mib = 81'559;
  s.power_watts = 612.3;
  s.health = Health::kDegraded;
  s.process_count = 3;
  s.gaps = IdleGaps{60'000, 12'345, 6'789};
  return s;
}

std::string Encode(const std::vector<Sample>& in, int64_t first_ms) {
  ChunkEncoder e(first_ms);
  for (const Sample& s : in) e.Add(s);
  return e.Finish();
}

std::string EncodeLegacy(const std::vector<Sample>& in, int64_t first_ms) {
  return testing::LegacyChunk(in, first_ms);
}

std::vector<Sample> DecodeAll(std::string_view data, int64_t first_ms) {
  std::vector<Sample> out;
  EXPECT_TRUE(DecodeChunk(data, first_ms, std::numeric_limits<int64_t>::min(),
                          std::numeric_limits<int64_t>::max(), out));
  return out;
}

// Compares every stored field exactly: the inputs hold values already at the store's
// precision, so what comes back must be the very doubles that went in.
void ExpectSame(const std::vector<Sample>& got, const std::vector<Sample>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "sample " << i);
    const Sample& g = got[i];
    const Sample& w = want[i];
    EXPECT_EQ(g.t_ms, w.t_ms);
    EXPECT_EQ(g.sm_active, w.sm_active);
    EXPECT_EQ(g.sm_occupancy, w.sm_occupancy);
    EXPECT_EQ(g.tensor_active, w.tensor_active);
    EXPECT_EQ(g.dram_active, w.dram_active);
    EXPECT_EQ(g.gpu_util, w.gpu_util);
    EXPECT_EQ(g.fb_used_mib, w.fb_used_mib);
    EXPECT_EQ(g.power_watts, w.power_watts);
    EXPECT_EQ(g.health, w.health);
    EXPECT_EQ(g.process_count, w.process_count);
    ASSERT_EQ(g.gaps.has_value(), w.gaps.has_value());
    if (w.gaps) {
      EXPECT_EQ(g.gaps->interval_ms, w.gaps->interval_ms);
      EXPECT_EQ(g.gaps->idle_ms, w.gaps->idle_ms);
      EXPECT_EQ(g.gaps->short_idle_ms, w.gaps->short_idle_ms);
    }
    EXPECT_TRUE(g.device_uuid.empty());
    EXPECT_TRUE(g.processes.empty());
  }
}

// Random samples in time order: figures absent or present, steady or jumping, small and
// huge (the integers up to int64's ends; the scaled figures up to where a double still
// holds their integer exactly), times equal, steady or jumping, every health.
std::vector<Sample> RandomSamples(std::mt19937_64& rng, size_t n, int64_t t0) {
  std::uniform_int_distribution<int> pick(0, 9);
  auto value = [&](int64_t prev, int64_t limit) -> int64_t {
    switch (pick(rng)) {
      case 0:
      case 1:
      case 2:
        return prev;  // unchanged
      case 3:
        return std::uniform_int_distribution<int64_t>(-limit, limit)(rng);  // anywhere
      case 4:
        return pick(rng) < 5 ? limit : -limit;  // an end
      default:
        // A step of 10, kept within [-limit, limit] without overflowing: prev may be at
        // an end of int64.
        int64_t step = std::uniform_int_distribution<int64_t>(-300, 300)(rng) * 10;
        if (step > 0 && prev > limit - step) return limit;
        if (step < 0 && prev < -limit - step) return -limit;
        return prev + step;
    }
  };
  constexpr int64_t kExact = int64_t{1}
                             << 50;  // ratio integers / 1e4 and back are exact below this
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<Sample> out;
  int64_t t = t0;
  int64_t v[11] = {};
  for (size_t i = 0; i < n; ++i) {
    Sample s;
    switch (pick(rng)) {
      case 0:
        break;  // an equal time
      case 1:
        t += std::uniform_int_distribution<int64_t>(1, int64_t{1} << 40)(rng);
        break;  // a jump
      case 2:
        t += 1;
        break;
      default:
        t += 10'000;
    }
    s.t_ms = t;
    s.health = static_cast<Health>(pick(rng) % 4);
    std::optional<double> Sample::*const figures[] = {
        &Sample::sm_active, &Sample::sm_occupancy, &Sample::tensor_active, &Sample::dram_active,
        &Sample::gpu_util,  &Sample::fb_used_mib,  &Sample::power_watts};
    const double scales[] = {1e4, 1e4, 1e4, 1e4, 1e4, 1, 10};
    for (int k = 0; k < 7; ++k) {
      if (pick(rng) < 2) continue;  // absent
      v[k] = value(v[k], kExact);
      s.*figures[k] = static_cast<double>(v[k]) / scales[k];
    }
    if (pick(rng) >= 2) {
      v[7] = value(v[7], std::numeric_limits<int32_t>::max());
      s.process_count = static_cast<int32_t>(v[7]);
    }
    if (pick(rng) >= 3) {
      for (int k = 8; k < 11; ++k) v[k] = value(v[k], kMax);
      s.gaps = IdleGaps{v[8], v[9], v[10]};
    }
    out.push_back(s);
  }
  return out;
}

TEST(SampleChunkTest, RoundTripsEveryFigureAtTheStoresPrecision) {
  std::vector<Sample> in = {Full(kT0), Sample{.t_ms = kT0 + 60'000, .gpu_util = 0.123456},
                            Full(kT0 + 61'000)};
  in[2].sm_active = 0.00004;  // below the precision: kept to 1e-4
  in[2].gaps.reset();
  in[2].process_count = 0;
  std::string data = Encode(in, kT0);
  std::vector<Sample> out;
  ASSERT_TRUE(DecodeChunk(data, kT0, 0, kT0 + kMsPerHour, out));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].t_ms, kT0);
  EXPECT_DOUBLE_EQ(*out[0].sm_active, 0.4321);
  EXPECT_DOUBLE_EQ(*out[0].sm_occupancy, 0.25);
  EXPECT_DOUBLE_EQ(*out[0].tensor_active, 0.0);
  EXPECT_DOUBLE_EQ(*out[0].dram_active, 1.0);
  EXPECT_DOUBLE_EQ(*out[0].gpu_util, 0.97);
  EXPECT_DOUBLE_EQ(*out[0].fb_used_mib, 81'559);
  EXPECT_DOUBLE_EQ(*out[0].power_watts, 612.3);
  EXPECT_EQ(out[0].health, Health::kDegraded);
  EXPECT_EQ(*out[0].process_count, 3);
  EXPECT_EQ(out[0].gaps->interval_ms, 60'000);
  EXPECT_EQ(out[0].gaps->idle_ms, 12'345);
  EXPECT_EQ(out[0].gaps->short_idle_ms, 6'789);
  // Absent figures stay absent.
  EXPECT_EQ(out[1].t_ms, kT0 + 60'000);
  EXPECT_FALSE(out[1].sm_active.has_value());
  EXPECT_FALSE(out[1].fb_used_mib.has_value());
  EXPECT_FALSE(out[1].process_count.has_value());
  EXPECT_FALSE(out[1].gaps.has_value());
  EXPECT_DOUBLE_EQ(*out[1].gpu_util, 0.1235);
  EXPECT_EQ(out[1].health, Health::kOk);
  EXPECT_DOUBLE_EQ(*out[2].sm_active, 0.0);
  EXPECT_EQ(*out[2].process_count, 0);
  EXPECT_FALSE(out[2].gaps.has_value());
}

TEST(SampleChunkTest, RandomSamplesComeBackExactlyAsTheyWentIn) {
  std::mt19937_64 rng(20261122);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    size_t n = round < 20 ? static_cast<size_t>(round) + 1
                          : std::uniform_int_distribution<size_t>(1, 600)(rng);
    // The chunk's first time is its first sample's, or (a chunk written by a test) before it.
    int64_t first = kT0 - (round % 3 == 0 ? 5'000 : 0);
    std::vector<Sample> in = RandomSamples(rng, n, kT0);
    ExpectSame(DecodeAll(Encode(in, first), first), in);
  }
}

TEST(SampleChunkTest, WritesBothTheDeflatedAndThePlainBodyAndReadsBoth) {
  // A lone sample gains nothing from deflate; a steady hour does.
  std::vector<Sample> one = {Full(kT0)};
  std::string small = Encode(one, kT0);
  ASSERT_GE(small.size(), 2u);
  EXPECT_EQ(static_cast<uint8_t>(small[0]), 0x80);  // varint 0x200: plain
  EXPECT_EQ(static_cast<uint8_t>(small[1]), 0x04);
  ExpectSame(DecodeAll(small, kT0), one);
  std::vector<Sample> hour;
  for (int i = 0; i < 360; ++i) {
    hour.push_back(Full(kT0 + i * 10'000));
    hour.back().sm_active = (i * 37 % 100) / 100.0;
  }
  std::string big = Encode(hour, kT0);
  EXPECT_EQ(static_cast<uint8_t>(big[0]), 0x81);  // varint 0x201: deflated
  EXPECT_EQ(static_cast<uint8_t>(big[1]), 0x04);
  ExpectSame(DecodeAll(big, kT0), hour);
}

TEST(SampleChunkTest, ChunksInTheLegacyRowFormatStillDecode) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 100; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::vector<Sample> in =
        RandomSamples(rng, std::uniform_int_distribution<size_t>(1, 200)(rng), kT0);
    std::string legacy = EncodeLegacy(in, kT0);
    ExpectSame(DecodeAll(legacy, kT0), in);
    std::vector<int64_t> times;
    ASSERT_TRUE(ChunkTimes(legacy, kT0, times));
    ASSERT_EQ(times.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(times[i], in[i].t_ms);
  }
}

TEST(SampleChunkTest, DecodesARangeAndTheTimesAlone) {
  std::vector<Sample> in;
  for (int i = 0; i < 60; ++i) in.push_back(Full(kT0 + i * 60'000));
  for (const std::string& data : {Encode(in, kT0), EncodeLegacy(in, kT0)}) {
    std::vector<Sample> out;
    ASSERT_TRUE(DecodeChunk(data, kT0, kT0 + 10 * 60'000, kT0 + 19 * 60'000, out));
    ASSERT_EQ(out.size(), 10u);
    EXPECT_EQ(out.front().t_ms, kT0 + 10 * 60'000);
    EXPECT_EQ(out.back().t_ms, kT0 + 19 * 60'000);
    EXPECT_EQ(out.front().gaps->idle_ms, 12'345);
    std::vector<int64_t> times;
    ASSERT_TRUE(ChunkTimes(data, kT0, times));
    ASSERT_EQ(times.size(), 60u);
    EXPECT_EQ(times[59], kT0 + 59 * 60'000);
  }
}

TEST(SampleChunkTest, ATruncatedChunkIsCorrupt) {
  std::mt19937_64 rng(3);
  std::vector<Sample> hour = RandomSamples(rng, 360, kT0);
  for (const std::string& data :
       {Encode({Full(kT0)}, kT0), Encode(hour, kT0), EncodeLegacy({Full(kT0)}, kT0)}) {
    for (size_t cut = 1; cut < data.size(); ++cut) {
      std::vector<Sample> out;
      EXPECT_FALSE(
          DecodeChunk(std::string_view(data).substr(0, cut), kT0, 0, kT0 + kMsPerHour, out))
          << cut;
      std::vector<int64_t> times;
      EXPECT_FALSE(ChunkTimes(std::string_view(data).substr(0, cut), kT0, times)) << cut;
    }
  }
}

TEST(SampleChunkTest, CorruptBytesAreRefusedOrDecodedButNeverCrash) {
  std::mt19937_64 rng(11);
  std::vector<Sample> hour = RandomSamples(rng, 120, kT0);
  const std::string good[] = {Encode(hour, kT0), Encode({Full(kT0), Full(kT0 + 10'000)}, kT0)};
  int refused = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string data = good[round % 2];
    int flips = 1 + round % 4;
    for (int f = 0; f < flips; ++f) {
      data[std::uniform_int_distribution<size_t>(0, data.size() - 1)(rng)] =
          static_cast<char>(rng());
    }
    std::vector<Sample> out;
    if (!DecodeChunk(data, kT0, 0, kT0 + kMsPerHour, out)) ++refused;
    std::vector<int64_t> times;
    (void)ChunkTimes(data, kT0, times);
  }
  EXPECT_GT(refused, 2000) << "most corruptions break a varint, a run or the deflate stream";
  // Tags the format does not have, and a deflated chunk claiming an absurd size.
  std::vector<Sample> out;
  EXPECT_FALSE(DecodeChunk(std::string("\x82\x04", 2), kT0, 0, kT0 + kMsPerHour, out));
  EXPECT_FALSE(
      DecodeChunk(std::string("\x81\x04\xff\xff\xff\xff\x0f", 7), kT0, 0, kT0 + kMsPerHour, out));
  EXPECT_FALSE(
      DecodeChunk(std::string("\x80\x04\xff\xff\xff\xff\x0f", 7), kT0, 0, kT0 + kMsPerHour, out));
  // Times that go back: a step below zero.
  EXPECT_FALSE(
      DecodeChunk(std::string("\x80\x04\x02\x00\x00\x03\x00", 7), kT0, 0, kT0 + kMsPerHour, out));
}


// The activity figures alone (DecodeActivity), by a road of the test's own: the whole
// samples, and of each the figure the ledger reads as activity (sm_active where present,
// else gpu_util), the memory, the process count and the gaps.
std::vector<ActivitySample> ActivityOfWhole(const std::vector<Sample>& whole) {
  std::vector<ActivitySample> out;
  for (const Sample& s : whole) {
    ActivitySample a;
    a.t_ms = s.t_ms;
    if (s.sm_active) {
      a.activity = s.sm_active;
    } else if (s.gpu_util) {
      a.activity = s.gpu_util;
    }
    a.fb_used_mib = s.fb_used_mib;
    a.process_count = s.process_count;
    a.gaps = s.gaps;
    out.push_back(a);
  }
  return out;
}

TEST(SampleChunkTest, TheActivityFiguresAloneAreThoseOfTheWholeSamples) {
  std::mt19937_64 rng(20261204);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::vector<Sample> in = RandomSamples(rng, std::uniform_int_distribution<size_t>(1, 400)(rng), kT0);
    // A part of the chunk's span (or all of it, or none), in either format.
    const int64_t last = in.back().t_ms;
    int64_t from = std::uniform_int_distribution<int64_t>(kT0 - 10, last)(rng);
    int64_t to = round % 5 == 0 ? std::numeric_limits<int64_t>::max()
                                : std::uniform_int_distribution<int64_t>(from - 10, last + 10)(rng);
    for (const std::string& data : {Encode(in, kT0), EncodeLegacy(in, kT0)}) {
      std::vector<Sample> whole;
      ASSERT_TRUE(DecodeChunk(data, kT0, from, to, whole));
      std::vector<ActivitySample> got = {ActivitySample{.t_ms = 1}};  // appended to, not replaced
      ASSERT_TRUE(DecodeActivity(data, kT0, from, to, got));
      std::vector<ActivitySample> want = ActivityOfWhole(whole);
      want.insert(want.begin(), ActivitySample{.t_ms = 1});
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "sample " << i;
    }
  }
  // Corrupt chunks are refused by both reads alike.
  std::vector<Sample> hour = RandomSamples(rng, 120, kT0);
  std::string good = Encode(hour, kT0);
  int refused = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string data = round % 3 == 0 ? good.substr(0, 1 + rng() % (good.size() - 1)) : good;
    data[std::uniform_int_distribution<size_t>(0, data.size() - 1)(rng)] = static_cast<char>(rng());
    std::vector<Sample> whole;
    std::vector<ActivitySample> got;
    bool ok = DecodeChunk(data, kT0, 0, kT0 + kMsPerHour, whole);
    ASSERT_EQ(DecodeActivity(data, kT0, 0, kT0 + kMsPerHour, got), ok) << round;
    if (ok) {
      EXPECT_EQ(got, ActivityOfWhole(whole)) << round;
    } else {
      ++refused;
    }
  }
  EXPECT_GT(refused, 500);
}

// Any split of a series of distinct instants into chunks (as the batches of a
// device-hour bring them, in either format, handed over in any order) merges back into
// that series, every figure as it was; merging the merged chunk again writes the same
// bytes; a corrupt chunk among them fails the merge.
TEST(SampleChunkTest, AnHoursChunksMergeIntoTheSeriesTheyWereCutFrom) {
  std::mt19937_64 rng(20261205);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    std::vector<Sample> series =
        RandomSamples(rng, std::uniform_int_distribution<size_t>(1, 400)(rng), kT0);
    series.erase(std::unique(series.begin(), series.end(),
                             [](const Sample& a, const Sample& b) { return a.t_ms == b.t_ms; }),
                 series.end());
    const size_t parts = std::uniform_int_distribution<size_t>(1, 8)(rng);
    std::vector<std::vector<Sample>> cut(parts);
    for (const Sample& smp : series) cut[std::uniform_int_distribution<size_t>(0, parts - 1)(rng)].push_back(smp);
    std::vector<StoredChunk> chunks;
    for (const auto& part : cut) {
      if (part.empty()) continue;
      const int64_t first = part.front().t_ms;
      chunks.push_back({first, round % 4 == 0 ? EncodeLegacy(part, first) : Encode(part, first)});
    }
    std::shuffle(chunks.begin(), chunks.end(), rng);
    MergedChunk merged;
    ASSERT_TRUE(MergeChunks(chunks, merged));
    ASSERT_EQ(merged.n, static_cast<int64_t>(series.size()));
    EXPECT_EQ(merged.first_ms, series.front().t_ms);
    EXPECT_EQ(merged.last_ms, series.back().t_ms);
    ExpectSame(DecodeAll(merged.data, merged.first_ms), series);
    MergedChunk again;
    ASSERT_TRUE(MergeChunks(std::vector<StoredChunk>{{merged.first_ms, merged.data}}, again));
    EXPECT_EQ(again.data, merged.data);
    if (chunks.size() > 1) {
      chunks.back().data.resize(chunks.back().data.size() / 2);
      MergedChunk broken;
      EXPECT_FALSE(MergeChunks(chunks, broken) && broken.n == merged.n) << "half a chunk merged as if whole";
    }
  }
  MergedChunk none;
  EXPECT_TRUE(MergeChunks({}, none));
  EXPECT_EQ(none.n, 0);
}

TEST(SampleChunkTest, AnHourOfABusyGpuTakesAFifthOfTheLegacyRows) {
  // Measured when the format was made: 2,319 bytes for this hour (legacy rows: 10,439).
  std::vector<Sample> hour = testing::DemoLikeSamples(kT0, 360, /*busy=*/true);
  std::string data = Encode(hour, kT0);
  EXPECT_LT(data.size(), 2'500u);
  EXPECT_GT(EncodeLegacy(hour, kT0).size(), 10'000u);
  ExpectSame(DecodeAll(data, kT0), hour);
  // An idle hour: every figure steady, so the columns are runs and constants.
  std::vector<Sample> idle;
  for (int i = 0; i < 360; ++i) {
    idle.push_back(Sample{.t_ms = kT0 + i * 10'000,
                          .sm_active = 0,
                          .sm_occupancy = 0,
                          .tensor_active = 0,
                          .dram_active = 0,
                          .gpu_util = 0,
                          .fb_used_mib = 450,
                          .power_watts = 70,
                          .process_count = 0});
  }
  std::string quiet = Encode(idle, kT0);
  EXPECT_LE(quiet.size(), 36u);  // measured: 35 (written plain: too small to deflate)
  ExpectSame(DecodeAll(quiet, kT0), idle);
}

// One read of samples brings at most 256 ranges, and past its first range no more than
// 64 device-days: a block ends where either bound is reached.
TEST(SampleReadEndTest, ABlockEndsAt256RangesOr64DeviceDays) {
  std::vector<DeviceRange> hours(600, DeviceRange{1, {0, kMsPerHour}});
  EXPECT_EQ(SampleReadEnd(hours, 0), 256u);
  EXPECT_EQ(SampleReadEnd(hours, 256), 512u);
  EXPECT_EQ(SampleReadEnd(hours, 512), 600u);
  EXPECT_EQ(SampleReadEnd(hours, 600), 600u);
  std::vector<DeviceRange> weeks(20, DeviceRange{1, {0, 7 * kMsPerDay}});
  EXPECT_EQ(SampleReadEnd(weeks, 0), 10u);  // 10 weeks reach 64 days; the 10th is taken
  std::vector<DeviceRange> year(3, DeviceRange{1, {0, 365 * kMsPerDay}});
  EXPECT_EQ(SampleReadEnd(year, 0), 1u);  // one range alone, however long
  EXPECT_EQ(SampleReadEnd(year, 1), 2u);
}

// Chunks read undecoded (EncodedChunks) decode by the ranges they were read for: each
// range's samples trimmed to it, two chunks of one hour that interleave put back in time
// order, whole samples and activity alike; a chunk that does not decode is named by its
// device and time, and one outside the bytes or the ranges read is refused.
TEST(EncodedChunksTest, DecodeByTheRangesTheyWereReadFor) {
  std::mt19937_64 rng(20261207);
  std::vector<Sample> hour = RandomSamples(rng, 60, kT0), next = RandomSamples(rng, 30, kT0 + kMsPerHour);
  for (size_t i = 0; i < hour.size(); ++i) hour[i].t_ms = kT0 + static_cast<int64_t>(i) * kMsPerMinute;
  for (size_t i = 0; i < next.size(); ++i) next[i].t_ms = kT0 + kMsPerHour + static_cast<int64_t>(i) * kMsPerMinute;
  std::vector<Sample> odd, even;  // two batches' chunks of the hour, interleaved
  for (size_t i = 0; i < hour.size(); ++i) (i % 2 ? odd : even).push_back(hour[i]);
  const std::vector<DeviceRange> ranges = {{7, {kT0, kT0 + 2 * kMsPerHour}},
                                           {9, {kT0 + 10 * kMsPerMinute, kT0 + 20 * kMsPerMinute}},
                                           {7, {kT0 + 3 * kMsPerHour, kT0 + 4 * kMsPerHour}}};
  EncodedChunks chunks;
  chunks.Add(0, even.front().t_ms, Encode(even, even.front().t_ms));
  chunks.Add(0, odd.front().t_ms, Encode(odd, odd.front().t_ms));
  chunks.Add(0, kT0 + kMsPerHour, Encode(next, kT0 + kMsPerHour));
  chunks.Add(1, kT0, Encode(hour, kT0));

  // What each range must bring, from the samples themselves.
  std::vector<std::vector<Sample>> want(ranges.size());
  for (const std::vector<Sample>* part : {&hour, &next}) {
    for (const Sample& smp : *part) want[0].push_back(smp);
  }
  for (const Sample& smp : hour) {
    if (smp.t_ms >= ranges[1].range.begin_ms && smp.t_ms <= ranges[1].range.end_ms) want[1].push_back(smp);
  }
  ASSERT_EQ(want[1].size(), 11u);
  auto samples = DecodeSamplesOf(ranges, chunks);
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 3u);
  for (size_t r = 0; r < 2; ++r) {
    SCOPED_TRACE(::testing::Message() << "range " << r);
    ExpectSame((*samples)[r], want[r]);
  }
  EXPECT_TRUE((*samples)[2].empty());
  auto activity = DecodeActivityOf(ranges, chunks);
  ASSERT_TRUE(activity.ok()) << activity.status().ToString();
  for (size_t r = 0; r < ranges.size(); ++r) EXPECT_EQ((*activity)[r], ActivityOfWhole(want[r])) << "range " << r;
  EXPECT_TRUE(DecodeActivityOf({}, EncodedChunks())->empty());

  EncodedChunks corrupt = chunks;
  corrupt.Add(1, kT0 + 5 * kMsPerMinute, std::string("\x80\x04\xff", 3));
  auto refused = DecodeActivityOf(ranges, corrupt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "store: sample_chunks row of device 9 at " + FormatTime(kT0 + 5 * kMsPerMinute) +
                " is corrupt: the chunk does not decode");
  EXPECT_FALSE(DecodeSamplesOf(ranges, corrupt).ok());
  EncodedChunks outside = chunks;
  outside.chunks.push_back({3, kT0, 0, 1});
  EXPECT_FALSE(DecodeActivityOf(ranges, outside).ok()) << "a fourth range, of three";
  outside = chunks;
  outside.chunks.back().size = outside.bytes.size();
  EXPECT_FALSE(DecodeActivityOf(ranges, outside).ok()) << "past the bytes read";
}

// Skip reads past varints exactly as Varint reads them: the same end, refused alike (cut
// short, or more than ten bytes long), over random byte strings of mostly long varints.
TEST(VarintTest, SkipEndsWhereVarintEnds) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20000; ++round) {
    std::string bytes(rng() % 40, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 4 == 0 ? rng() % 0x80 : 0x80 | rng() % 0x80);
    const size_t count = rng() % 6;
    VarintReader read(bytes), skip(bytes);
    bool ok = true;
    uint64_t v;
    for (size_t i = 0; i < count && ok; ++i) ok = read.Varint(v);
    ASSERT_EQ(skip.Skip(count), ok) << "round " << round;
    if (ok) {
      ASSERT_EQ(skip.remaining(), read.remaining()) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace gpuledger::store
