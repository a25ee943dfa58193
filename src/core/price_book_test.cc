#include "core/price_book.h"

#include <gtest/gtest.h>

namespace gpuledger {
namespace {

PriceEntry Entry(std::string model, std::string pool, const char* price,
                 TimeRange valid = {0, kForever}) {
  return PriceEntry{std::move(model), std::move(pool), CapacityType::kOnDemand,
                    *Money::Parse(price), valid};
}

TEST(PriceBookTest, MostSpecificEntryWins) {
  auto book = *PriceBook::Create({Entry("*", "*", "1.00"), Entry("NVIDIA H200", "*", "4.00"),
                                  Entry("NVIDIA H200", "serving", "3.50"),
                                  Entry("*", "dev", "0.50")});
  auto at = [&](const char* model, const char* pool) {
    return book.PriceAt(model, pool, CapacityType::kOnDemand, 0)->ToString();
  };
  EXPECT_EQ(at("NVIDIA H200", "serving"), "3.500000");
  EXPECT_EQ(at("NVIDIA H200", "training"), "4.000000");
  EXPECT_EQ(at("NVIDIA A100", "dev"), "0.500000");
  EXPECT_EQ(at("NVIDIA A100", "training"), "1.000000");
  EXPECT_FALSE(book.PriceAt("NVIDIA H200", "serving", CapacityType::kSpot, 0).has_value());
}

TEST(PriceBookTest, ValidityRangesChangeThePrice) {
  auto book = *PriceBook::Create({Entry("*", "*", "2.00", {0, 10 * kMsPerHour}),
                                  Entry("*", "*", "3.00", {10 * kMsPerHour, kForever})});
  EXPECT_EQ(book.PriceAt("x", "y", CapacityType::kOnDemand, 10 * kMsPerHour - 1)->micros(),
            2'000'000);
  EXPECT_EQ(book.PriceAt("x", "y", CapacityType::kOnDemand, 10 * kMsPerHour)->micros(), 3'000'000);
}

TEST(PriceBookTest, RejectsBadEntriesNamingThem) {
  auto overlap = PriceBook::Create({Entry("*", "*", "2.00", {0, 10 * kMsPerHour}),
                                    Entry("*", "*", "3.00", {5 * kMsPerHour, kForever})});
  ASSERT_FALSE(overlap.ok());
  EXPECT_NE(overlap.status().message().find("price[1]"), std::string::npos);
  EXPECT_FALSE(PriceBook::Create({Entry("*", "*", "-1")}).ok());
  EXPECT_FALSE(PriceBook::Create({Entry("*", "*", "1", {0, 90 * kMsPerMinute})}).ok());
}

}  // namespace
}  // namespace gpuledger
