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

TEST(UsageFormatTest, ParsesFormats) {
  EXPECT_EQ(*ParseFormat("csv"), Format::kCsv);
  EXPECT_FALSE(ParseFormat("xml").ok());
}

}  // namespace
}  // namespace gpuledger::report
