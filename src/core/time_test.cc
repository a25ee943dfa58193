#include "core/time.h"

#include <gtest/gtest.h>

namespace gpuledger {
namespace {

TEST(TimeTest, ParsesRfc3339InUtcAndWithOffsets) {
  EXPECT_EQ(*ParseTime("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseTime("2026-11-23T08:00:00Z"), 1795420800000);
  EXPECT_EQ(*ParseTime("2026-11-23T09:00:00+01:00"), 1795420800000);
  EXPECT_EQ(*ParseTime("2026-11-23T08:00:00.250Z"), 1795420800250);
}

// RFC 3339's date-time only: an offset within a day, a time with seconds, never a bare date.
TEST(TimeTest, RefusesLenientForms) {
  for (const char* bad : {"2026-11-23T08:00:00+99:00", "2026-11-23T08:00:00+05:99", "2026-11-29",
                          "2026-11-23T10:00Z", "2026-11-23T10:00+01:00"}) {
    auto r = ParseTime(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_EQ(*ParseTime("2026-11-23T08:00:00-23:59"), 1795420800000 + 23 * kMsPerHour + 59 * kMsPerMinute);
}

TEST(TimeTest, RejectsMalformedTimesWithTheText) {
  for (const char* bad : {"", "2026-13-01", "2026-02-30", "2026-11-23T08:00:00", "2026-11-23T25:00Z",
                          "yesterday", "2026-11-23T08:00:00Zjunk"}) {
    auto r = ParseTime(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
}

TEST(TimeTest, FormatRoundTrips) {
  for (int64_t t : {int64_t{0}, int64_t{1795420800000}, int64_t{1795420800250}}) {
    EXPECT_EQ(*ParseTime(FormatTime(t)), t);
  }
  EXPECT_EQ(FormatTime(1795420800000), "2026-11-23T08:00:00Z");
}

TEST(TimeTest, ParsesDurations) {
  EXPECT_EQ(*ParseDuration("90s"), 90'000);
  EXPECT_EQ(*ParseDuration("1h30m"), 90 * kMsPerMinute);
  EXPECT_EQ(*ParseDuration("30d"), 30 * kMsPerDay);
  EXPECT_EQ(*ParseDuration("2w"), 14 * kMsPerDay);
  EXPECT_EQ(*ParseDuration("500ms"), 500);
  EXPECT_EQ(*ParseDuration("1s250ms"), 1'250);
  EXPECT_EQ(*ParseDuration("1m30s"), 90'000);
  EXPECT_FALSE(ParseDuration("1h-30m").ok());
  EXPECT_FALSE(ParseDuration("7").ok());
  EXPECT_FALSE(ParseDuration("7y").ok());
  EXPECT_FALSE(ParseDuration("0s").ok());
  EXPECT_FALSE(ParseDuration("-3d").ok());
}

TEST(TimeTest, MonthsAndIsoWeeks) {
  auto nov = *ParseMonth("2026-11");
  EXPECT_EQ(FormatTime(nov.begin_ms), "2026-11-01T00:00:00Z");
  EXPECT_EQ(FormatTime(nov.end_ms), "2026-12-01T00:00:00Z");
  auto dec = *ParseMonth("2026-12");
  EXPECT_EQ(FormatTime(dec.end_ms), "2027-01-01T00:00:00Z");
  EXPECT_FALSE(ParseMonth("2026-13").ok());

  auto w48 = *ParseIsoWeek("2026-W48");
  EXPECT_EQ(FormatTime(w48.begin_ms), "2026-11-23T00:00:00Z");  // a Monday
  EXPECT_EQ(w48.length_ms(), 7 * kMsPerDay);
  EXPECT_EQ(IsoWeekOf(*ParseTime("2026-11-29T23:59:59Z")), "2026-W48");
  EXPECT_EQ(IsoWeekOf(*ParseTime("2027-01-01T00:00:00Z")), "2026-W53");
  EXPECT_EQ(FormatTime(ParseIsoWeek("2026-W01")->begin_ms), "2025-12-29T00:00:00Z");
  EXPECT_FALSE(ParseIsoWeek("2025-W53").ok());
}

TEST(TimeTest, RangesAreHalfOpen) {
  TimeRange r{10, 20};
  EXPECT_TRUE(r.Contains(10));
  EXPECT_FALSE(r.Contains(20));
  EXPECT_FALSE(r.Overlaps({20, 30}));
  EXPECT_EQ(r.Intersect({15, 40}), (TimeRange{15, 20}));
  EXPECT_TRUE(r.Intersect({30, 40}).empty());
  EXPECT_EQ(FloorTo(-1, 10), -10);
}

}  // namespace
}  // namespace gpuledger
