// The batch-id record's pure parts (store/batch_ids.h): how an id is keyed, when a stream
// folds, and the runs a fold leaves, against a set of every folded sequence.
#include "store/batch_ids.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

namespace gpuledger::store {
namespace {

TEST(BatchIdsTest, AnIdIsKeyedByStreamAndSequenceOrWhole) {
  auto key = [](std::string_view id) {
    BatchKey k = KeyOfBatchId(id);
    return k.stream + "/" + std::to_string(k.seq);
  };
  EXPECT_EQ(key("trn-07-18c5a3b2f00-17"), "trn-07-18c5a3b2f00/17");
  EXPECT_EQ(key("a-0"), "a/0");
  EXPECT_EQ(key("a-123456789012345678"), "a/123456789012345678");  // 18 digits
  for (std::string_view whole : {"a-1234567890123456789", "x-007", "a-00", "-5", "a-", "19", "trn-07-2026-11-23T08:00:00Z",
                                 "a-1x", "a- 1", ""}) {
    EXPECT_EQ(key(whole), std::string(whole) + "/-1") << whole;
  }
}

TEST(BatchIdsTest, AStreamFoldsEveryFoldEverySequencesWhatIsKeptBehind) {
  EXPECT_EQ(FoldCutAfter(0), std::nullopt);
  EXPECT_EQ(FoldCutAfter(kBatchIdsKept - kFoldEvery), std::nullopt);
  EXPECT_EQ(FoldCutAfter(kBatchIdsKept), std::optional<int64_t>(0));
  EXPECT_EQ(FoldCutAfter(kBatchIdsKept + 1), std::nullopt);
  EXPECT_EQ(FoldCutAfter(kBatchIdsKept + kFoldEvery), std::optional<int64_t>(kFoldEvery));
  EXPECT_EQ(FoldCutAfter(-1), std::nullopt);
}

// Runs as a backend keeps them: by first sequence.
class MapRanges : public StreamRanges {
 public:
  Result<std::optional<SeqRange>> AtOrBefore(int64_t seq) override {
    auto it = runs.upper_bound(seq);
    if (it == runs.begin()) return std::optional<SeqRange>();
    --it;
    return std::optional<SeqRange>(SeqRange{it->first, it->second});
  }
  Result<std::optional<SeqRange>> After(int64_t seq) override {
    auto it = runs.upper_bound(seq);
    if (it == runs.end()) return std::optional<SeqRange>();
    return std::optional<SeqRange>(SeqRange{it->first, it->second});
  }
  Status Put(const SeqRange& r) override {
    auto [it, added] = runs.try_emplace(r.first, r.last);
    if (!added) it->second = std::max(it->second, r.last);
    return Status::Ok();
  }
  Status Erase(int64_t first) override {
    runs.erase(first);
    return Status::Ok();
  }
  std::map<int64_t, int64_t> runs;
};

// Folds of random sequences, in random order and chunks, gaps filled late: the runs hold
// exactly the sequences folded, apart and not touching (each the longest it can be), and
// IsFolded says so of every sequence around them.
TEST(BatchIdsTest, RunsHoldExactlyTheFoldedSequencesAsFewRunsAsTheyCan) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const int64_t n = 1 + static_cast<int64_t>(rng() % 300);
    std::vector<int64_t> seqs;
    for (int64_t s = 0; s < n; ++s) {
      if (rng() % 4 != 0) seqs.push_back(s);  // some never come
    }
    std::shuffle(seqs.begin(), seqs.end(), rng);
    MapRanges ranges;
    std::set<int64_t> folded;
    for (size_t i = 0; i < seqs.size();) {
      size_t chunk = 1 + rng() % 40;
      std::vector<int64_t> part(seqs.begin() + static_cast<long>(i),
                                seqs.begin() + static_cast<long>(std::min(seqs.size(), i + chunk)));
      i += part.size();
      folded.insert(part.begin(), part.end());
      ASSERT_TRUE(AddToRanges(part, ranges).ok());
      // The runs are the folded set, cut where a sequence is missing.
      std::map<int64_t, int64_t> expected;
      for (int64_t s : folded) {
        if (!expected.empty() && std::prev(expected.end())->second == s - 1) {
          std::prev(expected.end())->second = s;
        } else {
          expected[s] = s;
        }
      }
      ASSERT_EQ(ranges.runs, expected) << "seed " << seed;
    }
    for (int64_t s = -2; s <= n + 1; ++s) {
      auto f = IsFolded(ranges, s);
      ASSERT_TRUE(f.ok());
      EXPECT_EQ(*f, folded.contains(s)) << "seed " << seed << " seq " << s;
    }
  }
}

}  // namespace
}  // namespace gpuledger::store
