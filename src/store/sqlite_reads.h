// The store's reads on one SQLite connection (internal to the store library): used by the
// writer's connection under its lock, and by each snapshot on a reader connection.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "store/day_cache.h"
#include "store/job_list_cache.h"
#include "store/serving_chunk.h"
#include "store/store.h"

struct sqlite3;

namespace gpuledger::store::sqlite {

class Stmt;

// Implements StoreReads with SQL on `db` (not owned; it outlives this). Not thread-safe:
// the owner of the connection serializes its use. A row that cannot be read (a bad enum
// text, a corrupt chunk or blob) is an error naming its table and key.
class Reads : public StoreSnapshot, private DayRowSource {
 public:
  ~Reads() override;
  // Prepares the read statements on `db`; whole days' rows through `days` and the job
  // list through `jobs`, the caches of the store whose connection `db` is
  // (store/day_cache.h, store/job_list_cache.h).
  static Result<std::unique_ptr<Reads>> Create(sqlite3* db, std::shared_ptr<DayRowCache> days,
                                               std::shared_ptr<JobListCache> jobs);

  Result<std::vector<DeviceRecord>> ListDevices() override;
  Result<std::vector<JobRecord>> ListJobs() override;
  Result<std::shared_ptr<const std::vector<JobRecord>>> SharedJobs() override;
  Result<std::vector<std::vector<AllocationRecord>>> AllocationsOf(std::span<const DeviceRange> ranges) override;
  Result<std::vector<AllocationRecord>> AllocationsOverlapping(const TimeRange& range) override;
  Result<std::vector<ServingSnapshot>> ServingOf(int64_t job_id, const TimeRange& range) override;
  Result<std::vector<ServingGauges>> ServingGaugesOf(int64_t job_id, const TimeRange& range) override;
  Result<std::vector<Progress>> ProgressOf(int64_t job_id, const TimeRange& range) override;
  Result<std::vector<JobChange>> JobChangesOf(int64_t job_id) override;
  Result<std::vector<ClosedPeriodRecord>> ClosedPeriods() override;
  Result<std::vector<FrozenLine>> FrozenLines() override;
  Result<std::vector<std::vector<Sample>>> SamplesOf(std::span<const DeviceRange> ranges) override;
  Result<EncodedChunks> EncodedChunksOf(std::span<const DeviceRange> ranges) override;
  Result<std::unordered_map<int64_t, Sample>> LatestSamples() override;
  Result<std::vector<DirtyHour>> DirtyHours(size_t limit) override;
  Result<std::vector<DirtyHour>> DirtyHoursIn(const TimeRange& hours) override;
  Result<std::vector<RollupSum>> SumHourRollups(const TimeRange& hours) override;
  Result<std::vector<RollupSum>> SumSettledHourRollups(const TimeRange& hours) override;
  Status ScanHourRollups(const TimeRange& hours, const std::function<Status(const RollupRow&)>& fn) override;
  Status ScanMinuteRollups(const TimeRange& range, const std::function<void(const RollupRow&)>& fn,
                           bool settled_only) override;
  Result<PriceBook> LoadPriceBook() override;
  Result<StoreStats> Stats() override;

 protected:
  Reads(sqlite3* db, std::shared_ptr<DayRowCache> days, std::shared_ptr<JobListCache> jobs)
      : db_(db), days_(std::move(days)), jobs_(std::move(jobs)) {}
  sqlite3* db() const { return db_; }

 private:
  enum Id {
    kListDevices, kListJobs, kJobsVersion, kAllocationsOfDevice, kAllocationsOverlapping, kSamplesOfDevice,
    kProcessesOfDevice, kDirtyHours, kDirtyHoursIn, kDirtyDayHours, kDayVersions, kReadDay,
    kScanDayMinutes, kLoadPrices, kProgressOf, kJobChangesOf, kClosedPeriods, kFrozenLines, kServingChunksOf, kServingGaugeChunksOf, kLatestSamples, kScanDayHours, kCount
  };
  Status Prepare();
  Stmt& S(Id id);
  // The chunks of a job that may hold snapshots of a range (whole, or their first
  // sections: `statement`), and the text and bytes they point into.
  struct ServingChunksRead {
    std::vector<std::string> held;
    std::vector<ServingChunkRow> rows;
  };
  Status ReadServingChunks(Id statement, int64_t job_id, const TimeRange& range, ServingChunksRead& out);
  Result<std::vector<AllocationRecord>> ReadAllocations(Stmt& q);
  // ListJobs, and the version of the jobs read in the same statement (none when no job).
  Result<std::vector<JobRecord>> ReadJobs(std::optional<int64_t>& version);
  // DayRowSource, for SumHourRollups and SumSettledHourRollups.
  Result<std::vector<std::pair<int64_t, int64_t>>> DayVersions(const TimeRange& days) override;
  Status ReadDay(int64_t day_ms, std::optional<int64_t>& version, const std::function<void(const DayRow&)>& fn) override;
  Status ReadDayHours(const TimeRange& days, const DayHoursFn& fn) override;
  Status ReadDirtyDayHours(const TimeRange& hours, const DayHoursFn& fn) override;
  // The per-process figures of one device's samples `out` over `range`, into them.
  Status AddProcesses(int64_t device_id, const TimeRange& range, std::vector<Sample>& out);

  sqlite3* db_;
  std::shared_ptr<DayRowCache> days_;
  std::shared_ptr<JobListCache> jobs_;
  std::vector<std::unique_ptr<Stmt>> stmts_;
};

}  // namespace gpuledger::store::sqlite
