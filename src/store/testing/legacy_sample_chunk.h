// The sample-chunk encoder stores wrote before the columnar format (store/sample_chunk.h),
// frozen here so that tests and the decode benchmark can make chunks as old stores hold
// them. Test-only: the store writes only the columnar format.
//
// Per sample: a varint presence mask (bits 0-6 the seven figures in Sample's order, bit 7
// the process count, bit 8 the idle gaps), the time as a varint delta from the previous
// sample's (the first: from the chunk's first time), the health as a varint, then each
// present figure as a zigzag varint of its absolute value at the store's precision
// (ratios x1e4, MiB, 0.1 W), the process count and the three gap figures.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "store/varint.h"

namespace gpuledger::store::testing {

// Appends `s` to a legacy chunk. REQUIRES: s.t_ms >= prev_t_ms.
inline void AppendLegacyChunkSample(std::string& data, const Sample& s, int64_t prev_t_ms) {
  std::optional<double> Sample::*const fields[] = {
      &Sample::sm_active, &Sample::sm_occupancy, &Sample::tensor_active, &Sample::dram_active,
      &Sample::gpu_util,  &Sample::fb_used_mib,  &Sample::power_watts};
  const double scales[] = {1e4, 1e4, 1e4, 1e4, 1e4, 1, 10};
  uint32_t mask = 0;
  for (int i = 0; i < 7; ++i) {
    if ((s.*fields[i]).has_value()) mask |= 1u << i;
  }
  if (s.process_count) mask |= 1u << 7;
  if (s.gaps) mask |= 1u << 8;
  PutVarint(data, mask);
  PutVarint(data, static_cast<uint64_t>(s.t_ms - prev_t_ms));
  PutVarint(data, static_cast<uint64_t>(s.health));
  for (int i = 0; i < 7; ++i) {
    if (const auto& v = s.*fields[i]) PutVarint(data, ZigZag(std::llround(*v * scales[i])));
  }
  if (s.process_count) PutVarint(data, ZigZag(*s.process_count));
  if (s.gaps) {
    PutVarint(data, ZigZag(s.gaps->interval_ms));
    PutVarint(data, ZigZag(s.gaps->idle_ms));
    PutVarint(data, ZigZag(s.gaps->short_idle_ms));
  }
}

// A whole chunk of `in` (times from `first_ms` on) in the legacy format.
inline std::string LegacyChunk(const std::vector<Sample>& in, int64_t first_ms) {
  std::string data;
  int64_t prev = first_ms;
  for (const Sample& s : in) {
    AppendLegacyChunkSample(data, s, prev);
    prev = s.t_ms;
  }
  return data;
}

}  // namespace gpuledger::store::testing
