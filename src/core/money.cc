#include "core/money.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace gpuledger {

Result<Money> Money::Parse(std::string_view text) {
  auto bad = [&](const char* why) {
    return InvalidArgument(fmt::format("amount \"{}\": {}", text, why));
  };
  size_t pos = 0;
  bool negative = false;
  if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) {
    negative = text[pos] == '-';
    ++pos;
  }
  int64_t units = 0;
  size_t int_digits = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    if (units > (INT64_MAX / kMicrosPerUnit) / 10) return bad("too large");
    units = units * 10 + (text[pos] - '0');
    ++pos;
    ++int_digits;
  }
  int64_t frac = 0;
  size_t frac_digits = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (++frac_digits > 6) return bad("more than six decimal places");
      frac = frac * 10 + (text[pos] - '0');
      ++pos;
    }
  }
  if (int_digits + frac_digits == 0) return bad("not a number");
  if (pos != text.size()) return bad("unexpected characters (want a plain decimal like 2.49)");
  for (size_t i = frac_digits; i < 6; ++i) frac *= 10;
  int64_t micros = units * kMicrosPerUnit + frac;
  return Money::FromMicros(negative ? -micros : micros);
}

std::string Money::ToString() const {
  int64_t abs = micros_ < 0 ? -micros_ : micros_;
  return fmt::format("{}{}.{:06}", micros_ < 0 ? "-" : "", abs / kMicrosPerUnit,
                     abs % kMicrosPerUnit);
}

std::string Money::ToDisplay() const {
  int64_t abs = micros_ < 0 ? -micros_ : micros_;
  int64_t cents = (abs + 5'000) / 10'000;
  std::string whole = std::to_string(cents / 100);
  std::string grouped;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) grouped += ',';
    grouped += whole[i];
  }
  return fmt::format("{}{}.{:02}", micros_ < 0 && cents != 0 ? "-" : "", grouped, cents % 100);
}

Money RoundCost(CostNumerator exact) {
  return Money::FromMicros(static_cast<int64_t>((exact + kCostDenominator / 2) / kCostDenominator));
}

std::vector<Money> ApportionCosts(const std::vector<CostNumerator>& parts) {
  CostNumerator sum = 0;
  std::vector<Money> out(parts.size());
  std::vector<CostNumerator> rem(parts.size());
  int64_t floor_sum = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    sum += parts[i];
    int64_t f = static_cast<int64_t>(parts[i] / kCostDenominator);
    rem[i] = parts[i] % kCostDenominator;
    out[i] = Money::FromMicros(f);
    floor_sum += f;
  }
  int64_t extra = RoundCost(sum).micros() - floor_sum;
  if (extra <= 0) return out;
  // The `extra` largest remainders, ties to the earlier part: a selection, not a sort (a
  // report may have millions of parts).
  std::vector<size_t> order;
  order.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    if (rem[i] != 0) order.push_back(i);
  }
  auto before = [&](size_t a, size_t b) { return rem[a] != rem[b] ? rem[a] > rem[b] : a < b; };
  size_t n = std::min(order.size(), static_cast<size_t>(extra));
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(), before);
  for (size_t k = 0; k < n; ++k) out[order[k]] += Money::FromMicros(1);
  return out;
}

std::vector<int64_t> ApportionInteger(int64_t total, const std::vector<double>& weights) {
  std::vector<int64_t> out(weights.size(), 0);
  if (weights.empty()) return out;
  double wsum = 0;
  for (double w : weights) wsum += std::isfinite(w) && w > 0 ? w : 0;
  std::vector<double> quota(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    double w = std::isfinite(weights[i]) && weights[i] > 0 ? weights[i] : 0;
    quota[i] = wsum > 0 ? static_cast<double>(total) * (w / wsum)
                        : static_cast<double>(total) / static_cast<double>(weights.size());
  }
  int64_t assigned = 0;
  std::vector<double> rem(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) {
    out[i] = std::min<int64_t>(static_cast<int64_t>(std::floor(quota[i])), total - assigned);
    rem[i] = quota[i] - static_cast<double>(out[i]);
    assigned += out[i];
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  for (size_t k = 0; assigned < total; k = (k + 1) % order.size()) {
    ++out[order[k]];
    ++assigned;
  }
  return out;
}

namespace {

// Largest-remainder split of `total` by exact weights (ties to the earlier weight).
std::vector<Money> SplitByWeights(Money total, const std::vector<CostNumerator>& weights) {
  std::vector<Money> out(weights.size());
  std::vector<CostNumerator> rem(weights.size());
  SplitMoneyInto(total, weights, rem, out);
  return out;
}

}  // namespace

std::vector<Money> SplitMoney(Money total, const std::vector<Money>& weights) {
  std::vector<CostNumerator> exact;
  exact.reserve(weights.size());
  for (Money w : weights) exact.push_back(w.micros());
  return SplitByWeights(total, exact);
}

std::vector<Money> SplitMoney(Money total, const std::vector<CostNumerator>& weights) {
  return SplitByWeights(total, weights);
}

void SplitMoneyInto(Money total, std::span<const CostNumerator> weights, std::span<CostNumerator> rem,
                    std::span<Money> out) {
  CostNumerator wsum = 0;
  size_t nonzero = 0, only = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    wsum += weights[i];
    if (weights[i] != 0) {
      ++nonzero;
      only = i;
    }
  }
  for (Money& m : out) m = Money();
  if (wsum == 0) return;
  if (nonzero == 1 && weights[only] > 0) {  // all of it: what the division below would give
    out[only] = total;
    return;
  }
  int64_t assigned = 0;
  // The products fit 64 bits when the weights are below 2^63 / total (an hour's idle
  // cost over its causes always is): 64-bit division, the same quotients.
  bool narrow = total.micros() >= 0 && wsum > 0 && wsum <= std::numeric_limits<int64_t>::max();
  const int64_t limit = std::numeric_limits<int64_t>::max() / std::max<int64_t>(total.micros(), 1);
  for (size_t i = 0; narrow && i < weights.size(); ++i) narrow = weights[i] >= 0 && weights[i] <= limit;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (narrow) {
      const int64_t num = total.micros() * static_cast<int64_t>(weights[i]), den = static_cast<int64_t>(wsum);
      out[i] = Money::FromMicros(num / den);
      rem[i] = num % den;
    } else {
      CostNumerator num = static_cast<CostNumerator>(total.micros()) * weights[i];
      out[i] = Money::FromMicros(static_cast<int64_t>(num / wsum));
      rem[i] = num % wsum;
    }
    assigned += out[i].micros();
  }
  // Fewer than weights.size() micro-units are left: one each to the largest remainders,
  // ties to the earlier weight. A few weights are scanned; many are sorted.
  if (weights.size() <= 16) {
    for (; assigned < total.micros(); ++assigned) {
      size_t best = 0;
      for (size_t i = 1; i < weights.size(); ++i) {
        if (rem[i] > rem[best]) best = i;
      }
      out[best] += Money::FromMicros(1);
      rem[best] = -1;
    }
    return;
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  for (size_t k = 0; assigned < total.micros(); ++k, ++assigned) out[order[k]] += Money::FromMicros(1);
}

}  // namespace gpuledger
