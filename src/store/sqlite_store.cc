// The embedded store: SQLite in WAL mode.
//
// Dialect notes for the PostgreSQL implementation: the schema uses only INTEGER, REAL
// and TEXT columns and "INSERT ... ON CONFLICT" upserts, which both databases speak.
// WITHOUT ROWID is SQLite's own and is kept in kSqliteTableSuffix.
#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "store/actions_internal.h"
#include "store/batch_ids.h"
#include "store/minute_blob.h"
#include "store/day_cache.h"
#include "store/job_list_cache.h"
#include "store/rollup_days.h"
#include "store/sample_chunk.h"
#include "store/serving_chunk.h"
#include "store/sqlite_reads.h"
#include "store/sqlite_util.h"
#include "store/store.h"

namespace gpuledger::store {
namespace {

using sqlite::Stmt;

constexpr const char* kSqliteTableSuffix = " WITHOUT ROWID";

// Schema migrations, applied in order; meta.schema_version records how many ran.
// rollup_day's rows summed from rollup_hour's (schema versions 11 and 18). The day of an
// hour is floored (the % of SQLite truncates toward zero).
constexpr const char* kDayRowsFromHourRows =
    "INSERT INTO rollup_day SELECT hour_ms - ((hour_ms % 86400000) + 86400000) % 86400000 AS day,"
    "  device_id, job_id, sum(active_ms), sum(idle_ms), sum(unallocated_ms), sum(unavailable_ms),"
    "  sum(unmonitored_ms), sum(coarse_ms), sum(input_stall_ms), sum(checkpoint_stall_ms),"
    "  sum(held_idle_ms), count(*) FROM rollup_hour GROUP BY day, device_id, job_id";

std::vector<std::string> Migrations() {
  std::string wr = kSqliteTableSuffix;
  return {
      // 1: the initial schema.
      "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE batches(batch_id TEXT PRIMARY KEY, source TEXT NOT NULL, digest TEXT NOT NULL,"
      "  samples INTEGER NOT NULL);"
      "CREATE TABLE devices(id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, node TEXT NOT NULL,"
      "  model TEXT NOT NULL, memory_mib INTEGER NOT NULL, pool TEXT NOT NULL,"
      "  capacity_type TEXT NOT NULL, parent_id INTEGER NOT NULL, share_num INTEGER NOT NULL,"
      "  share_den INTEGER NOT NULL, mig_profile TEXT NOT NULL, sample_interval_ms INTEGER NOT NULL,"
      "  in_service_ms INTEGER NOT NULL, last_sample_ms INTEGER NOT NULL);"
      "CREATE TABLE jobs(id INTEGER PRIMARY KEY, job_key TEXT NOT NULL UNIQUE, team TEXT NOT NULL,"
      "  project TEXT NOT NULL, experiment TEXT NOT NULL, user_name TEXT NOT NULL,"
      "  kind TEXT NOT NULL, pool TEXT NOT NULL, priority INTEGER NOT NULL,"
      "  requested_gpus INTEGER NOT NULL, requested_mig_profile TEXT NOT NULL,"
      "  submit_ms INTEGER, start_ms INTEGER, end_ms INTEGER);"
      "CREATE TABLE allocations(device_id INTEGER NOT NULL, job_id INTEGER NOT NULL,"
      "  from_ms INTEGER NOT NULL, to_ms INTEGER, PRIMARY KEY(device_id, job_id, from_ms))" + wr + ";"
      "CREATE INDEX allocations_by_time ON allocations(from_ms);"
      // Figures are stored as small integers (see kRatioScale): 1-3 bytes each.
      "CREATE TABLE samples(device_id INTEGER NOT NULL, t_ms INTEGER NOT NULL, sm_active INTEGER,"
      "  sm_occupancy INTEGER, tensor_active INTEGER, dram_active INTEGER, gpu_util INTEGER,"
      "  fb_used_mib INTEGER, power_dw INTEGER, health INTEGER NOT NULL,"
      "  PRIMARY KEY(device_id, t_ms))" + wr + ";"
      "CREATE TABLE process_samples(device_id INTEGER NOT NULL, t_ms INTEGER NOT NULL,"
      "  pid INTEGER NOT NULL, job_key TEXT NOT NULL, fb_used_mib REAL NOT NULL, sm_share REAL,"
      "  PRIMARY KEY(device_id, t_ms, pid))" + wr + ";"
      "CREATE TABLE rollup_hour(hour_ms INTEGER NOT NULL, device_id INTEGER NOT NULL,"
      "  job_id INTEGER NOT NULL, active_ms INTEGER NOT NULL, idle_ms INTEGER NOT NULL,"
      "  unallocated_ms INTEGER NOT NULL, unavailable_ms INTEGER NOT NULL,"
      "  unmonitored_ms INTEGER NOT NULL, coarse_ms INTEGER NOT NULL,"
      "  PRIMARY KEY(hour_ms, device_id, job_id))" + wr + ";"
      // Minute rollups are kept one row per device-hour, the hour's minutes packed in one
      // blob (store/minute_blob.h).
      "CREATE TABLE rollup_minute(hour_ms INTEGER NOT NULL, device_id INTEGER NOT NULL,"
      "  buckets BLOB NOT NULL, PRIMARY KEY(hour_ms, device_id))" + wr + ";"
      "CREATE TABLE dirty_hours(device_id INTEGER NOT NULL, hour_ms INTEGER NOT NULL,"
      "  generation INTEGER NOT NULL, PRIMARY KEY(device_id, hour_ms))" + wr + ";"
      "CREATE TABLE prices(id INTEGER PRIMARY KEY, model TEXT NOT NULL, pool TEXT NOT NULL,"
      "  capacity_type TEXT NOT NULL, micros_per_hour INTEGER NOT NULL, begin_ms INTEGER NOT NULL,"
      "  end_ms INTEGER NOT NULL);",
      // 2: idle causes. The agent's gap profile and process count per sample; hour
      // rollups split allocated_idle by cause (other = idle - the three).
      "ALTER TABLE samples ADD COLUMN process_count INTEGER;"
      "ALTER TABLE samples ADD COLUMN gap_interval_ms INTEGER;"
      "ALTER TABLE samples ADD COLUMN gap_idle_ms INTEGER;"
      "ALTER TABLE samples ADD COLUMN gap_short_idle_ms INTEGER;"
      "ALTER TABLE rollup_hour ADD COLUMN input_stall_ms INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE rollup_hour ADD COLUMN checkpoint_stall_ms INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE rollup_hour ADD COLUMN held_idle_ms INTEGER NOT NULL DEFAULT 0;"
      // Rollups built before this version have no causes: rebuild them all.
      "INSERT OR REPLACE INTO dirty_hours(device_id, hour_ms, generation)"
      "  SELECT DISTINCT device_id, hour_ms, 0 FROM rollup_hour;",
      // 3: what training jobs train, and their own progress reports (MFU).
      "ALTER TABLE jobs ADD COLUMN model_parameters REAL;"
      "ALTER TABLE jobs ADD COLUMN model_layers INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE jobs ADD COLUMN model_hidden INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE jobs ADD COLUMN model_sequence INTEGER NOT NULL DEFAULT 0;"
      "ALTER TABLE jobs ADD COLUMN model_dtype TEXT NOT NULL DEFAULT '';"
      "CREATE TABLE progress(job_id INTEGER NOT NULL, t_ms INTEGER NOT NULL,"
      "  interval_ms INTEGER NOT NULL, tokens REAL, model_flops REAL,"
      "  PRIMARY KEY(job_id, t_ms))" + wr + ";",
      // 4: serving engines' figures per serving job; histograms as EncodeHistogram text.
      "CREATE TABLE serving(job_id INTEGER NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,"
      "  t_ms INTEGER NOT NULL, requests_waiting REAL, requests_running REAL,"
      "  kv_cache_usage REAL, prompt_tokens REAL, generation_tokens REAL, preemptions REAL,"
      "  requests REAL, executions REAL, queue_seconds REAL, compute_seconds REAL,"
      "  prefill TEXT NOT NULL, decode TEXT NOT NULL, iteration_tokens TEXT NOT NULL,"
      "  PRIMARY KEY(job_id, engine, model, t_ms))" + wr + ";",
      // 5: raw samples packed per device, hour and batch (store/sample_chunk.h). The rows
      // of `samples` are moved into chunks by ConvertSamplesToChunks, which also drops it.
      // A rowid table, appended to in arrival order, so its pages fill up (a table keyed
      // by device would leave them half empty as devices interleave); the index finds a
      // device's chunks.
      "CREATE TABLE sample_chunks(device_id INTEGER NOT NULL, first_ms INTEGER NOT NULL,"
      "  last_ms INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);"
      "CREATE UNIQUE INDEX sample_chunks_by_device ON sample_chunks(device_id, first_ms);",
      // 6: every change a batch made to a stored job's metadata, with who sent it and when.
      "CREATE TABLE job_changes(job_id INTEGER NOT NULL, at_ms INTEGER NOT NULL,"
      "  batch_id TEXT NOT NULL, sender TEXT NOT NULL, field TEXT NOT NULL,"
      "  old_value TEXT NOT NULL, new_value TEXT NOT NULL);"
      "CREATE INDEX job_changes_by_job ON job_changes(job_id, at_ms);",
      // 7: closed billing periods and their frozen chargeback lines (money in micro-units).
      "CREATE TABLE closed_periods(month TEXT PRIMARY KEY, begin_ms INTEGER NOT NULL,"
      "  end_ms INTEGER NOT NULL, window_begin_ms INTEGER NOT NULL, window_end_ms INTEGER NOT NULL,"
      "  closed_at_ms INTEGER NOT NULL, closed_by TEXT NOT NULL);"
      "CREATE TABLE frozen_lines(month TEXT NOT NULL, for_month TEXT NOT NULL, team TEXT NOT NULL,"
      "  project TEXT NOT NULL, capacity TEXT NOT NULL, gpu_hours REAL NOT NULL,"
      "  active_gpu_hours REAL NOT NULL, idle_gpu_hours REAL NOT NULL, unpriced_gpu_hours REAL NOT NULL,"
      "  direct_micros INTEGER NOT NULL, input_stall_micros INTEGER NOT NULL,"
      "  checkpoint_stall_micros INTEGER NOT NULL, held_idle_micros INTEGER NOT NULL,"
      "  other_idle_micros INTEGER NOT NULL);",
      // 8: the audit log of the intervention rules (store/actions.h, sqlite_actions.cc).
      kSqliteActionsMigration,
      // 9: the scheduler labels and annotations the agent kept, as EncodeJobMetadata's
      // text (store.h); NULL while a job's set was never reported.
      "ALTER TABLE jobs ADD COLUMN labels TEXT;"
      "ALTER TABLE jobs ADD COLUMN annotations TEXT;",
      // 10: leases, one server's turn at the objectives loop (sqlite_actions.cc).
      kSqliteLeasesMigration,
      // 11: day rollups (store/rollup_days.h): per UTC day, device and job, the sums of
      // the device-day's hour rows and how many hour rows they sum (a reader that takes
      // some hours back out knows when none is left). Filled from the hour rows here;
      // kept equal to them by WriteRollups.
      "CREATE TABLE rollup_day(day_ms INTEGER NOT NULL, device_id INTEGER NOT NULL,"
      "  job_id INTEGER NOT NULL, active_ms INTEGER NOT NULL, idle_ms INTEGER NOT NULL,"
      "  unallocated_ms INTEGER NOT NULL, unavailable_ms INTEGER NOT NULL,"
      "  unmonitored_ms INTEGER NOT NULL, coarse_ms INTEGER NOT NULL,"
      "  input_stall_ms INTEGER NOT NULL, checkpoint_stall_ms INTEGER NOT NULL,"
      "  held_idle_ms INTEGER NOT NULL, hour_rows INTEGER NOT NULL,"
      "  PRIMARY KEY(day_ms, device_id, job_id))" + wr + ";"
      + kDayRowsFromHourRows + ";",
      // 12: each device-day's hour rows as one value (store/rollup_days.h,
      // EncodeDayHours), so that a scan of whole days reads a row per device and day.
      // Filled from the hour rows by FillDayHours; kept equal to them by WriteRollups.
      "CREATE TABLE rollup_day_hours(day_ms INTEGER NOT NULL, device_id INTEGER NOT NULL,"
      "  hours BLOB NOT NULL, PRIMARY KEY(day_ms, device_id))" + wr + ";",
      // 13: serving snapshots keyed by (job, time, engine, model), so that a window of a
      // job's snapshots is one range of the key; keyed by (job, engine, model, time), a
      // week's gauges of a job read every snapshot it ever reported (all 31 days of the
      // 10,000-GPU benchmark's store for the weekly report). The rows are copied as they are.
      "CREATE TABLE serving_by_time(job_id INTEGER NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,"
      "  t_ms INTEGER NOT NULL, requests_waiting REAL, requests_running REAL,"
      "  kv_cache_usage REAL, prompt_tokens REAL, generation_tokens REAL, preemptions REAL,"
      "  requests REAL, executions REAL, queue_seconds REAL, compute_seconds REAL,"
      "  prefill TEXT NOT NULL, decode TEXT NOT NULL, iteration_tokens TEXT NOT NULL,"
      "  PRIMARY KEY(job_id, t_ms, engine, model))" + wr + ";"
      "INSERT INTO serving_by_time SELECT job_id, engine, model, t_ms, requests_waiting, requests_running,"
      "  kv_cache_usage, prompt_tokens, generation_tokens, preemptions, requests, executions, queue_seconds,"
      "  compute_seconds, prefill, decode, iteration_tokens FROM serving;"
      "DROP TABLE serving;"
      "ALTER TABLE serving_by_time RENAME TO serving;",
      // 14: a version per day of rollup_day (store/day_cache.h), drawn anew by
      // WriteRollups for every day whose day rows it rewrites: what the servers' caches
      // of whole days are keyed by. A random one for each day there is.
      "CREATE TABLE rollup_day_versions(day_ms INTEGER PRIMARY KEY, version INTEGER NOT NULL);"
      "INSERT INTO rollup_day_versions SELECT day_ms, random() FROM (SELECT DISTINCT day_ms FROM rollup_day);",
      // 15: a version of the jobs (store/job_list_cache.h), what the servers' cache of the
      // job list is keyed by: drawn anew by triggers for every job inserted or deleted and
      // every update that changes a column (a migration adding a column to jobs recreates
      // jobs_updated with it).
      "CREATE TABLE catalog_versions(name TEXT PRIMARY KEY, version INTEGER NOT NULL);"
      "INSERT INTO catalog_versions VALUES('jobs', random());"
      "CREATE TRIGGER jobs_inserted AFTER INSERT ON jobs"
      "  BEGIN UPDATE catalog_versions SET version = random() WHERE name = 'jobs'; END;"
      "CREATE TRIGGER jobs_deleted AFTER DELETE ON jobs"
      "  BEGIN UPDATE catalog_versions SET version = random() WHERE name = 'jobs'; END;"
      "CREATE TRIGGER jobs_updated AFTER UPDATE ON jobs WHEN"
      "  (OLD.id, OLD.job_key, OLD.team, OLD.project, OLD.experiment, OLD.user_name, "
      "  OLD.kind, OLD.pool, OLD.priority, OLD.requested_gpus, "
      "  OLD.requested_mig_profile, OLD.submit_ms, OLD.start_ms, OLD.end_ms, "
      "  OLD.model_parameters, OLD.model_layers, OLD.model_hidden, OLD.model_sequence, "
      "  OLD.model_dtype, OLD.labels, OLD.annotations) IS NOT "
      "  (NEW.id, NEW.job_key, NEW.team, NEW.project, NEW.experiment, NEW.user_name, "
      "  NEW.kind, NEW.pool, NEW.priority, NEW.requested_gpus, "
      "  NEW.requested_mig_profile, NEW.submit_ms, NEW.start_ms, NEW.end_ms, "
      "  NEW.model_parameters, NEW.model_layers, NEW.model_hidden, NEW.model_sequence, "
      "  NEW.model_dtype, NEW.labels, NEW.annotations) "
      "  BEGIN UPDATE catalog_versions SET version = random() WHERE name = 'jobs'; END;",
      // 16: batch ids keyed by stream and sequence, each stream's older ones folded into
      // runs (store/batch_ids.h); the source and sample count of each batch, which
      // nothing read, are not kept.
      BatchIdsMigration(kSqliteTableSuffix),
      // 17: serving snapshots packed per job, engine, model, hour and batch
      // (store/serving_chunk.h), as samples are; the rows of `serving` are moved into
      // chunks by ConvertServingToChunks, which also drops it. A rowid table, as
      // sample_chunks; the index finds a job's chunks. serving_unmerged names the hours
      // that hold several chunks of one engine, for the rollup refresh to merge.
      "CREATE TABLE serving_chunks(job_id INTEGER NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,"
      "  first_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL, n INTEGER NOT NULL, gauges_end INTEGER NOT NULL,"
      "  data BLOB NOT NULL);"
      "CREATE UNIQUE INDEX serving_chunks_by_job ON serving_chunks(job_id, engine, model, first_ms);"
      "CREATE TABLE serving_unmerged(job_id INTEGER NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,"
      "  hour_ms INTEGER NOT NULL, PRIMARY KEY(job_id, engine, model, hour_ms))" + wr + ";",
      // 18: hour rows are kept in rollup_day_hours alone (store/rollup_days.h). The day rows
      // and day hours are derived once more from the hour rows (FillDayHours), which are
      // then dropped: the day hours took 0.3 KB a device-day, the hour rows 0.9 KB.
      std::string("DELETE FROM rollup_day;") + kDayRowsFromHourRows +
          ";"
          "INSERT OR REPLACE INTO rollup_day_versions SELECT DISTINCT day_ms, random() FROM rollup_day;"
          "DELETE FROM rollup_day_hours;",
      // 19: minute rollups a row per device and UTC day (store/minute_blob.h,
      // ReplaceDayMinutes), not per device-hour, as PostgreSQL's version 15 keeps them (there
      // 6.6 KB a device-day became 3.2). Here it costs a little: 5.3 KB a device-day against
      // 4.8 KB in hour rows, values of 2-7 KB packing into pages less well. The rows of
      // rollup_minute are moved by ConvertMinutesToDays, which also drops it. A rowid table,
      // as sample_chunks: a day's value is above what a WITHOUT ROWID table keeps in its
      // page (5.9 KB a device-day with overflow pages).
      "CREATE TABLE rollup_day_minutes(day_ms INTEGER NOT NULL, device_id INTEGER NOT NULL,"
      "  minutes BLOB NOT NULL);"
      "CREATE UNIQUE INDEX rollup_day_minutes_by_day ON rollup_day_minutes(day_ms, device_id);",
  };
}

// The schema versions whose migrations also run FillDayHours (18: then drops rollup_hour).
constexpr size_t kDayHoursVersion = 12;
constexpr size_t kHourRowsDroppedVersion = 18;
// The schema version whose migration also runs ConvertMinutesToDays.
constexpr size_t kMinutesByDayVersion = 19;
constexpr const char* kInsertServingChunkSql =
    "INSERT INTO serving_chunks(job_id, engine, model, first_ms, last_ms, n, gauges_end, data)"
    " VALUES(?1,?2,?3,?4,?5,?6,?7,?8)";
constexpr const char* kInsertDayMinutesSql =
    "INSERT INTO rollup_day_minutes(day_ms, device_id, minutes) VALUES(?1,?2,?3)";
constexpr const char* kInsertDayHoursSql = "INSERT INTO rollup_day_hours(day_ms, device_id, hours) VALUES(?1,?2,?3)";

// The schema version whose migration also runs ConvertSamplesToChunks.
constexpr size_t kChunkedSamplesVersion = 5;
// The schema version whose migration also runs ConvertServingToChunks.
constexpr size_t kChunkedServingVersion = 17;

// The old samples table kept ratios to 1e-4, memory to the MiB and power to the tenth
// of a watt (as chunks do): read when migrating to chunks.
constexpr double kRatioScale = 10'000;

std::optional<double> FromScaled(const std::optional<int64_t>& v, double scale) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v) / scale;
}

std::string DigestText(uint64_t d) { return fmt::format("{:016x}", d); }

// A device's row as stored (but its times): a batch that declares a device exactly as
// stored does not write it again.
struct DeviceRow {
  std::string node, model, pool, capacity_type, mig_profile;
  int64_t memory_mib = 0, parent_id = 0, share_num = 0, share_den = 0, sample_interval_ms = 0;
  bool operator==(const DeviceRow&) const = default;
};

class SqliteStore final : public Store, public ActionLog {
 public:
  ~SqliteStore() override {
    idle_readers_.clear();
    reads_.reset();
    stmts_.clear();
    sqlite3_close_v2(db_);
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the writer's lock
  }

  // The advisory lock of SqliteOptions::exclusive_writer: flock on the database file
  // itself (independent of SQLite's own fcntl locks), held by this descriptor until the
  // store is destroyed or the process ends, however it ends.
  Status LockExclusively(const std::string& path) {
    lock_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (lock_fd_ < 0) return Unavailable(fmt::format("store {}: cannot open it to lock it: {}", path, std::strerror(errno)));
    if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(lock_fd_);
      lock_fd_ = -1;
      if (err == EWOULDBLOCK) {
        return FailedPrecondition(fmt::format(
            "store {} is held by another gpuledger server or import: one writer per SQLite file "
            "(stop the other, or give this one another --db; several servers share a PostgreSQL store)",
            path));
      }
      return Unavailable(fmt::format("store {}: cannot lock it: {}", path, std::strerror(err)));
    }
    return Status::Ok();
  }

  Status Open(const std::string& path, const SqliteOptions& options) {
    days_ = std::make_shared<DayRowCache>(options.day_cache_bytes);
    jobs_ = std::make_shared<JobListCache>();
    // NOMUTEX: every use of the connection is under mu_ already, and SQLite's own
    // per-call mutex cost a lock and an unlock per bind and step (14% of native ingest).
    if (sqlite3_open_v2(path.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      return Unavailable(fmt::format("sqlite: cannot open {}: {}", path,
                                     db_ ? sqlite3_errmsg(db_) : "out of memory"));
    }
    sqlite3_busy_timeout(db_, 5000);
    if (options.exclusive_writer) GPULEDGER_RETURN_IF_ERROR(LockExclusively(path));
    // 8 KiB pages for a new database (an existing one keeps its size: the pragma only takes
    // before the first table). A device-hour's chunk is about 2 KB at 10 s sampling, and
    // 4 KiB pages hold only one such row each: on the demo fleet's day they left 38% of
    // sample_chunks' pages unused (storage_bench; docs/store-postgresql.md, "Size").
    GPULEDGER_RETURN_IF_ERROR(Exec("PRAGMA page_size=8192"));
    GPULEDGER_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    GPULEDGER_RETURN_IF_ERROR(
        Exec(options.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
    GPULEDGER_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=OFF"));
    GPULEDGER_RETURN_IF_ERROR(Exec("PRAGMA cache_size=-65536"));
    // Checkpoint the WAL into the database every 16 MiB of pages (4000 at 4 KiB) rather
    // than SQLite's 1000 pages: a page that several commits change in between is copied
    // back once. It cut the commit's CPU by a fifth on native ingest (docs/server.md).
    GPULEDGER_ASSIGN_OR_RETURN(int64_t page_bytes, QueryInt("PRAGMA page_size"));
    GPULEDGER_RETURN_IF_ERROR(
        Exec(fmt::format("PRAGMA wal_autocheckpoint={}", (16 << 20) / std::max<int64_t>(page_bytes, 512))));
    // Sorts and temporary tables in memory: with the disk full they would fail too.
    GPULEDGER_RETURN_IF_ERROR(Exec("PRAGMA temp_store=MEMORY"));
    GPULEDGER_RETURN_IF_ERROR(Migrate(path));
    if (options.max_size_bytes > 0) {
      // A cap on the database file, in pages: past it every write fails as on a full disk.
      int64_t page_size = 4096;
      if (auto ps = QueryInt("PRAGMA page_size"); ps.ok() && *ps > 0) page_size = *ps;
      GPULEDGER_RETURN_IF_ERROR(Exec(fmt::format("PRAGMA max_page_count={}", std::max<int64_t>(1, options.max_size_bytes / page_size))));
    }
    GPULEDGER_RETURN_IF_ERROR(PrepareAll());
    GPULEDGER_ASSIGN_OR_RETURN(reads_, sqlite::Reads::Create(db_, days_, jobs_));
    path_ = path;
    GPULEDGER_RETURN_IF_ERROR(LoadCaches());
    GPULEDGER_ASSIGN_OR_RETURN(data_version_, DataVersion());
    return Status::Ok();
  }

  Result<ApplyOutcome> ApplyBatch(const IngestPlan& plan) override {
    Group group(*this);
    GPULEDGER_RETURN_IF_ERROR(group.Begin());
    GPULEDGER_ASSIGN_OR_RETURN(ApplyOutcome outcome, group.Apply(plan));
    GPULEDGER_RETURN_IF_ERROR(group.Commit());
    return outcome;
  }

  Result<std::unique_ptr<BatchGroup>> BeginBatchGroup() override {
    auto group = std::make_unique<Group>(*this);
    GPULEDGER_RETURN_IF_ERROR(group->Begin());
    return std::unique_ptr<BatchGroup>(std::move(group));
  }

  // Reads on the writer's connection, under the writer's lock: they see what it committed
  // and wait for a group being applied (readers that must not wait take a Snapshot).
  Result<std::vector<DeviceRecord>> ListDevices() override { return Locked([&] { return reads_->ListDevices(); }); }
  Result<std::vector<JobRecord>> ListJobs() override { return Locked([&] { return reads_->ListJobs(); }); }
  Result<std::shared_ptr<const std::vector<JobRecord>>> SharedJobs() override {
    return Locked([&] { return reads_->SharedJobs(); });
  }
  Status ScanHourRollups(const TimeRange& hours, const std::function<Status(const RollupRow&)>& fn) override {
    return Locked([&] { return reads_->ScanHourRollups(hours, fn); });
  }
  Result<std::vector<std::vector<AllocationRecord>>> AllocationsOf(std::span<const DeviceRange> ranges) override {
    return Locked([&] { return reads_->AllocationsOf(ranges); });
  }
  Result<std::vector<AllocationRecord>> AllocationsOverlapping(const TimeRange& range) override {
    return Locked([&] { return reads_->AllocationsOverlapping(range); });
  }
  Result<std::vector<ServingSnapshot>> ServingOf(int64_t job_id, const TimeRange& range) override {
    return Locked([&] { return reads_->ServingOf(job_id, range); });
  }
  Result<std::vector<ServingGauges>> ServingGaugesOf(int64_t job_id, const TimeRange& range) override {
    return Locked([&] { return reads_->ServingGaugesOf(job_id, range); });
  }
  Result<std::vector<Progress>> ProgressOf(int64_t job_id, const TimeRange& range) override {
    return Locked([&] { return reads_->ProgressOf(job_id, range); });
  }
  Result<std::vector<JobChange>> JobChangesOf(int64_t job_id) override {
    return Locked([&] { return reads_->JobChangesOf(job_id); });
  }
  Result<std::vector<std::vector<Sample>>> SamplesOf(std::span<const DeviceRange> ranges) override {
    return Locked([&] { return reads_->SamplesOf(ranges); });
  }
  Result<EncodedChunks> EncodedChunksOf(std::span<const DeviceRange> ranges) override {
    return Locked([&] { return reads_->EncodedChunksOf(ranges); });
  }
  Result<std::unordered_map<int64_t, Sample>> LatestSamples() override {
    return Locked([&] { return reads_->LatestSamples(); });
  }
  Result<std::vector<DirtyHour>> DirtyHours(size_t limit) override {
    return Locked([&] { return reads_->DirtyHours(limit); });
  }
  Result<std::vector<DirtyHour>> DirtyHoursIn(const TimeRange& hours) override {
    return Locked([&] { return reads_->DirtyHoursIn(hours); });
  }
  Result<std::vector<RollupSum>> SumHourRollups(const TimeRange& hours) override {
    return Locked([&] { return reads_->SumHourRollups(hours); });
  }
  Result<std::vector<RollupSum>> SumSettledHourRollups(const TimeRange& hours) override {
    return Locked([&] { return reads_->SumSettledHourRollups(hours); });
  }
  Status ScanMinuteRollups(const TimeRange& range, const std::function<void(const RollupRow&)>& fn,
                           bool settled_only) override {
    return Locked([&] { return reads_->ScanMinuteRollups(range, fn, settled_only); });
  }
  Result<PriceBook> LoadPriceBook() override { return Locked([&] { return reads_->LoadPriceBook(); }); }
  Result<std::vector<ClosedPeriodRecord>> ClosedPeriods() override {
    return Locked([&] { return reads_->ClosedPeriods(); });
  }
  Result<std::vector<FrozenLine>> FrozenLines() override { return Locked([&] { return reads_->FrozenLines(); }); }
  Result<StoreStats> Stats() override { return Locked([&] { return reads_->Stats(); }); }

  Result<std::unique_ptr<StoreSnapshot>> Snapshot() override;

  // The audit log (sqlite_actions.cc), on the writer's connection.
  Result<size_t> RecordActions(std::span<const ActionRecord> actions) override {
    std::lock_guard lock(mu_);
    Txn txn(*this);
    GPULEDGER_RETURN_IF_ERROR(txn.Begin());
    GPULEDGER_ASSIGN_OR_RETURN(size_t added, sqlite::InsertActions(db_, actions));
    GPULEDGER_RETURN_IF_ERROR(txn.Commit());
    return added;
  }
  Result<std::vector<ActionRecord>> ActionsIn(const TimeRange& range) override {
    return Locked([&] { return sqlite::ReadActions(db_, range); });
  }
  Result<std::vector<ActionRecord>> SelectActions(const ActionSelection& selection) override {
    return Locked([&] { return sqlite::SelectActions(db_, selection); });
  }
  Result<Lease> HoldLease(const std::string& name, const std::string& holder, int64_t now_ms,
                          int64_t ttl_ms) override {
    return Locked([&] { return sqlite::HoldLease(db_, name, holder, now_ms, ttl_ms); });
  }
  Status ReleaseLease(const std::string& name, const std::string& holder) override {
    return Locked([&] { return sqlite::ReleaseLease(db_, name, holder); });
  }

  Status WriteRollups(const std::vector<RollupUpdate>& updates) override {
    GPULEDGER_RETURN_IF_ERROR(CheckRollupUpdates(updates));
    std::lock_guard lock(mu_);
    Txn txn(*this);
    GPULEDGER_RETURN_IF_ERROR(txn.Begin());
    for (const RollupUpdate& u : updates) {
      const DirtyHour& d = u.dirty;
      GPULEDGER_RETURN_IF_ERROR(Done(S(kClearDirty).Reset().Bind(1, d.device_id).Bind(2, d.hour_ms).Bind(3, d.generation)));
    }
    // Each device-day touched, once: its day hours and minutes as stored with the
    // refreshed hours replaced, and its day rows summed from the hours.
    for (const DeviceDayUpdates& dd : UpdatesByDeviceDay(updates)) {
      GPULEDGER_RETURN_IF_ERROR(PutDayMinutes(dd));
      std::vector<RollupRow> stored;
      Stmt& q = S(kDayHoursOf).Reset().Bind(1, dd.day_ms).Bind(2, dd.device_id);
      GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "rollup_day_hours", [&]() -> Status {
        GPULEDGER_ASSIGN_OR_RETURN(stored, DayHourRows(q.Blob(0), dd.day_ms, dd.device_id));
        return Status::Ok();
      }));
      const std::vector<RollupRow> rows = ReplaceHours(std::move(stored), dd.updates);
      const int64_t device = dd.device_id, day = dd.day_ms;
      GPULEDGER_RETURN_IF_ERROR(Done(S(kDeleteDayRollup).Reset().Bind(1, day).Bind(2, device)));
      for (const DayRow& d : SumDayRows(rows)) {
        Stmt& ins = S(kInsertDayRollup).Reset().Bind(1, day).Bind(2, device).Bind(3, d.sum.job_id);
        for (size_t b = 0; b < kBucketCount; ++b) ins.Bind(static_cast<int>(4 + b), d.sum.ms[b]);
        ins.Bind(9, d.sum.coarse_ms);
        for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) ins.Bind(static_cast<int>(10 + c), d.sum.idle_causes[c]);
        GPULEDGER_RETURN_IF_ERROR(Done(ins.Bind(13, d.hour_rows)));
      }
      GPULEDGER_RETURN_IF_ERROR(PutDayHours(device, day, rows));
    }
    for (int64_t day : TouchedDays(updates)) {
      GPULEDGER_RETURN_IF_ERROR(Done(S(kPutDayVersion).Reset().Bind(1, day).Bind(2, NewDayVersion())));
    }
    for (const auto& [device, hour] : HoursToMerge(updates)) GPULEDGER_RETURN_IF_ERROR(MergeHourChunks(device, hour));
    GPULEDGER_RETURN_IF_ERROR(MergeServingHours());
    return txn.Commit();
  }

 private:
  // The chunks of (device, hour) as one, when there are several and the device's samples
  // are past the hour (rollup_days.h, HoursToMerge). In the writer's transaction.
  // The refresh of a live device's current hour comes here on every round: the count
  // and the device's latest sample are read first, without the chunks' data.
  Status MergeHourChunks(int64_t device, int64_t hour) {
    auto one = [&](Stmt& q, const char* what) -> Result<int64_t> {  // the integer `q` answers
      if (int rc = q.Step(); rc != SQLITE_ROW) return sqlite::Error(db_, rc, what);
      const int64_t v = q.Int(0);
      (void)q.Step();
      return v;
    };
    GPULEDGER_ASSIGN_OR_RETURN(
        int64_t count, one(S(kCountChunksOfHour).Reset().Bind(1, device).Bind(2, hour).Bind(3, hour + kMsPerHour),
                           "counting a device-hour's chunks"));
    if (count < 2) return Status::Ok();
    GPULEDGER_ASSIGN_OR_RETURN(int64_t last,
                               one(S(kLastSampleOf).Reset().Bind(1, device), "reading a device's latest sample"));
    if (last < hour + kMsPerHour) return Status::Ok();
    std::vector<StoredChunk> chunks;
    Stmt& q = S(kChunksOfHour).Reset().Bind(1, device).Bind(2, hour).Bind(3, hour + kMsPerHour);
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "sample_chunks", [&] {
      chunks.push_back({q.Int(0), std::string(q.Blob(1))});
      return Status::Ok();
    }));
    // A chunk that does not decode is left as it is, for the reads and `store check` to
    // name: the merge saves room, and must not hold up the rollups.
    MergedChunk merged;
    if (!MergeChunks(chunks, merged) || merged.n == 0) return Status::Ok();
    GPULEDGER_RETURN_IF_ERROR(Done(S(kDeleteChunksOfHour).Reset().Bind(1, device).Bind(2, hour).Bind(3, hour + kMsPerHour)));
    Stmt& ins = S(kInsertChunk).Reset().Bind(1, device).Bind(2, merged.first_ms).Bind(3, merged.last_ms).Bind(4, merged.n);
    sqlite3_bind_blob(ins.get(), 5, merged.data.data(), static_cast<int>(merged.data.size()), SQLITE_STATIC);
    return Done(ins);
  }

  // The chunks of each job, engine, model and hour that serving_unmerged names, as one
  // (store/serving_chunk.h). In the writer's transaction. A chunk that does not decode
  // is left as it is, for the reads to name.
  Status MergeServingHours() {
    struct Key {
      int64_t job;
      std::string engine, model;
      int64_t hour;
    };
    std::vector<Key> keys;
    Stmt& q = S(kServingUnmerged).Reset();
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "serving_unmerged", [&] {
      keys.push_back({q.Int(0), q.Text(1), q.Text(2), q.Int(3)});
      return Status::Ok();
    }));
    if (keys.empty()) return Status::Ok();
    std::vector<StoredChunk> chunks;
    for (const Key& k : keys) {
      chunks.clear();
      Stmt& c = S(kServingChunksOfHour).Reset().Bind(1, k.job).Bind(2, k.engine).Bind(3, k.model).Bind(4, k.hour);
      GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, c, "serving_chunks", [&] {
        chunks.push_back({c.Int(0), std::string(c.Blob(1))});
        return Status::Ok();
      }));
      MergedChunk merged;
      if (chunks.size() < 2 || !MergeServingChunks(chunks, merged) || merged.n == 0) continue;
      GPULEDGER_RETURN_IF_ERROR(Done(
          S(kDeleteServingChunksOfHour).Reset().Bind(1, k.job).Bind(2, k.engine).Bind(3, k.model).Bind(4, k.hour)));
      GPULEDGER_RETURN_IF_ERROR(InsertServingChunk(S(kInsertServingChunk), k.job, k.engine, k.model, merged));
    }
    return Done(S(kDeleteServingUnmerged).Reset());
  }

  // Replaces the rollup_day_hours row of (device, day) with `rows` (none: no row).
  Status PutDayHours(int64_t device, int64_t day, const std::vector<RollupRow>& rows) {
    GPULEDGER_RETURN_IF_ERROR(Done(S(kDeleteDayHours).Reset().Bind(1, day).Bind(2, device)));
    if (rows.empty()) return Status::Ok();
    return InsertDayHours(S(kInsertDayHours), device, day, rows);
  }
  // Runs `ins` (kInsertDayHours' statement) for the day's hours of `rows`.
  Status InsertDayHours(Stmt& ins, int64_t device, int64_t day, const std::vector<RollupRow>& rows) {
    GPULEDGER_ASSIGN_OR_RETURN(std::string blob, EncodeDayHours(day, rows));
    ins.Reset().Bind(1, day).Bind(2, device);
    sqlite3_bind_blob(ins.get(), 3, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    return Done(ins);
  }

  // The device-day's minute rollups (rollup_day_minutes) with the hours of `updates`
  // replaced.
  Status PutDayMinutes(const DeviceDayUpdates& dd) {
    std::string stored;
    Stmt& q = S(kDayMinutesOf).Reset().Bind(1, dd.day_ms).Bind(2, dd.device_id);
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "rollup_day_minutes", [&]() -> Status {
      stored = std::string(q.Blob(0));
      return Status::Ok();
    }));
    GPULEDGER_ASSIGN_OR_RETURN(std::string minutes, DayMinutesAfter(stored, dd.device_id, dd.day_ms, dd.updates));
    GPULEDGER_RETURN_IF_ERROR(Done(S(kDeleteDayMinutes).Reset().Bind(1, dd.day_ms).Bind(2, dd.device_id)));
    if (minutes.empty()) return Status::Ok();
    Stmt& ins = S(kInsertDayMinutes).Reset().Bind(1, dd.day_ms).Bind(2, dd.device_id);
    sqlite3_bind_blob(ins.get(), 3, minutes.data(), static_cast<int>(minutes.size()), SQLITE_TRANSIENT);
    return Done(ins);
  }

 public:
  Status SavePriceBook(const PriceBook& book) override {
    std::lock_guard lock(mu_);
    Txn txn(*this);
    GPULEDGER_RETURN_IF_ERROR(txn.Begin());
    GPULEDGER_RETURN_IF_ERROR(Exec("DELETE FROM prices"));
    for (const PriceEntry& e : book.entries()) {
      std::string type(CapacityTypeName(e.capacity_type));
      GPULEDGER_RETURN_IF_ERROR(Done(S(kInsertPrice)
                                         .Reset()
                                         .Bind(1, e.model)
                                         .Bind(2, e.pool)
                                         .Bind(3, type)
                                         .Bind(4, e.per_gpu_hour.micros())
                                         .Bind(5, e.valid.begin_ms)
                                         .Bind(6, e.valid.end_ms)));
    }
    return txn.Commit();
  }

  Status ClosePeriod(const ClosedPeriodRecord& period, std::span<const FrozenLine> lines) override {
    std::lock_guard lock(mu_);
    Txn txn(*this);
    GPULEDGER_RETURN_IF_ERROR(txn.Begin());
    Stmt& p = S(kInsertClosedPeriod).Reset();
    p.Bind(1, period.month).Bind(2, period.range.begin_ms).Bind(3, period.range.end_ms);
    p.Bind(4, period.window.begin_ms).Bind(5, period.window.end_ms);
    p.Bind(6, period.closed_at_ms).Bind(7, period.closed_by);
    if (int rc = p.Step(); rc == SQLITE_CONSTRAINT) {
      return Status(StatusCode::kAlreadyExists, fmt::format("billing period {} is closed already", period.month));
    } else if (rc != SQLITE_DONE) {
      return sqlite::Error(db_, rc, "closing a billing period");
    }
    static_assert(kIdleCauseCount == 4);
    for (const FrozenLine& l : lines) {
      Stmt& w = S(kInsertFrozenLine).Reset();
      w.Bind(1, l.month).Bind(2, l.for_month).Bind(3, l.team).Bind(4, l.project).Bind(5, l.capacity);
      w.BindDouble(6, l.gpu_hours).BindDouble(7, l.active_gpu_hours).BindDouble(8, l.idle_gpu_hours);
      w.BindDouble(9, l.unpriced_gpu_hours);
      w.Bind(10, l.direct_cost.micros());
      for (int c = 0; c < 4; ++c) w.Bind(11 + c, l.idle_cost_by_cause[static_cast<size_t>(c)].micros());
      GPULEDGER_RETURN_IF_ERROR(Done(w));
    }
    return txn.Commit();
  }

  Result<StoreCheck> Check(bool full) override {
    std::lock_guard lock(mu_);
    const char* pragma = full ? "integrity_check" : "quick_check";
    StoreCheck out;
    GPULEDGER_ASSIGN_OR_RETURN(out.problems, CheckProblems(fmt::format("PRAGMA {}(100)", pragma)));
    if (out.ok()) return out;
    // Which tables: each checked alone (PRAGMA quick_check(TABLE), with its indexes).
    Stmt names;
    GPULEDGER_RETURN_IF_ERROR(names.Prepare(db_, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"));
    std::vector<std::string> tables;
    if (!sqlite::ForEach(db_, names, "sqlite_master", [&] {
          tables.push_back(names.Text(0));
          return Status::Ok();
        }).ok()) {
      return out;  // the schema itself is damaged: no table can be named
    }
    for (const std::string& t : tables) {
      GPULEDGER_ASSIGN_OR_RETURN(auto problems, CheckProblems(fmt::format("PRAGMA {}(\"{}\")", pragma, t)));
      if (!problems.empty()) out.tables.push_back(t);
    }
    return out;
  }

  // The lines of an integrity pragma other than "ok"; a pragma that stops on the damage
  // (SQLITE_CORRUPT) is a problem in its own words, not a failure to check.
  Result<std::vector<std::string>> CheckProblems(const std::string& sql) {
    Stmt q;
    std::vector<std::string> problems;
    int rc = q.Prepare(db_, sql).ok() ? SQLITE_OK : sqlite3_errcode(db_);
    if (rc == SQLITE_OK) {
      while ((rc = q.Step()) == SQLITE_ROW) {
        if (std::string line = q.Text(0); line != "ok") problems.push_back(std::move(line));
      }
    }
    if (rc == SQLITE_DONE) return problems;
    if (rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB) {
      problems.push_back(sqlite3_errmsg(db_));
      return problems;
    }
    return sqlite::Error(db_, rc, "checking the store's integrity");
  }

  Result<std::vector<int64_t>> SettleDays(int64_t, size_t) override { return std::vector<int64_t>{}; }
  Result<int64_t> PruneSamples(int64_t before_ms) override {
    std::lock_guard lock(mu_);
    Txn txn(*this);
    GPULEDGER_RETURN_IF_ERROR(txn.Begin());
    // Samples are kept in chunks of an hour: retention prunes whole hours, those before
    // the hour that holds `before_ms`.
    int64_t hour = FloorTo(before_ms, kMsPerHour);
    Stmt& q = S(kPruneSamples).Reset().Bind(1, hour);
    int64_t n = 0;
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "sample_chunks (pruning)", [&] {
      n += q.Int(0);
      return Status::Ok();
    }));
    GPULEDGER_RETURN_IF_ERROR(Done(S(kPruneProcesses).Reset().Bind(1, hour)));
    GPULEDGER_RETURN_IF_ERROR(txn.Commit());
    return n;
  }

 private:
  // A write transaction on db_ that is rolled back unless committed. REQUIRES: mu_ held
  // for its whole life.
  class Txn {
   public:
    explicit Txn(SqliteStore& s) : s_(s) {}
    Txn(const Txn&) = delete;
    Txn& operator=(const Txn&) = delete;
    ~Txn() {
      if (open_ && !sqlite3_get_autocommit(s_.db_)) (void)s_.Exec("ROLLBACK");
    }
    Status Begin() {
      GPULEDGER_RETURN_IF_ERROR(s_.Exec("BEGIN IMMEDIATE"));
      open_ = true;
      // Holding the write lock, the caches are checked against what other connections
      // (another process on the same file) committed since this one last wrote.
      return s_.ReloadCachesIfChanged();
    }
    // On error the transaction is rolled back (by SQLite or by the destructor).
    Status Commit() {
      Status st = s_.Exec("COMMIT");
      if (st.ok()) open_ = false;
      return st;
    }

   private:
    SqliteStore& s_;
    bool open_ = false;
  };

 private:
  // Ids and device state learnt inside a transaction, published after COMMIT. A batch
  // of a group keeps its own (dropped with its savepoint when it fails) on top of what
  // the batches before it in the group learnt (`parent`).
  struct Pending {
    const Pending* parent = nullptr;
    std::unordered_map<std::string, int64_t> devices;
    std::unordered_map<std::string, int64_t> jobs;
    std::unordered_map<int64_t, std::pair<int64_t, int64_t>> device_state;  // in service, last
    std::unordered_map<int64_t, DeviceRow> device_rows;                     // as written
    std::vector<std::pair<int64_t, int64_t>> dirty;  // (device id, hour) to mark

    void MergeFrom(Pending& batch) {
      for (auto& [uuid, id] : batch.devices) devices[uuid] = id;
      for (auto& [key, id] : batch.jobs) jobs[key] = id;
      for (auto& [id, rec] : batch.device_state) device_state[id] = rec;
      for (auto& [id, row] : batch.device_rows) device_rows[id] = std::move(row);
      dirty.insert(dirty.end(), batch.dirty.begin(), batch.dirty.end());
    }
  };

  // Writes what the batches of a group learnt about their devices' times and the hours
  // they made dirty (one generation for the group: no rollup refresh can read between
  // its batches).
  Status WriteGroupState(Pending& learnt) {
    for (auto& [id, st] : learnt.device_state) {
      GPULEDGER_RETURN_IF_ERROR(
          Done(S(kUpdateDeviceTimes).Reset().Bind(1, id).Bind(2, st.first).Bind(3, st.second)));
    }
    Stmt* next = &S(kNextGeneration).Reset();
    int rc = next->Step();
    if (rc == SQLITE_DONE) {  // no generation kept yet
      next->Reset();
      next = &S(kFirstGeneration).Reset();
      rc = next->Step();
    }
    if (rc != SQLITE_ROW) return sqlite::Error(db_, rc, "taking a dirty-hour generation");
    int64_t gen = next->Int(0);
    next->Reset();
    std::vector<std::pair<int64_t, int64_t>>& dirty = learnt.dirty;
    std::sort(dirty.begin(), dirty.end());
    dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
    for (auto [device_id, hour] : dirty) {
      GPULEDGER_RETURN_IF_ERROR(
          Done(S(kMarkDirty).Reset().Bind(1, device_id).Bind(2, hour).Bind(3, gen)));
    }
    return Status::Ok();
  }

  // A group commit (store.h) on this store's connection: one transaction, a savepoint
  // per batch. Holds mu_ from construction to destruction.
  class Group final : public BatchGroup {
   public:
    explicit Group(SqliteStore& store) : s_(store), lock_(store.mu_) {}
    ~Group() override {
      if (open_) (void)s_.Exec("ROLLBACK");
    }

    Status Begin() {
      GPULEDGER_RETURN_IF_ERROR(s_.Exec("BEGIN IMMEDIATE"));
      open_ = true;
      // Holding the write lock, the caches are checked against what other connections
      // (another process on the same file) committed since this one last wrote.
      return s_.ReloadCachesIfChanged();
    }

    Result<ApplyOutcome> Apply(const IngestPlan& plan) override {
      if (plan.batch == nullptr || !plan.check_stored_instants || !plan.allocation_dirty_hours) {
        return InvalidArgument("an ingest plan needs its batch and its rules (ledger::PlanIngest makes them)");
      }
      const Batch& b = *plan.batch;
      if (!broken_.ok()) return broken_;
      if (!open_)
        return FailedPrecondition(
            fmt::format("batch {}: the batch group is already committed", b.batch_id));
      if (Status st = s_.Exec("SAVEPOINT batch"); !st.ok()) return Break(st);
      Pending pending;
      pending.parent = &learnt_;
      auto outcome = s_.ApplyInTransaction(plan, pending);
      if (outcome.ok() && *outcome == ApplyOutcome::kApplied) {
        if (Status st = s_.Exec("RELEASE batch"); !st.ok()) return Break(st);
        learnt_.MergeFrom(pending);
        return outcome;
      }
      // A duplicate wrote nothing; a failed batch leaves nothing behind. Some errors
      // (the disk full, I/O) make SQLite roll the whole transaction back itself: then
      // the batches before this one are gone too, and the group is lost.
      if (sqlite3_get_autocommit(s_.db_)) {
        open_ = false;
        return Break(outcome.ok()
                         ? Internal("sqlite: the transaction ended unexpectedly")
                         : outcome.status().WithContext("the group's transaction was rolled back"));
      }
      Status st = s_.Exec("ROLLBACK TO batch");
      if (st.ok()) st = s_.Exec("RELEASE batch");
      if (!st.ok()) return Break(st);
      return outcome;
    }

    Status Commit() override {
      if (!broken_.ok()) return broken_;
      if (!open_) return FailedPrecondition("the batch group is already committed");
      if (Status st = s_.WriteGroupState(learnt_); !st.ok()) return Break(st);
      open_ = false;
      if (Status st = s_.Exec("COMMIT"); !st.ok()) {
        if (!sqlite3_get_autocommit(s_.db_)) (void)s_.Exec("ROLLBACK");
        broken_ = st;
        return st;
      }
      // Only now that the transaction holds may the caches learn the new ids.
      for (auto& [uuid, id] : learnt_.devices) s_.device_ids_[uuid] = id;
      for (auto& [key, id] : learnt_.jobs) s_.job_ids_[key] = id;
      for (auto& [id, rec] : learnt_.device_state) s_.device_state_[id] = rec;
      for (auto& [id, row] : learnt_.device_rows) s_.device_rows_[id] = std::move(row);
      return Status::Ok();
    }

   private:
    // Gives the whole group up: rolls back and fails from now on with `why`.
    Status Break(Status why) {
      if (open_ && !sqlite3_get_autocommit(s_.db_)) (void)s_.Exec("ROLLBACK");
      open_ = false;
      broken_ = why;
      return why;
    }

    SqliteStore& s_;
    std::unique_lock<std::mutex> lock_;
    bool open_ = false;
    Status broken_;   // not Ok once the group is lost
    Pending learnt_;  // by the batches applied so far
  };

  // The writer's statements (the reads are sqlite::Reads').
  enum StmtId {
    kInsertClosedPeriod, kInsertFrozenLine, kFindBatch, kInsertBatch, kFoldBatchIds, kRangeAtOrBefore,
    kRangeAfter, kPutRange, kEraseRange, kInsertDevice, kUpdateDevice, kUpdateDeviceTimes, kFindJob, kInsertJobChange, kUpsertJob,
    kFindAllocation, kInsertAllocation, kCloseAllocation, kInsertChunk, kChunksOverlapping, kCountChunksOfHour,
    kChunksOfHour, kDeleteChunksOfHour, kLastSampleOf, kInsertProcess,
    kMarkDirty, kDayMinutesOf, kDeleteDayMinutes, kInsertDayMinutes,
    kDeleteDayRollup, kInsertDayRollup, kPutDayVersion, kDayHoursOf, kDeleteDayHours, kInsertDayHours,
    kClearDirty, kInsertPrice, kPruneSamples, kPruneProcesses, kInsertProgress, kInsertServingChunk, kServingChunksOfHour, kServingTimesOfHour, kMarkServingUnmerged,
    kServingUnmerged, kDeleteServingChunksOfHour, kDeleteServingUnmerged,
    kNextGeneration, kFirstGeneration, kStmtCount
  };

  Stmt& S(StmtId id) { return *stmts_[id]; }

  Status PrepareAll() {
    const std::pair<StmtId, std::string> kSql[] = {
        {kInsertClosedPeriod,
         "INSERT INTO closed_periods(month, begin_ms, end_ms, window_begin_ms, window_end_ms, closed_at_ms,"
         " closed_by) VALUES(?1,?2,?3,?4,?5,?6,?7)"},
        {kInsertFrozenLine,
         "INSERT INTO frozen_lines(month, for_month, team, project, capacity, gpu_hours, active_gpu_hours,"
         " idle_gpu_hours, unpriced_gpu_hours, direct_micros, input_stall_micros, checkpoint_stall_micros,"
         " held_idle_micros, other_idle_micros) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14)"},
        {kFindBatch, "SELECT digest FROM batch_ids WHERE stream = ?1 AND seq = ?2"},
        {kInsertBatch, "INSERT INTO batch_ids(stream, seq, digest) VALUES(?1,?2,?3)"},
        {kFoldBatchIds, "DELETE FROM batch_ids WHERE stream = ?1 AND seq BETWEEN 0 AND ?2 RETURNING seq"},
        {kRangeAtOrBefore,
         "SELECT first_seq, last_seq FROM batch_ranges WHERE stream = ?1 AND first_seq <= ?2"
         " ORDER BY first_seq DESC LIMIT 1"},
        {kRangeAfter,
         "SELECT first_seq, last_seq FROM batch_ranges WHERE stream = ?1 AND first_seq > ?2"
         " ORDER BY first_seq LIMIT 1"},
        {kPutRange,
         "INSERT INTO batch_ranges(stream, first_seq, last_seq) VALUES(?1,?2,?3)"
         " ON CONFLICT(stream, first_seq) DO UPDATE SET last_seq = max(last_seq, excluded.last_seq)"},
        {kEraseRange, "DELETE FROM batch_ranges WHERE stream = ?1 AND first_seq = ?2"},
        {kInsertDevice,
         "INSERT INTO devices(uuid, node, model, memory_mib, pool, capacity_type, parent_id,"
         " share_num, share_den, mig_profile, sample_interval_ms, in_service_ms, last_sample_ms)"
         " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,0)"},
        {kUpdateDevice,
         "UPDATE devices SET node=?2, model=?3, memory_mib=?4, pool=?5, capacity_type=?6,"
         " parent_id=?7, share_num=?8, share_den=?9, mig_profile=?10, sample_interval_ms=?11"
         " WHERE id=?1"},
        {kUpdateDeviceTimes, "UPDATE devices SET in_service_ms=?2, last_sample_ms=?3 WHERE id=?1"},
        {kFindJob,
         "SELECT id, team, project, experiment, user_name, kind, pool, priority, requested_gpus,"
         " requested_mig_profile, labels, annotations FROM jobs WHERE job_key = ?1"},
        {kInsertJobChange,
         "INSERT INTO job_changes(job_id, at_ms, batch_id, sender, field, old_value, new_value)"
         " VALUES(?1,?2,?3,?4,?5,?6,?7)"},
        {kUpsertJob,
         "INSERT INTO jobs(job_key, team, project, experiment, user_name, kind, pool, priority,"
         " requested_gpus, requested_mig_profile, submit_ms, start_ms, end_ms, model_parameters,"
         " model_layers, model_hidden, model_sequence, model_dtype, labels, annotations)"
         " VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20)"
         // A declaration's empty, zero or unknown fields say nothing: an agent that knows
         // only a job's id (from a process) does not blank what another batch said of it.
         " ON CONFLICT(job_key) DO UPDATE SET"
         " team=CASE WHEN excluded.team = '' THEN team ELSE excluded.team END,"
         " project=CASE WHEN excluded.project = '' THEN project ELSE excluded.project END,"
         " experiment=CASE WHEN excluded.experiment = '' THEN experiment ELSE excluded.experiment END,"
         " user_name=CASE WHEN excluded.user_name = '' THEN user_name ELSE excluded.user_name END,"
         " kind=CASE WHEN excluded.kind = 'unknown' THEN kind ELSE excluded.kind END,"
         " pool=CASE WHEN excluded.pool = '' THEN pool ELSE excluded.pool END,"
         " priority=CASE WHEN excluded.priority = 0 THEN priority ELSE excluded.priority END,"
         " requested_gpus=CASE WHEN excluded.requested_gpus = 0 THEN requested_gpus ELSE excluded.requested_gpus END,"
         " requested_mig_profile=CASE WHEN excluded.requested_mig_profile = '' THEN requested_mig_profile"
         "   ELSE excluded.requested_mig_profile END,"
         " submit_ms=coalesce(excluded.submit_ms, submit_ms),"
         " start_ms=coalesce(excluded.start_ms, start_ms), end_ms=coalesce(excluded.end_ms, end_ms),"
         " model_parameters=coalesce(excluded.model_parameters, model_parameters),"
         " model_layers=max(excluded.model_layers, model_layers),"
         " model_hidden=max(excluded.model_hidden, model_hidden),"
         " model_sequence=max(excluded.model_sequence, model_sequence),"
         " model_dtype=CASE WHEN excluded.model_dtype = '' THEN model_dtype ELSE excluded.model_dtype END,"
         // Labels and annotations: a declared set (even empty) replaces the stored one.
         " labels=coalesce(excluded.labels, labels), annotations=coalesce(excluded.annotations, annotations)"
         " RETURNING id"},
        {kFindAllocation,
         "SELECT to_ms FROM allocations WHERE device_id=?1 AND job_id=?2 AND from_ms=?3"},
        {kInsertAllocation,
         "INSERT INTO allocations(device_id, job_id, from_ms, to_ms) VALUES(?1,?2,?3,?4)"},
        {kCloseAllocation,
         "UPDATE allocations SET to_ms=?4 WHERE device_id=?1 AND job_id=?2 AND from_ms=?3"},
        {kInsertChunk,
         "INSERT INTO sample_chunks(device_id, first_ms, last_ms, n, data) VALUES(?1,?2,?3,?4,?5)"},
        // Chunks of a device in one hour that overlap [?4, ?5]: a new chunk's neighbours.
        {kChunksOverlapping,
         "SELECT first_ms, data FROM sample_chunks WHERE device_id=?1 AND first_ms >= ?2"
         " AND first_ms < ?3 AND last_ms >= ?4 AND first_ms <= ?5"},
        {kCountChunksOfHour,
         "SELECT count(*) FROM sample_chunks WHERE device_id=?1 AND first_ms >= ?2 AND first_ms < ?3"},
        {kChunksOfHour,
         "SELECT first_ms, data FROM sample_chunks WHERE device_id=?1 AND first_ms >= ?2 AND first_ms < ?3"},
        {kDeleteChunksOfHour, "DELETE FROM sample_chunks WHERE device_id=?1 AND first_ms >= ?2 AND first_ms < ?3"},
        {kLastSampleOf, "SELECT last_sample_ms FROM devices WHERE id=?1"},
        {kInsertProcess,
         "INSERT INTO process_samples(device_id, t_ms, pid, job_key, fb_used_mib, sm_share)"
         " VALUES(?1,?2,?3,?4,?5,?6)"},
        {kMarkDirty,
         "INSERT INTO dirty_hours(device_id, hour_ms, generation) VALUES(?1,?2,?3)"
         " ON CONFLICT(device_id, hour_ms) DO UPDATE SET generation=excluded.generation"},
        {kInsertServingChunk, kInsertServingChunkSql},
        {kServingChunksOfHour,
         "SELECT first_ms, data FROM serving_chunks WHERE job_id=?1 AND engine=?2 AND model=?3"
         " AND first_ms >= ?4 AND first_ms < ?4 + 3600000"},
        {kServingTimesOfHour,
         "SELECT first_ms, substr(data, 1, gauges_end) FROM serving_chunks WHERE job_id=?1 AND engine=?2 AND model=?3"
         " AND first_ms >= ?4 AND first_ms < ?4 + 3600000"},
        {kMarkServingUnmerged, "INSERT OR IGNORE INTO serving_unmerged(job_id, engine, model, hour_ms) VALUES(?1,?2,?3,?4)"},
        {kServingUnmerged, "SELECT job_id, engine, model, hour_ms FROM serving_unmerged"},
        {kDeleteServingChunksOfHour,
         "DELETE FROM serving_chunks WHERE job_id=?1 AND engine=?2 AND model=?3 AND first_ms >= ?4"
         " AND first_ms < ?4 + 3600000"},
        {kDeleteServingUnmerged, "DELETE FROM serving_unmerged"},
        {kInsertProgress,
         "INSERT INTO progress(job_id, t_ms, interval_ms, tokens, model_flops) VALUES(?1,?2,?3,?4,?5)"},
        {kDayMinutesOf, "SELECT minutes FROM rollup_day_minutes WHERE day_ms=?1 AND device_id=?2"},
        {kDeleteDayMinutes, "DELETE FROM rollup_day_minutes WHERE day_ms=?1 AND device_id=?2"},
        {kDeleteDayRollup, "DELETE FROM rollup_day WHERE day_ms=?1 AND device_id=?2"},
        {kPutDayVersion,
         "INSERT INTO rollup_day_versions(day_ms, version) VALUES(?1, ?2)"
         " ON CONFLICT(day_ms) DO UPDATE SET version=excluded.version"},
        {kInsertDayRollup,
         "INSERT INTO rollup_day(day_ms, device_id, job_id, active_ms, idle_ms, unallocated_ms,"
         " unavailable_ms, unmonitored_ms, coarse_ms, input_stall_ms, checkpoint_stall_ms, held_idle_ms,"
         " hour_rows) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)"},
        {kDayHoursOf, "SELECT hours FROM rollup_day_hours WHERE day_ms=?1 AND device_id=?2"},
        {kDeleteDayHours, "DELETE FROM rollup_day_hours WHERE day_ms=?1 AND device_id=?2"},
        {kInsertDayHours, kInsertDayHoursSql},
        {kInsertDayMinutes, kInsertDayMinutesSql},
        {kClearDirty, "DELETE FROM dirty_hours WHERE device_id=?1 AND hour_ms=?2 AND generation=?3"},
        {kInsertPrice,
         "INSERT INTO prices(model, pool, capacity_type, micros_per_hour, begin_ms, end_ms)"
         " VALUES(?1,?2,?3,?4,?5,?6)"},
        {kPruneSamples, "DELETE FROM sample_chunks WHERE first_ms < ?1 RETURNING n"},
        {kPruneProcesses, "DELETE FROM process_samples WHERE t_ms < ?1"},
        // The dirty-hour generation is kept in the database, so that a writer in another
        // process (or a reopened store) never reuses one. The first one starts above any
        // stored (a store from before it was kept); the scan of dirty_hours runs only then.
        {kNextGeneration,
         "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'dirty_generation'"
         " RETURNING CAST(value AS INTEGER)"},
        {kFirstGeneration,
         "INSERT INTO meta(key, value) SELECT 'dirty_generation', coalesce(max(generation), 0) + 1"
         " FROM dirty_hours RETURNING CAST(value AS INTEGER)"},
    };
    stmts_.resize(kStmtCount);
    for (const auto& [id, sql] : kSql) {
      stmts_[id] = std::make_unique<Stmt>();
      GPULEDGER_RETURN_IF_ERROR(stmts_[id]->Prepare(db_, sql));
    }
    return Status::Ok();
  }

  Status Exec(const std::string& sql) { return sqlite::Exec(db_, sql); }

  // Steps a statement that returns no rows.
  Status Done(Stmt& s) {
    int rc = s.Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return sqlite::Error(db_, rc, "writing");
    return Status::Ok();
  }

  Status Migrate(const std::string& path) {
    GPULEDGER_RETURN_IF_ERROR(
        Exec("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)"));
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, "SELECT value FROM meta WHERE key='schema_version'"));
    size_t version = 0;
    if (int rc = q.Step(); rc == SQLITE_ROW) {
      std::string text = q.Text(0);
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return Internal(fmt::format("store {}: meta row schema_version is corrupt: \"{}\"", path, text));
      }
    } else if (rc != SQLITE_DONE) {
      return sqlite::Error(db_, rc, "reading the schema version");
    }
    q.Reset();  // no statement may be active while a migration drops a table
    auto migrations = Migrations();
    if (version > migrations.size()) {
      return FailedPrecondition(fmt::format(
          "store {} has schema version {}, newer than this build ({}); upgrade gpuledger", path,
          version, migrations.size()));
    }
    for (size_t v = version; v < migrations.size(); ++v) {
      GPULEDGER_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
      Status st = Exec(migrations[v]);
      if (st.ok() && v + 1 == kChunkedSamplesVersion) st = ConvertSamplesToChunks();
      if (st.ok() && (v + 1 == kDayHoursVersion || v + 1 == kHourRowsDroppedVersion)) st = FillDayHours();
      if (st.ok() && v + 1 == kHourRowsDroppedVersion) st = Exec("DROP TABLE rollup_hour");
      if (st.ok() && v + 1 == kMinutesByDayVersion) st = ConvertMinutesToDays();
      if (st.ok() && v + 1 == kChunkedServingVersion) st = ConvertServingToChunks();
      if (st.ok()) {
        st = Exec(fmt::format(
            "INSERT INTO meta(key, value) VALUES('schema_version', '{}')"
            " ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            v + 1));
      }
      if (!st.ok()) {
        (void)Exec("ROLLBACK");
        return st.WithContext(fmt::format("migrating {} to schema version {}", path, v + 1));
      }
      GPULEDGER_RETURN_IF_ERROR(Exec("COMMIT"));
    }
    return Status::Ok();
  }

  // Schema versions 12 and 18: the rollup_day_hours row of every device-day that has hour
  // rows.
  Status FillDayHours() {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, std::string("SELECT ") + sqlite::kHourRowColumns +
                                                 " FROM rollup_hour ORDER BY device_id, hour_ms, job_id"));
    Stmt ins;
    GPULEDGER_RETURN_IF_ERROR(ins.Prepare(db_, kInsertDayHoursSql));
    std::vector<RollupRow> rows;
    int64_t device = 0, day = 0;
    auto flush = [&]() -> Status {
      if (rows.empty()) return Status::Ok();
      GPULEDGER_RETURN_IF_ERROR(InsertDayHours(ins, device, day, rows));
      rows.clear();
      return Status::Ok();
    };
    RollupRow r;
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "rollup_hour", [&]() -> Status {
      sqlite::HourRowAt(q, r);
      if (r.device_id != device || FloorTo(r.period_ms, kMsPerDay) != day) {
        GPULEDGER_RETURN_IF_ERROR(flush());
        device = r.device_id;
        day = FloorTo(r.period_ms, kMsPerDay);
      }
      rows.push_back(r);
      return Status::Ok();
    }));
    return flush();
  }

  // Schema version 19: moves the rows of rollup_minute (one per device-hour) into
  // rollup_day_minutes (one per device-day), and drops it. Read in the key's order (hour,
  // device), a day at a time: memory is one day's rows.
  Status ConvertMinutesToDays() {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, "SELECT hour_ms, device_id, buckets FROM rollup_minute ORDER BY hour_ms, device_id"));
    Stmt ins;
    GPULEDGER_RETURN_IF_ERROR(ins.Prepare(db_, kInsertDayMinutesSql));
    int64_t day = 0;
    std::map<int64_t, std::vector<std::pair<int, std::string>>> of_day;  // device -> its hours
    auto flush = [&]() -> Status {
      for (const auto& [device, hours] : of_day) {
        GPULEDGER_ASSIGN_OR_RETURN(std::string minutes, ReplaceDayMinutes("", hours));
        ins.Reset().Bind(1, day).Bind(2, device);
        sqlite3_bind_blob(ins.get(), 3, minutes.data(), static_cast<int>(minutes.size()), SQLITE_TRANSIENT);
        GPULEDGER_RETURN_IF_ERROR(Done(ins));
      }
      of_day.clear();
      return Status::Ok();
    };
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "rollup_minute", [&]() -> Status {
      const int64_t hour = q.Int(0);
      if (FloorTo(hour, kMsPerDay) != day) {
        GPULEDGER_RETURN_IF_ERROR(flush());
        day = FloorTo(hour, kMsPerDay);
      }
      of_day[q.Int(1)].emplace_back(static_cast<int>((hour - day) / kMsPerHour), std::string(q.Blob(2)));
      return Status::Ok();
    }));
    GPULEDGER_RETURN_IF_ERROR(flush());
    q.Reset();
    return Exec("DROP TABLE rollup_minute");
  }

  // Schema version 17: moves the rows of the old `serving` table (one per snapshot) into
  // chunks, one per job, engine, model and hour, and drops the table. The rows are read
  // in the table's key order (job, time, engine, model), which needs no sort (with
  // temp_store=MEMORY a sort of them all would be held in memory), a job at a time.
  Status ConvertServingToChunks() {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(
        db_, "SELECT job_id, engine, model, t_ms, requests_waiting, requests_running, kv_cache_usage,"
             " prompt_tokens, generation_tokens, preemptions, requests, executions, queue_seconds,"
             " compute_seconds, prefill, decode, iteration_tokens FROM serving ORDER BY job_id, t_ms, engine, model"));
    Stmt ins;
    GPULEDGER_RETURN_IF_ERROR(ins.Prepare(db_, kInsertServingChunkSql));
    int64_t job = 0;
    std::vector<ServingSnapshot> of_job;
    auto flush = [&]() -> Status {
      for (const EngineChunk& c : ServingChunksOfJob(of_job)) {
        GPULEDGER_RETURN_IF_ERROR(InsertServingChunk(ins, job, c.engine, c.model, c.chunk));
      }
      of_job.clear();
      return Status::Ok();
    };
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "serving", [&]() -> Status {
      if (q.Int(0) != job) {
        GPULEDGER_RETURN_IF_ERROR(flush());
        job = q.Int(0);
      }
      ServingSnapshot& v = of_job.emplace_back();
      v.engine = q.Text(1);
      v.model = q.Text(2);
      v.t_ms = q.Int(3);
      int col = 4;
      for (std::optional<double>* f : {&v.requests_waiting, &v.requests_running, &v.kv_cache_usage_ratio,
                                       &v.prompt_tokens_total, &v.generation_tokens_total, &v.preemptions_total,
                                       &v.requests_total, &v.executions_total, &v.queue_seconds_total,
                                       &v.compute_seconds_total}) {
        *f = q.OptDouble(col++);
      }
      if (!DecodeHistogram(q.Text(14), v.prefill_seconds) || !DecodeHistogram(q.Text(15), v.decode_seconds) ||
          !DecodeHistogram(q.Text(16), v.iteration_tokens)) {
        return Internal(fmt::format("store: serving row of job {} at {} is corrupt: a histogram does not decode",
                                    q.Int(0), FormatTime(v.t_ms)));
      }
      return Status::Ok();
    }));
    GPULEDGER_RETURN_IF_ERROR(flush());
    q.Reset();  // no statement may be active while the table is dropped
    // Emptied first: DROP TABLE of the 10,000-GPU month's table (3.2 GB of pages) took
    // 3.3 GB of memory with temp_store=MEMORY (the sqlite3 shell, the same pragmas; 77 MB
    // without it), DELETE of all its rows 76 MB, then DROP of the empty table next to none.
    return Exec("DELETE FROM serving; DROP TABLE serving");
  }

  // Runs `ins` (kInsertServingChunkSql) for `chunk` of a job, engine and model.
  Status InsertServingChunk(Stmt& ins, int64_t job, const std::string& engine, const std::string& model,
                            const MergedChunk& chunk) {
    ins.Reset().Bind(1, job).Bind(2, engine).Bind(3, model).Bind(4, chunk.first_ms).Bind(5, chunk.last_ms);
    ins.Bind(6, chunk.n).Bind(7, static_cast<int64_t>(ServingGaugesEnd(chunk.data)));
    sqlite3_bind_blob(ins.get(), 8, chunk.data.data(), static_cast<int>(chunk.data.size()), SQLITE_STATIC);
    return Done(ins);
  }

  // Schema version 5: moves the rows of the old `samples` table (one per sample) into
  // chunks, one per device and hour, and drops the table.
  Status ConvertSamplesToChunks() {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(
        db_, "SELECT device_id, t_ms, sm_active, sm_occupancy, tensor_active, dram_active, gpu_util,"
             " fb_used_mib, power_dw, health, process_count, gap_interval_ms, gap_idle_ms,"
             " gap_short_idle_ms FROM samples ORDER BY device_id, t_ms"));
    Stmt ins;
    GPULEDGER_RETURN_IF_ERROR(ins.Prepare(
        db_, "INSERT INTO sample_chunks(device_id, first_ms, last_ms, n, data) VALUES(?1,?2,?3,?4,?5)"));
    int64_t device = -1, hour = 0, first = 0, last = 0, n = 0;
    std::optional<ChunkEncoder> encoder;
    auto flush = [&]() -> Status {
      if (n == 0) return Status::Ok();
      std::string data = encoder->Finish();
      ins.Reset().Bind(1, device).Bind(2, first).Bind(3, last).Bind(4, n);
      sqlite3_bind_blob(ins.get(), 5, data.data(), static_cast<int>(data.size()), SQLITE_STATIC);
      GPULEDGER_RETURN_IF_ERROR(Done(ins));
      n = 0;
      return Status::Ok();
    };
    int rc;
    while ((rc = q.Step()) == SQLITE_ROW) {
      Sample s;
      s.t_ms = q.Int(1);
      s.sm_active = FromScaled(q.OptInt(2), kRatioScale);
      s.sm_occupancy = FromScaled(q.OptInt(3), kRatioScale);
      s.tensor_active = FromScaled(q.OptInt(4), kRatioScale);
      s.dram_active = FromScaled(q.OptInt(5), kRatioScale);
      s.gpu_util = FromScaled(q.OptInt(6), kRatioScale);
      s.fb_used_mib = FromScaled(q.OptInt(7), 1);
      s.power_watts = FromScaled(q.OptInt(8), 10);
      s.health = static_cast<Health>(q.Int(9));
      if (auto c = q.OptInt(10)) s.process_count = static_cast<int32_t>(*c);
      if (auto interval = q.OptInt(11)) {
        s.gaps = IdleGaps{*interval, q.OptInt(12).value_or(0), q.OptInt(13).value_or(0)};
      }
      if (q.Int(0) != device || FloorTo(s.t_ms, kMsPerHour) != hour) {
        GPULEDGER_RETURN_IF_ERROR(flush());
        device = q.Int(0);
        hour = FloorTo(s.t_ms, kMsPerHour);
        first = s.t_ms;
        encoder.emplace(first);
      }
      encoder->Add(s);
      last = s.t_ms;
      ++n;
    }
    if (rc != SQLITE_DONE) return Internal(fmt::format("sqlite: reading samples: {}", sqlite3_errmsg(db_)));
    GPULEDGER_RETURN_IF_ERROR(flush());
    q.Reset();  // a table being read cannot be dropped
    ins.Reset();
    return Exec("DROP TABLE samples");
  }

  // The database's change counter as this connection sees it: it moves when another
  // connection commits (PRAGMA data_version), not when this one does.
  Result<int64_t> DataVersion() { return QueryInt("PRAGMA data_version"); }

  // The one integer a statement answers (a PRAGMA's value).
  Result<int64_t> QueryInt(const char* sql) {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, sql));
    if (int rc = q.Step(); rc != SQLITE_ROW) return sqlite::Error(db_, rc, sql);
    return q.Int(0);
  }

  // The id and device caches are this connection's memory of the tables: another writer
  // on the same file may have added devices and jobs or moved a device's times since.
  // Then they are read again (once per change, inside the write transaction, so nothing
  // can change them until it commits).
  Status ReloadCachesIfChanged() {
    GPULEDGER_ASSIGN_OR_RETURN(int64_t version, DataVersion());
    if (version == data_version_) return Status::Ok();
    device_ids_.clear();
    job_ids_.clear();
    device_state_.clear();
    device_rows_.clear();
    GPULEDGER_RETURN_IF_ERROR(LoadCaches());
    data_version_ = version;
    return Status::Ok();
  }

  Status LoadCaches() {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(
        db_,
        "SELECT id, uuid, in_service_ms, last_sample_ms, node, model, pool, capacity_type,"
        " mig_profile, memory_mib, parent_id, share_num, share_den, sample_interval_ms"
        " FROM devices"));
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "devices", [&] {
      device_ids_[q.Text(1)] = q.Int(0);
      device_state_[q.Int(0)] = {q.Int(2), q.Int(3)};
      device_rows_[q.Int(0)] = DeviceRow{q.Text(4), q.Text(5), q.Text(6), q.Text(7), q.Text(8),
                                         q.Int(9),  q.Int(10), q.Int(11), q.Int(12), q.Int(13)};
      return Status::Ok();
    }));
    Stmt j;
    GPULEDGER_RETURN_IF_ERROR(j.Prepare(db_, "SELECT id, job_key FROM jobs"));
    return sqlite::ForEach(db_, j, "jobs", [&] {
      job_ids_[j.Text(1)] = j.Int(0);
      return Status::Ok();
    });
  }

  std::optional<int64_t> DeviceId(const std::string& uuid, const Pending& p) const {
    for (const Pending* q = &p; q; q = q->parent) {
      if (auto it = q->devices.find(uuid); it != q->devices.end()) return it->second;
    }
    if (auto it = device_ids_.find(uuid); it != device_ids_.end()) return it->second;
    return std::nullopt;
  }
  std::optional<int64_t> JobId(const std::string& key, const Pending& p) const {
    for (const Pending* q = &p; q; q = q->parent) {
      if (auto it = q->jobs.find(key); it != q->jobs.end()) return it->second;
    }
    if (auto it = job_ids_.find(key); it != job_ids_.end()) return it->second;
    return std::nullopt;
  }
  const DeviceRow* StoredDeviceRow(int64_t id, const Pending& p) const {
    for (const Pending* q = &p; q; q = q->parent) {
      if (auto it = q->device_rows.find(id); it != q->device_rows.end()) return &it->second;
    }
    auto it = device_rows_.find(id);
    return it != device_rows_.end() ? &it->second : nullptr;
  }
  // The device's (in service, last sample) as this batch sees it. The reference stays
  // valid while `p` lives (unordered_map nodes do not move).
  std::pair<int64_t, int64_t>& DeviceState(int64_t id, Pending& p) {
    auto it = p.device_state.find(id);
    if (it != p.device_state.end()) return it->second;
    for (const Pending* q = p.parent; q; q = q->parent) {
      if (auto in = q->device_state.find(id); in != q->device_state.end())
        return p.device_state[id] = in->second;
    }
    auto cached = device_state_.find(id);
    return p.device_state[id] =
               cached != device_state_.end() ? cached->second : std::pair<int64_t, int64_t>{0, 0};
  }

  // Executes `plan` (store.h) in the open transaction: the SQL half of applying a batch.
  // The plan's sender check of a device this batch refers to, against its node as stored
  // or as this batch declared it.
  Status CheckNode(const IngestPlan& plan, const std::string& where, const std::string& uuid, int64_t id,
                   const Pending& pending) {
    if (!plan.check_stored_node) return Status::Ok();
    const DeviceRow* row = StoredDeviceRow(id, pending);
    if (row == nullptr) return Internal(fmt::format("store: device {} has no row", uuid));
    return plan.check_stored_node(where, uuid, row->node);
  }

  // Writes a job_changes row for each field of a stored job that `j` declares otherwise
  // (fields it leaves empty say nothing: see kUpsertJob).
  Status RecordJobChanges(const IngestPlan& plan, const Job& j) {
    Stmt& f = S(kFindJob).Reset().Bind(1, j.id);
    int rc = f.Step();
    if (rc == SQLITE_DONE) return Status::Ok();  // a new job
    if (rc != SQLITE_ROW) return sqlite::Error(db_, rc, "looking up a job");
    Job stored;
    stored.team = f.Text(1);
    stored.project = f.Text(2);
    stored.experiment = f.Text(3);
    stored.user = f.Text(4);
    if (auto kind = ParseJobKind(f.Text(5)); kind.ok()) stored.kind = *kind;
    stored.pool = f.Text(6);
    stored.priority = static_cast<int32_t>(f.Int(7));
    stored.requested_gpus = static_cast<int32_t>(f.Int(8));
    stored.requested_mig_profile = f.Text(9);
    stored.id = j.id;
    Status metadata = DecodeJobMetadata(f.OptText(10), f.OptText(11), stored);
    const int64_t job_id = f.Int(0);
    f.Rewind();
    GPULEDGER_RETURN_IF_ERROR(metadata);
    for (const JobChange& change : DeclaredJobChanges(stored, j)) {
      Stmt& w = S(kInsertJobChange).Reset();
      w.Bind(1, job_id).Bind(2, plan.now_ms).Bind(3, plan.batch->batch_id).Bind(4, plan.sender);
      // (Bound without a copy: each value outlives the step.)
      w.Bind(5, change.field).Bind(6, change.old_value).Bind(7, change.new_value);
      GPULEDGER_RETURN_IF_ERROR(Done(w));
    }
    return Status::Ok();
  }

  Result<ApplyOutcome> ApplyInTransaction(const IngestPlan& plan, Pending& pending) {
    const Batch& b = *plan.batch;
    auto bad = [&](std::string where, std::string what) {
      return InvalidArgument(fmt::format("batch {}: {}: {}", b.batch_id, where, what));
    };
    std::string digest = DigestText(b.content_digest);
    const BatchKey batch_key = KeyOfBatchId(b.batch_id);
    Ranges ranges(*this, batch_key.stream);
    {
      Stmt& find = S(kFindBatch).Reset().Bind(1, batch_key.stream).Bind(2, batch_key.seq);
      int rc = find.Step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sqlite::Error(db_, rc, "looking up the batch id");
      if (rc == SQLITE_ROW) {
        std::string seen = find.Text(0);
        find.Rewind();  // no statement stays active past the group's commit
        if (b.content_digest != 0 && seen != DigestText(0) && seen != digest) {
          return Status(StatusCode::kAlreadyExists,
                        fmt::format("batch {}: this id was applied before with different content; "
                                    "a batch id must name one batch",
                                    b.batch_id));
        }
        return ApplyOutcome::kDuplicate;
      }
      GPULEDGER_ASSIGN_OR_RETURN(bool folded, IsFolded(ranges, batch_key.seq));
      if (folded) return ApplyOutcome::kDuplicate;  // applied long ago: its content is not kept
    }
    // (device id, hour), sorted and made unique before they are written.
    std::vector<std::pair<int64_t, int64_t>> dirty;
    auto mark = [&](int64_t device_id, const TimeRange& hours) {
      for (int64_t h = hours.begin_ms; h < hours.end_ms; h += kMsPerHour) dirty.emplace_back(device_id, h);
    };

    // Devices: parents first, so that a slice can name a parent declared in this batch.
    std::vector<size_t> order(b.devices.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_partition(order.begin(), order.end(),
                          [&](size_t i) { return !b.devices[i].is_mig(); });
    for (size_t i : order) {
      const Device& d = b.devices[i];
      int64_t parent_id = 0;
      if (d.is_mig()) {
        auto pid = DeviceId(d.parent_uuid, pending);
        if (!pid) {
          return bad(fmt::format("devices[{}].parent", i),
                     fmt::format("unknown device {}", d.parent_uuid));
        }
        parent_id = *pid;
      }
      std::string type(CapacityTypeName(d.capacity_type));
      auto id = DeviceId(d.uuid, pending);
      DeviceRow row{d.node,       d.model,   d.pool,      type,        d.mig_profile,
                    d.memory_mib, parent_id, d.share.num, d.share.den, d.sample_interval_ms};
      if (id) {
        const DeviceRow* stored = StoredDeviceRow(*id, pending);
        if (stored && plan.check_stored_node) {
          GPULEDGER_RETURN_IF_ERROR(plan.check_stored_node(fmt::format("devices[{}]", i), d.uuid, stored->node));
        }
        if (stored && *stored == row) continue;  // as stored: nothing to write
      }
      Stmt& s = S(id ? kUpdateDevice : kInsertDevice).Reset();
      if (id) {
        s.Bind(1, *id).Bind(2, d.node).Bind(3, d.model).Bind(4, d.memory_mib).Bind(5, d.pool);
        s.Bind(6, type).Bind(7, parent_id).Bind(8, int64_t{d.share.num});
        s.Bind(9, int64_t{d.share.den}).Bind(10, d.mig_profile).Bind(11, d.sample_interval_ms);
      } else {
        s.Bind(1, d.uuid).Bind(2, d.node).Bind(3, d.model).Bind(4, d.memory_mib).Bind(5, d.pool);
        s.Bind(6, type).Bind(7, parent_id).Bind(8, int64_t{d.share.num});
        s.Bind(9, int64_t{d.share.den}).Bind(10, d.mig_profile).Bind(11, d.sample_interval_ms);
        s.Bind(12, int64_t{0});
      }
      GPULEDGER_RETURN_IF_ERROR(Done(s));
      if (!id) {
        id = sqlite3_last_insert_rowid(db_);
        pending.devices[d.uuid] = *id;
      }
      pending.device_rows[*id] = std::move(row);
    }

    for (size_t i = 0; i < b.jobs.size(); ++i) {
      const Job& j = b.jobs[i];
      std::string kind(JobKindName(j.kind));
      GPULEDGER_RETURN_IF_ERROR(RecordJobChanges(plan, j));
      Stmt& s = S(kUpsertJob).Reset();
      s.Bind(1, j.id).Bind(2, j.team).Bind(3, j.project).Bind(4, j.experiment).Bind(5, j.user);
      s.Bind(6, kind).Bind(7, j.pool).Bind(8, int64_t{j.priority});
      s.Bind(9, int64_t{j.requested_gpus}).Bind(10, j.requested_mig_profile);
      s.Bind(11, j.submit_ms).Bind(12, j.start_ms).Bind(13, j.end_ms);
      s.Bind(14, j.model_parameters).Bind(15, j.model_layers).Bind(16, j.model_hidden);
      s.Bind(17, j.model_sequence).Bind(18, j.model_dtype);
      const std::optional<std::string> labels = EncodeJobMetadata(j.labels);
      const std::optional<std::string> annotations = EncodeJobMetadata(j.annotations);
      s.Bind(19, labels).Bind(20, annotations);  // (bound without a copy: they outlive the step)
      if (int rc = s.Step(); rc != SQLITE_ROW) return sqlite::Error(db_, rc, fmt::format("upserting job {}", j.id));
      int64_t id = s.Int(0);
      (void)s.Step();
      if (!job_ids_.count(j.id)) pending.jobs[j.id] = id;
    }

    // The devices the samples are of: their times and the hours the plan marks.
    std::unordered_map<std::string_view, int64_t> sampled_id;
    for (const SampledDevice& sd : plan.sampled) {
      auto id = DeviceId(sd.device_uuid, pending);
      if (!id) {
        return bad(fmt::format("samples[{}].device", sd.first_sample),
                   fmt::format("unknown device {} (declare it in the batch's devices)", sd.device_uuid));
      }
      sampled_id[sd.device_uuid] = *id;
      GPULEDGER_RETURN_IF_ERROR(CheckNode(plan, fmt::format("samples[{}].device", sd.first_sample), sd.device_uuid,
                                          *id, pending));
      auto& [in_service, last] = DeviceState(*id, pending);
      in_service = in_service == 0 ? sd.first_ms : std::min(in_service, sd.first_ms);
      last = std::max(last, sd.last_ms);
      for (const TimeRange& hours : sd.dirty_hours) mark(*id, hours);
    }
    std::vector<int64_t> stored, times;
    for (const ChunkPlan& c : plan.chunks) {
      const int64_t device = sampled_id.at(c.device_uuid);
      // The instants of the device's stored chunks of that hour that overlap this one,
      // for the plan's duplicate check.
      Stmt& o = S(kChunksOverlapping).Reset();
      o.Bind(1, device).Bind(2, c.hour_ms).Bind(3, c.hour_ms + kMsPerHour).Bind(4, c.first_ms).Bind(5, c.last_ms);
      stored.clear();
      GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, o, "sample_chunks", [&]() -> Status {
        times.clear();
        if (!ChunkTimes(o.Blob(1), o.Int(0), times)) {
          return Internal(fmt::format("store: sample_chunks row of device {} at {} is corrupt: the chunk does not decode",
                                      device, FormatTime(o.Int(0))));
        }
        stored.insert(stored.end(), times.begin(), times.end());
        return Status::Ok();
      }));
      if (!stored.empty()) {
        std::sort(stored.begin(), stored.end());
        GPULEDGER_RETURN_IF_ERROR(plan.check_stored_instants(c, stored));
      }
      Stmt& ins = S(kInsertChunk).Reset();
      ins.Bind(1, device).Bind(2, c.first_ms).Bind(3, c.last_ms).Bind(4, static_cast<int64_t>(c.times.size()));
      sqlite3_bind_blob(ins.get(), 5, c.data.data(), static_cast<int>(c.data.size()), SQLITE_STATIC);
      if (int rc = ins.Step(); rc != SQLITE_DONE) {
        return sqlite::Error(db_, rc, fmt::format("inserting samples of device {} at {}", device, FormatTime(c.first_ms)));
      }
      // The processes each sample saw, once its instant is known to be new.
      if (!c.with_processes) continue;
      for (size_t i : c.sample_index) {
        const Sample& smp = b.samples[i];
        for (const ProcessSample& p : smp.processes) {
          Stmt& ps = S(kInsertProcess).Reset();
          ps.Bind(1, device).Bind(2, smp.t_ms).Bind(3, p.pid).Bind(4, p.job_id);
          ps.Bind(5, std::optional<double>(p.fb_used_mib)).Bind(6, p.sm_share);
          GPULEDGER_RETURN_IF_ERROR(Done(ps));
        }
      }
    }

    for (size_t i = 0; i < b.allocations.size(); ++i) {
      const Allocation& a = b.allocations[i];
      auto device_id = DeviceId(a.device_uuid, pending);
      if (!device_id) {
        return bad(fmt::format("allocations[{}].device", i),
                   fmt::format("unknown device {}", a.device_uuid));
      }
      GPULEDGER_RETURN_IF_ERROR(
          CheckNode(plan, fmt::format("allocations[{}].device", i), a.device_uuid, *device_id, pending));
      auto job_id = JobId(a.job_id, pending);
      if (!job_id) {
        return bad(fmt::format("allocations[{}].job", i),
                   fmt::format("unknown job {} (declare it in the batch's jobs)", a.job_id));
      }
      Stmt& find = S(kFindAllocation).Reset().Bind(1, *device_id).Bind(2, *job_id).Bind(3, a.from_ms);
      int found = find.Step();
      if (found != SQLITE_ROW && found != SQLITE_DONE) return sqlite::Error(db_, found, "looking up an allocation");
      if (found == SQLITE_ROW) {
        auto stored_to = find.OptInt(0);
        find.Rewind();
        if (stored_to && a.to_ms && *stored_to != *a.to_ms) {
          return bad(fmt::format("allocations[{}].to", i),
                     fmt::format("job {} on {} was already released at {}", a.job_id,
                                 a.device_uuid, FormatTime(*stored_to)));
        }
        if (!stored_to && a.to_ms) {
          GPULEDGER_RETURN_IF_ERROR(Done(S(kCloseAllocation)
                                             .Reset()
                                             .Bind(1, *device_id)
                                             .Bind(2, *job_id)
                                             .Bind(3, a.from_ms)
                                             .Bind(4, a.to_ms)));
        } else {
          continue;  // a retry of what is stored
        }
      } else {
        GPULEDGER_RETURN_IF_ERROR(Done(S(kInsertAllocation)
                                           .Reset()
                                           .Bind(1, *device_id)
                                           .Bind(2, *job_id)
                                           .Bind(3, a.from_ms)
                                           .Bind(4, a.to_ms)));
      }
      auto& [in_service, last] = DeviceState(*device_id, pending);
      in_service = in_service == 0 ? a.from_ms : std::min(in_service, a.from_ms);
      mark(*device_id, plan.allocation_dirty_hours(a, last));
    }

    for (size_t i = 0; i < b.progress.size(); ++i) {
      const Progress& p = b.progress[i];
      auto job_id = JobId(p.job_id, pending);
      if (!job_id) {
        return bad(fmt::format("progress[{}].job", i), fmt::format("unknown job {}", p.job_id));
      }
      Stmt& ins = S(kInsertProgress).Reset();
      ins.Bind(1, *job_id).Bind(2, p.t_ms).Bind(3, p.interval_ms).Bind(4, p.tokens).Bind(5, p.model_flops);
      if (int rc = ins.Step(); rc != SQLITE_DONE) {
        if (rc == SQLITE_CONSTRAINT) {
          return bad(fmt::format("progress[{}]", i),
                     fmt::format("job {} already reported progress at {}", p.job_id, FormatTime(p.t_ms)));
        }
        return sqlite::Error(db_, rc, fmt::format("inserting progress[{}]", i));
      }
    }

    if (!b.serving.empty()) {
      // A chunk per job, engine, model and hour; a snapshot that one stored (or one before
      // it in the batch) already has the time of is refused, naming the first such.
      std::vector<int64_t> jobs;
      for (size_t i = 0; i < b.serving.size(); ++i) {
        auto job_id = JobId(b.serving[i].job_id, pending);
        if (!job_id) {
          return bad(fmt::format("serving[{}].job", i), fmt::format("unknown job {}", b.serving[i].job_id));
        }
        jobs.push_back(*job_id);
      }
      const std::vector<ServingChunkGroup> groups = GroupServing(b.serving, jobs);
      std::vector<std::vector<int64_t>> stored_times(groups.size());
      for (size_t g = 0; g < groups.size(); ++g) {
        const ServingChunkGroup& k = groups[g];
        Stmt& q = S(kServingTimesOfHour).Reset().Bind(1, k.job_id).Bind(2, k.engine).Bind(3, k.model).Bind(4, k.hour_ms);
        GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, "serving_chunks", [&]() -> Status {
          if (!ServingChunkTimes(q.Blob(1), q.Int(0), stored_times[g])) {
            return Internal(fmt::format("store: serving_chunks row of job {} ({} {}) at {} is corrupt: the chunk does not decode",
                                        k.job_id, k.engine, k.model, FormatTime(q.Int(0))));
          }
          return Status::Ok();
        }));
      }
      if (auto i = FirstDuplicate(groups, stored_times, b.serving)) {
        const ServingSnapshot& v = b.serving[*i];
        return bad(fmt::format("serving[{}]", *i),
                   fmt::format("job {} already has a {} snapshot at {}", v.job_id, v.engine, FormatTime(v.t_ms)));
      }
      std::vector<ServingSnapshot> chunk;
      for (size_t g = 0; g < groups.size(); ++g) {
        const ServingChunkGroup& k = groups[g];
        chunk.clear();
        for (size_t i : k.indexes) chunk.push_back(b.serving[i]);
        GPULEDGER_RETURN_IF_ERROR(
            InsertServingChunk(S(kInsertServingChunk), k.job_id, k.engine, k.model, ServingChunkOf(chunk))
                .WithContext("inserting serving snapshots"));
        if (stored_times[g].empty()) continue;
        GPULEDGER_RETURN_IF_ERROR(Done(
            S(kMarkServingUnmerged).Reset().Bind(1, k.job_id).Bind(2, k.engine).Bind(3, k.model).Bind(4, k.hour_ms)));
      }
    }

    // The devices' times and the dirty hours are written once per group, before its
    // commit (WriteGroupState): a device-hour several batches of a group touch is
    // written once.
    pending.dirty = std::move(dirty);
    GPULEDGER_RETURN_IF_ERROR(Done(S(kInsertBatch).Reset().Bind(1, batch_key.stream).Bind(2, batch_key.seq).Bind(3, digest)));
    if (std::optional<int64_t> cut = FoldCutAfter(batch_key.seq)) {
      std::vector<int64_t> folded;
      Stmt& fold = S(kFoldBatchIds).Reset().Bind(1, batch_key.stream).Bind(2, *cut);
      int rc;
      while ((rc = fold.Step()) == SQLITE_ROW) folded.push_back(fold.Int(0));
      if (rc != SQLITE_DONE) return sqlite::Error(db_, rc, "folding the stream's batch ids");
      GPULEDGER_RETURN_IF_ERROR(AddToRanges(std::move(folded), ranges));
    }
    return ApplyOutcome::kApplied;
  }

  // A stream's runs of folded batch ids (store/batch_ids.h) on the writer's statements.
  class Ranges : public StreamRanges {
   public:
    Ranges(SqliteStore& store, const std::string& stream) : store_(store), stream_(stream) {}
    Result<std::optional<SeqRange>> AtOrBefore(int64_t seq) override { return One(kRangeAtOrBefore, seq); }
    Result<std::optional<SeqRange>> After(int64_t seq) override { return One(kRangeAfter, seq); }
    Status Put(const SeqRange& r) override {
      return store_.Done(store_.S(kPutRange).Reset().Bind(1, stream_).Bind(2, r.first).Bind(3, r.last));
    }
    Status Erase(int64_t first) override {
      return store_.Done(store_.S(kEraseRange).Reset().Bind(1, stream_).Bind(2, first));
    }

   private:
    Result<std::optional<SeqRange>> One(StmtId id, int64_t seq) {
      Stmt& q = store_.S(id).Reset().Bind(1, stream_).Bind(2, seq);
      int rc = q.Step();
      if (rc == SQLITE_DONE) return std::optional<SeqRange>();
      if (rc != SQLITE_ROW) return sqlite::Error(store_.db_, rc, "reading the stream's folded batch ids");
      SeqRange r{q.Int(0), q.Int(1)};
      q.Rewind();  // no statement stays active past the group's commit
      return std::optional<SeqRange>(r);
    }
    SqliteStore& store_;
    const std::string& stream_;
  };

  // Runs a read on the writer's connection under its lock.
  template <class F>
  auto Locked(F&& read) -> decltype(read()) {
    std::lock_guard lock(mu_);
    return read();
  }

  // A reader connection, returned to the pool by the snapshot that used it.
  struct Reader {
    sqlite3* db = nullptr;
    std::unique_ptr<sqlite::Reads> reads;
    ~Reader() {
      reads.reset();
      sqlite3_close_v2(db);
    }
  };
  class PooledSnapshot;
  Result<std::unique_ptr<Reader>> OpenReader();
  void ReturnReader(std::unique_ptr<Reader> r);

  std::mutex mu_;  // the writer: the connection db_, its statements and the caches below
  sqlite3* db_ = nullptr;
  std::string path_;
  std::vector<std::unique_ptr<Stmt>> stmts_;
  std::unique_ptr<sqlite::Reads> reads_;  // on db_
  // Whole days' day rows, for reads_ and every snapshot's (store/day_cache.h).
  std::shared_ptr<DayRowCache> days_;  // made by Open, of options.day_cache_bytes
  std::shared_ptr<JobListCache> jobs_;  // the job list, likewise (store/job_list_cache.h)
  std::unordered_map<std::string, int64_t> device_ids_;
  std::unordered_map<std::string, int64_t> job_ids_;
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> device_state_;
  std::unordered_map<int64_t, DeviceRow> device_rows_;
  int64_t data_version_ = -1;  // when the caches were loaded (DataVersion)
  int lock_fd_ = -1;           // holds SqliteOptions::exclusive_writer's lock
  std::mutex pool_mu_;
  std::vector<std::unique_ptr<Reader>> idle_readers_;  // guarded by pool_mu_
};

// A snapshot: a read transaction on a reader connection, begun and pinned at once, ended
// (and the connection handed back) when destroyed.
class SqliteStore::PooledSnapshot final : public StoreSnapshot {
 public:
  PooledSnapshot(SqliteStore& store, std::unique_ptr<Reader> r) : store_(store), r_(std::move(r)) {}
  ~PooledSnapshot() override {
    (void)sqlite::Exec(r_->db, "COMMIT");
    store_.ReturnReader(std::move(r_));
  }
  Result<std::vector<DeviceRecord>> ListDevices() override { return r_->reads->ListDevices(); }
  Result<std::vector<JobRecord>> ListJobs() override { return r_->reads->ListJobs(); }
  Result<std::shared_ptr<const std::vector<JobRecord>>> SharedJobs() override { return r_->reads->SharedJobs(); }
  Status ScanHourRollups(const TimeRange& hours, const std::function<Status(const RollupRow&)>& fn) override {
    return r_->reads->ScanHourRollups(hours, fn);
  }
  Result<std::vector<std::vector<AllocationRecord>>> AllocationsOf(std::span<const DeviceRange> ranges) override {
    return r_->reads->AllocationsOf(ranges);
  }
  Result<std::vector<AllocationRecord>> AllocationsOverlapping(const TimeRange& range) override {
    return r_->reads->AllocationsOverlapping(range);
  }
  Result<std::vector<ServingSnapshot>> ServingOf(int64_t job_id, const TimeRange& range) override {
    return r_->reads->ServingOf(job_id, range);
  }
  Result<std::vector<ServingGauges>> ServingGaugesOf(int64_t job_id, const TimeRange& range) override {
    return r_->reads->ServingGaugesOf(job_id, range);
  }
  Result<std::vector<Progress>> ProgressOf(int64_t job_id, const TimeRange& range) override {
    return r_->reads->ProgressOf(job_id, range);
  }
  Result<std::vector<JobChange>> JobChangesOf(int64_t job_id) override { return r_->reads->JobChangesOf(job_id); }
  Result<std::vector<std::vector<Sample>>> SamplesOf(std::span<const DeviceRange> ranges) override {
    return r_->reads->SamplesOf(ranges);
  }
  Result<EncodedChunks> EncodedChunksOf(std::span<const DeviceRange> ranges) override {
    return r_->reads->EncodedChunksOf(ranges);
  }
  Result<std::unordered_map<int64_t, Sample>> LatestSamples() override { return r_->reads->LatestSamples(); }
  Result<std::vector<DirtyHour>> DirtyHours(size_t limit) override { return r_->reads->DirtyHours(limit); }
  Result<std::vector<DirtyHour>> DirtyHoursIn(const TimeRange& hours) override {
    return r_->reads->DirtyHoursIn(hours);
  }
  Result<std::vector<RollupSum>> SumHourRollups(const TimeRange& hours) override {
    return r_->reads->SumHourRollups(hours);
  }
  Result<std::vector<RollupSum>> SumSettledHourRollups(const TimeRange& hours) override {
    return r_->reads->SumSettledHourRollups(hours);
  }
  Status ScanMinuteRollups(const TimeRange& range, const std::function<void(const RollupRow&)>& fn,
                           bool settled_only) override {
    return r_->reads->ScanMinuteRollups(range, fn, settled_only);
  }
  Result<PriceBook> LoadPriceBook() override { return r_->reads->LoadPriceBook(); }
  Result<std::vector<ClosedPeriodRecord>> ClosedPeriods() override { return r_->reads->ClosedPeriods(); }
  Result<std::vector<FrozenLine>> FrozenLines() override { return r_->reads->FrozenLines(); }
  Result<StoreStats> Stats() override { return r_->reads->Stats(); }

 private:
  SqliteStore& store_;
  std::unique_ptr<Reader> r_;
};

Result<std::unique_ptr<SqliteStore::Reader>> SqliteStore::OpenReader() {
  auto r = std::make_unique<Reader>();
  if (int rc = sqlite3_open_v2(path_.c_str(), &r->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
      rc != SQLITE_OK) {
    return sqlite::Error(r->db, rc, fmt::format("opening a reader of {}", path_));
  }
  sqlite3_busy_timeout(r->db, 5000);
  GPULEDGER_RETURN_IF_ERROR(sqlite::Exec(r->db, "PRAGMA cache_size=-32768"));
  // A reader's sorts stay in memory (bounded by the server's query limits), so that reads
  // go on while the disk is full.
  GPULEDGER_RETURN_IF_ERROR(sqlite::Exec(r->db, "PRAGMA temp_store=MEMORY"));
  GPULEDGER_ASSIGN_OR_RETURN(r->reads, sqlite::Reads::Create(r->db, days_, jobs_));
  return r;
}

void SqliteStore::ReturnReader(std::unique_ptr<Reader> r) {
  constexpr size_t kIdleReaders = 4;  // kept open for the next snapshots; more are closed
  std::lock_guard lock(pool_mu_);
  if (idle_readers_.size() < kIdleReaders) idle_readers_.push_back(std::move(r));
}

Result<std::unique_ptr<StoreSnapshot>> SqliteStore::Snapshot() {
  std::unique_ptr<Reader> r;
  {
    std::lock_guard lock(pool_mu_);
    if (!idle_readers_.empty()) {
      r = std::move(idle_readers_.back());
      idle_readers_.pop_back();
    }
  }
  if (!r) {
    GPULEDGER_ASSIGN_OR_RETURN(r, OpenReader());
  }
  // WAL: a read transaction sees the database as of its first read, whatever commits
  // later; the first read is done here, so the snapshot's moment is now.
  GPULEDGER_RETURN_IF_ERROR(sqlite::Exec(r->db, "BEGIN"));
  if (Status st = sqlite::Exec(r->db, "SELECT count(*) FROM meta"); !st.ok()) {
    (void)sqlite::Exec(r->db, "ROLLBACK");
    return st;
  }
  return std::unique_ptr<StoreSnapshot>(new PooledSnapshot(*this, std::move(r)));
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options) {
  auto store = std::make_unique<SqliteStore>();
  GPULEDGER_RETURN_IF_ERROR(store->Open(path, options));
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace gpuledger::store
