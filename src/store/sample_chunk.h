// How raw samples are stored: packed in chunks. A chunk holds the samples of one device
// within one UTC hour that one batch brought, in time order, so a batch writes one row
// per device-hour instead of one per sample (docs/ARCHITECTURE.md, step 4); once the
// device's samples are past the hour, the rollup refresh merges the hour's chunks into
// one (MergeChunks, below).
//
// Figures keep the precision they always had in the store: ratios to 1e-4, memory to
// the MiB, power to the tenth of a watt; health, process count and idle gaps exactly; an
// absent figure stays absent.
//
// The format stores write (the columnar one): a varint tag, 0x200 for the columnar body
// as it is or 0x201 for it deflated (raw deflate, preceded by the body's size as a varint), whichever is smaller (a body under 128 bytes, as a live
// batch's chunk of a few samples, is not tried: deflate costs more than it saves there).
// The body is columns, not rows:
//   - the sample count n;
//   - the times: each sample's step from the one before (the first: from the chunk's
//     first time) as a zigzag delta from the previous step, run-length coded as pairs
//     (value, further repeats): a steady cadence takes three runs;
//   - mask | health << 9 per sample, run-length coded the same way (the mask's bits 0-6
//     are the seven figures in Sample's order, bit 7 the process count, bit 8 the gaps);
//   - then for each of the eleven integers (seven figures at the store's precision,
//     process count, gap interval, idle and short idle) over the samples that hold it:
//     its first value as a zigzag varint, the greatest common divisor g of its deltas,
//     and, unless g is 0 (the figure never changes in the chunk), every further delta
//     divided by g as a zigzag varint. The demo fleet's ratios move in steps of 1e-3 and
//     its utilization in steps of 0.01, so g takes a digit off most deltas.
// The demo fleet's day at 10 s, in hourly batches, takes 4.2 bytes a sample (the format it
// replaced: 22.3); in 60 s batches 10.4 (22.2). docs/store-postgresql.md ("Size") has the
// measurements, sample_chunk_bench the decode speed.
//
// The format before (still read; store/testing/legacy_sample_chunk.h keeps its encoder):
// rows, each a varint mask (< 0x200, so never the tag above), the time as a varint delta,
// the health and the present figures as zigzag varints of their absolute values.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"

namespace gpuledger::store {

// Builds one chunk: the columnar layout needs all of its samples, so they are collected
// first and encoded by Finish. Not thread-safe; one encoder per chunk.
class ChunkEncoder {
 public:
  // `first_ms`: the chunk's first time, as stored beside it (its first sample's time).
  explicit ChunkEncoder(int64_t first_ms) : first_ms_(first_ms) {}

  // Adds the next sample (only its figures, health and time: device_uuid and processes
  // are stored elsewhere). REQUIRES: s.t_ms >= the previous sample's time, or >= first_ms
  // for the first.
  void Add(const Sample& s);

  size_t size() const { return rows_.size(); }

  // The chunk's data (the columnar format, deflated when that is smaller).
  std::string Finish() const;

 private:
  struct Row {
    int64_t t_ms;
    uint32_t mask_health;  // presence mask | health << 9
    int64_t v[11];         // the integers, those absent left 0
  };
  int64_t first_ms_;
  std::vector<Row> rows_;
};

// Decodes a chunk (either format) whose first sample is at `first_ms`, appending to `out`
// the samples with from_ms <= t <= to_ms (device_uuid and processes left empty). False
// when the data is corrupt (then `out` may hold part of it); never reads past `data`.
bool DecodeChunk(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                 std::vector<Sample>& out);

// What readers of activity alone take of a sample (the right-sizing advice, over every
// held GPU of a week): the figures of the whole Sample they read, and no others. A third
// of a Sample's room, and the figures nobody reads are skipped rather than stored.
struct ActivitySample {
  int64_t t_ms = 0;
  std::optional<double> activity;  // Sample::ActivityRatio()
  std::optional<double> fb_used_mib;
  std::optional<int32_t> process_count;
  std::optional<IdleGaps> gaps;

  // The same figures of a whole sample.
  static ActivitySample Of(const Sample& s);
  bool operator==(const ActivitySample&) const = default;
};

// DecodeChunk for those figures alone: appends to `out` the ActivitySample::Of of every
// sample DecodeChunk would append, without decoding the rest. False when corrupt.
bool DecodeActivity(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                    std::vector<ActivitySample>& out);

// DecodeChunk or DecodeActivity, for the stores' reads that take either.
template <class Out>
using ChunkDecoder = bool (*)(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                              std::vector<Out>& out);

// The times of a chunk's samples, for duplicate checks. False when corrupt.
bool ChunkTimes(std::string_view data, int64_t first_ms, std::vector<int64_t>& out);

// Chunks of one device-hour, as a store holds them, and the one chunk they make.
struct StoredChunk {
  int64_t first_ms = 0;
  std::string data;
};
struct MergedChunk {
  int64_t first_ms = 0, last_ms = 0, n = 0;
  std::string data;
};

// The samples of `chunks` (either format), in time order, as one chunk of the columnar
// format: what a store keeps of a device-hour once its batches are in, rather than a row
// per batch (a live agent sends a batch every 10 s by default, so a chunk of one sample
// each). The samples' figures are those the chunks held: they are at the store's
// precision already, so encoding them again changes none. An empty list gives n = 0.
// False when one of them is corrupt.
bool MergeChunks(std::span<const StoredChunk> chunks, MergedChunk& out);

}  // namespace gpuledger::store
