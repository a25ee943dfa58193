#include "core/time.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdio>

namespace gpuledger {
namespace {

// Reads exactly `n` decimal digits at `pos`, advancing it.
bool ReadDigits(std::string_view s, size_t& pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  pos += n;
  return true;
}

bool Expect(std::string_view s, size_t& pos, char c) {
  if (pos < s.size() && s[pos] == c) {
    ++pos;
    return true;
  }
  return false;
}

Status BadTime(std::string_view text, const char* why) {
  return InvalidArgument(fmt::format("time \"{}\": {} (want RFC 3339, e.g. 2026-11-23T08:00:00Z)",
                                     text, why));
}

unsigned DaysInMonth(int year, unsigned month) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

}  // namespace

TimeRange TimeRange::Intersect(const TimeRange& o) const {
  TimeRange r{std::max(begin_ms, o.begin_ms), std::min(end_ms, o.end_ms)};
  if (r.end_ms < r.begin_ms) r.end_ms = r.begin_ms;
  return r;
}

int64_t FloorTo(int64_t t_ms, int64_t step_ms) {
  int64_t q = t_ms / step_ms;
  if (t_ms % step_ms != 0 && t_ms < 0) --q;
  return q * step_ms;
}

int64_t DaysFromCivil(int year, unsigned month, unsigned day) {
  using namespace std::chrono;
  return sys_days{std::chrono::year{year} / std::chrono::month{month} / std::chrono::day{day}}
      .time_since_epoch()
      .count();
}

Result<int64_t> ParseTime(std::string_view text) {
  size_t pos = 0;
  int year = 0, month = 0, day = 0;
  if (!ReadDigits(text, pos, 4, year) || !Expect(text, pos, '-') ||
      !ReadDigits(text, pos, 2, month) || !Expect(text, pos, '-') ||
      !ReadDigits(text, pos, 2, day)) {
    return BadTime(text, "expected YYYY-MM-DD");
  }
  if (month < 1 || month > 12 || day < 1 ||
      static_cast<unsigned>(day) > DaysInMonth(year, static_cast<unsigned>(month))) {
    return BadTime(text, "no such date");
  }
  int64_t ms = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) *
               kMsPerDay;
  if (pos == text.size()) return BadTime(text, "a date without a time (want YYYY-MM-DDTHH:MM:SSZ)");
  if (!(Expect(text, pos, 'T') || Expect(text, pos, 't') || Expect(text, pos, ' '))) {
    return BadTime(text, "expected 'T' after the date");
  }
  int hh = 0, mm = 0, ss = 0;
  if (!ReadDigits(text, pos, 2, hh) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, mm)) {
    return BadTime(text, "expected HH:MM");
  }
  if (!Expect(text, pos, ':') || !ReadDigits(text, pos, 2, ss)) {
    return BadTime(text, "expected seconds (HH:MM:SS)");
  }
  if (hh > 23 || mm > 59 || ss > 60) return BadTime(text, "time of day out of range");
  int64_t frac_ms = 0;
  if (Expect(text, pos, '.')) {
    int64_t scale = 100;
    size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      frac_ms += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return BadTime(text, "empty fraction of a second");
  }
  ms += hh * kMsPerHour + mm * kMsPerMinute + ss * kMsPerSecond + frac_ms;
  if (Expect(text, pos, 'Z') || Expect(text, pos, 'z')) {
    // UTC
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '+' ? 1 : -1;
    ++pos;
    int oh = 0, om = 0;
    if (!ReadDigits(text, pos, 2, oh) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, om)) {
      return BadTime(text, "bad UTC offset");
    }
    if (oh > 23 || om > 59) return BadTime(text, "UTC offset out of range (at most +23:59)");
    ms -= sign * (oh * kMsPerHour + om * kMsPerMinute);
  } else {
    return BadTime(text, "missing time zone ('Z' or an offset)");
  }
  if (pos != text.size()) return BadTime(text, "trailing characters");
  return ms;
}

std::string FormatTime(int64_t t_ms) {
  using namespace std::chrono;
  int64_t days = FloorTo(t_ms, kMsPerDay) / kMsPerDay;
  int64_t rem = t_ms - days * kMsPerDay;
  year_month_day ymd{sys_days{std::chrono::days{days}}};
  int64_t h = rem / kMsPerHour, m = rem / kMsPerMinute % 60, s = rem / kMsPerSecond % 60,
          frac = rem % 1000;
  std::string out = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", static_cast<int>(ymd.year()),
                                static_cast<unsigned>(ymd.month()),
                                static_cast<unsigned>(ymd.day()), h, m, s);
  if (frac != 0) out += fmt::format(".{:03}", frac);
  out += 'Z';
  return out;
}

Result<int64_t> ParseDuration(std::string_view text) {
  if (text.empty()) return InvalidArgument("duration: empty (want e.g. 7d, 36h, 15m, 90s)");
  int64_t total = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(text.data() + pos, text.data() + text.size(), n);
    if (ec != std::errc() || ptr == text.data() + pos || n < 0) {
      return InvalidArgument(fmt::format("duration \"{}\": expected a number at offset {}", text, pos));
    }
    pos = static_cast<size_t>(ptr - text.data());
    if (pos >= text.size()) {
      return InvalidArgument(fmt::format("duration \"{}\": missing unit (ms, s, m, h, d or w)", text));
    }
    int64_t unit = 0;
    switch (text[pos]) {
      case 's': unit = kMsPerSecond; break;
      case 'm': unit = kMsPerMinute; break;
      case 'h': unit = kMsPerHour; break;
      case 'd': unit = kMsPerDay; break;
      case 'w': unit = 7 * kMsPerDay; break;
      default:
        return InvalidArgument(
            fmt::format("duration \"{}\": unknown unit '{}' (ms, s, m, h, d or w)", text, text[pos]));
    }
    ++pos;
    // "ms" is milliseconds; an "m" followed by anything else is minutes.
    if (unit == kMsPerMinute && pos < text.size() && text[pos] == 's') {
      unit = 1;
      ++pos;
    }
    if (n > 100 * 365 * kMsPerDay / unit) {
      return InvalidArgument(fmt::format("duration \"{}\": longer than a century", text));
    }
    total += n * unit;
  }
  if (total <= 0) return InvalidArgument(fmt::format("duration \"{}\": must be positive", text));
  return total;
}

Result<TimeRange> ParseMonth(std::string_view text) {
  size_t pos = 0;
  int year = 0, month = 0;
  if (!ReadDigits(text, pos, 4, year) || !Expect(text, pos, '-') ||
      !ReadDigits(text, pos, 2, month) || pos != text.size() || month < 1 || month > 12) {
    return InvalidArgument(fmt::format("period \"{}\": want a month as YYYY-MM", text));
  }
  int next_year = month == 12 ? year + 1 : year;
  unsigned next_month = month == 12 ? 1 : static_cast<unsigned>(month) + 1;
  return TimeRange{DaysFromCivil(year, static_cast<unsigned>(month), 1) * kMsPerDay,
                   DaysFromCivil(next_year, next_month, 1) * kMsPerDay};
}

namespace {
// Monday of ISO week 1 of `year`, in days since the epoch.
int64_t IsoWeekOneMonday(int year) {
  int64_t jan4 = DaysFromCivil(year, 1, 4);
  // 1970-01-01 was a Thursday; weekday 0 = Monday.
  int64_t weekday = ((jan4 % 7) + 7 + 3) % 7;
  return jan4 - weekday;
}
}  // namespace

Result<TimeRange> ParseIsoWeek(std::string_view text) {
  size_t pos = 0;
  int year = 0, week = 0;
  if (!ReadDigits(text, pos, 4, year) || !Expect(text, pos, '-') || !Expect(text, pos, 'W') ||
      !ReadDigits(text, pos, 2, week) || pos != text.size() || week < 1) {
    return InvalidArgument(fmt::format("week \"{}\": want an ISO week as YYYY-Www", text));
  }
  int64_t monday = IsoWeekOneMonday(year) + (week - 1) * 7;
  if (monday >= IsoWeekOneMonday(year + 1)) {
    return InvalidArgument(fmt::format("week \"{}\": {} has no week {}", text, year, week));
  }
  return TimeRange{monday * kMsPerDay, (monday + 7) * kMsPerDay};
}

std::string IsoWeekOf(int64_t t_ms) {
  int64_t day = FloorTo(t_ms, kMsPerDay) / kMsPerDay;
  using namespace std::chrono;
  int year = static_cast<int>(year_month_day{sys_days{std::chrono::days{day}}}.year());
  for (int y : {year + 1, year, year - 1}) {
    int64_t start = IsoWeekOneMonday(y);
    if (day >= start) return fmt::format("{:04}-W{:02}", y, (day - start) / 7 + 1);
  }
  return "";
}

int64_t SystemClock::NowMs() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace gpuledger
