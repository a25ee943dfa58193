// A device-hour's minute rollups as one value, and a device-day's hours of them as one
// value (rollup_day_minutes.minutes in both stores; below).
//
// The format (docs/ARCHITECTURE.md, "Storage"): a tag byte 0x01, then runs of equal
// minutes from minute 0 on: a varint count of minutes, a pattern byte and the pattern's
// figures as varints. The pattern byte's low five bits say which buckets hold time; bit 5
// says the minute is covered whole (its buckets add up to 60,000 ms), and then the last
// bucket that holds time is left out, being 60,000 less the others. Minutes after the last
// run hold no time. A device busy or idle the whole hour takes 3 bytes; a minute split between
// two buckets takes at most 5. At most 60 runs of at most 17 bytes, so an encoded blob is
// always shorter than the fixed layout it replaced (60 minutes x kBucketCount
// little-endian uint32, 1,200 bytes), which is still read: a blob of exactly that size.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace gpuledger::store {

// The size of the fixed layout stores written before the compact format hold.
inline constexpr size_t kLegacyMinuteBlobSize = 60 * kBucketCount * 4;

// The blob of `minute_rows` of the hour starting at `hour_ms`. kInternal when a row lies
// outside that hour or a bucket holds less than nothing or more than a minute.
Result<std::string> EncodeMinuteBlob(int64_t hour_ms, const std::vector<RollupRow>& minute_rows);

// Calls `fn` with each minute of `blob` (of device `device_id`, hour `hour_ms`) that has
// any time and lies in `range`. False when the blob is corrupt (then `fn` may have been
// called for the minutes before the fault).
bool DecodeMinuteBlob(std::string_view blob, int64_t hour_ms, int64_t device_id, const TimeRange& range,
                      const std::function<void(const RollupRow&)>& fn);

// A device-day's minute rollups as one value (rollup_day_minutes.minutes in both stores,
// since SQLite's schema 19 and PostgreSQL's 15; before, a row per device-hour): a tag byte
// 0x02, then for each hour of the day that has minute rollups, in hour order, the hour of
// the day (a byte, 0 to 23), the size of its blob (varint) and the blob (EncodeMinuteBlob's,
// or the fixed layout of older stores as it was stored).
struct HourMinutes {
  int hour = 0;  // of the day, 0 to 23
  std::string_view blob;
};
// The hours of a day's value, in hour order (views into `day`); nullopt when it is corrupt.
std::optional<std::vector<HourMinutes>> SplitDayMinutes(std::string_view day);

// A device-day's value `stored` (empty: the device-day has none) with the blobs of the
// hours in `replaced` put in place of theirs (an empty blob: the hour has none); empty when
// no hour is left. `replaced`: (hour of the day, blob), a later one of an hour winning.
// kInternal when `stored` is corrupt or an hour lies outside 0 to 23.
Result<std::string> ReplaceDayMinutes(std::string_view stored, const std::vector<std::pair<int, std::string>>& replaced);

// The blobs of `updates` of device-day `day_ms`'s hours: (hour of the day, EncodeMinuteBlob
// of its minute rows; empty when it has none), in the updates' order.
Result<std::vector<std::pair<int, std::string>>> HourBlobsOf(int64_t day_ms, std::span<const RollupUpdate* const> updates);

// PostgreSQL (schema 16) keeps a device-day's minute rollups as rows keyed by an hour: -1
// for the day's value (the format above), folded; 0 to 23 for one hour's blob written by a
// refresh since (EncodeMinuteBlob's; empty: the hour has none), which takes that hour's
// place in the day's value. A refresh writes its hour's row alone, so that it rewrites some
// hundred bytes rather than the whole day; the day is folded into one row once it is over.
struct DayMinutesRow {
  int hour = -1;
  std::string_view minutes;
};
// The day's value of a device-day's rows (any order; at most one of an hour): the folded
// value with each hour row in its hour's place (ReplaceDayMinutes); empty when no hour is
// left. kInternal when the folded value is corrupt or an hour lies outside -1 to 23.
Result<std::string> FoldDayMinutes(std::span<const DayMinutesRow> rows);

// The value of device `device_id`'s day `day_ms` after `updates` of its hours: `stored`
// (empty: none) with each update's hour replaced by its minute rows (EncodeMinuteBlob;
// none when it has no minute rows) by ReplaceDayMinutes. kInternal naming the device and
// the day when `stored` is corrupt.
Result<std::string> DayMinutesAfter(std::string_view stored, int64_t device_id, int64_t day_ms,
                                    std::span<const RollupUpdate* const> updates);

// Calls `fn` with each minute of the device-day's value `day` (of device `device_id`, day
// `day_ms`) that has any time and lies in `range`, but those of the hours `skip_hour`
// answers true for (given the hour's start), in time order. False when the value is
// corrupt (then `fn` may have been called for the minutes before the fault).
bool DecodeDayMinutes(std::string_view day, int64_t day_ms, int64_t device_id, const TimeRange& range,
                      const std::function<bool(int64_t hour_ms)>& skip_hour,
                      const std::function<void(const RollupRow&)>& fn);

}  // namespace gpuledger::store
