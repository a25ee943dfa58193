#include "store/sample_chunk.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "store/deflate.h"
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
  kMaskBits = 9,
};

// The tags of the columnar format: varints >= 0x200, which no legacy chunk starts with
// (its first varint is a mask < 0x200).
constexpr uint64_t kColumnar = 0x200;
constexpr uint64_t kColumnarDeflated = 0x201;

// Limits a corrupt chunk could otherwise push past: more samples than an hour has
// milliseconds, or a body bigger than such an hour could need.
constexpr uint64_t kMaxSamples = 3'600'000;
constexpr uint64_t kMaxBodyBytes = 64u << 20;
// What a decoding thread keeps for its next chunk: columns of an hour at 1 s, and an
// inflated body that size's chunks stay well under. A larger chunk's room is handed back.
constexpr size_t kKeptColumnRows = 3600;
constexpr size_t kKeptBodyBytes = 256u << 10;
// Smaller bodies are written plain: deflating a live batch's chunk of six samples saved
// 5.5% of its bytes on the demo fleet (85.0 against 89.9 KB per device-day) for 6 us of
// CPU a chunk, 12 times what encoding it takes otherwise.
constexpr size_t kMinDeflatedBody = 128;

// The figures in mask order, with their scale.
struct Figure {
  uint32_t bit;
  std::optional<double> Sample::*field;
  double scale;
};
constexpr Figure kFigures[] = {
    {kSmActive, &Sample::sm_active, kRatioScale},
    {kSmOccupancy, &Sample::sm_occupancy, kRatioScale},
    {kTensorActive, &Sample::tensor_active, kRatioScale},
    {kDramActive, &Sample::dram_active, kRatioScale},
    {kGpuUtil, &Sample::gpu_util, kRatioScale},
    {kFbUsed, &Sample::fb_used_mib, 1},
    {kPower, &Sample::power_watts, 10},
};
// The columnar body's eleven integers: the seven figures, process count, three gap figures.
constexpr int kIntegers = 11;
constexpr int kProcessCountAt = 7, kGapsAt = 8;

// The mask bit that says whether integer `i` is present.
uint32_t BitOf(int i) { return i < kGapsAt ? 1u << i : kGaps; }

// --- The legacy row format ---

// Reads one sample's header and figures into `s` (t from `prev`); false when corrupt.
bool ReadLegacySample(VarintReader& r, int64_t prev, Sample& s) {
  uint64_t mask, delta, health;
  if (!r.Varint(mask) || !r.Varint(delta) || !r.Varint(health)) return false;
  // A time past int64's end is corrupt (fuzz_sample_chunk found the overflow).
  if (delta >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - static_cast<uint64_t>(prev))
    return false;
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
    if (!r.Signed(g.interval_ms) || !r.Signed(g.idle_ms) || !r.Signed(g.short_idle_ms))
      return false;
    s.gaps = g;
  }
  return true;
}

bool DecodeLegacy(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                  std::vector<Sample>& out) {
  VarintReader r(data);
  int64_t prev = first_ms;
  while (!r.done()) {
    Sample s;
    if (!ReadLegacySample(r, prev, s)) return false;
    prev = s.t_ms;
    if (s.t_ms > to_ms) break;  // times increase within a chunk
    if (s.t_ms >= from_ms) out.push_back(std::move(s));
  }
  return true;
}

// --- The columnar format ---

// Appends `values` as runs: (value, further repeats) pairs.
void PutRuns(std::string& out, const std::vector<uint64_t>& values) {
  for (size_t i = 0; i < values.size();) {
    size_t j = i + 1;
    while (j < values.size() && values[j] == values[i]) ++j;
    PutVarint(out, values[i]);
    PutVarint(out, j - i - 1);
    i = j;
  }
}

// Reads runs until `n` values are read; false when corrupt or a run overshoots n.
bool ReadRuns(VarintReader& r, size_t n, std::vector<uint64_t>& out) {
  out.clear();
  out.reserve(n);
  while (out.size() < n) {
    uint64_t v, more;
    if (!r.Varint(v) || !r.Varint(more) || more >= n - out.size()) return false;
    out.insert(out.end(), more + 1, v);
  }
  return true;
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

// Wrapping arithmetic: a delta between two int64 may not fit one, but its wrap does, and
// adding it back wraps to the value again.
int64_t WrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

// Gap figure `k` (kGapsAt and the two after it), the gaps made present.
int64_t& GapFigure(std::optional<IdleGaps>& gaps, int k) {
  if (!gaps) gaps.emplace();
  return k == kGapsAt ? gaps->interval_ms : k == kGapsAt + 1 ? gaps->idle_ms : gaps->short_idle_ms;
}
// Where the columnar decoder puts a sample's time and health, and its integer `k` (in
// the body's order: the seven figures, process count, the three gap figures), for the
// two kinds of sample it decodes into.
void PutHead(Sample& s, int64_t t_ms, Health health) {
  s.t_ms = t_ms;
  s.health = health;
}
void PutInteger(Sample& s, int k, int64_t v) {
  if (k < kProcessCountAt) {
    s.*kFigures[k].field = static_cast<double>(v) / kFigures[k].scale;
  } else if (k == kProcessCountAt) {
    s.process_count = static_cast<int32_t>(v);
  } else {
    GapFigure(s.gaps, k) = v;
  }
}
void PutHead(ActivitySample& s, int64_t t_ms, Health) { s.t_ms = t_ms; }
constexpr int kSmActiveAt = 0, kGpuUtilAt = 4, kFbUsedAt = 5, kPowerAt = 6;
void PutInteger(ActivitySample& s, int k, int64_t v) {
  switch (k) {
    case kSmActiveAt:
      s.activity = static_cast<double>(v) / kFigures[k].scale;
      break;
    case kGpuUtilAt:  // after sm_active, which wins where present (Sample::ActivityRatio)
      if (!s.activity) s.activity = static_cast<double>(v) / kFigures[k].scale;
      break;
    case kFbUsedAt:
      s.fb_used_mib = static_cast<double>(v) / kFigures[k].scale;
      break;
    case kProcessCountAt:
      s.process_count = static_cast<int32_t>(v);
      break;
    case kGapsAt:
    case kGapsAt + 1:
    case kGapsAt + 2:
      GapFigure(s.gaps, k) = v;
      break;
    default:  // sm_occupancy, tensor_active, dram_active, power: not read
      break;
  }
}
// Whether integer `k` is stored into an ActivitySample (else only read past).
constexpr bool Kept(const Sample*, int) { return true; }
constexpr bool Kept(const ActivitySample*, int k) {
  return k == kSmActiveAt || k == kGpuUtilAt || (k >= kFbUsedAt && k != kPowerAt);
}

// Decodes a columnar body, appending the samples in [from_ms, to_ms] to `out`.
template <class Out>
bool DecodeColumnar(std::string_view body, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                    std::vector<Out>* out) {
  VarintReader r(body);
  uint64_t n;
  if (!r.Varint(n) || n > kMaxSamples) return false;
  // The columns' room, kept by each thread for its next chunk up to kKeptColumnRows; more
  // (a chunk may claim up to kMaxSamples) is handed back once this chunk is decoded.
  struct Columns {
    std::vector<uint64_t> runs, masks;
    std::vector<int64_t> t;
  };
  thread_local Columns room;
  struct Trim {
    Columns& c;
    ~Trim() {
      if (c.t.capacity() > kKeptColumnRows) c = Columns();
    }
  } trim{room};
  std::vector<uint64_t>& runs = room.runs;
  std::vector<uint64_t>& masks = room.masks;
  std::vector<int64_t>& t = room.t;
  if (!ReadRuns(r, n, runs)) return false;
  t.resize(n);
  int64_t prev = first_ms, step = 0;
  for (size_t i = 0; i < n; ++i) {
    step = static_cast<int64_t>(static_cast<uint64_t>(step) +
                                static_cast<uint64_t>(UnZigZag(runs[i])));
    if (step < 0) return false;  // times never decrease
    int64_t next = static_cast<int64_t>(static_cast<uint64_t>(prev) + static_cast<uint64_t>(step));
    if (next < prev) return false;  // past the end of time
    t[i] = prev = next;
  }
  if (!ReadRuns(r, n, masks)) return false;
  for (uint64_t m : masks) {
    if ((m >> kMaskBits) > static_cast<uint64_t>(Health::kLost)) return false;
  }
  // The samples to return: [begin, end) of t, which ascends.
  size_t begin = 0, end = n;
  while (begin < n && t[begin] < from_ms) ++begin;
  end = begin;
  while (end < n && t[end] <= to_ms) ++end;
  size_t base = out->size();
  out->resize(base + (end - begin));
  for (size_t i = begin; i < end; ++i) {
    PutHead((*out)[base + i - begin], t[i], static_cast<Health>(masks[i] >> kMaskBits));
  }
  for (int k = 0; k < kIntegers; ++k) {
    uint32_t bit = BitOf(k);
    if (!Kept(static_cast<const Out*>(nullptr), k)) {
      // Read past: the first value and the step, then one varint for each other sample
      // that has the figure, none of them decoded.
      size_t present = 0;
      for (size_t i = 0; i < n; ++i) present += (masks[i] & bit) != 0;
      if (present == 0) continue;
      int64_t v;
      uint64_t g;
      if (!r.Signed(v) || !r.Varint(g)) return false;
      if (g != 0 && !r.Skip(present - 1)) return false;
      continue;
    }
    int64_t v = 0;
    uint64_t g = 0;
    bool first = true;
    for (size_t i = 0; i < n; ++i) {
      if ((masks[i] & bit) == 0) continue;
      if (first) {
        if (!r.Signed(v) || !r.Varint(g)) return false;
        first = false;
      } else if (g != 0) {
        int64_t q;
        if (!r.Signed(q)) return false;
        v = static_cast<int64_t>(static_cast<uint64_t>(v) + static_cast<uint64_t>(q) * g);
      }
      if (i < begin || i >= end) continue;
      PutInteger((*out)[base + i - begin], k, v);
    }
  }
  return r.done();
}

// The legacy rows, decoded whole and then, for an ActivitySample, projected (no store
// has written them since the columnar format came).
bool DecodeLegacyInto(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                      std::vector<Sample>* out) {
  return DecodeLegacy(data, first_ms, from_ms, to_ms, *out);
}
bool DecodeLegacyInto(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                      std::vector<ActivitySample>* out) {
  std::vector<Sample> whole;
  bool ok = DecodeLegacy(data, first_ms, from_ms, to_ms, whole);
  for (const Sample& s : whole) out->push_back(ActivitySample::Of(s));
  return ok;
}

// Decodes either format: the columnar one by its tag, else the legacy rows.
template <class Out>
bool Decode(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
            std::vector<Out>* out) {
  VarintReader r(data);
  uint64_t tag;
  // A legacy chunk starts with a mask < 0x200; an empty chunk is a legacy one of no samples.
  if (data.empty() || !r.Varint(tag) || tag < kColumnar)
    return DecodeLegacyInto(data, first_ms, from_ms, to_ms, out);
  if (tag == kColumnar)
    return DecodeColumnar(data.substr(data.size() - r.remaining()), first_ms, from_ms, to_ms, out);
  if (tag != kColumnarDeflated) return false;
  uint64_t size;
  if (!r.Varint(size) || size > kMaxBodyBytes) return false;
  // Kept by each thread for its next chunk, up to kKeptBodyBytes.
  thread_local std::string body;
  bool ok = Inflate(data.substr(data.size() - r.remaining()), size, body) &&
            DecodeColumnar(body, first_ms, from_ms, to_ms, out);
  if (body.capacity() > kKeptBodyBytes) std::string().swap(body);
  return ok;
}

}  // namespace

void ChunkEncoder::Add(const Sample& s) {
  Row row{};
  row.t_ms = s.t_ms;
  uint32_t mask = 0;
  for (int k = 0; k < kProcessCountAt; ++k) {
    if (const auto& v = s.*kFigures[k].field) {
      mask |= kFigures[k].bit;
      row.v[k] = std::llround(*v * kFigures[k].scale);
    }
  }
  if (s.process_count) {
    mask |= kProcessCount;
    row.v[kProcessCountAt] = *s.process_count;
  }
  if (s.gaps) {
    mask |= kGaps;
    row.v[kGapsAt] = s.gaps->interval_ms;
    row.v[kGapsAt + 1] = s.gaps->idle_ms;
    row.v[kGapsAt + 2] = s.gaps->short_idle_ms;
  }
  row.mask_health = mask | static_cast<uint32_t>(s.health) << kMaskBits;
  rows_.push_back(row);
}

std::string ChunkEncoder::Finish() const {
  std::string body;
  PutVarint(body, rows_.size());
  std::vector<uint64_t> column;
  int64_t prev = first_ms_, step = 0;
  for (const Row& row : rows_) {
    int64_t next = WrappingSub(row.t_ms, prev);
    column.push_back(ZigZag(WrappingSub(next, step)));
    step = next;
    prev = row.t_ms;
  }
  PutRuns(body, column);
  column.clear();
  for (const Row& row : rows_) column.push_back(row.mask_health);
  PutRuns(body, column);
  std::vector<int64_t> deltas;
  for (int k = 0; k < kIntegers; ++k) {
    uint32_t bit = BitOf(k);
    deltas.clear();
    const Row* last = nullptr;
    for (const Row& row : rows_) {
      if ((row.mask_health & bit) == 0) continue;
      deltas.push_back(last ? WrappingSub(row.v[k], last->v[k]) : row.v[k]);
      last = &row;
    }
    if (deltas.empty()) continue;
    uint64_t g = 0;
    for (size_t i = 1; i < deltas.size(); ++i) g = std::gcd(g, Magnitude(deltas[i]));
    PutVarint(body, ZigZag(deltas[0]));
    PutVarint(body, g);
    if (g == 0) continue;
    for (size_t i = 1; i < deltas.size(); ++i) {
      uint64_t q = Magnitude(deltas[i]) / g;
      PutVarint(body, deltas[i] < 0 ? ZigZag(static_cast<int64_t>(0 - q))
                                    : ZigZag(static_cast<int64_t>(q)));
    }
  }
  std::string plain;
  PutVarint(plain, kColumnar);
  std::string deflated = body.size() >= kMinDeflatedBody ? Deflate(body) : std::string();
  if (!deflated.empty()) {
    std::string packed;
    PutVarint(packed, kColumnarDeflated);
    PutVarint(packed, body.size());
    if (packed.size() + deflated.size() < plain.size() + body.size()) return packed + deflated;
  }
  return plain + body;
}

bool DecodeChunk(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                 std::vector<Sample>& out) {
  return Decode(data, first_ms, from_ms, to_ms, &out);
}

ActivitySample ActivitySample::Of(const Sample& s) {
  return {s.t_ms, s.ActivityRatio(), s.fb_used_mib, s.process_count, s.gaps};
}

bool DecodeActivity(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                    std::vector<ActivitySample>& out) {
  return Decode(data, first_ms, from_ms, to_ms, &out);
}

bool ChunkTimes(std::string_view data, int64_t first_ms, std::vector<int64_t>& out) {
  // Only for the rare chunk that overlaps another: decoding it whole is cheap enough, and
  // checks all of it.
  std::vector<Sample> samples;
  bool ok = Decode(data, first_ms, std::numeric_limits<int64_t>::min(),
                   std::numeric_limits<int64_t>::max(), &samples);
  for (const Sample& smp : samples) out.push_back(smp.t_ms);
  return ok;
}

bool MergeChunks(std::span<const StoredChunk> chunks, MergedChunk& out) {
  std::vector<Sample> samples;
  for (const StoredChunk& c : chunks) {
    if (!DecodeChunk(c.data, c.first_ms, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                     samples)) {
      return false;
    }
  }
  out = MergedChunk{};
  if (samples.empty()) return true;
  std::stable_sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.t_ms < b.t_ms; });
  ChunkEncoder encoder(samples.front().t_ms);
  for (const Sample& smp : samples) encoder.Add(smp);
  out.first_ms = samples.front().t_ms;
  out.last_ms = samples.back().t_ms;
  out.n = static_cast<int64_t>(samples.size());
  out.data = encoder.Finish();
  return true;
}

}  // namespace gpuledger::store
