// The store's reads on one PostgreSQL connection (internal to the store library): used by
// the writer's connection under its lock, and by each snapshot inside its repeatable-read
// transaction. Batch-oriented reads are one statement for all their devices (the ranges
// go as arrays, unnest()ed by the server): one round trip, whatever the fleet's size.
#pragma once

#include <memory>

#include "store/day_cache.h"
#include "store/job_list_cache.h"
#include "store/pg_util.h"
#include "store/serving_chunk.h"
#include "store/store.h"

namespace gpuledger::store::pg {

// The figures of a rollup row from row `i` of `q`, its columns from `col` on: the five
// buckets, coarse_ms and the named idle causes, in the order of rollup_day's columns.
// "Other" idle is the idle time no named cause holds.
template <typename Row>
void ReadRollupFigures(const Rows& q, int i, int col, Row& r) {
  for (size_t b = 0; b < kBucketCount; ++b) r.ms[b] = q.Int(i, col + static_cast<int>(b));
  r.coarse_ms = q.Int(i, col + static_cast<int>(kBucketCount));
  int64_t named = 0;
  for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) {
    r.idle_causes[c] = q.Int(i, col + static_cast<int>(kBucketCount + 1 + c));
    named += r.idle_causes[c];
  }
  r.idle_causes[kIdleCauseCount - 1] = r.ms[static_cast<size_t>(Bucket::kAllocatedIdle)] - named;
}

// Each device-day of `q`'s rows (columns day_ms, device_id, hour, minutes of
// rollup_day_minutes, ordered by the first three) to `fn` with the day's value: its folded
// row with the hour rows since in their places (store/minute_blob.h, FoldDayMinutes;
// empty when no hour is left). An error of `fn` stops it and is returned; a row that does
// not fold is an error naming the device and day.
Status ForEachDayMinutes(const Rows& q,
                         const std::function<Status(int64_t day_ms, int64_t device_id, std::string_view value)>& fn);

// Implements StoreReads with SQL on `conn` (not owned; it outlives this). Not
// thread-safe: the owner of the connection serializes its use. A row that cannot be read
// (a bad enum text, a corrupt chunk or minute blob) is an error naming its table and key.
//
// Whole days of SumHourRollups come through `days`, and the job list through `jobs`, the
// caches of the store whose connection `conn` is (store/day_cache.h,
// store/job_list_cache.h).
class Reads final : public StoreSnapshot, private DayRowSource {
 public:
  Reads(Conn& conn, std::shared_ptr<DayRowCache> days, std::shared_ptr<JobListCache> jobs)
      : c_(conn), days_(std::move(days)), jobs_(std::move(jobs)) {}

  Result<std::vector<DeviceRecord>> ListDevices() override;
  Result<std::vector<JobRecord>> ListJobs() override;
  Result<std::shared_ptr<const std::vector<JobRecord>>> SharedJobs() override;
  Status ScanHourRollups(const TimeRange& hours, const std::function<Status(const RollupRow&)>& fn) override;
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
  Status ScanMinuteRollups(const TimeRange& range, const std::function<void(const RollupRow&)>& fn,
                           bool settled_only) override;
  Result<PriceBook> LoadPriceBook() override;
  Result<StoreStats> Stats() override;

 private:
  // Into `out`, the chunks of `job_id` that may hold snapshots of `range` (`gauges`: their
  // first sections alone); they point into the rows returned, which must outlive them.
  Result<Rows> ServingChunksOf(int64_t job_id, const TimeRange& range, bool gauges, std::vector<ServingChunkRow>& out);
  // DayRowSource, for SumHourRollups and SumSettledHourRollups.
  Result<std::vector<std::pair<int64_t, int64_t>>> DayVersions(const TimeRange& days) override;
  Status ReadDay(int64_t day_ms, std::optional<int64_t>& version, const std::function<void(const DayRow&)>& fn) override;
  Status ReadDayHours(const TimeRange& days, const DayHoursFn& fn) override;
  Status ReadDirtyDayHours(const TimeRange& hours, const DayHoursFn& fn) override;
  // ListJobs, and the version of the jobs read in the same statement (none when no job).
  Result<std::vector<JobRecord>> ReadJobs(std::optional<int64_t>& version);
  Conn& c_;
  std::shared_ptr<DayRowCache> days_;
  std::shared_ptr<JobListCache> jobs_;
};

}  // namespace gpuledger::store::pg
