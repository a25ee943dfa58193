// A closed billing period is frozen: whatever arrives later (a late sample, a job moved to
// another team, a new price), its chargeback answers as it did when it closed, and the
// change is booked as corrections in the first open month. Checked against the live
// figures by a second road: Usage by team, summed here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "ledger/test_fixture.h"
#include "wire/batch.h"

namespace gpuledger::ledger {
namespace {

using ::testing::HasSubstr;

// 2026-11-23T00:00:00Z: GPU-1 held by j1 (nlp), GPU-2 by j2 (recsys), one sample a minute.
Batch Fleet(const std::string& id, int64_t from_ms, int minutes, bool declare) {
  Batch b;
  b.batch_id = id;
  if (declare) {
    for (const char* uuid : {"GPU-1", "GPU-2"}) {
      Device d;
      d.uuid = uuid;
      d.model = "A100";
      d.pool = "p";
      d.node = "n1";
      d.sample_interval_ms = kMsPerMinute;
      b.devices.push_back(d);
    }
    Job j1, j2;
    j1.id = "j1";
    j1.team = "nlp";
    j1.project = "llm";
    j2.id = "j2";
    j2.team = "recsys";
    j2.project = "ranker";
    b.jobs = {j1, j2};
    b.allocations = {{"GPU-1", "j1", testing::kBaseMs, std::nullopt}, {"GPU-2", "j2", testing::kBaseMs, std::nullopt}};
  }
  for (int i = 0; i < minutes; ++i) {
    for (const char* uuid : {"GPU-1", "GPU-2"}) {
      Sample s;
      s.device_uuid = uuid;
      s.t_ms = from_ms + i * kMsPerMinute;
      s.sm_active = i % 2 ? 0.8 : 0.3;
      b.samples.push_back(s);
    }
  }
  return b;
}

PriceBook Price(const char* per_hour) {
  return *PriceBook::Create({PriceEntry{"*", "*", CapacityType::kOnDemand, *Money::Parse(per_hour), {0, kForever}}});
}

// Each team's direct cost (active + allocated idle) over `month`, from Usage by team.
std::map<std::string, Money> LiveByTeam(Ledger& ledger, const TimeRange& month) {
  std::map<std::string, Money> out;
  auto usage = ledger.Usage(month, {Dimension::kTeam});
  EXPECT_TRUE(usage.ok()) << usage.status().ToString();
  for (const UsageRow& row : usage->rows) {
    if (!row.no_job) out[row.key[0]] += row.cost[0] + row.cost[1];
  }
  return out;
}

// The lines of `r` booked for `month`, by team: its own charges, or corrections to it.
std::map<std::string, Money> Booked(const ChargebackReport& r, const std::string& month, bool corrections) {
  std::map<std::string, Money> out;
  for (const ChargebackLine& l : r.lines) {
    if (l.capacity || (corrections ? l.correction_for != month : !l.correction_for.empty())) continue;
    out[l.team] += l.direct_cost;
  }
  return out;
}

class BillingPeriodsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ledger().SetPrices(Price("3.00")).ok());
    ASSERT_EQ(*ledger().Ingest(Fleet("nov", testing::kBaseMs, 120, true)), store::ApplyOutcome::kApplied);
  }
  Ledger& ledger() { return t_.ledger(); }
  // Every figure of the period's chargeback lines and its total, as text.
  std::string Lines(const TimeRange& period, bool share = false) {
    auto r = ledger().Chargeback(period, share);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::string out = fmt::format("total {} share {}\n", r->total.ToString(), r->share_idle);
    for (const ChargebackLine& l : r->lines) {
      out += fmt::format("{}|{}|{}|{}|{:.9f}|{:.9f}|{:.9f}|{:.9f}|{}|{}", l.team, l.project, l.correction_for,
                         l.capacity ? static_cast<int>(*l.capacity) : -1, l.gpu_hours, l.active_gpu_hours,
                         l.idle_gpu_hours, l.unpriced_gpu_hours, l.direct_cost.ToString(), l.shared_idle_cost.ToString());
      for (const Money& m : l.idle_cost_by_cause) out += "|" + m.ToString();
      out += "\n";
    }
    return out;
  }

  testing::TempLedger t_;
  const TimeRange nov_ = *ParseMonth("2026-11");
  const TimeRange dec_ = *ParseMonth("2026-12");
  const TimeRange jan_ = *ParseMonth("2027-01");
};

TEST_F(BillingPeriodsTest, AClosedMonthAnswersAsItDidWhenItClosed) {
  const std::string before = Lines(nov_), shared_before = Lines(nov_, true);
  auto closed = ledger().ClosePeriod("2026-11", "finance");
  ASSERT_TRUE(closed.ok()) << closed.status().ToString();
  EXPECT_EQ(closed->closed_by, "finance");
  auto frozen = *ledger().Chargeback(nov_, false);
  ASSERT_TRUE(frozen.closed.has_value());
  EXPECT_EQ(frozen.closed->month, "2026-11");
  // The same lines, to the micro-unit.
  EXPECT_EQ(Lines(nov_), before);
  EXPECT_EQ(Lines(nov_, true), shared_before);

  // j2 moves to nlp; a late November sample arrives; the price goes up.
  Job moved;
  moved.id = "j2";
  moved.team = "nlp";
  Batch reteam;
  reteam.batch_id = "reteam";
  reteam.jobs = {moved};
  ASSERT_EQ(*ledger().Ingest(reteam), store::ApplyOutcome::kApplied);
  ASSERT_EQ(*ledger().Ingest(Fleet("late", testing::kBaseMs + 3 * kMsPerHour, 30, false)), store::ApplyOutcome::kApplied);
  ASSERT_TRUE(ledger().SetPrices(Price("4.00")).ok());
  ASSERT_TRUE(ledger().RefreshRollups().ok());

  // November stands as frozen; its live figures moved.
  EXPECT_EQ(Lines(nov_), before);
  EXPECT_EQ(Lines(nov_, true), shared_before);
  std::map<std::string, Money> live = LiveByTeam(ledger(), nov_);
  ASSERT_EQ(live.size(), 1u);  // everything is nlp's now
  auto booked = Booked(frozen, "2026-11", false);
  EXPECT_NE(booked, live);

  // December carries the corrections: November's frozen lines plus them equal its live
  // figures, team by team.
  auto dec = *ledger().Chargeback(dec_, false);
  auto corrections = Booked(dec, "2026-11", true);
  std::map<std::string, Money> sum = booked;
  for (const auto& [team, m] : corrections) sum[team] += m;
  std::erase_if(sum, [](const auto& kv) { return kv.second == Money(); });
  EXPECT_EQ(sum, live);
  EXPECT_LT(corrections.at("recsys"), Money());  // recsys is refunded what it was charged
  EXPECT_EQ(corrections.at("recsys"), Money() - booked.at("recsys"));
  // The month's total is its own cost (none yet) plus the corrections.
  Money correction_total;
  for (const ChargebackLine& l : dec.lines) {
    if (!l.correction_for.empty()) correction_total += l.direct_cost;
  }
  EXPECT_EQ(dec.total, ledger().Usage(dec_, {Dimension::kTeam})->total.total_cost() + correction_total);

  // Closing December freezes the corrections with it: January owes November nothing more.
  t_.clock().Set(jan_.begin_ms + kMsPerHour);
  const std::string dec_open = Lines(dec_);
  ASSERT_TRUE(ledger().ClosePeriod("2026-12", "finance").ok());
  EXPECT_EQ(Lines(dec_), dec_open);
  EXPECT_TRUE(Booked(*ledger().Chargeback(jan_, false), "2026-11", true).empty());
  // A second change to November: January books only that one.
  ASSERT_TRUE(ledger().SetPrices(Price("5.00")).ok());
  auto jan = *ledger().Chargeback(jan_, false);
  auto second = Booked(jan, "2026-11", true);
  ASSERT_EQ(second.size(), 1u);
  std::map<std::string, Money> before_jan = booked;
  for (const auto& [team, m] : corrections) before_jan[team] += m;
  Money live_nlp = LiveByTeam(ledger(), nov_).at("nlp");
  EXPECT_EQ(second.at("nlp"), live_nlp - before_jan.at("nlp"));
  EXPECT_GT(second.at("nlp"), Money());  // 4.00 -> 5.00 per hour
}

TEST_F(BillingPeriodsTest, MonthsCloseOnceInOrderAfterTheyEnd) {
  EXPECT_EQ(ledger().ClosePeriod("2026-12", "x").status().code(), StatusCode::kFailedPrecondition);  // not over
  EXPECT_THAT(ledger().ClosePeriod("2026-12", "x").status().message(), HasSubstr("not over"));
  ASSERT_TRUE(ledger().ClosePeriod("2026-11", "x").ok());
  EXPECT_EQ(ledger().ClosePeriod("2026-11", "y").status().code(), StatusCode::kAlreadyExists);
  auto earlier = ledger().ClosePeriod("2026-10", "x");
  EXPECT_EQ(earlier.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(earlier.status().message(), HasSubstr("close in order"));
  EXPECT_FALSE(ledger().ClosePeriod("2026-13", "x").ok());
  auto list = *ledger().ClosedPeriods();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].month, "2026-11");
  // A week that overlaps the closed month is live, and says so.
  auto week = *ledger().Chargeback({testing::kBaseMs, testing::kBaseMs + 7 * kMsPerDay}, false);
  EXPECT_FALSE(week.closed.has_value());
  EXPECT_EQ(week.overlaps_closed, std::vector<std::string>{"2026-11"});
}

}  // namespace
}  // namespace gpuledger::ledger
