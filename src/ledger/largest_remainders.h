// The largest-remainder step of the ledger's rounding (docs/ARCHITECTURE.md, "Usage";
// core/money.h's ApportionCosts): which `n` of a report's remainders get a micro-unit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace gpuledger::ledger {

// One floored cost's remainder, below 2^32 (kCostDenominator), what it belongs to, and
// the first part of its tie-break key: a dense rank (the ledger's: its device's place in
// uuid order).
struct Remainder {
  uint32_t rem;
  uint32_t atom;
  uint32_t rank;
  uint8_t bucket;
};

// Calls `give(r)` once for each of the `n` largest of `rems` by remainder, ties to the
// smallest (r.rank, later_key(r)): a total order on `rems` (later_key's type ordered by <,
// distinct for distinct remainders of one rank). Every r.rank is below `ranks`.
// REQUIRES: n <= rems.size().
//
// Equal remainders are common: in a month of a 1,000-GPU fleet grouped by hour, 547,295 of
// 750,974 equal the one the selection stops at (whole busy hours at one price have one
// remainder). So nothing is sorted by key: the passes read `rems` in order; the n-th largest
// remainder is found by a histogram of its top 16 bits, the ties at it are counted by rank
// to find the rank they stop at, and only that rank's ties are ordered by later_key, which
// reads what they belong to.
template <class LaterKey, class Give>
void ForLargestRemainders(const std::vector<Remainder>& rems, size_t n, size_t ranks,
                          LaterKey later_key, Give give) {
  if (n == 0) return;
  // The n-th largest remainder: its top 16 bits first, then its value among those.
  std::vector<uint32_t> count(size_t{1} << 16);
  for (const Remainder& r : rems) ++count[r.rem >> 16];
  size_t top = count.size() - 1, above_top = 0;
  while (above_top + count[top] < n) above_top += count[top--];
  std::vector<uint32_t> in_top;
  in_top.reserve(count[top]);
  for (const Remainder& r : rems) {
    if (r.rem >> 16 == top) in_top.push_back(r.rem);
  }
  const size_t k = n - above_top;  // from 1 to count[top]
  std::nth_element(in_top.begin(), in_top.begin() + static_cast<std::ptrdiff_t>(k - 1),
                   in_top.end(), std::greater<>());
  const uint32_t threshold = in_top[k - 1];
  // Those above it, and the ties at it counted by rank.
  std::vector<uint32_t> ties_of_rank(ranks);
  size_t above = 0;
  for (const Remainder& r : rems) {
    if (r.rem > threshold) {
      give(r);
      ++above;
    } else if (r.rem == threshold) {
      ++ties_of_rank[r.rank];
    }
  }
  // above < n <= above + the ties, by what the n-th largest is: the ties of the ranks
  // before `last` are all wanted, and the first few of rank `last`.
  const size_t wanted = n - above;
  size_t last = 0, before = 0;
  while (before + ties_of_rank[last] < wanted) before += ties_of_rank[last++];
  std::vector<Remainder> of_last;
  for (const Remainder& r : rems) {
    if (r.rem != threshold || r.rank > last) continue;
    if (r.rank < last) {
      give(r);
    } else {
      of_last.push_back(r);
    }
  }
  const auto more = static_cast<std::ptrdiff_t>(wanted - before);
  std::nth_element(
      of_last.begin(), of_last.begin() + more - 1, of_last.end(),
      [&](const Remainder& x, const Remainder& y) { return later_key(x) < later_key(y); });
  for (std::ptrdiff_t i = 0; i < more; ++i) give(of_last[static_cast<size_t>(i)]);
}

}  // namespace gpuledger::ledger
