// A device-hour's minute rollups as one value: 60 minutes x kBucketCount little-endian
// uint32 milliseconds (the layout both stores keep in rollup_minute.buckets).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace gpuledger::store {

inline constexpr size_t kMinuteBlobSize = 60 * kBucketCount * 4;

// The blob of `minute_rows` of the hour starting at `hour_ms`. kInternal when a row lies
// outside that hour.
Result<std::array<uint8_t, kMinuteBlobSize>> EncodeMinuteBlob(int64_t hour_ms,
                                                              const std::vector<RollupRow>& minute_rows);

// Calls `fn` with each minute of `blob` (of device `device_id`, hour `hour_ms`) that has
// any time and lies in `range`. False when the blob has the wrong size.
bool DecodeMinuteBlob(std::string_view blob, int64_t hour_ms, int64_t device_id, const TimeRange& range,
                      const std::function<void(const RollupRow&)>& fn);

}  // namespace gpuledger::store
