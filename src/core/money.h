// Money is an integer count of micro-units (1e-6) of the ledger's one currency, never a
// floating-point number.
//
// Rounding rule. Costs are computed exactly as rational numbers
//   cost = duration_ms x capacity_share x price_per_gpu_hour / 3,600,000 ms
// and accumulated exactly (CostNumerator, 128-bit). A figure is rounded to micro-units
// only when it is reported, once per table: the table's total is rounded half up, and
// its cells are apportioned by the largest-remainder method (ties go to the earlier
// cell), so every row, column and the total add up to the micro-unit.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <span>
#include <vector>

#include "core/status.h"

namespace gpuledger {

class Money {
 public:
  static constexpr int64_t kMicrosPerUnit = 1'000'000;

  constexpr Money() = default;
  static constexpr Money FromMicros(int64_t micros) { return Money(micros); }
  static constexpr Money FromUnits(int64_t units) { return Money(units * kMicrosPerUnit); }

  // Parses a decimal amount such as "2.49", "-0.000001" or "1200". At most six
  // fractional digits; no exponent, no grouping. The error names the text.
  static Result<Money> Parse(std::string_view text);

  constexpr int64_t micros() const { return micros_; }
  // Exact decimal form with six fractional digits: "1234.500000".
  std::string ToString() const;
  // Rounded (half up) to cents with thousands separators, for people: "1,234.50".
  std::string ToDisplay() const;

  constexpr Money operator+(Money o) const { return Money(micros_ + o.micros_); }
  constexpr Money operator-(Money o) const { return Money(micros_ - o.micros_); }
  constexpr Money& operator+=(Money o) {
    micros_ += o.micros_;
    return *this;
  }
  constexpr Money& operator-=(Money o) {
    micros_ -= o.micros_;
    return *this;
  }
  constexpr auto operator<=>(const Money&) const = default;

 private:
  constexpr explicit Money(int64_t micros) : micros_(micros) {}
  int64_t micros_ = 0;
};

// Capacity shares: a full GPU is kShareScale ticks; a MIG slice of 3/7 is 360 ticks.
// 840 is divisible by every denominator 1..8, so all MIG shares are exact integers.
inline constexpr int64_t kShareScale = 840;

// An exact cost in units of micro / kCostDenominator. One GPU (kShareScale ticks) for
// one millisecond at P micro-units per hour adds P x kShareScale.
__extension__ using CostNumerator = __int128;  // GCC and Clang both provide it
inline constexpr int64_t kCostDenominator = 3'600'000LL * kShareScale;

inline CostNumerator CostOf(int64_t duration_ms, int64_t share_ticks, Money price_per_gpu_hour) {
  return static_cast<CostNumerator>(duration_ms) * share_ticks * price_per_gpu_hour.micros();
}

// Rounds an exact non-negative cost to micro-units, half up.
Money RoundCost(CostNumerator exact);

// Splits round(sum(parts)) into one Money per part by the largest-remainder method. The
// results add up exactly to RoundCost(sum). REQUIRES: every part >= 0.
std::vector<Money> ApportionCosts(const std::vector<CostNumerator>& parts);

// Splits an integer `total` in proportion to non-negative `weights` by the largest
// remainder method; the results add up to `total` exactly. All-zero (or empty-sum)
// weights split evenly. REQUIRES: total >= 0, !weights.empty().
std::vector<int64_t> ApportionInteger(int64_t total, const std::vector<double>& weights);

// Splits `total` in proportion to `weights` exactly (largest remainder, ties to the
// earlier weight); the parts add up to `total`. All-zero weights give all-zero parts
// except that nothing can be split: callers check for that case. REQUIRES: total >= 0,
// weights >= 0.
std::vector<Money> SplitMoney(Money total, const std::vector<Money>& weights);
// The same with exact costs as weights: a rounded cost split over the exact costs it was
// rounded from (an idle cost over its causes priced at their own GPUs' prices).
// REQUIRES: total >= 0, weights >= 0, total x each weight < 2^126.
std::vector<Money> SplitMoney(Money total, const std::vector<CostNumerator>& weights);
// The same rule into `out` (out.size() == weights.size()), using `scratch` (the same size)
// for the remainders: allocation-free for callers that split millions of small sets.
void SplitMoneyInto(Money total, std::span<const CostNumerator> weights, std::span<CostNumerator> scratch,
                    std::span<Money> out);

}  // namespace gpuledger
