// The audit log through the ledger (ledger/actions.h): what is recorded, what is refused,
// and what a team's view of it holds.
#include "ledger/actions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpuledger::ledger
