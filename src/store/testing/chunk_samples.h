// Samples like the demo fleet's (demo/demo_fleet.cc) for the chunk tests and benchmark:
// n samples 10 s apart from t0, busy (activity around 0.7 at 1e-3, the other figures
// following it, memory steady, gaps reported) or idle (every figure steady).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/model.h"

namespace gpuledger::store::testing {

inline std::vector<Sample> DemoLikeSamples(int64_t t0, int n, bool busy, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(-0.03, 0.03);
  std::vector<Sample> out;
  for (int i = 0; i < n; ++i) {
    double a = busy ? std::round((0.7 + noise(rng)) * 1000) / 1000 : 0;
    Sample s;
    s.t_ms = t0 + i * 10'000;
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

}  // namespace gpuledger::store::testing
