#include "store/minute_blob.h"

namespace gpuledger::store {

Result<std::array<uint8_t, kMinuteBlobSize>> EncodeMinuteBlob(int64_t hour_ms,
                                                              const std::vector<RollupRow>& minute_rows) {
  std::array<uint8_t, kMinuteBlobSize> blob{};
  for (const RollupRow& r : minute_rows) {
    int64_t minute = (r.period_ms - hour_ms) / kMsPerMinute;
    if (r.period_ms < hour_ms || minute >= 60) return Internal("minute rollup outside its hour");
    for (size_t b = 0; b < kBucketCount; ++b) {
      auto v = static_cast<uint32_t>(r.ms[b]);
      size_t at = (static_cast<size_t>(minute) * kBucketCount + b) * 4;
      for (size_t k = 0; k < 4; ++k) blob[at + k] = static_cast<uint8_t>(v >> (8 * k));
    }
  }
  return blob;
}

bool DecodeMinuteBlob(std::string_view blob, int64_t hour_ms, int64_t device_id, const TimeRange& range,
                      const std::function<void(const RollupRow&)>& fn) {
  if (blob.size() != kMinuteBlobSize) return false;
  for (size_t m = 0; m < 60; ++m) {
    RollupRow r;
    r.period_ms = hour_ms + static_cast<int64_t>(m) * kMsPerMinute;
    r.device_id = device_id;
    uint32_t any = 0;
    for (size_t b = 0; b < kBucketCount; ++b) {
      size_t at = (m * kBucketCount + b) * 4;
      uint32_t v = 0;
      for (size_t k = 0; k < 4; ++k) v |= static_cast<uint32_t>(static_cast<uint8_t>(blob[at + k])) << (8 * k);
      r.ms[b] = v;
      any |= v;
    }
    if (any && range.Contains(r.period_ms)) fn(r);
  }
  return true;
}

}  // namespace gpuledger::store
