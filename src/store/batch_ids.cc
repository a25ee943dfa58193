#include "store/batch_ids.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuledger::store {

BatchKey KeyOfBatchId(std::string_view id) {
  size_t dash = id.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return {std::string(id), -1};
  std::string_view digits = id.substr(dash + 1);
  if (digits.empty() || digits.size() > 18 || (digits.size() > 1 && digits[0] == '0')) return {std::string(id), -1};
  int64_t seq = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return {std::string(id), -1};
    seq = seq * 10 + (c - '0');
  }
  return {std::string(id.substr(0, dash)), seq};
}

std::optional<int64_t> FoldCutAfter(int64_t seq) {
  if (seq < kBatchIdsKept || seq % kFoldEvery != 0) return std::nullopt;
  return seq - kBatchIdsKept;
}

Result<bool> IsFolded(StreamRanges& ranges, int64_t seq) {
  if (seq < 0) return false;
  GPULEDGER_ASSIGN_OR_RETURN(std::optional<SeqRange> r, ranges.AtOrBefore(seq));
  return r.has_value() && r->last >= seq;
}

Status AddToRanges(std::vector<int64_t> folded, StreamRanges& ranges) {
  std::sort(folded.begin(), folded.end());
  folded.erase(std::unique(folded.begin(), folded.end()), folded.end());
  for (size_t i = 0; i < folded.size();) {
    size_t end = i + 1;
    while (end < folded.size() && folded[end] == folded[end - 1] + 1) ++end;
    SeqRange run{folded[i], folded[end - 1]};
    i = end;
    GPULEDGER_ASSIGN_OR_RETURN(std::optional<SeqRange> before, ranges.AtOrBefore(run.first));
    if (before && before->last >= run.first - 1) run = {before->first, std::max(before->last, run.last)};
    for (;;) {
      GPULEDGER_ASSIGN_OR_RETURN(std::optional<SeqRange> next, ranges.After(run.first));
      if (!next || next->first > run.last + 1) break;
      run.last = std::max(run.last, next->last);
      GPULEDGER_RETURN_IF_ERROR(ranges.Erase(next->first));
    }
    GPULEDGER_RETURN_IF_ERROR(ranges.Put(run));
  }
  return Status::Ok();
}

std::string BatchIdsMigration(std::string_view table_suffix) {
  // rtrim drops the id's trailing digits: what is left ends with '-' when the digits are
  // the id's sequence (KeyOfBatchId). length and substr count characters on both
  // backends, and '-' and the digits are one byte each, so the split is KeyOfBatchId's.
  return fmt::format(
      "CREATE TABLE batch_ids(stream TEXT NOT NULL, seq BIGINT NOT NULL, digest TEXT NOT NULL,"
      "  PRIMARY KEY(stream, seq)){0};"
      "CREATE TABLE batch_ranges(stream TEXT NOT NULL, first_seq BIGINT NOT NULL, last_seq BIGINT NOT NULL,"
      "  PRIMARY KEY(stream, first_seq)){0};"
      "INSERT INTO batch_ids(stream, seq, digest)"
      "  SELECT CASE WHEN ok THEN substr(head, 1, length(head) - 1) ELSE batch_id END,"
      "    CASE WHEN ok THEN CAST(digits AS BIGINT) ELSE -1 END, digest"
      "  FROM (SELECT batch_id, digest, head, digits,"
      "      (length(head) >= 2 AND head LIKE '%-' AND length(digits) BETWEEN 1 AND 18"
      "       AND (digits = '0' OR substr(digits, 1, 1) <> '0')) AS ok"
      "    FROM (SELECT batch_id, digest, rtrim(batch_id, '0123456789') AS head,"
      "      substr(batch_id, length(rtrim(batch_id, '0123456789')) + 1) AS digits FROM batches) AS split) AS keyed;"
      "INSERT INTO batch_ranges(stream, first_seq, last_seq)"
      "  SELECT stream, min(seq), max(seq) FROM ("
      "    SELECT b.stream, b.seq, b.seq - row_number() OVER (PARTITION BY b.stream ORDER BY b.seq) AS run"
      "    FROM batch_ids b JOIN (SELECT stream, max(seq) AS top FROM batch_ids WHERE seq >= 0 GROUP BY stream) t"
      "      ON t.stream = b.stream"
      "    WHERE b.seq >= 0 AND b.seq <= t.top - {1}) AS runs"
      "  GROUP BY stream, run;"
      "DELETE FROM batch_ids WHERE seq >= 0"
      "  AND seq <= (SELECT max(m.seq) FROM batch_ids m WHERE m.stream = batch_ids.stream) - {1};"
      "DROP TABLE batches;",
      table_suffix, kBatchIdsKept);
}

}  // namespace gpuledger::store
