// The Store: where batches, rollups and the price book live. SqliteStore is the embedded
// implementation; a PostgreSQL one will serve the same interface. The ledger library
// reads and writes only through this interface.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/price_book.h"
#include "core/status.h"
#include "core/time.h"
#include "store/sample_chunk.h"

namespace gpuledger::store {

// The widest staleness limit any device can have; bounds how far a sample's coverage
// reaches, and so which rollup hours a new sample can change.
inline constexpr int64_t kMaxStalenessMs = 5 * kMsPerMinute;
// How far around a sample the ledger looks to tell why a GPU idled (runs of idle
// samples, recurring checkpoint gaps): docs/idle-causes.md.
inline constexpr int64_t kIdleContextMs = 90 * kMsPerMinute;

struct DeviceRecord {
  int64_t id = 0;
  Device device;
  int64_t in_service_ms = 0;    // first seen (earliest sample or allocation)
  int64_t last_sample_ms = 0;   // latest sample time, 0 if none
  int64_t parent_id = 0;        // 0 for a physical GPU
};

struct JobRecord {
  int64_t id = 0;
  Job job;
};

// A change a batch made to a stored job's metadata: the job-change history.
struct JobChange {
  int64_t at_ms = 0;     // when the batch was applied
  std::string batch_id;  // the batch that made it
  std::string sender;    // who sent that batch (a token's name; "local" for the CLI)
  std::string field;     // "team", "project", ...
  std::string old_value, new_value;
};

// The fields of a stored job that a declaration `declared` says otherwise, as JobChanges
// without their batch (at_ms, batch_id and sender left empty). Fields the declaration
// leaves empty say nothing (empty text, kind unknown, priority or requested GPUs 0): an
// upsert keeps the stored value for them. Both backends write their job-change history
// from this.
// A declaration's labels (or annotations), when present, replace the stored set: each key
// added, changed or removed is a change of field "label:KEY" ("annotation:KEY"), with
// "(absent)" for the side that has no such key (no label value can be in parentheses:
// ValidateBatch).
std::vector<JobChange> DeclaredJobChanges(const Job& stored, const Job& declared);

// A job's labels or annotations as one column of `jobs`: "KEY\x1fVALUE\x1e" per entry in
// key order (a key or value holds no control character: ValidateBatch), NULL (nullopt)
// for a job whose set was never reported. Both backends store and read them with these.
std::optional<std::string> EncodeJobMetadata(const std::optional<JobMetadata>& metadata);
// Sets `job`'s labels and annotations from their columns (NULL: nullopt); kInternal naming
// the job when a column is not a text EncodeJobMetadata wrote.
Status DecodeJobMetadata(const std::optional<std::string>& labels, const std::optional<std::string>& annotations,
                         Job& job);

// A billing period (a calendar month, UTC) that was closed: its chargeback was frozen then.
struct ClosedPeriodRecord {
  std::string month;  // "2026-11"
  TimeRange range;    // the month
  TimeRange window;   // what its chargeback covered when it closed (to where the data ended)
  int64_t closed_at_ms = 0;
  std::string closed_by;
};

// One line of a closed month's frozen chargeback, booked in `month`, for `for_month`: the
// same month for its own charges, an earlier closed month for a correction to that one.
struct FrozenLine {
  std::string month, for_month;
  std::string team, project;  // empty for a capacity line
  std::string capacity;       // a capacity line's bucket ("unallocated", ...); empty for a team's
  double gpu_hours = 0, active_gpu_hours = 0, idle_gpu_hours = 0, unpriced_gpu_hours = 0;
  Money direct_cost;
  std::array<Money, kIdleCauseCount> idle_cost_by_cause{};
};

struct AllocationRecord {
  int64_t device_id = 0;
  int64_t job_id = 0;
  int64_t from_ms = 0;
  std::optional<int64_t> to_ms;
};

// Bucket durations of one device (and one job, or none) over one rollup period.
// `coarse_ms` is the part of active + allocated_idle whose activity came from gpu_util.
struct RollupRow {
  int64_t period_ms = 0;  // start of the hour (or minute)
  int64_t device_id = 0;
  int64_t job_id = 0;     // 0: the device's capacity held by no job
  std::array<int64_t, kBucketCount> ms{};
  int64_t coarse_ms = 0;
  // allocated_idle by cause; adds up to ms[kAllocatedIdle]. Hour rows only.
  std::array<int64_t, kIdleCauseCount> idle_causes{};
};

// Hour rollups summed over a range of hours, per device and job.
struct RollupSum {
  int64_t device_id = 0;
  int64_t job_id = 0;
  std::array<int64_t, kBucketCount> ms{};
  int64_t coarse_ms = 0;
  std::array<int64_t, kIdleCauseCount> idle_causes{};
};

struct DirtyHour {
  int64_t device_id = 0;
  int64_t hour_ms = 0;
  int64_t generation = 0;
};

// The new rollups of one dirty device-hour.
struct RollupUpdate {
  DirtyHour dirty;
  std::vector<RollupRow> hour_rows;
  std::vector<RollupRow> minute_rows;
};

// How many jobs overlap a window (neither ended before it nor started at or after it),
// and how many distinct values of each attribute they carry: a query's size, estimated
// before the query runs.
struct JobCounts {
  int64_t jobs = 0;
  int64_t teams = 0, projects = 0, experiments = 0, users = 0, kinds = 0;
};

struct StoreStats {
  int64_t batches = 0;
  int64_t devices = 0;
  int64_t jobs = 0;
  int64_t samples = 0;
  int64_t sample_rows = 0;  // the rows they are packed in (store/sample_chunk.h)
  int64_t dirty_hours = 0;
  int64_t bytes = 0;
};

enum class ApplyOutcome { kApplied, kDuplicate };

// What Store::Check found: nothing when the database is sound.
struct StoreCheck {
  std::vector<std::string> problems;  // the database's own words, at most 100
  std::vector<std::string> tables;    // the tables (or their indexes' tables) they name
  bool ok() const { return problems.empty(); }
};

// One device-hour of a batch's samples as one chunk (store/sample_chunk.h's encoding).
struct ChunkPlan {
  std::string device_uuid;
  int64_t hour_ms = 0;
  int64_t first_ms = 0, last_ms = 0;
  std::string data;                  // the encoded samples
  std::vector<int64_t> times;        // their instants, ascending
  std::vector<size_t> sample_index;  // their places in batch.samples, for errors
  bool with_processes = false;
};

// What a batch's samples do to one device: the span of their times (the device's time in
// service and its newest sample move to cover it) and the rollup hours they make dirty.
struct SampledDevice {
  std::string device_uuid;
  size_t first_sample = 0;  // its first place in batch.samples, for errors
  int64_t first_ms = 0, last_ms = 0;
  std::vector<TimeRange> dirty_hours;  // [first hour, last hour + 1h), disjoint, ascending
};

// A validated batch as the ledger prepared it for a store (ledger/ingest_plan.h): the
// backend-neutral decisions, made once for every backend, so that what is left in a store
// is reading and writing. A store resolves the names to its ids and applies the rules at
// the two points where they need what is stored.
struct IngestPlan {
  const Batch* batch = nullptr;
  std::vector<ChunkPlan> chunks;        // by device (in batch order) and hour
  std::vector<SampledDevice> sampled;   // one per device with samples
  // Refuses a chunk some of whose instants another batch stored already (`stored`: the
  // instants of the device's stored chunks that overlap it, ascending, maybe repeated).
  std::function<Status(const ChunkPlan&, std::span<const int64_t> stored)> check_stored_instants;
  // The rollup hours a new or newly closed allocation makes dirty, given its device's
  // newest sample (in the store, with this batch's samples).
  std::function<TimeRange(const Allocation&, int64_t newest_sample_ms)> allocation_dirty_hours;
  // Who sent it and when it is applied: the job-change history records both.
  std::string sender = "local";
  int64_t now_ms = 0;
  // Refuses a device the sender may not report for, given the node the store holds for it
  // (before this batch changes it). Null when the sender may report for any node.
  std::function<Status(const std::string& where, const std::string& uuid, const std::string& node)> check_stored_node;
};

// Group commit: one store transaction in which several batches are applied, each under
// its own savepoint, and made durable together by one commit (with synchronous=FULL, one
// fsync for all of them). A batch that fails leaves nothing behind and the batches
// applied before and after it in the group stay.
//
// A group holds the store's writer from Store::BeginBatchGroup until it is committed or
// destroyed: other store calls, from any thread, wait for it. Not thread-safe itself:
// one thread applies and commits. The destructor rolls back whatever was not committed.
class BatchGroup {
 public:
  virtual ~BatchGroup() = default;

  // Applies `batch` inside the group, with the outcomes and errors of Store::ApplyBatch.
  // A batch id applied earlier in the same group counts as applied before: the same
  // content is kDuplicate, other content kAlreadyExists. An outcome holds only once
  // Commit() returns Ok. After an error that cost the whole transaction (the disk full,
  // an I/O error) this and every later call fail, and so does Commit().
  // REQUIRES: ValidateBatch(*plan.batch) passed; Commit() not called yet.
  virtual Result<ApplyOutcome> Apply(const IngestPlan& plan) = 0;

  // Commits the group: on Ok every batch Apply() accepted is durable (as the store's
  // synchronous setting promises); on error none of them is applied. REQUIRES: called
  // at most once.
  virtual Status Commit() = 0;
};

// One device over one span of time: a part of a batch-oriented read.
struct DeviceRange {
  int64_t device_id = 0;
  TimeRange range;
};

// Where the block of `ranges` from `first` that one SamplesOf read should bring ends: at
// most 256 ranges, and no more device-time than 64 device-days once it holds one, so
// that a read's samples stay bounded however long its ranges are (a week of a GPU at
// 10 s is 60,000 samples). Reports that read many devices' samples go block by block.
size_t SampleReadEnd(std::span<const DeviceRange> ranges, size_t first);

// The stored chunks of a block of ranges as the database holds them, not yet decoded: a
// reader can take a block's bytes from its snapshot on one thread and decode them on
// another while the snapshot reads the next block (the advice over a 10,000-GPU week,
// where reading and decoding are most of the weekly report).
struct EncodedChunks {
  struct Chunk {
    size_t range = 0;      // its entry of the ranges read
    int64_t first_ms = 0;  // its first sample's time
    size_t offset = 0;     // its data: bytes.substr(offset, size)
    size_t size = 0;
  };
  std::string bytes;          // every chunk's data, one after the other
  std::vector<Chunk> chunks;  // by range, and each range's by first_ms

  void Add(size_t range, int64_t first_ms, std::string_view data) {
    chunks.push_back({range, first_ms, bytes.size(), data.size()});
    bytes.append(data);
  }
};

// `chunks`, read for `ranges`, decoded as SamplesOf (without processes) and ActivityOf
// return them: for each range, its samples with t in [range.begin, range.end], by time.
// A chunk that does not decode is an error naming its device and first time.
Result<std::vector<std::vector<Sample>>> DecodeSamplesOf(std::span<const DeviceRange> ranges,
                                                       const EncodedChunks& chunks);
Result<std::vector<std::vector<ActivitySample>>> DecodeActivityOf(std::span<const DeviceRange> ranges,
                                                                const EncodedChunks& chunks);

// What a store can be asked. Every read returns a Status that is not Ok when the database
// failed (an I/O error, a corrupt row named by its table and key), never a truncated list.
// Reads are batch-oriented: a query over the fleet asks for many devices in one call (one
// round trip for a networked database), not one call per device.
class StoreReads {
 public:
  virtual ~StoreReads() = default;

  virtual Result<std::vector<DeviceRecord>> ListDevices() = 0;
  virtual Result<std::vector<JobRecord>> ListJobs() = 0;
  // The jobs of ListJobs as a list shared by the reads that see the same jobs: the SQLite
  // and PostgreSQL stores hand out the list they read before while no job row changed
  // since, on any replica (store/job_list_cache.h); by default, a fresh list each time.
  virtual Result<std::shared_ptr<const std::vector<JobRecord>>> SharedJobs();
  // The jobs overlapping `window` (JobCounts), counted from SharedJobs: a count over the
  // list held in memory, where the database's count(DISTINCT ...) of five columns cost
  // usage over 7 days of the 10,000-GPU month 19 ms (docs/benchmarks.md).
  Result<JobCounts> CountJobs(const TimeRange& window);
  // For each entry of `ranges`, in order: the allocations of its device that overlap its
  // range, by from_ms.
  virtual Result<std::vector<std::vector<AllocationRecord>>> AllocationsOf(std::span<const DeviceRange> ranges) = 0;
  // Allocations of one device that overlap `range`, by from_ms (AllocationsOf for one).
  Result<std::vector<AllocationRecord>> Allocations(int64_t device_id, const TimeRange& range);
  // All allocations overlapping `range`, by device and from_ms.
  virtual Result<std::vector<AllocationRecord>> AllocationsOverlapping(const TimeRange& range) = 0;
  // Serving snapshots of `job_id` with t in [range.begin, range.end], by engine, model
  // and time.
  virtual Result<std::vector<ServingSnapshot>> ServingOf(int64_t job_id, const TimeRange& range) = 0;
  // Their queue and KV-cache gauges alone (core/serving.h), by time; the snapshots of one
  // time, each of another engine or model, in no promised order.
  virtual Result<std::vector<ServingGauges>> ServingGaugesOf(int64_t job_id, const TimeRange& range) = 0;
  // Progress reports of `job_id` whose interval overlaps `range`, by time.
  virtual Result<std::vector<Progress>> ProgressOf(int64_t job_id, const TimeRange& range) = 0;
  // The changes batches made to job `job_id`'s metadata, oldest first.
  virtual Result<std::vector<JobChange>> JobChangesOf(int64_t job_id) = 0;
  // For each entry of `ranges`, in order: the samples of its device with t in
  // [range.begin, range.end], by time, with their per-process figures. The returned
  // samples' device_uuid is left empty.
  virtual Result<std::vector<std::vector<Sample>>> SamplesOf(std::span<const DeviceRange> ranges) = 0;
  // Samples of one device (SamplesOf for one).
  Result<std::vector<Sample>> Samples(int64_t device_id, const TimeRange& range);
  // For each entry of `ranges`, in order: what SamplesOf would return, as ActivitySamples
  // (store/sample_chunk.h): the activity, memory, process count and gaps, and no other
  // figure decoded, no per-process row read. DecodeActivityOf of EncodedChunksOf.
  Result<std::vector<std::vector<ActivitySample>>> ActivityOf(std::span<const DeviceRange> ranges);
  // For each entry of `ranges`: the stored chunks that hold its samples, undecoded (the
  // chunks from the hour of its begin to its end; decoding trims them to the range).
  virtual Result<EncodedChunks> EncodedChunksOf(std::span<const DeviceRange> ranges) = 0;

  // The latest sample of every device that has one (without its processes), by device
  // id: one read for the fleet.
  virtual Result<std::unordered_map<int64_t, Sample>> LatestSamples() = 0;

  // Up to `limit` dirty (device, hour) pairs, oldest hour first.
  virtual Result<std::vector<DirtyHour>> DirtyHours(size_t limit) = 0;
  // The dirty (device, hour) pairs with hour in [hours.begin, hours.end), by device and hour.
  virtual Result<std::vector<DirtyHour>> DirtyHoursIn(const TimeRange& hours) = 0;
  // Hour rollups with hour in [hours.begin, hours.end), summed per device and job.
  virtual Result<std::vector<RollupSum>> SumHourRollups(const TimeRange& hours) = 0;
  // The same, leaving out the device-hours marked dirty (whose rollups are stale or
  // missing: a reader attributes those from the samples itself).
  virtual Result<std::vector<RollupSum>> SumSettledHourRollups(const TimeRange& hours) = 0;
  // Every hour rollup row with hour in [hours.begin, hours.end), by hour, device and job,
  // dirty device-hours included (a reader that attributes those from the samples leaves
  // them out), to `fn` one row at a time; its idle_causes are filled. An error of `fn`
  // stops the scan and is returned. Memory is at most a day's rows, however long the
  // range: what an hourly report over a month reads in one pass instead of an hour at a time.
  virtual Status ScanHourRollups(const TimeRange& hours, const std::function<Status(const RollupRow&)>& fn) = 0;
  // Minute rollups (job_id 0, all jobs together) in `range`, per device and minute, by
  // day, then device, then minute; with `settled_only` none of a dirty device-hour.
  // Memory is at most a day's rows.
  virtual Status ScanMinuteRollups(const TimeRange& range,
                                   const std::function<void(const RollupRow&)>& fn,
                                   bool settled_only = false) = 0;

  virtual Result<PriceBook> LoadPriceBook() = 0;
  virtual Result<StoreStats> Stats() = 0;

  // The closed billing periods, by month; and every frozen line, by month booked, then
  // the order they were written in.
  virtual Result<std::vector<ClosedPeriodRecord>> ClosedPeriods() = 0;
  virtual Result<std::vector<FrozenLine>> FrozenLines() = 0;
};

// A consistent view of the store: every read sees the state of one committed moment
// (the one when the snapshot was taken), whatever is committed meanwhile, and never waits
// for a writer. Not thread-safe: one thread reads through it. Cheap to take; hold it for
// one query, not longer (SQLite cannot checkpoint past the oldest open snapshot).
class StoreSnapshot : public StoreReads {
 public:
  // Another snapshot of this one's moment, for a second thread to read beside this one (a
  // query whose reads wait on the database more than on this process). Null where none
  // can be had at once: the backend cannot share a moment between connections (SQLite:
  // Debian's build has no sqlite3_snapshot_open), or no second connection is free now (a
  // full pgbouncer pool is not waited for). The caller then reads on this one alone.
  virtual std::unique_ptr<StoreSnapshot> Sibling() { return nullptr; }
};

// The store: reads (on the writer's connection, seeing what it committed), snapshots for
// concurrent readers, and the writer path. Thread-safe: writes are serialized by the
// store (a BatchGroup holds the writer until committed or destroyed); snapshots are taken
// and used from any thread.
class Store : public StoreReads {
 public:
  // Opens a group commit (BatchGroup). Blocks while another group or store call holds
  // the writer. Thread-safe.
  virtual Result<std::unique_ptr<BatchGroup>> BeginBatchGroup() = 0;

  // Applies `batches` in one group: one outcome per batch, in order. A batch that fails
  // is refused with its own error and the others are applied; when the group cannot be
  // begun or committed, every batch gets that error and none is applied. Thread-safe.
  std::vector<Result<ApplyOutcome>> ApplyBatches(std::span<const IngestPlan> plans);

  // Applies `batch` in one transaction: all of it or, on any error, none of it. A batch
  // whose id was applied before is not applied again and returns kDuplicate; the same
  // id with different content is an error. Referential problems (a sample or an
  // allocation on an unknown device, an allocation of an unknown job, a sample already
  // stored by another batch, an allocation closed twice at different times) fail with
  // kInvalidArgument naming the batch and the field. Marks the rollup hours it changes
  // as dirty. A group of one: durable when it returns. REQUIRES: ValidateBatch(*plan.batch)
  // passed. Thread-safe.
  virtual Result<ApplyOutcome> ApplyBatch(const IngestPlan& plan) = 0;

  // A snapshot for a reader (see StoreSnapshot). Thread-safe; never waits for a group.
  virtual Result<std::unique_ptr<StoreSnapshot>> Snapshot() = 0;

  // Replaces the rollups of each device-hour in `updates` (hour rows and minute rows)
  // and clears its dirty mark, unless it was marked again after its generation was
  // read; and recomputes the day rollups of each device-day touched (store/rollup_days.h);
  // all in one transaction. REQUIRES: each update's hour on a whole hour and its hour
  // rows in its own device-hour; otherwise kInvalidArgument, nothing written.
  virtual Status WriteRollups(const std::vector<RollupUpdate>& updates) = 0;

  // Replaces the price book. Prices are read at query time, so no rollup changes.
  virtual Status SavePriceBook(const PriceBook& book) = 0;

  // Closes `period` with its frozen `lines`, in one transaction. kAlreadyExists when that
  // month is closed already.
  virtual Status ClosePeriod(const ClosedPeriodRecord& period, std::span<const FrozenLine> lines) = 0;

  // Deletes raw samples older than `before_ms` (rollups stay). Returns rows deleted.
  virtual Result<int64_t> PruneSamples(int64_t before_ms) = 0;

  // Lays the raw samples of up to `limit` days out again in device and time order, so
  // that a long read of a device's days (a week's advice) reads them together: days that
  // ended at or before `before_ms`, hold no dirty hour and were not laid out before. Each
  // day once; a late sample coming after is stored and read as any other. Returns the
  // days' first instants. PostgreSQL: CLUSTER of the day's partition, which holds it from
  // reads and writes for as long as that takes (docs/store-postgresql.md, "Settled days").
  // SQLite: none (its chunks stay in the order they came; docs/benchmarks.md).
  virtual Result<std::vector<int64_t>> SettleDays(int64_t before_ms, size_t limit) = 0;

  // Checks the database's own integrity: `full` checks every table and index against each
  // other (slow on a large store), otherwise the cheaper structural check. Ok with
  // problems listed when the database is damaged; an error only when it cannot check.
  virtual Result<StoreCheck> Check(bool full) = 0;
};

// The memory a store keeps whole days' day rows in by default (its DayRowCache, shared by
// its snapshots): some 4.8 million day rows (one per device and job of a day), five
// months of a 10,000-GPU fleet.
inline constexpr size_t kDefaultDayCacheBytes = size_t{256} << 20;

struct SqliteOptions {
  // FULL makes each acknowledged batch durable against power loss; NORMAL (WAL) only
  // against a crash of the process. The server uses FULL.
  bool synchronous_full = false;
  // Holds the file for this store alone while it is open: another store opened on it
  // with `exclusive_writer` (a second server, an import meanwhile) is refused with
  // kFailedPrecondition saying so, instead of both writing and half the batches failing.
  // Stores opened without it (the CLI's reports) still read and write alongside. Several
  // servers share a PostgreSQL store, not a SQLite file.
  bool exclusive_writer = false;
  // A cap on the database file's size (0: none): past it writes fail with kUnavailable
  // saying the store is out of space, exactly as on a full disk, and reads go on.
  int64_t max_size_bytes = 0;
  // The memory for whole days' day rows, which long windows read again from memory
  // (0: none, every read goes to the file).
  size_t day_cache_bytes = kDefaultDayCacheBytes;
};

// Opens (creating if needed, migrating if older) the SQLite store at `path`.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteOptions& options = {});

}  // namespace gpuledger::store
