#include "store/minute_blob.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "store/varint.h"

namespace gpuledger::store {
namespace {

constexpr uint8_t kTag = 0x01;
constexpr uint8_t kWholeMinute = 1u << 5;  // in the pattern byte; the low five bits are buckets
constexpr int64_t kMinuteMs = kMsPerMinute;
static_assert(kBucketCount <= 5, "the pattern byte has five bucket bits");

using Minute = std::array<int64_t, kBucketCount>;

void PutMinute(std::string& out, const Minute& m) {
  uint8_t pattern = 0;
  int64_t sum = 0;
  size_t last = 0;
  for (size_t b = 0; b < kBucketCount; ++b) {
    if (m[b] != 0) {
      pattern |= static_cast<uint8_t>(1u << b);
      last = b;
    }
    sum += m[b];
  }
  bool whole = pattern != 0 && sum == kMinuteMs;
  if (whole) pattern |= kWholeMinute;
  out.push_back(static_cast<char>(pattern));
  for (size_t b = 0; b < kBucketCount; ++b) {
    if (m[b] != 0 && !(whole && b == last)) PutVarint(out, static_cast<uint64_t>(m[b]));
  }
}

bool ReadMinute(VarintReader& r, Minute& m) {
  uint8_t pattern;
  if (!r.Byte(pattern) || (pattern >> 6) != 0) return false;
  bool whole = (pattern & kWholeMinute) != 0;
  m = {};
  int64_t sum = 0;
  size_t last = kBucketCount;
  for (size_t b = 0; b < kBucketCount; ++b) {
    if ((pattern & (1u << b)) == 0) continue;
    last = b;
  }
  if (whole && last == kBucketCount) return false;
  for (size_t b = 0; b < kBucketCount; ++b) {
    if ((pattern & (1u << b)) == 0 || (whole && b == last)) continue;
    uint64_t v;
    if (!r.Varint(v) || v == 0 || v > static_cast<uint64_t>(kMinuteMs)) return false;
    m[b] = static_cast<int64_t>(v);
    sum += m[b];
  }
  if (whole) {
    if (sum >= kMinuteMs) return false;
    m[last] = kMinuteMs - sum;
  }
  return true;
}

void Emit(const Minute& m, int64_t period_ms, int64_t device_id, const TimeRange& range,
          const std::function<void(const RollupRow&)>& fn) {
  bool any = false;
  for (int64_t v : m) any = any || v != 0;
  if (!any || !range.Contains(period_ms)) return;
  RollupRow r;
  r.period_ms = period_ms;
  r.device_id = device_id;
  r.ms = m;
  fn(r);
}

bool DecodeLegacy(std::string_view blob, int64_t hour_ms, int64_t device_id, const TimeRange& range,
                  const std::function<void(const RollupRow&)>& fn) {
  for (size_t minute = 0; minute < 60; ++minute) {
    Minute m{};
    for (size_t b = 0; b < kBucketCount; ++b) {
      size_t at = (minute * kBucketCount + b) * 4;
      uint32_t v = 0;
      for (size_t k = 0; k < 4; ++k) v |= static_cast<uint32_t>(static_cast<uint8_t>(blob[at + k])) << (8 * k);
      m[b] = v;
    }
    Emit(m, hour_ms + static_cast<int64_t>(minute) * kMinuteMs, device_id, range, fn);
  }
  return true;
}

}  // namespace

Result<std::string> EncodeMinuteBlob(int64_t hour_ms, const std::vector<RollupRow>& minute_rows) {
  std::array<Minute, 60> minutes{};
  int64_t used = 0;  // minutes up to the last that holds time
  for (const RollupRow& r : minute_rows) {
    int64_t minute = (r.period_ms - hour_ms) / kMinuteMs;
    if (r.period_ms < hour_ms || minute >= 60) return Internal("minute rollup outside its hour");
    for (size_t b = 0; b < kBucketCount; ++b) {
      if (r.ms[b] < 0 || r.ms[b] > kMinuteMs) return Internal("minute rollup bucket outside 0..60,000 ms");
      minutes[static_cast<size_t>(minute)][b] = r.ms[b];
      if (r.ms[b] != 0) used = std::max(used, minute + 1);
    }
  }
  std::string out(1, static_cast<char>(kTag));
  for (int64_t m = 0; m < used;) {
    int64_t run = 1;
    while (m + run < used && minutes[static_cast<size_t>(m + run)] == minutes[static_cast<size_t>(m)]) ++run;
    PutVarint(out, static_cast<uint64_t>(run));
    PutMinute(out, minutes[static_cast<size_t>(m)]);
    m += run;
  }
  return out;
}

bool DecodeMinuteBlob(std::string_view blob, int64_t hour_ms, int64_t device_id, const TimeRange& range,
                      const std::function<void(const RollupRow&)>& fn) {
  if (blob.size() == kLegacyMinuteBlobSize) return DecodeLegacy(blob, hour_ms, device_id, range, fn);
  if (blob.empty() || static_cast<uint8_t>(blob[0]) != kTag) return false;
  VarintReader r(blob.substr(1));
  int64_t minute = 0;
  while (!r.done()) {
    uint64_t run;
    Minute m;
    if (!r.Varint(run) || run == 0 || run > static_cast<uint64_t>(60 - minute) || !ReadMinute(r, m)) return false;
    for (uint64_t k = 0; k < run; ++k, ++minute) Emit(m, hour_ms + minute * kMinuteMs, device_id, range, fn);
  }
  return true;
}

constexpr uint8_t kDayTag = 0x02;

std::optional<std::vector<HourMinutes>> SplitDayMinutes(std::string_view day) {
  if (day.empty() || static_cast<uint8_t>(day[0]) != kDayTag) return std::nullopt;
  std::vector<HourMinutes> out;
  VarintReader r(day.substr(1));
  while (!r.done()) {
    uint8_t hour;
    uint64_t size;
    std::string_view blob;
    if (!r.Byte(hour) || hour > 23 || (!out.empty() && hour <= out.back().hour) || !r.Varint(size) ||
        size > r.remaining() || !r.Take(static_cast<size_t>(size), blob)) {
      return std::nullopt;
    }
    out.push_back({hour, blob});
  }
  return out;
}

Result<std::string> ReplaceDayMinutes(std::string_view stored, const std::vector<std::pair<int, std::string>>& replaced) {
  std::map<int, std::string> hours;
  if (!stored.empty()) {
    std::optional<std::vector<HourMinutes>> old = SplitDayMinutes(stored);
    if (!old) return Internal("the stored day of minute rollups is corrupt");
    for (const HourMinutes& h : *old) hours[h.hour] = std::string(h.blob);
  }
  for (const auto& [hour, blob] : replaced) {
    if (hour < 0 || hour > 23) return Internal("minute rollups outside their day");
    if (blob.empty()) {
      hours.erase(hour);
    } else {
      hours[hour] = blob;
    }
  }
  if (hours.empty()) return std::string();
  std::string out(1, static_cast<char>(kDayTag));
  for (const auto& [hour, blob] : hours) {
    out.push_back(static_cast<char>(hour));
    PutVarint(out, blob.size());
    out += blob;
  }
  return out;
}

Result<std::vector<std::pair<int, std::string>>> HourBlobsOf(int64_t day_ms, std::span<const RollupUpdate* const> updates) {
  std::vector<std::pair<int, std::string>> hours;
  for (const RollupUpdate* u : updates) {
    std::string blob;
    if (!u->minute_rows.empty()) {
      GPULEDGER_ASSIGN_OR_RETURN(blob, EncodeMinuteBlob(u->dirty.hour_ms, u->minute_rows));
    }
    hours.emplace_back(static_cast<int>((u->dirty.hour_ms - day_ms) / kMsPerHour), std::move(blob));
  }
  return hours;
}

Result<std::string> FoldDayMinutes(std::span<const DayMinutesRow> rows) {
  std::string_view folded;
  std::vector<std::pair<int, std::string>> hours;
  for (const DayMinutesRow& r : rows) {
    if (r.hour == -1) {
      folded = r.minutes;
    } else {
      hours.emplace_back(r.hour, std::string(r.minutes));
    }
  }
  if (hours.empty()) {
    if (!folded.empty() && !SplitDayMinutes(folded)) return Internal("the stored day of minute rollups is corrupt");
    return std::string(folded);
  }
  return ReplaceDayMinutes(folded, hours);
}

Result<std::string> DayMinutesAfter(std::string_view stored, int64_t device_id, int64_t day_ms,
                                    std::span<const RollupUpdate* const> updates) {
  GPULEDGER_ASSIGN_OR_RETURN(auto hours, HourBlobsOf(day_ms, updates));
  Result<std::string> out = ReplaceDayMinutes(stored, hours);
  if (!out.ok()) {
    return out.status().WithContext(fmt::format("rollup_day_minutes row of device {} on {}", device_id, FormatTime(day_ms)));
  }
  return out;
}

bool DecodeDayMinutes(std::string_view day, int64_t day_ms, int64_t device_id, const TimeRange& range,
                      const std::function<bool(int64_t hour_ms)>& skip_hour,
                      const std::function<void(const RollupRow&)>& fn) {
  std::optional<std::vector<HourMinutes>> hours = SplitDayMinutes(day);
  if (!hours) return false;
  for (const HourMinutes& h : *hours) {
    const int64_t hour_ms = day_ms + h.hour * kMsPerHour;
    if (!range.Overlaps({hour_ms, hour_ms + kMsPerHour}) || skip_hour(hour_ms)) continue;
    if (!DecodeMinuteBlob(h.blob, hour_ms, device_id, range, fn)) return false;
  }
  return true;
}

}  // namespace gpuledger::store
