#include "store/rollup_days.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
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

std::vector<std::pair<int64_t, int64_t>> HoursToMerge(const std::vector<RollupUpdate>& updates) {
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(2 * updates.size());
  for (const RollupUpdate& u : updates) {
    out.emplace_back(u.dirty.device_id, u.dirty.hour_ms - kMsPerHour);
    out.emplace_back(u.dirty.device_id, u.dirty.hour_ms);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int64_t> TouchedDays(const std::vector<RollupUpdate>& updates) {
  std::vector<int64_t> out;
  out.reserve(updates.size());
  for (const RollupUpdate& u : updates) out.push_back(FloorTo(u.dirty.hour_ms, kMsPerDay));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<DeviceDayUpdates> UpdatesByDeviceDay(const std::vector<RollupUpdate>& updates) {
  std::vector<const RollupUpdate*> sorted;
  sorted.reserve(updates.size());
  for (const RollupUpdate& u : updates) sorted.push_back(&u);
  // Stable: a device-day's updates keep the order given.
  std::stable_sort(sorted.begin(), sorted.end(), [](const RollupUpdate* a, const RollupUpdate* b) {
    return std::pair(a->dirty.device_id, FloorTo(a->dirty.hour_ms, kMsPerDay)) <
           std::pair(b->dirty.device_id, FloorTo(b->dirty.hour_ms, kMsPerDay));
  });
  std::vector<DeviceDayUpdates> out;
  for (const RollupUpdate* u : sorted) {
    const int64_t day = FloorTo(u->dirty.hour_ms, kMsPerDay);
    if (out.empty() || out.back().device_id != u->dirty.device_id || out.back().day_ms != day) {
      out.push_back({u->dirty.device_id, day, {}});
    }
    out.back().updates.push_back(u);
  }
  return out;
}

std::vector<RollupRow> ReplaceHours(std::vector<RollupRow> stored, std::span<const RollupUpdate* const> updates) {
  // The last update of each hour wins.
  std::vector<const RollupUpdate*> last;
  for (const RollupUpdate* u : updates) {
    auto same = std::find_if(last.begin(), last.end(),
                             [&](const RollupUpdate* l) { return l->dirty.hour_ms == u->dirty.hour_ms; });
    if (same != last.end()) {
      *same = u;
    } else {
      last.push_back(u);
    }
  }
  auto replaced = [&](int64_t hour) {
    return std::any_of(last.begin(), last.end(), [&](const RollupUpdate* u) { return u->dirty.hour_ms == hour; });
  };
  std::erase_if(stored, [&](const RollupRow& r) { return replaced(r.period_ms); });
  for (const RollupUpdate* u : last) stored.insert(stored.end(), u->hour_rows.begin(), u->hour_rows.end());
  std::stable_sort(stored.begin(), stored.end(), [](const RollupRow& a, const RollupRow& b) {
    return std::pair(a.period_ms, a.job_id) < std::pair(b.period_ms, b.job_id);
  });
  return stored;
}

DirtySet::DirtySet(const std::vector<DirtyHour>& marks) {
  keys_.reserve(marks.size());
  for (const DirtyHour& d : marks) keys_.emplace_back(d.device_id, d.hour_ms);
  std::sort(keys_.begin(), keys_.end());
}

bool DirtySet::Holds(int64_t device_id, int64_t hour_ms) const {
  return std::binary_search(keys_.begin(), keys_.end(), std::pair(device_id, hour_ms));
}

std::vector<DayRow> SumDayRows(std::vector<RollupRow> hour_rows) {
  std::sort(hour_rows.begin(), hour_rows.end(), [](const RollupRow& a, const RollupRow& b) { return a.job_id < b.job_id; });
  std::vector<DayRow> out;
  for (const RollupRow& r : hour_rows) {
    if (out.empty() || out.back().sum.job_id != r.job_id) {
      out.emplace_back();
      out.back().sum.device_id = r.device_id;
      out.back().sum.job_id = r.job_id;
    }
    DayRow& d = out.back();
    for (size_t b = 0; b < kBucketCount; ++b) d.sum.ms[b] += r.ms[b];
    d.sum.coarse_ms += r.coarse_ms;
    for (size_t c = 0; c < kIdleCauseCount; ++c) d.sum.idle_causes[c] += r.idle_causes[c];
    ++d.hour_rows;
  }
  return out;
}

namespace {

constexpr uint8_t kDayHoursTag = 0x01;
constexpr uint8_t kCoarseBit = 1u << 5;
constexpr uint8_t kCausesBit = 1u << 6;
constexpr uint8_t kWholeHourBit = 1u << 7;  // the buckets add up to the hour; the last is left out
constexpr size_t kNamedCauses = kIdleCauseCount - 1;  // the last is the rest of allocated_idle
static_assert(kBucketCount <= 5, "the pattern byte has five bucket bits");
// Figures and job ids are below this (an hour row's are below 3,600,000 ms), so that no
// sum of a window's rows can overflow: the decoder takes a larger one for corruption.
constexpr uint64_t kMaxFigure = uint64_t{1} << 40;

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
    auto out_of_range = [](int64_t v) { return v < 0 || static_cast<uint64_t>(v) >= kMaxFigure; };
    if (out_of_range(r.job_id)) {
      return Internal(fmt::format("hour rollup of device {} has job id {}", r.device_id, r.job_id));
    }
    uint8_t pattern = 0;
    int64_t sum = 0;
    size_t last = kBucketCount;  // the last bucket that holds time
    for (size_t b = 0; b < kBucketCount; ++b) {
      if (out_of_range(r.ms[b])) {
        return Internal(fmt::format("hour rollup of device {}: a bucket of {} ms", r.device_id, r.ms[b]));
      }
      if (r.ms[b] != 0) {
        pattern |= static_cast<uint8_t>(1u << b);
        last = b;
      }
      sum += r.ms[b];
    }
    const bool whole = sum == kMsPerHour;
    if (whole) pattern |= kWholeHourBit;
    if (out_of_range(r.coarse_ms)) {
      return Internal(fmt::format("hour rollup of device {}: coarse time of {} ms", r.device_id, r.coarse_ms));
    }
    if (r.coarse_ms != 0) pattern |= kCoarseBit;
    bool causes = false;
    for (size_t c = 0; c < kNamedCauses; ++c) {
      if (out_of_range(r.idle_causes[c])) {
        return Internal(fmt::format("hour rollup of device {}: an idle cause of {} ms", r.device_id, r.idle_causes[c]));
      }
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

namespace {

// Reads the next row of a day's hours off `in` into `r` (its device_id left as it is),
// checking that it comes after (last_hour, last_job). False when corrupt.
bool ReadRow(VarintReader& in, int64_t day_ms, RollupRow& r, int64_t& last_hour, int64_t& last_job) {
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
  return true;
}

// The rows of `blob` after its tag, or nullopt when it has none.
std::optional<VarintReader> RowsOf(std::string_view blob) {
  if (blob.empty() || static_cast<uint8_t>(blob[0]) != kDayHoursTag) return std::nullopt;
  return VarintReader(blob.substr(1));
}

}  // namespace

bool DecodeDayHours(std::string_view blob, int64_t day_ms, int64_t device_id,
                    const std::function<void(const RollupRow&)>& fn) {
  std::optional<VarintReader> in = RowsOf(blob);
  if (!in) return false;
  RollupRow r;
  r.device_id = device_id;
  int64_t last_hour = -1, last_job = -1;
  while (!in->done()) {
    if (!ReadRow(*in, day_ms, r, last_hour, last_job)) return false;
    fn(r);
  }
  return true;
}

Status CorruptDayHours(int64_t device_id, int64_t day_ms) {
  return Internal(fmt::format("store: rollup_day_hours row of device {} on {} is corrupt", device_id, FormatTime(day_ms)));
}

Result<std::vector<RollupRow>> DayHourRows(std::string_view blob, int64_t day_ms, int64_t device_id) {
  std::vector<RollupRow> rows;
  if (!DecodeDayHours(blob, day_ms, device_id, [&](const RollupRow& r) { rows.push_back(r); })) {
    return CorruptDayHours(device_id, day_ms);
  }
  return rows;
}

Status DayHoursScan::Add(int64_t day_ms, int64_t device_id, std::string_view hours) {
  if (any_ && (day_ms < day_ms_ || (day_ms == day_ms_ && device_id <= last_device_))) {
    return InvalidArgument(fmt::format("day hours of device {} on {} read out of order", device_id,
                                       FormatTime(day_ms)));
  }
  if (!devices_.empty() && day_ms != day_ms_) GPULEDGER_RETURN_IF_ERROR(Finish());
  day_ms_ = day_ms;
  // Checked whole now, so that a corrupt row stops the scan before any row of its day.
  std::optional<VarintReader> in = RowsOf(hours);
  bool good = in.has_value();
  RollupRow r;
  int64_t last_hour = -1, last_job = -1;
  while (good && !in->done()) good = ReadRow(*in, day_ms, r, last_hour, last_job);
  if (!good) {
    return CorruptDayHours(device_id, day_ms);
  }
  any_ = true;
  last_device_ = device_id;
  devices_.push_back({device_id, bytes_.size(), hours.size()});
  bytes_.append(hours);
  return Status::Ok();
}

Status DayHoursScan::Finish() {
  // Each device's rows are in hour order: one cursor per device, all advanced an hour at
  // a time, hand the day on by hour, then device, then job, holding only its bytes.
  struct Cursor {
    VarintReader in;
    int64_t last_hour = -1, last_job = -1;
  };
  std::vector<Cursor> cursors;
  cursors.reserve(devices_.size());
  for (const Entry& e : devices_) {
    cursors.push_back({*RowsOf(std::string_view(bytes_).substr(e.offset, e.size))});
  }
  RollupRow r;
  for (uint8_t hour = 0; hour < 24; ++hour) {
    for (size_t k = 0; k < cursors.size(); ++k) {
      Cursor& c = cursors[k];
      r.device_id = devices_[k].device_id;
      uint8_t next;
      while (c.in.Peek(next) && next == hour) {
        if (!ReadRow(c.in, day_ms_, r, c.last_hour, c.last_job)) return Internal("store: rollup_day_hours changed while read");
        GPULEDGER_RETURN_IF_ERROR(fn_(r));
      }
    }
  }
  devices_.clear();
  bytes_.clear();
  return Status::Ok();
}

}  // namespace gpuledger::store
