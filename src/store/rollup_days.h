// Day rollups (internal to the store library): `rollup_day` holds, per UTC day, device
// and job, the sums of that device-day's hour rows, so that a long window reads one row
// per device, job and day instead of 24. Both backends keep the invariant
//   day row (day, device, job) = sum of the hour rows (h, device, job), h in the day
// in the transaction that writes hour rows (WriteRollups), and answer SumHourRollups
// from day rows for the whole days of a window and from hour rows for the rest.
#pragma once

#include <cstdint>
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

// The distinct (device_id, day_ms) of the updates, sorted: the day rows to recompute.
std::vector<std::pair<int64_t, int64_t>> TouchedDeviceDays(const std::vector<RollupUpdate>& updates);

}  // namespace gpuledger::store
