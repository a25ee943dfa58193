#include "store/rollup_days.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "store/varint.h"

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

namespace {

constexpr uint8_t kDayHoursTag = 0x01;
constexpr uint8_t kCoarseBit = 1u << 5;
constexpr uint8_t kCausesBit = 1u << 6;
constexpr uint8_t kWholeHourBit = 1u << 7;  // the buckets add up to the hour; the last is left out
constexpr size_t kNamedCauses = kIdleCauseCount - 1;  // the last is the rest of allocated_idle
static_assert(kBucketCount <= 5, "the pattern byte has five bucket bits");

}  // namespace

Result<std::string> EncodeDayHours(int64_t day_ms, std::vector<RollupRow> hour_rows) {
  std::sort(hour_rows.begin(), hour_rows.end(), [](const RollupRow& a, const RollupRow& b) {
    return std::tie(a.period_ms, a.job_id) < std::tie(b.period_ms, b.job_id);
  });
  std::string out(1, static_cast<char>(kDayHoursTag));
  out.reserve(1 + hour_rows.size() * 8);
  for (size_t i = 0; i < hour_rows.size(); ++i) {
    const RollupRow& r = hour_rows[i];
    int64_t hour = (r.period_ms - day_ms) / kMsPerHour;
    if (r.period_ms < day_ms || hour >= 24 || r.period_ms % kMsPerHour != 0) {
      return Internal(fmt::format("hour rollup of device {} at {} lies outside the day {}", r.device_id,
                                  FormatTime(r.period_ms), FormatTime(day_ms)));
    }
    if (i > 0 && hour_rows[i - 1].period_ms == r.period_ms && hour_rows[i - 1].job_id == r.job_id) {
      return Internal(fmt::format("two hour rollups of device {} and job {} at {}", r.device_id, r.job_id,
                                  FormatTime(r.period_ms)));
    }
    if (r.job_id < 0) return Internal(fmt::format("hour rollup of device {} has job id {}", r.device_id, r.job_id));
    uint8_t pattern = 0;
    int64_t sum = 0;
    size_t last = kBucketCount;  // the last bucket that holds time
    for (size_t b = 0; b < kBucketCount; ++b) {
      if (r.ms[b] < 0) return Internal(fmt::format("hour rollup of device {}: a bucket below 0 ms", r.device_id));
      if (r.ms[b] != 0) {
        pattern |= static_cast<uint8_t>(1u << b);
        last = b;
      }
      sum += r.ms[b];
    }
    const bool whole = sum == kMsPerHour;
    if (whole) pattern |= kWholeHourBit;
    if (r.coarse_ms < 0) return Internal(fmt::format("hour rollup of device {}: coarse time below 0", r.device_id));
    if (r.coarse_ms != 0) pattern |= kCoarseBit;
    bool causes = false;
    for (size_t c = 0; c < kNamedCauses; ++c) {
      if (r.idle_causes[c] < 0) return Internal(fmt::format("hour rollup of device {}: an idle cause below 0", r.device_id));
      causes = causes || r.idle_causes[c] != 0;
    }
    if (causes) pattern |= kCausesBit;
    out.push_back(static_cast<char>(hour));
    PutVarint(out, static_cast<uint64_t>(r.job_id));
    out.push_back(static_cast<char>(pattern));
    for (size_t b = 0; b < kBucketCount; ++b) {
      if (r.ms[b] != 0 && !(whole && b == last)) PutVarint(out, static_cast<uint64_t>(r.ms[b]));
    }
    if (r.coarse_ms != 0) PutVarint(out, static_cast<uint64_t>(r.coarse_ms));
    if (causes) {
      for (size_t c = 0; c < kNamedCauses; ++c) PutVarint(out, static_cast<uint64_t>(r.idle_causes[c]));
    }
  }
  return out;
}

bool DecodeDayHours(std::string_view blob, int64_t day_ms, int64_t device_id,
                    const std::function<void(const RollupRow&)>& fn) {
  if (blob.empty() || static_cast<uint8_t>(blob[0]) != kDayHoursTag) return false;
  VarintReader in(blob.substr(1));
  RollupRow r;
  r.device_id = device_id;
  int64_t last_hour = -1, last_job = -1;
  // Figures are bounded so that no sum of a window's rows can overflow.
  constexpr uint64_t kMaxFigure = uint64_t{1} << 40;
  while (!in.done()) {
    uint8_t hour, pattern;
    uint64_t job;
    if (!in.Byte(hour) || hour >= 24 || !in.Varint(job) || job >= kMaxFigure || !in.Byte(pattern)) return false;
    const bool whole = (pattern & kWholeHourBit) != 0;
    size_t last = kBucketCount;
    for (size_t b = 0; b < kBucketCount; ++b) {
      if ((pattern & (1u << b)) != 0) last = b;
    }
    if (whole && last == kBucketCount) return false;
    auto j = static_cast<int64_t>(job);
    if (hour < last_hour || (hour == last_hour && j <= last_job)) return false;
    last_hour = hour;
    last_job = j;
    r.period_ms = day_ms + hour * kMsPerHour;
    r.job_id = j;
    auto figure = [&](bool present, int64_t& v) {
      v = 0;
      if (!present) return true;
      uint64_t u;
      if (!in.Varint(u) || u >= kMaxFigure) return false;
      v = static_cast<int64_t>(u);
      return true;
    };
    int64_t sum = 0;
    for (size_t b = 0; b < kBucketCount; ++b) {
      if (!figure((pattern & (1u << b)) != 0 && !(whole && b == last), r.ms[b])) return false;
      sum += r.ms[b];
    }
    if (whole) {
      if (sum >= kMsPerHour) return false;
      r.ms[last] = kMsPerHour - sum;
    }
    if (!figure((pattern & kCoarseBit) != 0, r.coarse_ms)) return false;
    int64_t named = 0;
    for (size_t c = 0; c < kNamedCauses; ++c) {
      if (!figure((pattern & kCausesBit) != 0, r.idle_causes[c])) return false;
      named += r.idle_causes[c];
    }
    r.idle_causes[kNamedCauses] = r.ms[static_cast<size_t>(Bucket::kAllocatedIdle)] - named;
    fn(r);
  }
  return true;
}

Status DayHoursScan::Add(int64_t day_ms, int64_t device_id, std::string_view hours) {
  if (any_ && (day_ms < day_ms_ || (day_ms == day_ms_ && device_id <= device_id_))) {
    return InvalidArgument(fmt::format("day hours of device {} on {} read out of order", device_id,
                                       FormatTime(day_ms)));
  }
  if (any_ && day_ms != day_ms_) GPULEDGER_RETURN_IF_ERROR(Finish());
  any_ = true;
  day_ms_ = day_ms;
  device_id_ = device_id;
  if (!DecodeDayHours(hours, day_ms, device_id, [&](const RollupRow& r) {
        by_hour_[static_cast<size_t>((r.period_ms - day_ms) / kMsPerHour)].push_back(r);
      })) {
    return Internal(fmt::format("store: rollup_day_hours row of device {} on {} is corrupt", device_id,
                                FormatTime(day_ms)));
  }
  return Status::Ok();
}

Status DayHoursScan::Finish() {
  for (std::vector<RollupRow>& rows : by_hour_) {
    for (const RollupRow& r : rows) GPULEDGER_RETURN_IF_ERROR(fn_(r));
    rows.clear();
  }
  return Status::Ok();
}

}  // namespace gpuledger::store
