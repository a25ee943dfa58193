#include "core/amortization.h"

#include <gtest/gtest.h>

#include "core/price_book.h"

namespace gpuledger {
namespace {

TimeRange Term(const char* from, const char* to) { return {*ParseTime(from), *ParseTime(to)}; }

// Hand-computed: the purchase over the term's GPU-hours, rounded half up to the micro-unit.
TEST(AmortizationTest, SpreadsAPurchaseOverEveryGpuHourOfItsTerm) {
  // One GPU for 2026 (365 days, 8,760 hours): 21,812.40 / 8,760 = 2.49 exactly.
  EXPECT_EQ(AmortizedPerGpuHour(*Money::Parse("21812.40"), 1, Term("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"))
                ->ToString(),
            "2.490000");
  // Eight GPUs for three years with a leap day: 210,432 GPU-hours, 2.3760644... -> 2.376064.
  EXPECT_EQ(AmortizedPerGpuHour(*Money::Parse("500000"), 8, Term("2026-01-01T00:00:00Z", "2029-01-01T00:00:00Z"))
                ->ToString(),
            "2.376064");
  // 1,000 over a 30-day month (720 hours): 1.3888... -> 1.388889 (half up).
  EXPECT_EQ(AmortizedPerGpuHour(*Money::Parse("1000"), 1, Term("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"))
                ->ToString(),
            "1.388889");
  // 0.000001 over two hours: half a micro-unit per hour rounds up to one.
  EXPECT_EQ(AmortizedPerGpuHour(Money::FromMicros(1), 1, Term("2026-11-01T00:00:00Z", "2026-11-01T02:00:00Z"))
                ->micros(),
            1);
}

TEST(AmortizationTest, RefusesWhatCannotBeSpread) {
  const TimeRange month = Term("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z");
  EXPECT_EQ(AmortizedPerGpuHour(*Money::Parse("-1"), 1, month).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(AmortizedPerGpuHour(*Money::Parse("1"), 0, month).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(AmortizedPerGpuHour(*Money::Parse("1"), 1, {month.begin_ms, kForever}).ok());
  EXPECT_FALSE(AmortizedPerGpuHour(*Money::Parse("1"), 1, {month.begin_ms + 1, month.end_ms}).ok());
  EXPECT_FALSE(AmortizedPerGpuHour(*Money::Parse("1"), 1, {month.end_ms, month.begin_ms}).ok());
}

}  // namespace
}  // namespace gpuledger
