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

TEST(UsageFormatTest, EveryFormatNamesTheCurrency) {
  ledger::UsageReport r = Sample();
  r.currency = *Currency::Iso4217("EUR");
  auto j = nlohmann::json::parse(RenderUsage(r, Format::kJson));
  EXPECT_EQ(j["currency"], "EUR");
  EXPECT_EQ(j["currency_kind"], "iso4217");
  EXPECT_EQ(j["currency_unit"], "1e-6");
  std::string csv = RenderUsage(r, Format::kCsv);
  EXPECT_THAT(csv, HasSubstr(",unpriced_gpu_hours,currency\n"));
  EXPECT_THAT(csv, HasSubstr("sm_active,0.000000,EUR\n"));
  std::string t = RenderUsage(r, Format::kTable);
  EXPECT_THAT(t, HasSubstr("(GPU-hours; amounts in EUR)"));
  EXPECT_THAT(t, HasSubstr("cost EUR"));

  ledger::ChargebackReport cb;
  cb.period = r.window;
  cb.currency = *Currency::Unit("GPU credits");
  cb.lines.push_back({.team = "vision", .project = "core", .gpu_hours = 1, .direct_cost = Money::FromUnits(2)});
  cb.total = Money::FromUnits(2);
  EXPECT_EQ(nlohmann::json::parse(RenderChargeback(cb, Format::kJson))["currency"], "GPU credits");
  EXPECT_THAT(RenderChargeback(cb, Format::kCsv), HasSubstr(",0.000000,GPU credits\n"));
  EXPECT_THAT(RenderChargeback(cb, Format::kTable), HasSubstr("total GPU credits"));
}

TEST(UsageFormatTest, NoCurrencySetIsSaidPlainly) {
  ledger::UsageReport r = Sample();  // currency unset
  auto j = nlohmann::json::parse(RenderUsage(r, Format::kJson));
  EXPECT_TRUE(j["currency"].is_null());
  EXPECT_EQ(j["currency_kind"], "unset");
  std::string t = RenderUsage(r, Format::kTable);
  EXPECT_THAT(t, HasSubstr("amounts in an unnamed unit (no currency set"));
  EXPECT_THAT(t, HasSubstr("cost (unnamed unit)"));
  EXPECT_THAT(t, ::testing::Not(HasSubstr("USD")));
}

TEST(UsageFormatTest, UnpricedCapacityIsNamedUnderTheTable) {
  ledger::UsageReport r = Sample();
  r.unpriced.push_back({.model = "NVIDIA H200", .pool = "lab", .gpu_ticks_ms = 2 * kMsPerHour * kShareScale});
  EXPECT_THAT(RenderUsage(r, Format::kTable),
              HasSubstr("UNPRICED: 2.0 GPU-hours had no price and cost 0 in these figures: NVIDIA H200 in pool lab "
                        "(on-demand) 2.0 h."));
  EXPECT_EQ(UnpricedNote({}), "");
}

TEST(UsageFormatTest, ParsesFormats) {
  EXPECT_EQ(*ParseFormat("csv"), Format::kCsv);
  EXPECT_FALSE(ParseFormat("xml").ok());
}

}  // namespace
}  // namespace gpuledger::report
