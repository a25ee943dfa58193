#include "core/quota.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuledger {
namespace {

using ::testing::HasSubstr;

int64_t T(const char* text) { return ParseTime(text).value(); }

TEST(QuotaPeriodTest, AMonthIsItsCalendarMonthInUtc) {
  TimeRange r = QuotaPeriodContaining(QuotaPeriod::kMonth, T("2026-11-30T23:59:59Z"));
  EXPECT_EQ(r.begin_ms, T("2026-11-01T00:00:00Z"));
  EXPECT_EQ(r.end_ms, T("2026-12-01T00:00:00Z"));
  EXPECT_EQ(QuotaPeriodLabel(QuotaPeriod::kMonth, r), "2026-11");
}

TEST(QuotaPeriodTest, AQuarterStartsInJanuaryAprilJulyOrOctoberAndMayCrossTheYear) {
  TimeRange q4 = QuotaPeriodContaining(QuotaPeriod::kQuarter, T("2026-11-15T12:00:00Z"));
  EXPECT_EQ(q4.begin_ms, T("2026-10-01T00:00:00Z"));
  EXPECT_EQ(q4.end_ms, T("2027-01-01T00:00:00Z"));
  EXPECT_EQ(QuotaPeriodLabel(QuotaPeriod::kQuarter, q4), "2026-Q4");
  TimeRange q1 = QuotaPeriodContaining(QuotaPeriod::kQuarter, T("2027-01-01T00:00:00Z"));
  EXPECT_EQ(q1.begin_ms, T("2027-01-01T00:00:00Z"));
  EXPECT_EQ(q1.end_ms, T("2027-04-01T00:00:00Z"));
}

TEST(QuotaPeriodTest, LabelsParseBackToTheirPeriods) {
  auto q = ParseQuotaPeriodLabel("2026-Q2");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->first, QuotaPeriod::kQuarter);
  EXPECT_EQ(q->second, (TimeRange{T("2026-04-01T00:00:00Z"), T("2026-07-01T00:00:00Z")}));
  auto m = ParseQuotaPeriodLabel("2026-02");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->first, QuotaPeriod::kMonth);
  EXPECT_EQ(m->second.length_ms(), 28 * kMsPerDay);
  for (const char* bad : {"2026-Q5", "2026-13", "Q4", ""}) {
    auto r = ParseQuotaPeriodLabel(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("\"") + bad + "\""));
  }
}

TEST(QuotaSpecTest, NamesAndModesParseAndBadOnesAreNamed) {
  EXPECT_EQ(ParseQuotaMode("hard").value(), QuotaMode::kHard);
  EXPECT_EQ(ParseQuotaPeriod("quarter").value(), QuotaPeriod::kQuarter);
  EXPECT_THAT(ParseQuotaMode("strict").status().message(), HasSubstr("\"strict\""));
  EXPECT_THAT(ParseQuotaPeriod("week").status().message(), HasSubstr("want month or quarter"));
  QuotaSpec q{.owner = QuotaSpec::Owner::kProject, .name = "llm", .gpu_hours = 10, .pool = "training"};
  EXPECT_EQ(q.Label(), "project:llm month gpu_hours pool:training");
}

}  // namespace
}  // namespace gpuledger
