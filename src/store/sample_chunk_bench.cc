// Decode and encode speed of sample chunks (store/sample_chunk.h), the legacy row format
// beside the columnar one, on the chunks the ledger reads: a busy and an idle device-hour
// at 10 s, and the six samples a live agent's 60 s batch brings. Never run by ctest.
//   build/release/src/store/sample_chunk_bench [--benchmark_filter=Decode]
// Each reports items (samples) per second and the chunk's bytes.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "store/sample_chunk.h"
#include "store/testing/legacy_sample_chunk.h"

namespace gpuledger::store {
namespace {

constexpr int64_t kT0 = 1'795'392'000'000;

// `n` samples at 10 s: busy (activity noisy around 0.7 at 1e-3, the other figures
// following it, as the demo fleet's training jobs) or idle (every figure steady).
std::vector<Sample> Samples(int n, bool busy) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> noise(-0.03, 0.03);
  std::vector<Sample> out;
  for (int i = 0; i < n; ++i) {
    double a = busy ? std::round((0.7 + noise(rng)) * 1000) / 1000 : 0;
    Sample s;
    s.t_ms = kT0 + i * 10'000;
    s.sm_active = a;
    s.sm_occupancy = std::round(a * 0.55 * 1000) / 1000;
    s.tensor_active = std::round(a * 0.6 * 1000) / 1000;
    s.dram_active = std::round(a * 0.4 * 1000) / 1000;
    s.gpu_util = busy ? std::min(1.0, std::round((a * 1.3 + 0.05) * 100) / 100) : 0;
    s.fb_used_mib = busy ? 61'440 : 450;
    s.power_watts = std::round((70 + a * 630) * 10) / 10;
    s.process_count = busy ? 1 : 0;
    if (busy) {
      int64_t idle = std::llround((1 - a) * 10'000);
      s.gaps = IdleGaps{10'000, idle, std::min<int64_t>(idle, 700)};
    }
    out.push_back(s);
  }
  return out;
}

std::string Chunk(const std::vector<Sample>& in, bool legacy) {
  if (legacy) return testing::LegacyChunk(in, kT0);
  ChunkEncoder e(kT0);
  for (const Sample& s : in) e.Add(s);
  return e.Finish();
}

// args: samples, busy (0/1), legacy (0/1)
void BM_Decode(benchmark::State& state) {
  std::vector<Sample> in = Samples(static_cast<int>(state.range(0)), state.range(1) != 0);
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
    ->Args({6, 1, 0});

void BM_Encode(benchmark::State& state) {
  std::vector<Sample> in = Samples(static_cast<int>(state.range(0)), state.range(1) != 0);
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
