// The audit log through the ledger (ledger/actions.h): what is recorded, what is refused,
// and what a team's view of it holds.
#include "ledger/actions.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "core/testing/missing_component.h"
#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using ::testing::HasSubstr;
using testing::kBaseMs;
using testing::TempLedger;

RecordedAction Stop(std::string id, std::string team, std::string outcome, int64_t at_ms) {
  return RecordedAction{.decision_id = std::move(id), .at_ms = at_ms, .rule = "idle-notebooks", .job = "77",
                        .team = std::move(team), .action = "stop", .outcome = std::move(outcome),
                        .enforce = false, .evidence = "idle 2h, max activity 0.0%, 1 GPU",
                        .per_hour_freed = Money::FromMicros(3'500'000)};
}

TEST(AuditLog, RecordsEachDecisionOnceAndFiltersByTeamRuleAndOutcome) {
  TempLedger t;
  std::vector<RecordedAction> batch = {Stop("a", "vision", "proposed", kBaseMs), Stop("b", "speech", "taken", kBaseMs + 1),
                                       Stop("c", "vision", "skipped", kBaseMs + 2)};
  auto added = RecordActions(t.ledger(), batch);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 3u);
  added = RecordActions(t.ledger(), batch);  // the loop evaluating the same moment again
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(*added, 0u);

  auto all = Actions(t.ledger(), {});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, batch);

  auto vision = Actions(t.ledger(), {.teams = std::set<std::string>{"vision"}});
  ASSERT_TRUE(vision.ok());
  ASSERT_EQ(vision->size(), 2u);
  EXPECT_EQ((*vision)[0].decision_id, "a");
  EXPECT_EQ((*vision)[1].decision_id, "c");

  auto proposed = Actions(t.ledger(), {.outcome = "proposed"});
  ASSERT_TRUE(proposed.ok());
  ASSERT_EQ(proposed->size(), 1u);
  EXPECT_EQ((*proposed)[0].decision_id, "a");
  auto other_rule = Actions(t.ledger(), {.rule = "pending-jobs"});
  ASSERT_TRUE(other_rule.ok());
  EXPECT_TRUE(other_rule->empty());
}

TEST(AuditLog, RefusesABadDecisionNamingItsIndexAndFieldAndRecordsNone) {
  TempLedger t;
  RecordedAction bad = Stop("b", "vision", "done", kBaseMs);
  auto r = RecordActions(t.ledger(), {Stop("a", "vision", "taken", kBaseMs), bad});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("action 1 (decision \"b\"): outcome \"done\" is none of"));
  EXPECT_TRUE(Actions(t.ledger(), {})->empty());

  RecordedAction no_id = Stop("", "vision", "taken", kBaseMs);
  EXPECT_THAT(RecordActions(t.ledger(), {no_id}).status().message(), HasSubstr("decision_id is empty"));
  RecordedAction zap = Stop("z", "vision", "taken", kBaseMs);
  zap.action = "zap";
  EXPECT_THAT(RecordActions(t.ledger(), {zap}).status().message(), HasSubstr("action is unknown"));
}

TEST(AuditLog, TotalsCountOutcomesAndTheMoneyPerHourFreedAndProposed) {
  ActionTotals tot = TotalActions({Stop("a", "v", "taken", 0), Stop("b", "v", "taken", 0), Stop("c", "v", "proposed", 0),
                                   Stop("d", "v", "warned", 0), Stop("e", "v", "skipped", 0)});
  EXPECT_EQ(tot.taken, 2);
  EXPECT_EQ(tot.proposed, 1);
  EXPECT_EQ(tot.warned, 1);
  EXPECT_EQ(tot.skipped, 1);
  EXPECT_EQ(tot.freed_per_hour, Money::FromMicros(7'000'000));
  EXPECT_EQ(tot.proposed_per_hour, Money::FromMicros(3'500'000));
}

// Paging, on both stores: more decisions than the largest page (many at the same
// millisecond, as one evaluation's are), read page after page through `next`, each exactly
// once and in order; filters apply within the pages; a bad cursor or limit is refused.
class AuditLogPaging : public ::testing::TestWithParam<testing::Backend> {};

TEST_P(AuditLogPaging, PagesThroughMoreThanTheMaximumExactlyOnce) {
  if (std::string why = testing::BackendMissing(GetParam()); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  TempLedger t(GetParam());
  const int64_t total = kMaxActionsPage + 1'234;
  std::vector<RecordedAction> all;
  for (int64_t i = 0; i < total; ++i) {
    // Seven decisions a millisecond; ids out of their time order, so that the order is the
    // key's (time, then id), not the insertion's.
    all.push_back(Stop(fmt::format("d{:05}", (i * 7919) % total), i % 3 == 0 ? "vision" : "speech",
                       i % 2 == 0 ? "proposed" : "skipped", kBaseMs + i / 7));
  }
  ASSERT_TRUE(RecordActions(t.ledger(), all).ok());

  std::map<std::string, int> seen;
  std::string after;
  int pages = 0;
  RecordedAction previous;
  do {
    auto page = ActionsPage(t.ledger(), {}, after, kMaxActionsPage);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    ASSERT_LE(static_cast<int64_t>(page->actions.size()), kMaxActionsPage);
    for (const RecordedAction& a : page->actions) {
      ++seen[a.decision_id];
      if (!previous.decision_id.empty()) {
        EXPECT_LT(std::tie(previous.at_ms, previous.decision_id), std::tie(a.at_ms, a.decision_id));
      }
      previous = a;
    }
    after = page->next;
    ++pages;
  } while (!after.empty() && pages < 10);
  EXPECT_EQ(pages, 2);
  EXPECT_EQ(static_cast<int64_t>(seen.size()), total);
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;

  // The filters hold within pages: vision's proposals, 500 a page.
  int64_t want = 0;
  for (const RecordedAction& a : all) want += a.team == "vision" && a.outcome == "proposed" ? 1 : 0;
  int64_t got = 0;
  after.clear();
  for (int i = 0; i < 100; ++i) {
    auto page = ActionsPage(t.ledger(), {.teams = std::set<std::string>{"vision"}, .outcome = "proposed"}, after, 500);
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    for (const RecordedAction& a : page->actions) {
      EXPECT_EQ(a.team, "vision");
      EXPECT_EQ(a.outcome, "proposed");
    }
    got += static_cast<int64_t>(page->actions.size());
    after = page->next;
    if (after.empty()) break;
  }
  EXPECT_EQ(got, want);
  // A viewer with no team sees nothing.
  auto none = ActionsPage(t.ledger(), {.teams = std::set<std::string>{}}, "", 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->actions.empty());
  EXPECT_TRUE(none->next.empty());

  EXPECT_THAT(ActionsPage(t.ledger(), {}, "", kMaxActionsPage + 1).status().message(),
              HasSubstr("limit 5001: want a whole number within 1..5000"));
  EXPECT_THAT(ActionsPage(t.ledger(), {}, "", 0).status().message(), HasSubstr("limit 0"));
  for (const char* bad : {"yesterday", "17", ":d1", "17:", "-5:d1"}) {
    EXPECT_THAT(ActionsPage(t.ledger(), {}, bad, 10).status().message(), HasSubstr("not a cursor a page gave")) << bad;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, AuditLogPaging, ::testing::Values(testing::Backend::kSqlite, testing::Backend::kPostgres),
                         [](const auto& param_info) { return testing::BackendName(param_info.param); });

}  // namespace
}  // namespace gpuledger::ledger
