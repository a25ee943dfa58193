// ForLargestRemainders against the rule written out plainly: sort every remainder by
// (remainder descending, rank, later key) and take the first n.
#include "ledger/largest_remainders.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>
#include <utility>

namespace gpuledger::ledger {
namespace {

TEST(LargestRemaindersTest, GivesTheNLargestTiesToTheSmallestKeyAsAFullSortDoes) {
  std::mt19937_64 rng(20261207);
  for (int round = 0; round < 600; ++round) {
    const size_t count = 1 + rng() % 3000;
    // Few distinct remainders (most tie, as a month of whole busy hours does), or many;
    // values spread over the whole range, or packed in one bucket of their top 16 bits.
    const uint32_t distinct = static_cast<uint32_t>(1 + rng() % (round % 3 == 0   ? 3
                                                                 : round % 3 == 1 ? 40
                                                                                  : 5000));
    const bool packed = round % 5 == 0;
    std::vector<uint32_t> values(distinct);
    for (uint32_t& v : values) {
      v = packed ? 0x5a1f0000u + static_cast<uint32_t>(rng() % 0x10000)
                 : static_cast<uint32_t>(rng() % 3'600'000'000u) + 1;
    }
    const size_t ranks = 1 + rng() % 50;
    std::vector<Remainder> rems(count);
    for (size_t i = 0; i < count; ++i) {
      rems[i] = {values[rng() % distinct], static_cast<uint32_t>(i / 5),
                 static_cast<uint32_t>(rng() % ranks), static_cast<uint8_t>(i % 5)};
    }
    // The later key: the atoms in an order that is not their place.
    std::vector<uint32_t> order(count / 5 + 1);
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    auto later_key = [&](const Remainder& r) { return std::make_tuple(order[r.atom], r.bucket); };
    const size_t n = round % 7 == 0 ? count : rng() % (count + 1);

    std::vector<Remainder> sorted = rems;
    std::sort(sorted.begin(), sorted.end(), [&](const Remainder& x, const Remainder& y) {
      return std::make_tuple(~x.rem, x.rank, later_key(x)) <
             std::make_tuple(~y.rem, y.rank, later_key(y));
    });
    std::set<std::pair<uint32_t, uint8_t>> expected, got;
    for (size_t k = 0; k < n; ++k) expected.insert({sorted[k].atom, sorted[k].bucket});
    size_t calls = 0;
    ForLargestRemainders(rems, n, ranks, later_key, [&](const Remainder& r) {
      ++calls;
      got.insert({r.atom, r.bucket});
    });
    ASSERT_EQ(calls, n) << "round " << round << ": each chosen once";
    ASSERT_EQ(got, expected) << "round " << round << ", " << count << " remainders of " << distinct
                             << " values in " << ranks << " ranks, n " << n;
  }
}

TEST(LargestRemaindersTest, NoneWantedGivesNone) {
  std::vector<Remainder> rems = {{5, 0, 0, 0}, {7, 1, 0, 0}};
  auto key = [](const Remainder& r) { return r.atom; };
  ForLargestRemainders(rems, 0, 1, key, [](const Remainder&) { FAIL(); });
  ForLargestRemainders(std::vector<Remainder>(), 0, 1, key, [](const Remainder&) { FAIL(); });
}

}  // namespace
}  // namespace gpuledger::ledger
