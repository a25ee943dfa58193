#include "report/usage_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuledger::report {
namespace {

using ::testing::HasSubstr;

ledger::UsageReport Sample() {
  ledger::UsageReport r;
  r.window = {0, kMsPerHour};
  r.by = {ledger::Dimension::kTeam};
  ledger::UsageRow a;
  a.key = {"vision, \"core\""};
  a.gpu_ticks_ms = {kMsPerHour * kShareScale / 2, kMsPerHour * kShareScale / 2, 0, 0, 0};
  a.cost = {Money::FromMicros(1'000'000), Money::FromMicros(1'000'000), Money(), Money(), Money()};
  r.rows.push_back(a);
  r.total = a;
  r.total.key = {"(total)"};
  return r;
}

TEST(UsageFormatTest, JsonCarriesExactMoneyAndRatios) {
  auto j = nlohmann::json::parse(RenderUsage(Sample(), Format::kJson));
  EXPECT_EQ(j["rows"][0]["group"]["team"], "vision, \"core\"");
  EXPECT_EQ(j["rows"][0]["buckets"]["active"]["cost"], "1.000000");
  EXPECT_DOUBLE_EQ(j["rows"][0]["effective_utilization"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["total"]["gpu_hours"].get<double>(), 1.0);
  EXPECT_EQ(j["total"]["activity_source"], "sm_active");
}

TEST(UsageFormatTest, CsvQuotesHostileLabels) {
  std::string csv = RenderUsage(Sample(), Format::kCsv);
  EXPECT_THAT(csv, HasSubstr("\"vision, \"\"core\"\"\",1.000000"));
  EXPECT_THAT(csv, HasSubstr("2.000000,0.500000,0.500000,sm_active"));
}

TEST(UsageFormatTest, TableShowsPercentagesAndMoney) {
  std::string t = RenderUsage(Sample(), Format::kTable);
  EXPECT_THAT(t, HasSubstr("50.0%"));
  EXPECT_THAT(t, HasSubstr("2.00"));
  EXPECT_THAT(t, HasSubstr("(total)"));
}

// A chargeback of the first open month after a closed one: its corrections say which month
// they correct in every format, and a closed month's says when and by whom it was closed.
TEST(UsageFormatTest, ChargebackCorrectionsAndClosedMonthsAreNamed) {
  ledger::ChargebackReport r;
  r.period = {0, kMsPerDay};
  ledger::ChargebackLine own, fix;
  own.team = fix.team = "nlp";
  own.project = fix.project = "llm";
  own.direct_cost = Money::FromMicros(3'000'000);
  fix.direct_cost = Money::FromMicros(-1'250'000);
  fix.correction_for = "2026-11";
  r.lines = {own, fix};
  r.total = own.direct_cost + fix.direct_cost;
  EXPECT_THAT(RenderChargeback(r, Format::kTable), HasSubstr("llm (correction for 2026-11)"));
  EXPECT_THAT(RenderChargeback(r, Format::kCsv), HasSubstr(",-1.250000,0.000000,-1.250000,"));
  EXPECT_THAT(RenderChargeback(r, Format::kCsv), HasSubstr(",2026-11\n"));
  auto j = nlohmann::json::parse(RenderChargeback(r, Format::kJson));
  EXPECT_FALSE(j["lines"][0].contains("correction_for"));
  EXPECT_EQ(j["lines"][1]["correction_for"], "2026-11");
  EXPECT_EQ(j["total"], "1.750000");
  r.closed = ledger::ClosedPeriod{"2026-11", r.period, kMsPerDay, "finance"};
  EXPECT_EQ(nlohmann::json::parse(RenderChargeback(r, Format::kJson))["closed"]["closed_by"], "finance");
  EXPECT_THAT(RenderChargeback(r, Format::kTable), HasSubstr("by finance: as frozen"));
}

TEST(UsageFormatTest, ParsesFormats) {
  EXPECT_EQ(*ParseFormat("csv"), Format::kCsv);
  EXPECT_FALSE(ParseFormat("xml").ok());
}

}  // namespace
}  // namespace gpuledger::report
