// The day rows of whole days kept in memory (internal to the store library), so that a
// long window read again (usage over 30 days, the chargeback of a month, asked by every
// dashboard refresh) does not read its day rows from the database again.
//
// `rollup_day_versions` holds a version per UTC day: a random 64-bit value drawn anew, in
// the transaction that writes the day's rows, for every day whose day rows change:
// SQLite's WriteRollups draws it (the only writer of rollup_day after the migrations);
// on PostgreSQL, triggers on rollup_day do, once per statement, so that a replica of an
// older build refreshing beside newer ones draws it too. So in every backend
//   the day rows of day d are the same wherever the version of d is the same
// and a day's rows cached with the version read in the same statement are those of any
// later read of that version, on any replica sharing the database. A random value rather
// than a counter: a database restored from a backup counts again from an older value, and
// a cache that outlived it would take new rows for old ones; two draws of 64 bits meet
// with odds of 2^-64.
//
// Dirty hours are not part of a day's version: a settled read takes the cached day rows
// and subtracts the hour rows of the day's dirty device-hours, read from the database in
// its own snapshot, as it did from the day rows read there (store/rollup_days.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "store/rollup_days.h"
#include "store/store.h"

namespace gpuledger::store {

// A fresh day version: 64 random bits (std::random_device). Thread-safe.
int64_t NewDayVersion();

// One rollup_day row as the cache keeps it: the figures of one device-day in 32 bits (a
// day's figure is at most 86,400,000 ms; a day holding a larger one is not cached).
struct CachedDayRow {
  int64_t device_id = 0;
  int64_t job_id = 0;
  std::array<int32_t, kBucketCount> ms{};
  int32_t coarse_ms = 0;
  std::array<int32_t, kIdleCauseCount - 1> named_causes{};  // the last is the rest of allocated_idle
  int32_t hour_rows = 0;
};
using CachedDay = std::vector<CachedDayRow>;

// The cache of one store, shared by its snapshots: days by (day, version), the least
// recently used dropped past `max_bytes`. Thread-safe.
class DayRowCache {
 public:
  // 0: nothing is kept.
  explicit DayRowCache(size_t max_bytes = kDefaultDayCacheBytes) : max_bytes_(max_bytes) {}

  // The rows of `day_ms` at `version`, or null when not cached at that version.
  std::shared_ptr<const CachedDay> Find(int64_t day_ms, int64_t version);
  // Keeps `rows` as the day's at `version` (replacing another version's).
  void Put(int64_t day_ms, int64_t version, std::shared_ptr<const CachedDay> rows);

  size_t bytes() const;
  size_t days() const;

 private:
  struct Entry {
    int64_t version = 0;
    std::shared_ptr<const CachedDay> rows;
    uint64_t used = 0;  // tick_ when last found or put
  };
  static size_t BytesOf(const CachedDay& rows) { return sizeof(Entry) + rows.size() * sizeof(CachedDayRow); }

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::map<int64_t, Entry> days_;  // guarded by mu_
  size_t bytes_ = 0;               // guarded by mu_
  uint64_t tick_ = 0;              // guarded by mu_
};

// Rollup figures summed per (device, job), with how many hour rows each pair sums: a pair
// left with none (every row of it was in a dirty hour, subtracted again) is no answer, as
// when nothing was read. Pairs come out in the order first added. The lookup is each
// device's jobs, a small vector sorted by job: rows come device by device, and a device's
// few jobs stay in cache, where a hash of every pair of a 10,000-GPU month (400k) misses
// it on most rows. Store ids are dense; a larger one is hashed.
class RollupSummer {
 public:
  // `named`: the idle causes but the last, which is the rest of ms[kAllocatedIdle].
  template <class T>
  void Add(int64_t device_id, int64_t job_id, const std::array<T, kBucketCount>& ms, int64_t coarse_ms,
           const std::array<T, kIdleCauseCount - 1>& named, int64_t hour_rows) {
    size_t i = Slot(device_id, job_id);
    RollupSum& r = out_[i];
    hour_rows_[i] += hour_rows;
    for (size_t b = 0; b < kBucketCount; ++b) r.ms[b] += ms[b];
    r.coarse_ms += coarse_ms;
    int64_t sum = 0;
    for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) {
      r.idle_causes[c] += named[c];
      sum += named[c];
    }
    r.idle_causes[kIdleCauseCount - 1] += ms[static_cast<size_t>(Bucket::kAllocatedIdle)] - sum;
  }
  void Add(const CachedDayRow& d) { Add(d.device_id, d.job_id, d.ms, d.coarse_ms, d.named_causes, d.hour_rows); }
  // Room for `pairs` pairs, so that a month's 400k are not copied at each doubling.
  void Reserve(size_t pairs) {
    out_.reserve(pairs);
    hour_rows_.reserve(pairs);
  }
  std::vector<RollupSum> Finish() &&;

 private:
  size_t Slot(int64_t device_id, int64_t job_id);

  struct PairHash {
    size_t operator()(const std::pair<int64_t, int64_t>& p) const {
      return std::hash<int64_t>()(p.first * 1'000'003 + p.second);
    }
  };
  static constexpr int64_t kDenseIds = 1 << 20;
  std::vector<RollupSum> out_;
  std::vector<int64_t> hour_rows_;
  // Device id -> (job, index in out_). The lists grow from nothing for every sum (a month
  // of 10,000 GPUs: 400k pairs on 11,280 devices): their memory comes from one arena that
  // the summer lets go of whole, rather than from malloc at each doubling.
  std::pmr::monotonic_buffer_resource lists_arena_;
  std::pmr::vector<std::pmr::vector<std::pair<int64_t, size_t>>> jobs_of_{&lists_arena_};
  std::unordered_map<std::pair<int64_t, int64_t>, size_t, PairHash> index_;  // ids from kDenseIds on
};

// What a backend reads for SumHourRollups through the cache.
class DayRowSource {
 public:
  virtual ~DayRowSource() = default;
  // The version of each day of `days` that has one, by day.
  virtual Result<std::vector<std::pair<int64_t, int64_t>>> DayVersions(const TimeRange& days) = 0;
  // The rollup_day rows of the day `day_ms`, and its version read in the same statement
  // (none when it has no version row): each row to `fn`, in any order.
  virtual Status ReadDay(int64_t day_ms, std::optional<int64_t>& version,
                         const std::function<void(const DayRow&)>& fn) = 0;
  // Each rollup_day_hours row of the days from days.begin_ms (a UTC midnight) to
  // days.end_ms: fn(day_ms, device_id, hours), in any order.
  using DayHoursFn = std::function<Status(int64_t day_ms, int64_t device_id, std::string_view hours)>;
  virtual Status ReadDayHours(const TimeRange& days, const DayHoursFn& fn) = 0;
  // Each dirty device-hour of `hours` whose device-day has a rollup_day_hours row, with
  // that row: fn(hour_ms, device_id, hours), in any order.
  virtual Status ReadDirtyDayHours(const TimeRange& hours, const DayHoursFn& fn) = 0;
  // The dirty device-hours of `hours` (StoreReads::DirtyHoursIn).
  virtual Result<std::vector<DirtyHour>> DirtyHoursIn(const TimeRange& hours) = 0;
};

// SumHourRollups (settled: SumSettledHourRollups) of `hours`: whole days from `cache`
// where it holds them at their version, read by `source` and kept there otherwise; the
// rest from `source`.
Result<std::vector<RollupSum>> SumHourRollupsThroughCache(DayRowSource& source, DayRowCache& cache,
                                                          const TimeRange& hours, bool settled);

}  // namespace gpuledger::store
