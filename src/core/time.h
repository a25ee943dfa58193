// Time in gpuledger: instants are int64 milliseconds since the Unix epoch (UTC), named
// `*_ms`; spans are half-open [begin, end). Nothing reads the wall clock except through
// a Clock, so tests, the simulator and the demo can drive time themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuledger {

inline constexpr int64_t kMsPerSecond = 1000;
inline constexpr int64_t kMsPerMinute = 60 * kMsPerSecond;
inline constexpr int64_t kMsPerHour = 60 * kMsPerMinute;
inline constexpr int64_t kMsPerDay = 24 * kMsPerHour;

// A half-open span of time [begin_ms, end_ms).
struct TimeRange {
  int64_t begin_ms = 0;
  int64_t end_ms = 0;

  int64_t length_ms() const { return end_ms > begin_ms ? end_ms - begin_ms : 0; }
  bool empty() const { return end_ms <= begin_ms; }
  bool Contains(int64_t t_ms) const { return t_ms >= begin_ms && t_ms < end_ms; }
  bool Overlaps(const TimeRange& o) const { return begin_ms < o.end_ms && o.begin_ms < end_ms; }
  TimeRange Intersect(const TimeRange& o) const;
  bool operator==(const TimeRange&) const = default;
};

// Floors `t_ms` to a multiple of `step_ms` (correct for negative instants too).
int64_t FloorTo(int64_t t_ms, int64_t step_ms);

// Parses an instant: an RFC 3339 date-time ("2026-11-23T08:00:00Z",
// "2026-11-23T08:00:00.250+01:00"), with seconds, and a zone (Z or an offset of at most
// 23:59). A bare date, a time without seconds or an offset out of range fail, with a
// message naming the text.
Result<int64_t> ParseTime(std::string_view text);

// Formats an instant as RFC 3339 in UTC, with milliseconds only when they are not zero.
std::string FormatTime(int64_t t_ms);

// Parses a duration such as "500ms", "90s", "15m", "36h", "7d", "2w" or "1h30m": one or
// more whole numbers, each with its unit (ms, s, m, h, d, w). Must be > 0. The one
// duration grammar of flags, the API and the config file.
Result<int64_t> ParseDuration(std::string_view text);

// "2026-11" -> [2026-11-01T00:00Z, 2026-12-01T00:00Z).
Result<TimeRange> ParseMonth(std::string_view text);

// ISO 8601 week "2026-W48" -> [Monday 00:00Z, next Monday 00:00Z).
Result<TimeRange> ParseIsoWeek(std::string_view text);
// The ISO week ("2026-W48") that contains `t_ms`.
std::string IsoWeekOf(int64_t t_ms);

// Days since the epoch for a civil date, and back. Valid for the proleptic Gregorian
// calendar; used by the parsers above and by generators.
int64_t DaysFromCivil(int year, unsigned month, unsigned day);

// The source of "now". Implementations must be thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;
};

// The system's real-time clock.
class SystemClock final : public Clock {
 public:
  int64_t NowMs() const override;
};

// A clock that moves only when told to: for tests, the simulator and the demo.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ms = 0) : now_ms_(now_ms) {}
  int64_t NowMs() const override { return now_ms_.load(std::memory_order_relaxed); }
  void Set(int64_t now_ms) { now_ms_.store(now_ms, std::memory_order_relaxed); }
  void Advance(int64_t delta_ms) { now_ms_.fetch_add(delta_ms, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace gpuledger
