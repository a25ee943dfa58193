#include "store/serving_chunk.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "core/time.h"

namespace gpuledger::store {
namespace {

constexpr int64_t kHour = 1'790'812'800'000;  // 2026-10-01T00:00:00Z
constexpr int64_t kAll0 = std::numeric_limits<int64_t>::min(), kAll1 = std::numeric_limits<int64_t>::max();

// Bitwise equality of two optional figures: a NaN is itself, -0 is not 0.
::testing::AssertionResult SameFigure(const std::optional<double>& a, const std::optional<double>& b) {
  if (a.has_value() != b.has_value()) return ::testing::AssertionFailure() << "presence differs";
  if (a && std::bit_cast<uint64_t>(*a) != std::bit_cast<uint64_t>(*b)) {
    return ::testing::AssertionFailure() << *a << " != " << *b;
  }
  return ::testing::AssertionSuccess();
}

// What the store kept of a snapshot before chunks (a row: every figure as a double, each
// histogram as EncodeHistogram's text): the oracle a chunk must give back.
void ExpectSameAsARow(const ServingSnapshot& want, const ServingSnapshot& got) {
  EXPECT_EQ(want.t_ms, got.t_ms);
  for (auto f : {&ServingSnapshot::requests_waiting, &ServingSnapshot::requests_running,
                 &ServingSnapshot::kv_cache_usage_ratio, &ServingSnapshot::prompt_tokens_total,
                 &ServingSnapshot::generation_tokens_total, &ServingSnapshot::preemptions_total,
                 &ServingSnapshot::requests_total, &ServingSnapshot::executions_total,
                 &ServingSnapshot::queue_seconds_total, &ServingSnapshot::compute_seconds_total}) {
    EXPECT_TRUE(SameFigure(want.*f, got.*f)) << "at " << want.t_ms;
  }
  for (auto h : {&ServingSnapshot::prefill_seconds, &ServingSnapshot::decode_seconds,
                 &ServingSnapshot::iteration_tokens}) {
    CumulativeHistogram row;
    ASSERT_TRUE(DecodeHistogram(EncodeHistogram(want.*h), row));
    EXPECT_EQ(EncodeHistogram(row), EncodeHistogram(got.*h));
    EXPECT_EQ(row.le, (got.*h).le);
    EXPECT_EQ(row.count, (got.*h).count);
  }
}

CumulativeHistogram Histogram(double scale, double total) {
  CumulativeHistogram h;
  h.le = {0.01 * scale, 0.1 * scale, 1 * scale, std::numeric_limits<double>::infinity()};
  h.count = {std::floor(total / 4), std::floor(total / 2), std::floor(total * 0.9), total};
  h.sum = total * 0.137 * scale;
  h.total = total;
  return h;
}

// An hour of a vLLM engine scraped every minute, as the demo fleet's: counters that grow,
// gauges with a few decimals, histograms.
std::vector<ServingSnapshot> EngineHour(int64_t hour, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<ServingSnapshot> out;
  double requests = 1000, tokens = 5e6;
  for (int m = 0; m < 60; ++m) {
    ServingSnapshot s;
    s.t_ms = hour + m * kMsPerMinute + 250;
    s.requests_waiting = static_cast<double>(rng() % 4);
    s.requests_running = static_cast<double>(rng() % 40);
    s.kv_cache_usage_ratio = static_cast<double>(rng() % 10000) / 10000;
    requests += static_cast<double>(rng() % 500);
    tokens += static_cast<double>(rng() % 100000);
    s.requests_total = requests;
    s.prompt_tokens_total = tokens;
    s.generation_tokens_total = tokens / 4;
    s.preemptions_total = 3;
    s.queue_seconds_total = requests * 0.0125;
    s.compute_seconds_total = requests * 0.4375;
    s.prefill_seconds = Histogram(1, requests);
    s.decode_seconds = Histogram(10, requests);
    if (m % 2 == 0) s.iteration_tokens = Histogram(100, requests * 3);
    out.push_back(std::move(s));
  }
  return out;
}

TEST(ServingChunkTest, GivesBackEveryFigureAsARowKeptIt) {
  std::vector<ServingSnapshot> in = EngineHour(kHour, 1);
  // Figures no decimal scale holds, and the odd ones: raw bits.
  in[3].kv_cache_usage_ratio = 1.0 / 3;
  in[4].requests_running = -0.0;
  in[5].compute_seconds_total = std::numeric_limits<double>::quiet_NaN();
  in[6].queue_seconds_total = std::numeric_limits<double>::infinity();
  in[7].prompt_tokens_total = 1e300;
  in[8].generation_tokens_total = std::numeric_limits<double>::denorm_min();
  in[9].requests_waiting.reset();
  in[10].kv_cache_usage_ratio.reset();
  in[11] = ServingSnapshot{.t_ms = in[11].t_ms};  // nothing but its time
  in[12].t_ms = in[11].t_ms;                      // two at one time (merged chunks may hold them)
  std::string data = EncodeServingChunk(in);
  std::vector<ServingSnapshot> out;
  ASSERT_TRUE(DecodeServingChunk(data, in.front().t_ms, kAll0, kAll1, out));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) ExpectSameAsARow(in[i], out[i]);
  EXPECT_TRUE(out[0].job_id.empty() && out[0].engine.empty() && out[0].model.empty());
}

TEST(ServingChunkTest, GaugesAloneAreTheWholeDecodesGauges) {
  std::vector<ServingSnapshot> in = EngineHour(kHour, 2);
  in[9].requests_waiting.reset();
  in[10].kv_cache_usage_ratio = 0.1 + 0.2;  // raw bits
  std::string data = EncodeServingChunk(in);
  std::vector<ServingGauges> gauges;
  ASSERT_TRUE(DecodeServingGauges(data, in.front().t_ms, kAll0, kAll1, gauges));
  ASSERT_EQ(gauges.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(gauges[i].t_ms, in[i].t_ms);
    EXPECT_TRUE(SameFigure(gauges[i].requests_waiting, in[i].requests_waiting));
    EXPECT_TRUE(SameFigure(gauges[i].kv_cache_usage_ratio, in[i].kv_cache_usage_ratio));
  }
  std::vector<int64_t> times;
  ASSERT_TRUE(ServingChunkTimes(data, in.front().t_ms, times));
  ASSERT_EQ(times.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(times[i], in[i].t_ms);
  // The chunk's first bytes alone, as the stores read them for the advice, give the same;
  // they are a small part of it, and do not decode as a whole chunk.
  const std::string prefix = data.substr(0, ServingGaugesEnd(data));
  EXPECT_LT(prefix.size() * 3, data.size()) << prefix.size() << " of " << data.size();
  std::vector<ServingGauges> from_prefix;
  ASSERT_TRUE(DecodeServingGauges(prefix, in.front().t_ms, kAll0, kAll1, from_prefix));
  EXPECT_EQ(from_prefix, gauges);
  times.clear();
  ASSERT_TRUE(ServingChunkTimes(prefix, in.front().t_ms, times));
  EXPECT_EQ(times.size(), in.size());
  std::vector<ServingSnapshot> whole;
  EXPECT_FALSE(DecodeServingChunk(prefix, in.front().t_ms, kAll0, kAll1, whole));
}

TEST(ServingChunkTest, ReadsOnlyTheSnapshotsOfTheRange) {
  std::vector<ServingSnapshot> in = EngineHour(kHour, 3);
  std::string data = EncodeServingChunk(in);
  const int64_t from = in[10].t_ms, to = in[19].t_ms;  // both ends in
  std::vector<ServingSnapshot> out;
  ASSERT_TRUE(DecodeServingChunk(data, in.front().t_ms, from, to, out));
  ASSERT_EQ(out.size(), 10u);
  EXPECT_EQ(out.front().t_ms, from);
  EXPECT_EQ(out.back().t_ms, to);
  std::vector<ServingGauges> gauges;
  ASSERT_TRUE(DecodeServingGauges(data, in.front().t_ms, from + 1, to - 1, gauges));
  EXPECT_EQ(gauges.size(), 8u);
  // Appends: what `out` held stays.
  ASSERT_TRUE(DecodeServingChunk(data, in.front().t_ms, to, to, out));
  EXPECT_EQ(out.size(), 11u);
}

TEST(ServingChunkTest, AnHourOfAnEngineTakesLessThanItsRows) {
  std::vector<ServingSnapshot> in = EngineHour(kHour, 4);
  std::string data = EncodeServingChunk(in);
  // The rows' figures alone: 8 bytes a present figure, and the histograms' text.
  size_t rows = 0;
  for (const ServingSnapshot& s : in) {
    rows += 8 + 10 * 8 + EncodeHistogram(s.prefill_seconds).size() + EncodeHistogram(s.decode_seconds).size() +
            EncodeHistogram(s.iteration_tokens).size();
  }
  // This hour's counters and histograms move at random, more than an engine's do: a
  // third of the rows' bytes here (the demo fleet's figures: docs/store-postgresql.md).
  EXPECT_LT(data.size() * 3, rows) << data.size() << " bytes against " << rows;
}

TEST(ServingChunkTest, MergesChunksIntoOneInTimeOrder) {
  std::vector<ServingSnapshot> in = EngineHour(kHour, 5);
  // Three batches' chunks, the last holding the earliest minutes.
  std::vector<StoredChunk> chunks;
  auto part = [&](size_t b, size_t e) {
    std::vector<ServingSnapshot> p(in.begin() + static_cast<std::ptrdiff_t>(b), in.begin() + static_cast<std::ptrdiff_t>(e));
    chunks.push_back({p.front().t_ms, EncodeServingChunk(p)});
  };
  part(20, 40);
  part(40, 60);
  part(0, 20);
  MergedChunk merged;
  ASSERT_TRUE(MergeServingChunks(chunks, merged));
  EXPECT_EQ(merged.first_ms, in.front().t_ms);
  EXPECT_EQ(merged.last_ms, in.back().t_ms);
  EXPECT_EQ(merged.n, 60);
  std::vector<ServingSnapshot> out;
  ASSERT_TRUE(DecodeServingChunk(merged.data, merged.first_ms, kAll0, kAll1, out));
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) ExpectSameAsARow(in[i], out[i]);
  // A corrupt one fails the merge; none merges to nothing.
  chunks[1].data[0] = '\x7f';
  EXPECT_FALSE(MergeServingChunks(chunks, merged));
  EXPECT_TRUE(MergeServingChunks({}, merged));
  EXPECT_EQ(merged.n, 0);
}

TEST(ServingChunkTest, NoCutOrFlippedChunkDecodesPastItsBytes) {
  std::vector<ServingSnapshot> in = EngineHour(kHour, 6);
  for (const std::string& data : {EncodeServingChunk(in), EncodeServingChunk(std::span(in).first(2))}) {
    for (size_t n = 0; n < data.size(); ++n) {
      std::string cut = data.substr(0, n);  // its own allocation: ASan sees a read past it
      std::vector<ServingSnapshot> out;
      std::vector<ServingGauges> gauges;
      EXPECT_FALSE(DecodeServingChunk(cut, kHour, kAll0, kAll1, out)) << n;
      (void)DecodeServingGauges(cut, kHour, kAll0, kAll1, gauges);  // may hold the first section whole
    }
    std::mt19937 rng(7);
    for (int k = 0; k < 2000; ++k) {
      std::string bad = data;
      bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      std::vector<ServingSnapshot> out;
      std::vector<ServingGauges> gauges;
      (void)DecodeServingChunk(bad, kHour, kAll0, kAll1, out);
      (void)DecodeServingGauges(bad, kHour, kAll0, kAll1, gauges);
    }
  }
}

TEST(ServingChunkTest, GroupsABatchPerJobEngineModelAndHourAndNamesItsFirstDuplicate) {
  auto snap = [](int64_t t, std::string engine, std::string model) {
    ServingSnapshot s;
    s.t_ms = t;
    s.engine = std::move(engine);
    s.model = std::move(model);
    return s;
  };
  const std::vector<ServingSnapshot> batch = {
      snap(kHour + 120'000, "vllm", "a"),         // 0: job 7, hour 0
      snap(kHour + 60'000, "vllm", "a"),          // 1: job 7, hour 0, earlier
      snap(kHour + kMsPerHour, "vllm", "a"),      // 2: job 7, hour 1
      snap(kHour + 60'000, "triton", "a"),        // 3: another engine
      snap(kHour + 60'000, "vllm", "a"),          // 4: job 9
      snap(kHour + 120'000, "vllm", "a"),         // 5: job 7 again at 0's time
  };
  const std::vector<int64_t> jobs = {7, 7, 7, 7, 9, 7};
  std::vector<ServingChunkGroup> groups = GroupServing(batch, jobs);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].job_id, 7);
  EXPECT_EQ(groups[0].hour_ms, kHour);
  EXPECT_EQ(groups[0].indexes, (std::vector<size_t>{1, 0, 5}));  // by time, stable
  EXPECT_EQ(groups[1].hour_ms, kHour + kMsPerHour);
  EXPECT_EQ(groups[2].engine, "triton");
  EXPECT_EQ(groups[3].job_id, 9);
  std::vector<std::vector<int64_t>> stored(groups.size());
  EXPECT_EQ(FirstDuplicate(groups, stored, batch), std::optional<size_t>(5));
  // Without 5, one already stored names the batch's own.
  std::vector<ServingSnapshot> four(batch.begin(), batch.begin() + 5);
  groups = GroupServing(four, std::span(jobs).first(5));
  stored.assign(groups.size(), {});
  EXPECT_EQ(FirstDuplicate(groups, stored, four), std::nullopt);
  stored[3] = {kHour + 60'000};  // job 9's
  stored[2] = {kHour};           // triton's, another time
  EXPECT_EQ(FirstDuplicate(groups, stored, four), std::optional<size_t>(4));
}

}  // namespace
}  // namespace gpuledger::store
