// How serving engines' snapshots are stored: packed in chunks, as raw samples are
// (store/sample_chunk.h). A chunk holds the snapshots of one job's one engine and model
// within one UTC hour, in time order: a row per job-hour instead of one per scrape. A batch
// writes a chunk per job, engine, model and hour it brings; the rollup refresh then merges
// a job-hour's chunks into one (MergeServingChunks), as it does a device-hour's samples.
//
// Every figure is kept exactly as it came (a double, to the bit), histograms as
// EncodeHistogram's text (core/serving.h).
//
// The format: a varint tag (1), the snapshot count n, then two sections, each its plain
// size, a byte (0 plain, 1 raw-deflated, then the deflated size) and its bytes, deflated
// where that is smaller. The first section is what the serving advice reads
// (ServingGauges), so that a reader of the gauges takes the chunk's first bytes alone
// (ServingGaugesEnd) and inflates no further:
//   - each snapshot's time, as a varint step from the one before (the first: from the
//     chunk's first time, so 0);
//   - each snapshot's mask, a varint: bits 0-9 the ten figures in ServingSnapshot's order
//     present, bits 10-12 the three histograms not empty;
//   - the columns of requests_waiting and kv_cache_usage_ratio (below).
// The second section: the columns of the other eight figures, then each histogram's text
// as a varint length and its bytes, for the snapshots that hold it.
// A column (the values of the snapshots that hold the figure, in time order) is a mode
// byte and the values: mode k + 1 (k in 0..9) when every value is a whole number of
// 10^-k (it decodes to exactly itself as integer / 10^k), each as a zigzag varint delta
// of that integer from the one before; mode 0 otherwise, each value's bits XOR the
// previous value's as 8 little-endian bytes. Counters and gauges such as a queue length
// or a KV-cache ratio to the 1e-4 take a byte or two a value.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/serving.h"
#include "core/status.h"
#include "core/time.h"
#include "store/sample_chunk.h"

namespace gpuledger::store {

// The chunk of `snapshots` (one job, engine and model; their job_id, engine and model are
// not stored). REQUIRES: in time order, not empty.
std::string EncodeServingChunk(std::span<const ServingSnapshot> snapshots);

// EncodeServingChunk's chunk with its first and last time and count, as stores keep it.
// REQUIRES: as EncodeServingChunk.
MergedChunk ServingChunkOf(std::span<const ServingSnapshot> snapshots);

// Decodes a chunk whose first snapshot is at `first_ms`, appending to `out` the snapshots
// with from_ms <= t <= to_ms (job_id, engine and model left empty). False when the data is
// corrupt (then `out` may hold part of it); never reads past `data`.
bool DecodeServingChunk(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                        std::vector<ServingSnapshot>& out);

// The gauges alone of the snapshots DecodeServingChunk would append, from the chunk's
// first section: `data` may be the chunk or its first ServingGaugesEnd bytes (what the
// stores read for the advice). False when corrupt.
bool DecodeServingGauges(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                         std::vector<ServingGauges>& out);

// The snapshots of `chunks` (the stored chunks of one job, engine, model and hour), in
// time order, as one chunk (MergeChunks' counterpart). An empty list gives n = 0. False
// when one of them is corrupt.
bool MergeServingChunks(std::span<const StoredChunk> chunks, MergedChunk& out);

// The first UTC hour's start at or before `t_ms`: the hour a snapshot's chunk is of.
int64_t ServingChunkHour(int64_t t_ms);

// A batch's snapshots grouped as stores write them: one chunk per job, engine, model and
// hour. `job_ids` are the store's ids of the snapshots' jobs, in the batch's order.
struct ServingChunkGroup {
  int64_t job_id = 0;
  std::string engine, model;
  int64_t hour_ms = 0;
  std::vector<size_t> indexes;  // into the batch's snapshots, in time order (stable)
};
std::vector<ServingChunkGroup> GroupServing(std::span<const ServingSnapshot> snapshots,
                                            std::span<const int64_t> job_ids);

// One job's snapshots (in any order) as the chunks a store keeps of them: one per engine,
// model and hour, in the order GroupServing gives.
struct EngineChunk {
  std::string engine, model;
  MergedChunk chunk;
};
std::vector<EngineChunk> ServingChunksOfJob(std::span<const ServingSnapshot> snapshots);

// The first snapshot of the batch (its index) whose (job, engine, model, time) another
// snapshot before it in the batch or a stored one already has: the batch is refused
// naming it. `stored_times[g]` holds the stored snapshots' times of groups[g]'s job,
// engine, model and hour.
std::optional<size_t> FirstDuplicate(std::span<const ServingChunkGroup> groups,
                                     std::span<const std::vector<int64_t>> stored_times,
                                     std::span<const ServingSnapshot> snapshots);

// How many of a chunk's first bytes hold its first section: what DecodeServingGauges and
// ServingChunkTimes read. The whole size when the chunk is corrupt.
size_t ServingGaugesEnd(std::string_view data);

// The times of a chunk's snapshots (or of its first ServingGaugesEnd bytes), for
// duplicate checks. False when corrupt.
bool ServingChunkTimes(std::string_view data, int64_t first_ms, std::vector<int64_t>& out);

// A stored chunk of a job as the stores' reads find it (engine, model and data point into
// the read's result).
struct ServingChunkRow {
  std::string_view engine, model;
  int64_t first_ms = 0;
  std::string_view data;
};

// StoreReads::ServingOf from the chunks of job `job_id` (its store id) that may hold
// snapshots of `range` (every chunk whose first time is in [the hour of range.begin,
// range.end]), in any order: the snapshots with t in the range, by engine and model
// (bytewise, on every backend) and time. A chunk that does not decode is an error naming
// the job, engine, model and first time.
Result<std::vector<ServingSnapshot>> ServingOfChunks(int64_t job_id, std::span<const ServingChunkRow> rows,
                                                     const TimeRange& range);
// StoreReads::ServingGaugesOf from the same chunks: by time.
Result<std::vector<ServingGauges>> ServingGaugesOfChunks(int64_t job_id, std::span<const ServingChunkRow> rows,
                                                         const TimeRange& range);

}  // namespace gpuledger::store
