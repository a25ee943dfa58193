#include "store/sample_chunk.h"

#include <gtest/gtest.h>

#include "core/time.h"

namespace gpuledger::store {
namespace {

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

TEST(SampleChunkTest, RoundTripsEveryFigureAtTheStoresPrecision) {
  const int64_t t0 = 1'795'392'000'000;
  std::vector<Sample> in = {Full(t0), Sample{.t_ms = t0 + 60'000, .gpu_util = 0.123456},
                            Full(t0 + 61'000)};
  in[2].sm_active = 0.00004;  // below the precision: kept to 1e-4
  in[2].gaps.reset();
  in[2].process_count = 0;
  std::string data;
  int64_t prev = t0;
  for (const Sample& s : in) {
    AppendChunkSample(data, s, prev);
    prev = s.t_ms;
  }
  std::vector<Sample> out;
  ASSERT_TRUE(DecodeChunk(data, t0, 0, t0 + kMsPerHour, out));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].t_ms, t0);
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
  EXPECT_EQ(out[1].t_ms, t0 + 60'000);
  EXPECT_FALSE(out[1].sm_active.has_value());
  EXPECT_FALSE(out[1].fb_used_mib.has_value());
  EXPECT_FALSE(out[1].process_count.has_value());
  EXPECT_FALSE(out[1].gaps.has_value());
  EXPECT_DOUBLE_EQ(*out[1].gpu_util, 0.1235);
  EXPECT_EQ(out[1].health, Health::kOk);
  EXPECT_DOUBLE_EQ(*out[2].sm_active, 0.0);
  EXPECT_EQ(*out[2].process_count, 0);
  EXPECT_FALSE(out[2].gaps.has_value());
  // A minute-sampled GPU with every figure takes about 30 bytes a sample.
  EXPECT_LT(data.size(), 3 * 32u);
}

TEST(SampleChunkTest, DecodesARangeAndTheTimesAlone) {
  const int64_t t0 = 1'795'392'000'000;
  std::string data;
  for (int i = 0; i < 60; ++i) AppendChunkSample(data, Full(t0 + i * 60'000), i ? t0 + (i - 1) * 60'000 : t0);
  std::vector<Sample> out;
  ASSERT_TRUE(DecodeChunk(data, t0, t0 + 10 * 60'000, t0 + 19 * 60'000, out));
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(out.front().t_ms, t0 + 10 * 60'000);
  EXPECT_EQ(out.back().t_ms, t0 + 19 * 60'000);
  std::vector<int64_t> times;
  ASSERT_TRUE(ChunkTimes(data, t0, times));
  ASSERT_EQ(times.size(), 60u);
  EXPECT_EQ(times[59], t0 + 59 * 60'000);
}

TEST(SampleChunkTest, ATruncatedChunkIsCorrupt) {
  const int64_t t0 = 1'795'392'000'000;
  std::string data;
  AppendChunkSample(data, Full(t0), t0);
  for (size_t cut = 1; cut < data.size(); ++cut) {
    std::vector<Sample> out;
    EXPECT_FALSE(DecodeChunk(std::string_view(data).substr(0, cut), t0, 0, t0 + kMsPerHour, out)) << cut;
    std::vector<int64_t> times;
    EXPECT_FALSE(ChunkTimes(std::string_view(data).substr(0, cut), t0, times)) << cut;
  }
}

}  // namespace
}  // namespace gpuledger::store
