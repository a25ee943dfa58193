#include "report/usage_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ledger/rightsizing.h"

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
  EXPECT_THAT(RenderChargeback(r, Format::kCsv), HasSubstr(",2026-11,\n"));
  auto j = nlohmann::json::parse(RenderChargeback(r, Format::kJson));
  EXPECT_FALSE(j["lines"][0].contains("correction_for"));
  EXPECT_EQ(j["lines"][1]["correction_for"], "2026-11");
  EXPECT_EQ(j["total"], "1.750000");
  r.closed = ledger::ClosedPeriod{"2026-11", r.period, kMsPerDay, "finance"};
  EXPECT_EQ(nlohmann::json::parse(RenderChargeback(r, Format::kJson))["closed"]["closed_by"], "finance");
  EXPECT_THAT(RenderChargeback(r, Format::kTable), HasSubstr("by finance: as frozen"));
}

// Advice as every surface lists it: group by group (kind and team), the largest money
// first, with the totals per kind, team and pool adding up to the whole.
TEST(UsageFormatTest, AdviceIsListedByGroupTheLargestMoneyFirst) {
  auto piece = [](ledger::RecommendationKind kind, const char* job, const char* team, const char* pool, int64_t net) {
    ledger::Recommendation r;
    r.kind = kind;
    r.job_id = job;
    r.team = team;
    r.pool = pool;
    r.cost = Money::FromUnits(100);
    r.saving = r.net_saving = Money::FromUnits(net);
    return r;
  };
  using K = ledger::RecommendationKind;
  std::vector<ledger::Recommendation> recs = {
      piece(K::kIdleShutdown, "nb-1", "nlp", "dev", 30), piece(K::kIdleShutdown, "nb-2", "nlp", "dev", 25),
      piece(K::kInputBound, "ft", "nlp", "training", 40), piece(K::kFewerGpus, "sweep", "vision", "training", 90)};
  auto j = nlohmann::json::parse(RecommendationsJson(recs, {0, kMsPerDay}));
  // The groups: fewer-gpus/vision 90, idle-shutdown/nlp 55, input-bound/nlp 40.
  ASSERT_EQ(j["groups"].size(), 3u);
  EXPECT_EQ(j["groups"][0]["kind"], "fewer-gpus");
  EXPECT_EQ(j["groups"][1]["kind"], "idle-shutdown");
  EXPECT_EQ(j["groups"][1]["net_saving"], "55.000000");
  EXPECT_EQ(j["groups"][1]["count"], 2);
  std::vector<std::string> order;
  for (const auto& r : j["recommendations"]) order.push_back(r["job"]);
  EXPECT_EQ(order, (std::vector<std::string>{"sweep", "nb-1", "nb-2", "ft"}));
  EXPECT_EQ(j["totals"]["by_team"][0]["team"], "nlp");
  EXPECT_EQ(j["totals"]["by_team"][0]["net_saving"], "95.000000");
  EXPECT_EQ(j["totals"]["by_pool"][0]["pool"], "training");
  EXPECT_EQ(j["totals"]["by_pool"][0]["net_saving"], "130.000000");
  EXPECT_EQ(j["total_net_saving"], "185.000000");
  std::string text = RecommendationsText(recs, {0, kMsPerDay});
  EXPECT_THAT(text, HasSubstr("4 pieces, saving 185.00 net"));
  size_t sweep = text.find("== fewer-gpus / vision: 1 piece, 90.00 net");
  size_t idle = text.find("== idle-shutdown / nlp: 2 pieces, 55.00 net");
  ASSERT_NE(sweep, std::string::npos);
  ASSERT_NE(idle, std::string::npos);
  EXPECT_LT(sweep, idle);
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
  EXPECT_THAT(RenderChargeback(cb, Format::kCsv), HasSubstr(",0.000000,,GPU credits\n"));  // no correction_for
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
