// Decode and encode speed of sample chunks (store/sample_chunk.h), the legacy row format
// beside the columnar one, on the chunks the ledger reads: a busy and an idle device-hour
// at 10 s, and the six samples a live agent's 60 s batch brings. Never run by ctest.
//   build/release/src/store/sample_chunk_bench [--benchmark_filter=Decode]
// Each reports items (samples) per second and the chunk's bytes.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "store/sample_chunk.h"
#include "store/testing/chunk_samples.h"
#include "store/testing/legacy_sample_chunk.h"

namespace gpuledger::store {
namespace {

constexpr int64_t kT0 = 1'795'392'000'000;


std::string Chunk(const std::vector<Sample>& in, bool legacy) {
  if (legacy) return testing::LegacyChunk(in, kT0);
  ChunkEncoder e(kT0);
  for (const Sample& s : in) e.Add(s);
  return e.Finish();
}

// args: samples, busy (0/1), legacy (0/1)
void BM_Decode(benchmark::State& state) {
  std::vector<Sample> in = testing::DemoLikeSamples(kT0, static_cast<int>(state.range(0)), state.range(1) != 0);
  std::string data = Chunk(in, state.range(2) != 0);
  std::vector<Sample> out;
  for (auto _ : state) {
    out.clear();
    if (!DecodeChunk(data, kT0, kT0, kT0 + 3'600'000, out)) state.SkipWithError("corrupt");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.counters["bytes"] = static_cast<double>(data.size());
}
BENCHMARK(BM_Decode)
    ->ArgNames({"samples", "busy", "legacy"})
    ->Args({360, 1, 1})
    ->Args({360, 1, 0})
    ->Args({360, 0, 1})
    ->Args({360, 0, 0})
    ->Args({6, 1, 1})
    ->Args({6, 1, 0})
    ->Args({12, 1, 0})
    ->Args({12, 0, 0});

// The activity figures alone (DecodeActivity, what the right-sizing advice reads), on
// the same chunks; 12 samples is an hour at 300 s, the 10,000-GPU benchmark fleet's chunk.
void BM_DecodeActivity(benchmark::State& state) {
  std::vector<Sample> in = testing::DemoLikeSamples(kT0, static_cast<int>(state.range(0)), state.range(1) != 0);
  std::string data = Chunk(in, false);
  std::vector<ActivitySample> out;
  for (auto _ : state) {
    out.clear();
    if (!DecodeActivity(data, kT0, kT0, kT0 + 3'600'000, out)) state.SkipWithError("corrupt");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.counters["bytes"] = static_cast<double>(data.size());
}
BENCHMARK(BM_DecodeActivity)->ArgNames({"samples", "busy"})->Args({360, 1})->Args({12, 1})->Args({12, 0});

void BM_Encode(benchmark::State& state) {
  std::vector<Sample> in = testing::DemoLikeSamples(kT0, static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(Chunk(in, state.range(2) != 0));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Encode)
    ->ArgNames({"samples", "busy", "legacy"})
    ->Args({360, 1, 1})
    ->Args({360, 1, 0})
    ->Args({6, 1, 1})
    ->Args({6, 1, 0});

}  // namespace
}  // namespace gpuledger::store

BENCHMARK_MAIN();
