#include "store/rollup_days.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuledger::store {

DaySplit SplitIntoDays(const TimeRange& hours) {
  // The first midnight at or after begin, the last at or before end.
  int64_t first = FloorTo(hours.begin_ms, kMsPerDay);
  if (first < hours.begin_ms) first += kMsPerDay;
  int64_t last = FloorTo(hours.end_ms, kMsPerDay);
  if (hours.empty() || first >= last) return {hours, {hours.end_ms, hours.end_ms}, {hours.end_ms, hours.end_ms}};
  return {{hours.begin_ms, first}, {first, last}, {last, hours.end_ms}};
}

Status CheckRollupUpdates(const std::vector<RollupUpdate>& updates) {
  for (const RollupUpdate& u : updates) {
    const DirtyHour& d = u.dirty;
    if (FloorTo(d.hour_ms, kMsPerHour) != d.hour_ms) {
      return InvalidArgument(fmt::format("rollups of device {} at {}: not on a whole hour", d.device_id,
                                         FormatTime(d.hour_ms)));
    }
    for (const RollupRow& r : u.hour_rows) {
      if (r.period_ms != d.hour_ms || r.device_id != d.device_id) {
        return InvalidArgument(fmt::format(
            "rollups of device {} at {}: an hour row of device {} at {} lies outside the device-hour", d.device_id,
            FormatTime(d.hour_ms), r.device_id, FormatTime(r.period_ms)));
      }
    }
  }
  return Status::Ok();
}

std::vector<std::pair<int64_t, int64_t>> TouchedDeviceDays(const std::vector<RollupUpdate>& updates) {
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(updates.size());
  for (const RollupUpdate& u : updates) out.emplace_back(u.dirty.device_id, FloorTo(u.dirty.hour_ms, kMsPerDay));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace gpuledger::store
