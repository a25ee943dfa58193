#include "core/money.h"

#include <gtest/gtest.h>

#include <random>

namespace gpuledger {
namespace {

TEST(MoneyTest, ParsesDecimalsExactly) {
  EXPECT_EQ(Money::Parse("2.49")->micros(), 2'490'000);
  EXPECT_EQ(Money::Parse("1200")->micros(), 1'200'000'000);
  EXPECT_EQ(Money::Parse("-0.000001")->micros(), -1);
  EXPECT_EQ(Money::Parse(".5")->micros(), 500'000);
  for (const char* bad : {"", "abc", "1.0000001", "1e3", "1,000", "--1", "."}) {
    EXPECT_FALSE(Money::Parse(bad).ok()) << bad;
  }
}

TEST(MoneyTest, FormatsExactAndForPeople) {
  EXPECT_EQ(Money::FromMicros(1'234'500'000).ToString(), "1234.500000");
  EXPECT_EQ(Money::FromMicros(-1).ToString(), "-0.000001");
  EXPECT_EQ(Money::FromMicros(1'234'567'890'000).ToDisplay(), "1,234,567.89");
  EXPECT_EQ(Money::FromMicros(4'995'000).ToDisplay(), "5.00");
  EXPECT_EQ(Money::FromMicros(4'994'999).ToDisplay(), "4.99");
}

TEST(MoneyTest, CostOfOneGpuHourIsThePrice) {
  Money price = *Money::Parse("3.10");
  EXPECT_EQ(RoundCost(CostOf(3'600'000, kShareScale, price)), price);
}

TEST(MoneyTest, RoundsHalfUp) {
  EXPECT_EQ(RoundCost(kCostDenominator / 2).micros(), 1);
  EXPECT_EQ(RoundCost(kCostDenominator / 2 - 1).micros(), 0);
}

TEST(MoneyTest, ApportionedCostsAddUpToTheRoundedTotal) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<CostNumerator> parts(1 + rng() % 20);
    CostNumerator sum = 0;
    for (auto& p : parts) {
      p = static_cast<CostNumerator>(rng() % (kCostDenominator * 50));
      sum += p;
    }
    auto shares = ApportionCosts(parts);
    Money total;
    for (size_t i = 0; i < parts.size(); ++i) {
      total += shares[i];
      // Each share is its exact value rounded down or up, never further.
      EXPECT_GE(shares[i].micros(), static_cast<int64_t>(parts[i] / kCostDenominator));
      EXPECT_LE(shares[i].micros(), static_cast<int64_t>(parts[i] / kCostDenominator) + 1);
    }
    EXPECT_EQ(total, RoundCost(sum));
  }
}

TEST(MoneyTest, ApportionedIntegersAddUpAndFollowWeights) {
  EXPECT_EQ(ApportionInteger(10, {1, 1, 1}), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(ApportionInteger(10, {0, 0}), (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(ApportionInteger(7, {3, 0, 1}), (std::vector<int64_t>{5, 0, 2}));
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<double> w(1 + rng() % 6);
    for (double& x : w) x = static_cast<double>(rng() % 1000) / 997.0;
    int64_t total = static_cast<int64_t>(rng() % 100000);
    int64_t sum = 0;
    for (int64_t v : ApportionInteger(total, w)) {
      EXPECT_GE(v, 0);
      sum += v;
    }
    EXPECT_EQ(sum, total);
  }
}

}  // namespace
}  // namespace gpuledger

namespace gpuledger {
namespace {

TEST(MoneyTest, SplitMoneyIsExactAndProportional) {
  auto parts = SplitMoney(Money::FromMicros(100), {Money::FromMicros(1), Money::FromMicros(1),
                                                   Money::FromMicros(1)});
  EXPECT_EQ(parts[0].micros() + parts[1].micros() + parts[2].micros(), 100);
  EXPECT_EQ(parts[0].micros(), 34);
  auto uneven = SplitMoney(Money::FromUnits(10), {Money::FromUnits(3), Money::FromUnits(1)});
  EXPECT_EQ(uneven[0], Money::FromMicros(7'500'000));
  EXPECT_EQ(uneven[1], Money::FromMicros(2'500'000));
  auto none = SplitMoney(Money::FromUnits(10), {Money(), Money()});
  EXPECT_EQ(none[0], Money());
  // One weight that holds anything takes it all, wherever it stands.
  auto one = SplitMoney(Money::FromMicros(1'234'567), {Money(), Money(), Money::FromMicros(5), Money()});
  EXPECT_EQ(one, (std::vector<Money>{Money(), Money(), Money::FromMicros(1'234'567), Money()}));
  // Weights whose products with the total pass 64 bits.
  const CostNumerator big = CostNumerator{1} << 62;
  auto wide = SplitMoney(Money::FromUnits(1'000'000), std::vector<CostNumerator>{big, big, 1});
  EXPECT_EQ(wide, (std::vector<Money>{Money::FromUnits(500'000), Money::FromUnits(500'000), Money()}));
}

}  // namespace
}  // namespace gpuledger
