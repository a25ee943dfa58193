#include "store/serving_chunk.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "core/time.h"
#include "store/deflate.h"
#include "store/varint.h"

namespace gpuledger::store {
namespace {

constexpr uint64_t kTag = 1;  // the format below
constexpr uint8_t kPlain = 0, kDeflated = 1;
constexpr size_t kFigureCount = 10;
constexpr size_t kHistogramCount = 3;
// Limits a corrupt chunk could otherwise push past: more snapshots than an hour has
// milliseconds, or a body bigger than such an hour could need.
constexpr uint64_t kMaxSnapshots = 3'600'000;
constexpr uint64_t kMaxBodyBytes = 64u << 20;
// As sample chunks: a smaller body is written plain.
constexpr size_t kMinDeflatedBody = 128;
// The decimal scales a column is tried at: 10^0 .. 10^9.
constexpr int kScales = 10;
constexpr std::array<double, kScales> kPowersOfTen = {1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

using Figure = std::optional<double> ServingSnapshot::*;
// The ten figures in ServingSnapshot's order (the mask's bits 0-9).
constexpr std::array<Figure, kFigureCount> kFigures = {
    &ServingSnapshot::requests_waiting,        &ServingSnapshot::requests_running,
    &ServingSnapshot::kv_cache_usage_ratio,    &ServingSnapshot::prompt_tokens_total,
    &ServingSnapshot::generation_tokens_total, &ServingSnapshot::preemptions_total,
    &ServingSnapshot::requests_total,          &ServingSnapshot::executions_total,
    &ServingSnapshot::queue_seconds_total,     &ServingSnapshot::compute_seconds_total,
};
constexpr size_t kWaiting = 0, kKv = 2;
// The figures of the body's second section, in its order.
constexpr std::array<size_t, 8> kSecondFigures = {1, 3, 4, 5, 6, 7, 8, 9};
constexpr std::array<CumulativeHistogram ServingSnapshot::*, kHistogramCount> kHistograms = {
    &ServingSnapshot::prefill_seconds, &ServingSnapshot::decode_seconds, &ServingSnapshot::iteration_tokens};

// `v` as a whole number of 10^-k, when that number decodes to exactly `v` (to the bit).
std::optional<int64_t> Scaled(double v, int k) {
  const double x = v * kPowersOfTen[static_cast<size_t>(k)];
  if (!std::isfinite(x) || std::fabs(x) >= 9.0e15) return std::nullopt;  // below 2^53: exact as a double
  const auto i = static_cast<int64_t>(std::llround(x));
  if (std::bit_cast<uint64_t>(static_cast<double>(i) / kPowersOfTen[static_cast<size_t>(k)]) != std::bit_cast<uint64_t>(v)) {
    return std::nullopt;
  }
  return i;
}

void PutColumn(std::string& out, const std::vector<double>& values) {
  for (int k = 0; k < kScales; ++k) {
    std::vector<int64_t> ints;
    ints.reserve(values.size());
    for (double v : values) {
      auto i = Scaled(v, k);
      if (!i) break;
      ints.push_back(*i);
    }
    if (ints.size() != values.size()) continue;
    out.push_back(static_cast<char>(k + 1));
    int64_t prev = 0;
    for (int64_t i : ints) {
      PutVarint(out, ZigZag(i - prev));  // |i| < 2^53: no overflow
      prev = i;
    }
    return;
  }
  out.push_back(0);
  uint64_t prev = 0;
  for (double v : values) {
    const uint64_t bits = std::bit_cast<uint64_t>(v);
    const uint64_t x = bits ^ prev;
    for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((x >> (8 * b)) & 0xff));
    prev = bits;
  }
}

// Reads a column of `count` values.
bool ReadColumn(VarintReader& r, size_t count, std::vector<double>& out) {
  out.clear();
  uint8_t mode = 0;
  if (!r.Byte(mode) || mode > kScales) return false;
  if (mode == 0) {
    std::string_view bytes;
    if (count > r.remaining() / 8 || !r.Take(count * 8, bytes)) return false;
    uint64_t prev = 0;
    for (size_t i = 0; i < count; ++i) {
      uint64_t x = 0;
      for (int b = 0; b < 8; ++b) x |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i * 8 + static_cast<size_t>(b)])) << (8 * b);
      prev ^= x;
      out.push_back(std::bit_cast<double>(prev));
    }
    return true;
  }
  const double scale = kPowersOfTen[mode - 1u];
  int64_t v = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t d = 0;
    if (!r.Signed(d)) return false;
    v = static_cast<int64_t>(static_cast<uint64_t>(v) + static_cast<uint64_t>(d));  // wraps on corrupt data only
    out.push_back(static_cast<double>(v) / scale);
  }
  return true;
}

// A section as stored: its plain size, a kind byte, and its bytes (plain, or raw deflate
// preceded by their count).
struct Section {
  uint64_t size = 0;  // plain
  bool deflated = false;
  std::string_view bytes;
};

void PutSection(std::string& out, const std::string& plain) {
  PutVarint(out, plain.size());
  std::string deflated = plain.size() >= kMinDeflatedBody ? Deflate(plain) : std::string();
  if (!deflated.empty() && deflated.size() + 4 < plain.size()) {
    out.push_back(static_cast<char>(kDeflated));
    PutVarint(out, deflated.size());
    out += deflated;
  } else {
    out.push_back(static_cast<char>(kPlain));
    out += plain;
  }
}

bool ReadSection(VarintReader& r, Section& s) {
  uint8_t kind = 0;
  if (!r.Varint(s.size) || s.size > kMaxBodyBytes || !r.Byte(kind) || kind > kDeflated) return false;
  s.deflated = kind == kDeflated;
  uint64_t stored = s.size;
  if (s.deflated && (!r.Varint(stored) || stored > kMaxBodyBytes)) return false;
  return r.Take(stored, s.bytes);
}

// A section's plain bytes: `room` holds them where inflated.
bool Plain(const Section& s, std::string& room, std::string_view& out) {
  if (!s.deflated) {
    out = s.bytes;
    return true;
  }
  if (!Inflate(s.bytes, s.size, room)) return false;
  out = room;
  return true;
}

// The first section's figures of n snapshots.
struct FirstSection {
  std::vector<int64_t> t;
  std::vector<uint32_t> mask;
  std::vector<double> waiting, kv;
};

bool ReadFirstSection(VarintReader& r, uint64_t n, int64_t first_ms, FirstSection& s) {
  s.t.resize(n);
  s.mask.resize(n);
  int64_t t = first_ms;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t step = 0;
    if (!r.Varint(step) || step > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - t)) return false;
    t += static_cast<int64_t>(step);
    s.t[i] = t;
  }
  size_t waiting = 0, kv = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t m = 0;
    if (!r.Varint(m) || m >= (1u << (kFigureCount + kHistogramCount))) return false;
    s.mask[i] = static_cast<uint32_t>(m);
    waiting += (m >> kWaiting) & 1;
    kv += (m >> kKv) & 1;
  }
  return ReadColumn(r, waiting, s.waiting) && ReadColumn(r, kv, s.kv);
}

// A chunk's tag and count, and its first section as stored; `r` is left after it.
bool ReadHead(VarintReader& r, uint64_t& n, Section& first) {
  uint64_t tag = 0;
  return r.Varint(tag) && tag == kTag && r.Varint(n) && n <= kMaxSnapshots && ReadSection(r, first);
}

// A chunk opened: its count and its first section read; `second` is the second section as
// stored (`whole`: read too, and the chunk must end there; else only what a gauges prefix
// holds is read).
struct Opened {
  uint64_t n = 0;
  FirstSection s;
  Section second;
};

bool Open(std::string_view data, int64_t first_ms, bool whole, Opened& o) {
  thread_local std::string room;
  VarintReader r(data);
  Section first;
  std::string_view plain;
  if (!ReadHead(r, o.n, first) || !Plain(first, room, plain)) return false;
  VarintReader f(plain);
  if (!ReadFirstSection(f, o.n, first_ms, o.s) || !f.done()) return false;
  return !whole || (ReadSection(r, o.second) && r.done());
}

}  // namespace

std::string EncodeServingChunk(std::span<const ServingSnapshot> snapshots) {
  std::string body;  // the first section, then the second
  const int64_t first_ms = snapshots.empty() ? 0 : snapshots.front().t_ms;
  int64_t prev = first_ms;
  for (const ServingSnapshot& s : snapshots) {
    PutVarint(body, static_cast<uint64_t>(s.t_ms - prev));
    prev = s.t_ms;
  }
  std::vector<std::array<std::string, kHistogramCount>> texts(snapshots.size());
  for (size_t i = 0; i < snapshots.size(); ++i) {
    const ServingSnapshot& s = snapshots[i];
    uint32_t m = 0;
    for (size_t f = 0; f < kFigureCount; ++f) m |= (s.*kFigures[f]).has_value() ? 1u << f : 0;
    for (size_t h = 0; h < kHistogramCount; ++h) {
      texts[i][h] = EncodeHistogram(s.*kHistograms[h]);
      m |= texts[i][h].empty() ? 0 : 1u << (kFigureCount + h);
    }
    PutVarint(body, m);
  }
  auto column = [&](size_t f) {
    std::vector<double> values;
    for (const ServingSnapshot& s : snapshots) {
      if (auto v = s.*kFigures[f]) values.push_back(*v);
    }
    PutColumn(body, values);
  };
  column(kWaiting);
  column(kKv);
  const size_t first_section = body.size();
  for (size_t f : kSecondFigures) column(f);
  for (size_t h = 0; h < kHistogramCount; ++h) {
    for (const auto& t : texts) {
      if (t[h].empty()) continue;
      PutVarint(body, t[h].size());
      body += t[h];
    }
  }
  std::string out;
  PutVarint(out, kTag);
  PutVarint(out, snapshots.size());
  PutSection(out, body.substr(0, first_section));
  PutSection(out, body.substr(first_section));
  return out;
}

MergedChunk ServingChunkOf(std::span<const ServingSnapshot> snapshots) {
  return {snapshots.front().t_ms, snapshots.back().t_ms, static_cast<int64_t>(snapshots.size()),
          EncodeServingChunk(snapshots)};
}

size_t ServingGaugesEnd(std::string_view data) {
  VarintReader r(data);
  uint64_t n = 0;
  Section first;
  return ReadHead(r, n, first) ? data.size() - r.remaining() : data.size();
}

bool DecodeServingChunk(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                        std::vector<ServingSnapshot>& out) {
  Opened o;
  if (!Open(data, first_ms, /*whole=*/true, o)) return false;
  FirstSection& s = o.s;
  thread_local std::string room;
  std::string_view second;
  if (!Plain(o.second, room, second)) return false;
  VarintReader r(second);
  const uint64_t n = o.n;
  std::array<std::vector<double>, kFigureCount> columns;
  columns[kWaiting] = std::move(s.waiting);
  columns[kKv] = std::move(s.kv);
  for (size_t f : kSecondFigures) {
    size_t count = 0;
    for (uint32_t m : s.mask) count += (m >> f) & 1;
    if (!ReadColumn(r, count, columns[f])) return false;
  }
  const size_t begin = out.size();
  out.resize(begin + n);
  std::array<size_t, kFigureCount> next{};
  for (uint64_t i = 0; i < n; ++i) {
    ServingSnapshot& v = out[begin + i];
    v.t_ms = s.t[i];
    for (size_t f = 0; f < kFigureCount; ++f) {
      if ((s.mask[i] >> f) & 1) v.*kFigures[f] = columns[f][next[f]++];
    }
  }
  for (size_t k = 0; k < kHistogramCount; ++k) {
    for (uint64_t i = 0; i < n; ++i) {
      if (((s.mask[i] >> (kFigureCount + k)) & 1) == 0) continue;
      uint64_t size = 0;
      std::string_view text;
      if (!r.Varint(size) || !r.Take(size, text) || text.empty() ||
          !DecodeHistogram(text, out[begin + i].*kHistograms[k])) {
        return false;
      }
    }
  }
  if (!r.done()) return false;
  // The snapshots outside [from_ms, to_ms] out again (times are in order).
  const auto first = out.begin() + static_cast<std::ptrdiff_t>(begin);
  auto keep_end = std::partition_point(first, out.end(), [&](const ServingSnapshot& v) { return v.t_ms <= to_ms; });
  out.erase(keep_end, out.end());
  auto keep_begin = std::partition_point(first, out.end(), [&](const ServingSnapshot& v) { return v.t_ms < from_ms; });
  out.erase(first, keep_begin);
  return true;
}

bool DecodeServingGauges(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                         std::vector<ServingGauges>& out) {
  Opened o;
  if (!Open(data, first_ms, /*whole=*/false, o)) return false;
  const FirstSection& s = o.s;
  size_t w = 0, k = 0;
  for (size_t i = 0; i < o.n; ++i) {
    std::optional<double> waiting, kv;
    if ((s.mask[i] >> kWaiting) & 1) waiting = s.waiting[w++];
    if ((s.mask[i] >> kKv) & 1) kv = s.kv[k++];
    if (s.t[i] >= from_ms && s.t[i] <= to_ms) out.push_back({s.t[i], waiting, kv});
  }
  return true;
}

bool ServingChunkTimes(std::string_view data, int64_t first_ms, std::vector<int64_t>& out) {
  Opened o;
  if (!Open(data, first_ms, /*whole=*/false, o)) return false;
  out.insert(out.end(), o.s.t.begin(), o.s.t.end());
  return true;
}

bool MergeServingChunks(std::span<const StoredChunk> chunks, MergedChunk& out) {
  std::vector<ServingSnapshot> all;
  for (const StoredChunk& c : chunks) {
    if (!DecodeServingChunk(c.data, c.first_ms, std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max(), all)) {
      return false;
    }
  }
  out = MergedChunk{};
  if (all.empty()) return true;
  std::stable_sort(all.begin(), all.end(), [](const ServingSnapshot& a, const ServingSnapshot& b) { return a.t_ms < b.t_ms; });
  out = ServingChunkOf(all);
  return true;
}

namespace {

Status CorruptChunk(int64_t job_id, const ServingChunkRow& row) {
  return Internal(fmt::format("store: serving_chunks row of job {} ({} {}) at {} is corrupt: the chunk does not decode",
                              job_id, row.engine, row.model, FormatTime(row.first_ms)));
}

// `rows` by engine, model (bytewise) and first time.
std::vector<const ServingChunkRow*> InKeyOrder(std::span<const ServingChunkRow> rows) {
  std::vector<const ServingChunkRow*> out;
  out.reserve(rows.size());
  for (const ServingChunkRow& r : rows) out.push_back(&r);
  std::sort(out.begin(), out.end(), [](const ServingChunkRow* a, const ServingChunkRow* b) {
    return std::tie(a->engine, a->model, a->first_ms) < std::tie(b->engine, b->model, b->first_ms);
  });
  return out;
}

}  // namespace

Result<std::vector<ServingSnapshot>> ServingOfChunks(int64_t job_id, std::span<const ServingChunkRow> rows,
                                                     const TimeRange& range) {
  std::vector<ServingSnapshot> out;
  for (const ServingChunkRow* row : InKeyOrder(rows)) {
    const size_t begin = out.size();
    if (!DecodeServingChunk(row->data, row->first_ms, range.begin_ms, range.end_ms, out)) return CorruptChunk(job_id, *row);
    for (size_t i = begin; i < out.size(); ++i) {
      out[i].engine = row->engine;
      out[i].model = row->model;
    }
  }
  // The chunks of one engine and model are in time order and each in itself; two of one
  // hour not yet merged may interleave.
  auto before = [](const ServingSnapshot& a, const ServingSnapshot& b) {
    return std::tie(a.engine, a.model, a.t_ms) < std::tie(b.engine, b.model, b.t_ms);
  };
  if (!std::is_sorted(out.begin(), out.end(), before)) std::stable_sort(out.begin(), out.end(), before);
  return out;
}

Result<std::vector<ServingGauges>> ServingGaugesOfChunks(int64_t job_id, std::span<const ServingChunkRow> rows,
                                                         const TimeRange& range) {
  std::vector<ServingGauges> out;
  for (const ServingChunkRow* row : InKeyOrder(rows)) {
    if (!DecodeServingGauges(row->data, row->first_ms, range.begin_ms, range.end_ms, out)) {
      return CorruptChunk(job_id, *row);
    }
  }
  auto before = [](const ServingGauges& a, const ServingGauges& b) { return a.t_ms < b.t_ms; };
  if (!std::is_sorted(out.begin(), out.end(), before)) std::stable_sort(out.begin(), out.end(), before);
  return out;
}

int64_t ServingChunkHour(int64_t t_ms) { return FloorTo(t_ms, kMsPerHour); }

std::vector<ServingChunkGroup> GroupServing(std::span<const ServingSnapshot> snapshots,
                                            std::span<const int64_t> job_ids) {
  std::map<std::tuple<int64_t, std::string_view, std::string_view, int64_t>, size_t> at;
  std::vector<ServingChunkGroup> out;
  for (size_t i = 0; i < snapshots.size(); ++i) {
    const ServingSnapshot& s = snapshots[i];
    const int64_t hour = ServingChunkHour(s.t_ms);
    auto [it, fresh] = at.try_emplace({job_ids[i], s.engine, s.model, hour}, out.size());
    if (fresh) out.push_back({job_ids[i], s.engine, s.model, hour, {}});
    out[it->second].indexes.push_back(i);
  }
  for (ServingChunkGroup& g : out) {
    std::stable_sort(g.indexes.begin(), g.indexes.end(),
                     [&](size_t a, size_t b) { return snapshots[a].t_ms < snapshots[b].t_ms; });
  }
  return out;
}

std::vector<EngineChunk> ServingChunksOfJob(std::span<const ServingSnapshot> snapshots) {
  const std::vector<int64_t> one_job(snapshots.size(), 0);
  std::vector<EngineChunk> out;
  std::vector<ServingSnapshot> chunk;
  for (const ServingChunkGroup& g : GroupServing(snapshots, one_job)) {
    chunk.clear();
    for (size_t i : g.indexes) chunk.push_back(snapshots[i]);
    out.push_back({g.engine, g.model, ServingChunkOf(chunk)});
  }
  return out;
}

std::optional<size_t> FirstDuplicate(std::span<const ServingChunkGroup> groups,
                                     std::span<const std::vector<int64_t>> stored_times,
                                     std::span<const ServingSnapshot> snapshots) {
  std::optional<size_t> first;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::set<int64_t> seen(stored_times[g].begin(), stored_times[g].end());
    // In the batch's order, so that of two equal snapshots in the batch the second is named.
    std::vector<size_t> order = groups[g].indexes;
    std::sort(order.begin(), order.end());
    for (size_t i : order) {
      if (seen.insert(snapshots[i].t_ms).second) continue;
      if (!first || i < *first) first = i;
      break;
    }
  }
  return first;
}

}  // namespace gpuledger::store
