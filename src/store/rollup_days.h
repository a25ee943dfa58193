// Day rollups (internal to the store library): `rollup_day` holds, per UTC day, device
// and job, the sums of that device-day's hour rows, so that a long window reads one row
// per device, job and day instead of 24.
//
// `rollup_day_hours` holds, per UTC day and device, that device-day's hour rows
// themselves as one value (EncodeDayHours): the only place hour rows are stored (until
// SQLite's schema 18 and PostgreSQL's 14 they were also a row each in `rollup_hour`).
// Both backends keep the invariant
//   day row (day, device, job) = sum of DecodeDayHours(day_hours (day, device)) of job
// in the transaction that writes hour rows (WriteRollups: it reads a device-day's hours,
// replaces those of the hours it refreshes, ReplaceHours, and writes both back), and
// answer SumHourRollups from day rows for the whole days of a window and from the day
// hours for the rest, and ScanHourRollups from the day hours, a row per device and day.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/time.h"
#include "store/store.h"

namespace gpuledger::store {

// A window of hours cut into the whole UTC days it holds and the hours outside them.
// `days` is empty when no whole day lies inside; then `head` is the whole window and
// `tail` is empty. Hour rows lie on whole hours, so an hour row of the window is in
// exactly one of head, the days, or tail.
struct DaySplit {
  TimeRange head;  // [hours.begin, first whole day)
  TimeRange days;  // whole days, begin and end on UTC midnights
  TimeRange tail;  // [end of the last whole day, hours.end)
};
DaySplit SplitIntoDays(const TimeRange& hours);

// The hour rows of an update lie in its own device-hour, on a whole hour: the day rows
// are recomputed from the (device, day) of each update, and read by day with the 24
// hours of the day. An update that breaks this is refused (kInvalidArgument, naming the
// device and the hour) before anything is written.
Status CheckRollupUpdates(const std::vector<RollupUpdate>& updates);

// The distinct UTC days of the updates, sorted: the days whose version is drawn anew
// (store/day_cache.h).
std::vector<int64_t> TouchedDays(const std::vector<RollupUpdate>& updates);

// The distinct (device_id, hour_ms) whose sample chunks WriteRollups merges into one
// (MergeChunks, store/sample_chunk.h) where it finds several, sorted: each update's
// hour, and the hour before it, which a live device's next hour of samples closes. Of
// these, a store merges only the hours that the device's latest sample is past (a
// device's current hour still grows).
std::vector<std::pair<int64_t, int64_t>> HoursToMerge(const std::vector<RollupUpdate>& updates);

// The updates of one device-day, in the order given.
struct DeviceDayUpdates {
  int64_t device_id = 0;
  int64_t day_ms = 0;
  std::vector<const RollupUpdate*> updates;
};
// The updates by device-day, sorted by (device, day): each device-day's hours to replace.
std::vector<DeviceDayUpdates> UpdatesByDeviceDay(const std::vector<RollupUpdate>& updates);

// The hour rows of a device-day after `updates` of it: the rows of `stored` (its day hours
// as stored, decoded) of the hours no update names, and the rows of each update (of an
// hour two updates name, the later one's), in (hour, job) order.
std::vector<RollupRow> ReplaceHours(std::vector<RollupRow> stored, std::span<const RollupUpdate* const> updates);

// Dirty device-hours, for a settled read to leave out.
class DirtySet {
 public:
  DirtySet() = default;
  explicit DirtySet(const std::vector<DirtyHour>& marks);
  bool Holds(int64_t device_id, int64_t hour_ms) const;

 private:
  std::vector<std::pair<int64_t, int64_t>> keys_;  // (device, hour), sorted
};

// A day row: the sums of one device-day's hour rows of one job, and how many they are.
struct DayRow {
  RollupSum sum;
  int64_t hour_rows = 0;
};

// The day rows of one device-day's hour rows (in any order), by job: what rollup_day
// holds for that device-day. Both stores write them from the hour rows they read for the
// day hours, so that a refresh reads a device-day's hour rows once.
std::vector<DayRow> SumDayRows(std::vector<RollupRow> hour_rows);

// The hour rows of one device-day as one value (rollup_day_hours.hours in both stores).
// The format: a tag byte 0x01, then each row in (hour, job) order: the hour of the day
// (a byte, 0 to 23), the job id (varint), a pattern byte and the figures it names as
// varints. The pattern's low five bits say which buckets hold time, bit 5 that coarse_ms
// is not 0, bit 6 that the three named idle causes follow (the fourth is the rest of
// allocated_idle, as in rollup_day), bit 7 that the buckets add up to the whole hour, and
// then the last bucket that holds time is left out, being the rest of the hour. A row
// busy (or idle) for one job the whole hour is 4 bytes while the job's id is below 16,384.
// kInternal when a row lies outside the day, two rows share an (hour, job), or a figure
// or job id is negative or at least 2^40 (which the decoder takes for corruption).
Result<std::string> EncodeDayHours(int64_t day_ms, std::vector<RollupRow> hour_rows);

// Calls `fn` with each hour row of `blob` (of device `device_id`, day `day_ms`) in
// (hour, job) order, idle_causes filled. False when the blob is corrupt (then `fn` may
// have been called for the rows before the fault).
bool DecodeDayHours(std::string_view blob, int64_t day_ms, int64_t device_id,
                    const std::function<void(const RollupRow&)>& fn);

// The error of a rollup_day_hours row that does not decode (kInternal, naming it).
Status CorruptDayHours(int64_t device_id, int64_t day_ms);

// DecodeDayHours' rows as a list; kInternal naming the device and the day when `blob` is
// corrupt.
Result<std::vector<RollupRow>> DayHourRows(std::string_view blob, int64_t day_ms, int64_t device_id);

// Takes the rollup_day_hours rows of whole days, read by day and then device, and hands
// their hour rows to `fn` in (hour, device, job) order: ScanHourRollups' order. Holds
// one day's encoded rows at a time.
class DayHoursScan {
 public:
  explicit DayHoursScan(std::function<Status(const RollupRow&)> fn) : fn_(std::move(fn)) {}
  // The row (day_ms, device_id, hours); kInternal naming them when `hours` is corrupt,
  // kInvalidArgument when out of order, or the error of `fn`.
  Status Add(int64_t day_ms, int64_t device_id, std::string_view hours);
  // Hands on the last day's rows.
  Status Finish();

 private:
  struct Entry {
    int64_t device_id = 0;
    size_t offset = 0, size = 0;  // in bytes_
  };
  std::function<Status(const RollupRow&)> fn_;  // a copy: a lambda passed in would not outlive the call
  int64_t day_ms_ = 0, last_device_ = 0;  // of the last row added, when any_
  bool any_ = false;
  std::vector<Entry> devices_;  // of the day, in order
  std::string bytes_;           // their blobs, one after another
};

}  // namespace gpuledger::store
