// Batches the store tests apply (both the contract suite and the PostgreSQL store's own).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/batch.h"
#include "core/serving.h"
#include "store/minute_blob.h"
#include "store/store.h"

namespace gpuledger::store::testing_batches {

// SQL that puts a store's batch ids back as stores before schema version 16 (SQLite) or
// 11 (PostgreSQL) kept them, a row per batch in `batches` (a folded one with the digest
// of no content): what a test that takes a store back to an older version runs first, so
// that its migration runs from there.
inline constexpr const char* kBatchesTableOfOldStores =
    "CREATE TABLE batches(batch_id TEXT PRIMARY KEY, source TEXT NOT NULL, digest TEXT NOT NULL,"
    "  samples BIGINT NOT NULL);"
    "INSERT INTO batches SELECT CASE WHEN seq >= 0 THEN stream || '-' || seq ELSE stream END, '', digest, 0"
    "  FROM batch_ids;"
    "WITH RECURSIVE folded(stream, seq, last_seq) AS (SELECT stream, first_seq, last_seq FROM batch_ranges"
    "  UNION ALL SELECT stream, seq + 1, last_seq FROM folded WHERE seq < last_seq)"
    "  INSERT INTO batches SELECT stream || '-' || seq, '', '0000000000000000', 0 FROM folded;"
    "DROP TABLE batch_ids; DROP TABLE batch_ranges;";

// SQL that puts hour rows back as stores before schema version 18 (SQLite) or 14
// (PostgreSQL) kept them, a row each in `rollup_hour`, holding `rows`: what a test that
// takes a store back to an older version runs too. (PostgreSQL's was partitioned by month;
// one table serves the migrations as well.)
inline std::string HourRowsTableOfOldStores(bool postgresql, const std::vector<RollupRow>& rows) {
  const char* integer = postgresql ? "BIGINT" : "INTEGER";
  std::string sql = fmt::format(
      "CREATE TABLE rollup_hour(hour_ms {0} NOT NULL, device_id {0} NOT NULL, job_id {0} NOT NULL,"
      " active_ms {0} NOT NULL, idle_ms {0} NOT NULL, unallocated_ms {0} NOT NULL, unavailable_ms {0} NOT NULL,"
      " unmonitored_ms {0} NOT NULL, coarse_ms {0} NOT NULL, input_stall_ms {0} NOT NULL DEFAULT 0,"
      " checkpoint_stall_ms {0} NOT NULL DEFAULT 0, held_idle_ms {0} NOT NULL DEFAULT 0,"
      " PRIMARY KEY(hour_ms, device_id, job_id)){1};",
      integer, postgresql ? "" : " WITHOUT ROWID");
  for (const RollupRow& r : rows) {
    sql += fmt::format("INSERT INTO rollup_hour VALUES({}, {}, {}", r.period_ms, r.device_id, r.job_id);
    for (int64_t ms : r.ms) sql += fmt::format(", {}", ms);
    sql += fmt::format(", {}", r.coarse_ms);
    for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) sql += fmt::format(", {}", r.idle_causes[c]);
    sql += ");";
  }
  return sql;
}

// A device-hour's minute rollups as stores before schema version 19 (SQLite) or 15
// (PostgreSQL) kept them: its blob (store/minute_blob.h).
struct OldMinuteRow {
  int64_t hour_ms = 0;
  int64_t device_id = 0;
  std::string blob;
};

// SQL that puts minute rollups back as those stores kept them, a row per device-hour in
// `rollup_minute`, holding `rows`, and drops their days' table. (PostgreSQL's was
// partitioned by month; one table serves the migrations as well.)
inline std::string MinuteRowsTableOfOldStores(bool postgresql, const std::vector<OldMinuteRow>& rows = {}) {
  const char* integer = postgresql ? "BIGINT" : "INTEGER";
  std::string sql = fmt::format(
      "DROP TABLE rollup_day_minutes; CREATE TABLE rollup_minute(hour_ms {0} NOT NULL, device_id {0} NOT NULL,"
      " buckets {1} NOT NULL, PRIMARY KEY(hour_ms, device_id)){2};",
      integer, postgresql ? "BYTEA" : "BLOB", postgresql ? "" : " WITHOUT ROWID");
  for (const OldMinuteRow& r : rows) {
    std::string hex;
    for (unsigned char c : r.blob) hex += fmt::format("{:02x}", c);
    sql += fmt::format("INSERT INTO rollup_minute VALUES({}, {}, {});", r.hour_ms, r.device_id,
                       postgresql ? "'\\x" + hex + "'" : "x'" + hex + "'");
  }
  return sql;
}

// Minute rollups of devices 1 and 2 in hours around the UTC day `day0`, as stores before
// SQLite's schema 19 and PostgreSQL's 15 kept them (a row per device-hour), and the active
// milliseconds each (device, minute) holds: what a migration to a row per device-day must
// read back.
inline std::vector<OldMinuteRow> OldMinuteRowsAround(int64_t day0,
                                                     std::map<std::pair<int64_t, int64_t>, int64_t>& active) {
  std::vector<OldMinuteRow> out;
  for (int64_t device : {1, 2}) {
    for (int64_t k : {-2, 0, 5, 23, 24, 30}) {
      const int64_t hour = day0 + k * kMsPerHour;
      std::vector<RollupRow> rows;
      for (int64_t m : {(k + device + 59) % 59, (k + device + 59) % 59 + 1}) {
        RollupRow r{hour + m * kMsPerMinute, device, 0, {1000 * device + k + 2 + m, 7, 0, 0, 0}, 0};
        active[{device, r.period_ms}] = r.ms[0];
        rows.push_back(r);
      }
      out.push_back({hour, device, *EncodeMinuteBlob(hour, rows)});
    }
  }
  return out;
}

// SQL that puts both rollup tables back as stores before schema version 18 (SQLite) or 14
// (PostgreSQL) kept them: HourRowsTableOfOldStores and MinuteRowsTableOfOldStores.
inline std::string RollupTablesOfOldStores(bool postgresql, const std::vector<RollupRow>& hour_rows = {},
                                           const std::vector<OldMinuteRow>& minute_rows = {}) {
  return HourRowsTableOfOldStores(postgresql, hour_rows) + MinuteRowsTableOfOldStores(postgresql, minute_rows);
}

// SQL that puts a store's serving snapshots back as stores before schema version 17
// (SQLite) or 13 (PostgreSQL) kept them, a row per snapshot in `serving` keyed by (job,
// time, engine, model), holding those of `b` (its jobs' store id `job_id`), and drops the
// chunks: what a test that takes a store back to an older version runs too. `postgresql`:
// that backend's types and key (version 12's, carrying the two gauges).
inline std::string ServingTableOfOldStores(bool postgresql, const Batch& b = {}, int64_t job_id = 0) {
  const char* real = postgresql ? "DOUBLE PRECISION" : "REAL";
  const char* integer = postgresql ? "BIGINT" : "INTEGER";
  std::string sql = "DROP TABLE serving_chunks; DROP TABLE serving_unmerged;";
  sql += std::string("CREATE TABLE serving(job_id ") + integer + " NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,"
         " t_ms " + integer + " NOT NULL, requests_waiting " + real + ", requests_running " + real +
         ", kv_cache_usage " + real + ", prompt_tokens " + real + ", generation_tokens " + real + ", preemptions " +
         real + ", requests " + real + ", executions " + real + ", queue_seconds " + real + ", compute_seconds " + real +
         ", prefill TEXT NOT NULL, decode TEXT NOT NULL, iteration_tokens TEXT NOT NULL, PRIMARY KEY(job_id, t_ms, engine, model)" +
         (postgresql ? " INCLUDE (requests_waiting, kv_cache_usage))" : ") WITHOUT ROWID") + ";";
  auto figure = [](const std::optional<double>& v) { return v ? fmt::format("{}", *v) : std::string("NULL"); };
  for (const ServingSnapshot& v : b.serving) {
    sql += fmt::format("INSERT INTO serving VALUES({}, '{}', '{}', {}", job_id, v.engine, v.model, v.t_ms);
    for (const auto& f : {v.requests_waiting, v.requests_running, v.kv_cache_usage_ratio, v.prompt_tokens_total,
                          v.generation_tokens_total, v.preemptions_total, v.requests_total, v.executions_total,
                          v.queue_seconds_total, v.compute_seconds_total}) {
      sql += ", " + figure(f);
    }
    sql += fmt::format(", '{}', '{}', '{}');", EncodeHistogram(v.prefill_seconds), EncodeHistogram(v.decode_seconds),
                       EncodeHistogram(v.iteration_tokens));
  }
  return sql;
}

// A batch on its own node: device GPU-<node>, job j-<node>, `n` samples a minute apart
// from `t0`.
inline Batch OnNode(const std::string& id, const std::string& node, int64_t t0, int n = 3) {
  Batch b;
  b.batch_id = id;
  b.source = node;
  b.devices.push_back(Device{.uuid = "GPU-" + node, .node = node, .model = "NVIDIA H100", .pool = "p"});
  b.jobs.push_back(Job{.id = "j-" + node, .team = "t"});
  b.allocations.push_back(Allocation{"GPU-" + node, "j-" + node, t0, std::nullopt});
  for (int i = 0; i < n; ++i) {
    Sample s;
    s.device_uuid = "GPU-" + node;
    s.t_ms = t0 + i * kMsPerMinute;
    s.sm_active = 0.25;
    b.samples.push_back(s);
  }
  return b;
}

// Batch `<stream>-<seq>`, as an agent numbers its batches: OnNode's device GPU-stream
// with one sample at t0 + seq x 10 s and no job, content digest `digest`.
inline Batch OfStream(const std::string& stream, int64_t seq, int64_t t0, uint64_t digest = 1) {
  Batch b = OnNode(stream + "-" + std::to_string(seq), "stream", t0 + seq * 10'000, 1);
  b.jobs.clear();
  b.allocations.clear();
  b.content_digest = digest;
  return b;
}

// Batch ids that are no `<stream>-<sequence>` (or not the same one), each kept whole: a
// time after the node, a sequence with a leading zero beside the same without, no stream.
inline const std::vector<std::string> kIdsOfNoStream = {"trn-07-2026-11-23T08:00:00Z", "x-007", "x-7", "-5",
                                                         "node-b-00", "node-b-0", "19", "a-1234567890123456789"};

// Batch `id` of kIdsOfNoStream's `i`th: one sample of device GPU-odd at t0 + i x 10 s.
inline Batch OfNoStream(const std::string& id, int i, int64_t t0) {
  Batch b = OfStream("odd", i, t0);
  b.batch_id = id;
  b.devices[0].uuid = b.samples[0].device_uuid = "GPU-odd";
  return b;
}

// What a store migrated from one holding sequences 1..400 of `stream` (OfStream) and
// kIdsOfNoStream (OfNoStream) answers: every id a duplicate, the newest compared by
// content, the next sequence applied. `apply(batch)`: the store's outcome.
template <class Apply>
void ExpectMigratedBatchIdsStayDuplicates(const std::string& stream, int64_t t0, Apply&& apply) {
  for (int64_t seq : {1, 144, 145, 400}) {
    Result<ApplyOutcome> r = apply(OfStream(stream, seq, t0));
    EXPECT_TRUE(r.ok() && *r == ApplyOutcome::kDuplicate) << seq << ": " << r.status().ToString();
  }
  for (int i = 0; i < static_cast<int>(kIdsOfNoStream.size()); ++i) {
    Result<ApplyOutcome> r = apply(OfNoStream(kIdsOfNoStream[i], i, t0));
    EXPECT_TRUE(r.ok() && *r == ApplyOutcome::kDuplicate) << kIdsOfNoStream[i] << ": " << r.status().ToString();
  }
  EXPECT_EQ(apply(OfStream(stream, 400, t0, /*digest=*/2)).status().code(), StatusCode::kAlreadyExists);
  Result<ApplyOutcome> next = apply(OfStream(stream, 401, t0));
  EXPECT_TRUE(next.ok() && *next == ApplyOutcome::kApplied) << next.status().ToString();
}

// Batch `id`: serving job "serve" and its snapshots of two engines every six hours for
// three days from t0, models alternating; requests_waiting is the snapshot's step k, and
// the KV cache k / 100 for vLLM, unreported for Triton on every third step.
inline Batch ServingEverySixHours(const std::string& id, int64_t t0) {
  Batch b;
  b.batch_id = id;
  b.jobs.push_back(Job{.id = "serve", .team = "t", .kind = JobKind::kServing});
  for (int64_t k = 0; k < 12; ++k) {
    for (const char* engine : {"vllm", "triton"}) {
      ServingSnapshot v;
      v.job_id = "serve";
      v.t_ms = t0 + k * 6 * 3'600'000;
      v.engine = engine;
      v.model = k % 2 ? "m1" : "m0";
      v.requests_waiting = static_cast<double>(k);
      if (v.engine == "vllm") {
        v.kv_cache_usage_ratio = static_cast<double>(k) / 100;
      } else if (k % 3 != 0) {
        v.kv_cache_usage_ratio = 0.5;
      }
      b.serving.push_back(v);
    }
  }
  return b;
}

// `b` with two more vLLM snapshots of its first snapshot's model, one and two minutes
// after it: three in that engine's first hour, where ServingEverySixHours has one.
inline Batch WithinTheFirstHour(Batch b) {
  for (int64_t minute : {2, 1}) {
    ServingSnapshot v = b.serving.front();
    v.t_ms += minute * 60'000;
    v.requests_waiting = static_cast<double>(100 + minute);
    v.requests_running = 0.25 * static_cast<double>(minute);
    b.serving.push_back(v);
  }
  return b;
}

// A serving snapshot's (engine, model, t, requests_waiting), -1 when unreported.
using ServingKey = std::tuple<std::string, std::string, int64_t, double>;

// The snapshots of `b` in [begin_ms, end_ms], in (engine, model, t) order: what a store's
// ServingOf(job, {begin_ms, end_ms}) answers.
inline std::vector<ServingKey> ServingIn(const Batch& b, int64_t begin_ms, int64_t end_ms) {
  std::vector<ServingKey> out;
  for (const ServingSnapshot& v : b.serving) {
    if (v.t_ms >= begin_ms && v.t_ms <= end_ms) out.emplace_back(v.engine, v.model, v.t_ms, v.requests_waiting.value_or(-1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What a store answered, in its order.
inline std::vector<ServingKey> KeysOf(const std::vector<ServingSnapshot>& snapshots) {
  std::vector<ServingKey> out;
  for (const ServingSnapshot& v : snapshots) out.emplace_back(v.engine, v.model, v.t_ms, v.requests_waiting.value_or(-1));
  return out;
}

// Gauges in one order whatever the order of those at one time: by time, queue and cache.
inline std::vector<ServingGauges> Canonical(std::vector<ServingGauges> gauges) {
  std::sort(gauges.begin(), gauges.end(), [](const ServingGauges& x, const ServingGauges& y) {
    return std::tie(x.t_ms, x.requests_waiting, x.kv_cache_usage_ratio) <
           std::tie(y.t_ms, y.requests_waiting, y.kv_cache_usage_ratio);
  });
  return gauges;
}

// The gauges of the snapshots of `b` in [begin_ms, end_ms], Canonical: what a store's
// ServingGaugesOf(job, {begin_ms, end_ms}) answers, once Canonical too.
inline std::vector<ServingGauges> GaugesIn(const Batch& b, int64_t begin_ms, int64_t end_ms) {
  std::vector<ServingGauges> out;
  for (const ServingSnapshot& v : b.serving) {
    if (v.t_ms >= begin_ms && v.t_ms <= end_ms) out.push_back({v.t_ms, v.requests_waiting, v.kv_cache_usage_ratio});
  }
  return Canonical(std::move(out));
}

// The serving snapshots and gauges `reads` answers for job `job` (its store id) over a few
// windows of ServingEverySixHours(…, t0) are those of `b`, which sent them.
inline void ExpectServingReadsAsSent(StoreReads& reads, int64_t job, const Batch& b, int64_t t0) {
  constexpr int64_t kHour = 3'600'000, kDay = 24 * kHour;
  for (const TimeRange& w :
       {TimeRange{t0, t0 + 3 * kDay}, TimeRange{t0 + kDay, t0 + 2 * kDay}, TimeRange{t0 + 6 * kHour + 1, t0 + 12 * kHour}}) {
    const std::string over = "over [" + FormatTime(w.begin_ms) + ", " + FormatTime(w.end_ms) + "]";
    auto snapshots = reads.ServingOf(job, w);
    ASSERT_TRUE(snapshots.ok()) << snapshots.status().ToString();
    EXPECT_EQ(KeysOf(*snapshots), ServingIn(b, w.begin_ms, w.end_ms)) << over;
    auto gauges = reads.ServingGaugesOf(job, w);
    ASSERT_TRUE(gauges.ok()) << gauges.status().ToString();
    EXPECT_EQ(Canonical(*gauges), GaugesIn(b, w.begin_ms, w.end_ms)) << over;
  }
}

}  // namespace gpuledger::store::testing_batches
