// The exactly-once record of batch ids, as both backends keep it (docs/batch-format.md,
// "Exactly once").
//
// A batch id `<stream>-<sequence>` (the agent's `<node>-<instance>-<n>`: a decimal
// sequence after the last '-', "0" or without a leading zero, at most 18 digits, the
// stream before it not empty) is keyed by (stream, sequence); any other id by (the whole
// id, -1). Each stream's newest ids are kept a row each (table batch_ids) with the content
// digest that tells a retry from another batch reusing the id. Ids kBatchIdsKept or more
// below the newest one applied are folded into runs of consecutive sequences (table
// batch_ranges, a row per run): still known as applied, forever, and answered as
// duplicates, but their content is no longer compared. An agent's stream is one run, so
// the record of its batches stays a few hundred rows however long it sends, where a row
// per batch was most of a store's bytes at the agent's 10 s push (docs/store-postgresql.md,
// "Size").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuledger::store {

struct BatchKey {
  std::string stream;
  int64_t seq = -1;  // -1: the id is no sequence, and `stream` is the whole id
};
BatchKey KeyOfBatchId(std::string_view id);

// How many of a stream's newest sequences keep their row and digest.
inline constexpr int64_t kBatchIdsKept = 256;
// A stream is folded after every this many sequences.
inline constexpr int64_t kFoldEvery = 64;
// After applying sequence `seq` of a stream: fold the stream's rows with a sequence at or
// below the returned cut into its runs; nothing when empty.
std::optional<int64_t> FoldCutAfter(int64_t seq);

// A run of consecutive folded sequences, both ends included.
struct SeqRange {
  int64_t first = 0;
  int64_t last = 0;
};

// One stream's runs on a backend's statements, as a fold reads and writes them.
class StreamRanges {
 public:
  virtual ~StreamRanges() = default;
  // The run with the largest first at or below `seq`.
  virtual Result<std::optional<SeqRange>> AtOrBefore(int64_t seq) = 0;
  // The run with the smallest first above `seq`.
  virtual Result<std::optional<SeqRange>> After(int64_t seq) = 0;
  // Writes the run that begins at r.first (its last the larger of r.last and the stored).
  virtual Status Put(const SeqRange& r) = 0;
  virtual Status Erase(int64_t first) = 0;
};

// Whether `seq` was folded into the stream's runs.
Result<bool> IsFolded(StreamRanges& ranges, int64_t seq);

// Adds the sequences `folded` (rows just deleted from batch_ids, any order) to the
// stream's runs, joining each to the runs it touches.
Status AddToRanges(std::vector<int64_t> folded, StreamRanges& ranges);

// How many batches were applied: the rows of batch_ids and the sequences of batch_ranges
// (the same SQL on both backends).
inline constexpr const char* kCountBatchesSql =
    "SELECT CAST((SELECT count(*) FROM batch_ids) +"
    " (SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM batch_ranges) AS BIGINT)";

// The migration from a table `batches(batch_id, digest, ...)` to batch_ids and
// batch_ranges: the same SQL on SQLite and PostgreSQL. `table_suffix`: after each
// CREATE TABLE (" WITHOUT ROWID" on SQLite). The ids are keyed as KeyOfBatchId keys them,
// and each stream's ids kBatchIdsKept or more below its newest are folded.
std::string BatchIdsMigration(std::string_view table_suffix);

}  // namespace gpuledger::store
