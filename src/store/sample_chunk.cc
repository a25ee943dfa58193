#include "store/sample_chunk.h"

#include <cmath>
#include <limits>
#include <optional>

#include "store/varint.h"

namespace gpuledger::store {
namespace {

constexpr double kRatioScale = 10'000;

// The mask's bits: the seven optional figures in order, then process count and gaps.
enum : uint32_t {
  kSmActive = 1u << 0,
  kSmOccupancy = 1u << 1,
  kTensorActive = 1u << 2,
  kDramActive = 1u << 3,
  kGpuUtil = 1u << 4,
  kFbUsed = 1u << 5,
  kPower = 1u << 6,
  kProcessCount = 1u << 7,
  kGaps = 1u << 8,
};

// The figures in mask order, with their scale.
struct Figure {
  uint32_t bit;
  std::optional<double> Sample::*field;
  double scale;
};
constexpr Figure kFigures[] = {
    {kSmActive, &Sample::sm_active, kRatioScale},       {kSmOccupancy, &Sample::sm_occupancy, kRatioScale},
    {kTensorActive, &Sample::tensor_active, kRatioScale}, {kDramActive, &Sample::dram_active, kRatioScale},
    {kGpuUtil, &Sample::gpu_util, kRatioScale},         {kFbUsed, &Sample::fb_used_mib, 1},
    {kPower, &Sample::power_watts, 10},
};

// Reads one sample's header and figures into `s` (t from `prev`); false when corrupt.
bool ReadSample(VarintReader& r, int64_t prev, Sample& s) {
  uint64_t mask, delta, health;
  if (!r.Varint(mask) || !r.Varint(delta) || !r.Varint(health)) return false;
  s.t_ms = prev + static_cast<int64_t>(delta);
  s.health = static_cast<Health>(health);
  for (const Figure& f : kFigures) {
    if (mask & f.bit) {
      int64_t v;
      if (!r.Signed(v)) return false;
      s.*f.field = static_cast<double>(v) / f.scale;
    }
  }
  if (mask & kProcessCount) {
    int64_t v;
    if (!r.Signed(v)) return false;
    s.process_count = static_cast<int32_t>(v);
  }
  if (mask & kGaps) {
    IdleGaps g;
    if (!r.Signed(g.interval_ms) || !r.Signed(g.idle_ms) || !r.Signed(g.short_idle_ms)) return false;
    s.gaps = g;
  }
  return true;
}

}  // namespace

void AppendChunkSample(std::string& data, const Sample& s, int64_t prev_t_ms) {
  uint32_t mask = 0;
  for (const Figure& f : kFigures) {
    if ((s.*f.field).has_value()) mask |= f.bit;
  }
  if (s.process_count) mask |= kProcessCount;
  if (s.gaps) mask |= kGaps;
  PutVarint(data, mask);
  PutVarint(data, static_cast<uint64_t>(s.t_ms - prev_t_ms));
  PutVarint(data, static_cast<uint64_t>(s.health));
  for (const Figure& f : kFigures) {
    if (const auto& v = s.*f.field) PutVarint(data, ZigZag(std::llround(*v * f.scale)));
  }
  if (s.process_count) PutVarint(data, ZigZag(*s.process_count));
  if (s.gaps) {
    PutVarint(data, ZigZag(s.gaps->interval_ms));
    PutVarint(data, ZigZag(s.gaps->idle_ms));
    PutVarint(data, ZigZag(s.gaps->short_idle_ms));
  }
}

bool DecodeChunk(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                 std::vector<Sample>& out) {
  VarintReader r(data);
  int64_t prev = first_ms;
  while (!r.done()) {
    Sample s;
    if (!ReadSample(r, prev, s)) return false;
    prev = s.t_ms;
    if (s.t_ms > to_ms) break;  // times increase within a chunk
    if (s.t_ms >= from_ms) out.push_back(std::move(s));
  }
  return true;
}

bool ChunkTimes(std::string_view data, int64_t first_ms, std::vector<int64_t>& out) {
  // Only for the rare chunk that overlaps another: decoding it whole is cheap enough.
  std::vector<Sample> samples;
  bool ok = DecodeChunk(data, first_ms, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), samples);
  for (const Sample& smp : samples) out.push_back(smp.t_ms);
  return ok;
}

}  // namespace gpuledger::store
