// Burn rates and the multiwindow alerts, held to their definitions: a fake source of
// per-minute good and total counts, and an oracle that decides each alert with integer
// arithmetic from the raw minutes (no burn rate, no division).
#include "objectives/burn_rate.h"

#include <gtest/gtest.h>

#include <random>

#include "objectives/evaluate.h"

namespace gpuledger::objectives {
namespace {

TEST(BurnRateTest, ARatioObjectiveBurnsItsErrorBudget) {
  // 95% promised, 90% delivered: twice the allowed 5% bad.
  Tally t = RatioTally(90, 100, 0.95);
  EXPECT_TRUE(t.has_data);
  EXPECT_DOUBLE_EQ(t.sli, 0.9);
  EXPECT_NEAR(t.BurnRate(), 2.0, 1e-12);
  // All good burns nothing; nothing at all is no data, and burns nothing either.
  EXPECT_EQ(RatioTally(100, 100, 0.95).BurnRate(), 0);
  EXPECT_FALSE(RatioTally(0, 0, 0.95).has_data);
  EXPECT_EQ(RatioTally(0, 0, 0.95).BurnRate(), 0);
}

TEST(BurnRateTest, ABudgetBurnsItsMonthlyShare) {
  // 1,000.00 a 30-day month, 100% of it allowed: a day may spend 33.33; 66.67 is 2x.
  int64_t month = 30 * kMsPerDay;
  Tally t = BudgetTally(66'666'667, kMsPerDay, 1'000'000'000, 1.0, month);
  EXPECT_NEAR(t.BurnRate(), 2.0, 1e-6);
  // Holding the team to 50% of its budget doubles the burn of the same spend.
  EXPECT_NEAR(BudgetTally(66'666'667, kMsPerDay, 1'000'000'000, 0.5, month).BurnRate(), 4.0, 1e-6);
}

TEST(BurnRateTest, TheWindowsAreSlothsAndPyrrasDefaults) {
  ASSERT_EQ(kBurnWindows.size(), 4u);
  EXPECT_EQ(BurnWindowName(kBurnWindows[0]), "1h/5m");
  EXPECT_DOUBLE_EQ(kBurnWindows[0].factor, 14.4);
  EXPECT_EQ(BurnWindowName(kBurnWindows[1]), "6h/30m");
  EXPECT_DOUBLE_EQ(kBurnWindows[1].factor, 6);
  EXPECT_EQ(BurnWindowName(kBurnWindows[2]), "1d/2h");
  EXPECT_DOUBLE_EQ(kBurnWindows[2].factor, 3);
  EXPECT_EQ(kBurnWindows[2].severity, Severity::kTicket);
  EXPECT_EQ(BurnWindowName(kBurnWindows[3]), "3d/6h");
  EXPECT_DOUBLE_EQ(kBurnWindows[3].factor, 1);
  // A 30-day budget at 14.4x is gone in 50 hours, at 1x in 30 days: 1h/5m spends 2% of it.
  EXPECT_NEAR(14.4 * 1.0 / (30 * 24), 0.02, 1e-12);
}

// Minutes of good and total counts ending at `end`: what a fleet would report.
class MinuteSource final : public ObjectiveSource {
 public:
  MinuteSource(int64_t end_ms, std::vector<int64_t> good, std::vector<int64_t> total)
      : end_ms_(end_ms), good_(std::move(good)), total_(std::move(total)) {}
  Result<Measured> Measure(const ObjectiveSpec&, const TimeRange& window) override {
    Measured m;
    for (size_t i = 0; i < good_.size(); ++i) {
      int64_t minute = end_ms_ - static_cast<int64_t>(good_.size() - i) * kMsPerMinute;
      if (!window.Contains(minute)) continue;
      m.good += static_cast<double>(good_[i]);
      m.total += static_cast<double>(total_[i]);
    }
    m.covered_ms = window.length_ms();
    return m;
  }
  Result<AvailabilityReport> Availability(const ObjectiveSpec&, const TimeRange& window) override {
    return AvailabilityReport{.window = window};
  }

 private:
  int64_t end_ms_;
  std::vector<int64_t> good_, total_;
};

TEST(BurnRateTest, AlertsFireExactlyWhenBothWindowsBurnTheirFactor) {
  std::mt19937_64 rng(20261201);
  const int64_t end = 100 * kMsPerDay;
  const int64_t minutes = 4 * 24 * 60;
  int fired = 0, quiet = 0;
  for (int trial = 0; trial < 200; ++trial) {
    // Targets in per-mille so that the oracle stays in integers: 900..999.
    int64_t target_milli = 900 + static_cast<int64_t>(rng() % 100);
    ObjectiveSpec spec{.name = "random", .kind = ObjectiveKind::kAvailability, .target = static_cast<double>(target_milli) / 1000.0,
                       .window_ms = 3 * kMsPerDay};
    std::vector<int64_t> good(minutes), total(minutes);
    // Quiet stretches and incidents of random length and depth.
    int64_t bad_per_mille = 0;
    for (int64_t i = 0; i < minutes; ++i) {
      if (rng() % 500 == 0) bad_per_mille = static_cast<int64_t>(rng() % 4 == 0 ? rng() % 1000 : rng() % 20);
      total[i] = 1000;
      good[i] = 1000 - bad_per_mille;
    }
    MinuteSource source(end, good, total);
    auto st = Evaluate(spec, source, end);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    for (const AlertStatus& a : st->alerts) {
      // Oracle: bad x 1000 >= factor x (1000 - target_milli) x total, per window, in
      // tenths of the factor (14.4 -> 144) to stay exact.
      auto burns = [&](int64_t length_ms) {
        CostNumerator bad = 0, all = 0;
        for (int64_t i = minutes - length_ms / kMsPerMinute; i < minutes; ++i) {
          bad += total[i] - good[i];
          all += total[i];
        }
        auto factor_tenths = static_cast<int64_t>(a.window.factor * 10 + 0.5);
        return bad * 1000 * 10 >= static_cast<CostNumerator>(factor_tenths) * (1000 - target_milli) * all;
      };
      bool want = burns(a.window.long_ms) && burns(a.window.short_ms);
      EXPECT_EQ(a.firing, want) << "trial " << trial << " " << BurnWindowName(a.window) << " long "
                                << a.long_burn << " short " << a.short_burn;
      (want ? fired : quiet)++;
    }
  }
  // The random fleets exercise both answers.
  EXPECT_GT(fired, 20);
  EXPECT_GT(quiet, 20);
}

TEST(BurnRateTest, AFactorBeyondTheObjectivesReachIsMarkedUnattainable) {
  // 65% utilization: nothing active at all burns 1 / 0.35 = 2.86x, so only 1x can fire.
  ObjectiveSpec spec{.name = "u", .kind = ObjectiveKind::kAvailability, .target = 0.65, .window_ms = kMsPerDay};
  MinuteSource source(kMsPerDay * 10, std::vector<int64_t>(4 * 24 * 60, 0), std::vector<int64_t>(4 * 24 * 60, 10));
  auto st = Evaluate(spec, source, kMsPerDay * 10);
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->alerts[0].attainable);
  EXPECT_FALSE(st->alerts[1].attainable);
  EXPECT_FALSE(st->alerts[2].attainable);
  EXPECT_TRUE(st->alerts[3].attainable);
  EXPECT_TRUE(st->alerts[3].firing);
  EXPECT_NEAR(st->alerts[3].long_burn, 1 / 0.35, 1e-9);
  EXPECT_FALSE(st->met);
  EXPECT_NEAR(st->budget_left, 1 - 1 / 0.35, 1e-9);
}

}  // namespace
}  // namespace gpuledger::objectives
