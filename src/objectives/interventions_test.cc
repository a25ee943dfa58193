// The safety rules of interventions, one at a time, on decision inputs built in memory
// (the golden scenarios run them on a real store).
#include "objectives/interventions.h"

#include <gtest/gtest.h>

namespace gpuledger::objectives {
namespace {

constexpr int64_t kT0 = 100 * kMsPerDay;

ledger::HeldJob IdleNotebook(const std::string& id, int64_t at_ms, double activity = 0) {
  ledger::HeldJob h;
  h.job = Job{.id = id, .team = "nlp", .user = id + "-owner", .kind = JobKind::kNotebook, .pool = "dev"};
  h.devices = {"GPU-" + id};
  h.held_since_ms = at_ms - 5 * kMsPerHour;
  h.gpus = 1;
  h.samples = 300;
  h.max_activity = activity;
  h.evidence_until_ms = at_ms - kMsPerMinute;
  h.price_per_hour = Money::FromUnits(2);
  return h;
}

InterventionRule StopIdleNotebooks() {
  return InterventionRule{.name = "idle", .action = InterventionAction::kStop, .enforce = true,
                          .kind = JobKind::kNotebook, .grace_ms = 0};
}

TEST(InterventionsTest, TheRuleStopsActingAtItsHourlyLimit) {
  InterventionRule rule = StopIdleNotebooks();
  rule.max_actions_per_hour = 2;
  DecisionInputs in{.at_ms = kT0};
  for (const char* id : {"a", "b", "c"}) in.held.push_back(IdleNotebook(id, kT0));
  InterventionHistory history;
  std::vector<Decision> d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].outcome, Outcome::kTaken);
  EXPECT_EQ(d[1].outcome, Outcome::kTaken);
  EXPECT_EQ(d[2].outcome, Outcome::kSkipped);
  EXPECT_EQ(d[2].reason, "the rule's limit of 2 actions per hour is reached");
  EXPECT_EQ(d[2].per_hour_freed, Money());
  // An hour later the limit has room again; a and b are in their cooldown.
  in.at_ms = kT0 + kMsPerHour;
  for (auto& h : in.held) h = IdleNotebook(h.job.id, in.at_ms);
  d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].outcome, Outcome::kSkipped);
  EXPECT_EQ(d[2].outcome, Outcome::kTaken);
  EXPECT_EQ(d[2].job.id, "c");
}

TEST(InterventionsTest, DryRunProposesAndEnforceTakes) {
  InterventionRule rule = StopIdleNotebooks();
  rule.enforce = false;
  DecisionInputs in{.at_ms = kT0, .held = {IdleNotebook("a", kT0)}};
  InterventionHistory history;
  std::vector<Decision> d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome, Outcome::kProposed);
  EXPECT_EQ(d[0].per_hour_freed, Money::FromUnits(2));
}

TEST(InterventionsTest, ARuleWithAnObjectiveActsOnlyWhileItFires) {
  InterventionRule rule = StopIdleNotebooks();
  rule.objective = "dev-utilization";
  DecisionInputs in{.at_ms = kT0, .held = {IdleNotebook("a", kT0)}};
  InterventionHistory history;
  EXPECT_TRUE(Decide({rule}, in, history).empty());
  in.firing_objectives = {"dev-utilization"};
  EXPECT_EQ(Decide({rule}, in, history).size(), 1u);
}

TEST(InterventionsTest, WorkDuringTheGracePeriodWithdrawsTheWarning) {
  InterventionRule rule = StopIdleNotebooks();
  rule.grace_ms = 30 * kMsPerMinute;
  InterventionHistory history;
  DecisionInputs in{.at_ms = kT0, .held = {IdleNotebook("a", kT0)}};
  ASSERT_EQ(Decide({rule}, in, history)[0].outcome, Outcome::kWarned);
  // The owner came back: a kernel ran. No decision, and the warning is withdrawn.
  in.at_ms = kT0 + 10 * kMsPerMinute;
  in.held = {IdleNotebook("a", in.at_ms, 0.4)};
  EXPECT_TRUE(Decide({rule}, in, history).empty());
  // Idle again after the grace period would have ended: a new warning, not a stop.
  in.at_ms = kT0 + 40 * kMsPerMinute;
  in.held = {IdleNotebook("a", in.at_ms)};
  std::vector<Decision> d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome, Outcome::kWarned);
}

TEST(InterventionsTest, TheStopWaitsPastItsGraceWhileTheWarningIsUnconfirmed) {
  InterventionRule rule = StopIdleNotebooks();
  rule.grace_ms = 30 * kMsPerMinute;
  DecisionInputs in{.at_ms = kT0, .held = {IdleNotebook("a", kT0)}};
  InterventionHistory history;
  std::vector<Decision> d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome, Outcome::kWarned);
  EXPECT_EQ(d[0].deadline_ms, kT0 + 30 * kMsPerMinute);
  EXPECT_EQ(d[0].per_hour_held, Money::FromUnits(2));  // for the owner's notice
  EXPECT_EQ(d[0].per_hour_freed, Money());              // a warning frees nothing
  history.warning_unconfirmed[{"idle", "a"}] = "the warning is still being delivered";
  in.at_ms = kT0 + 31 * kMsPerMinute;
  in.held = {IdleNotebook("a", in.at_ms)};
  d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome, Outcome::kSkipped);
  EXPECT_EQ(d[0].reason, "owner not warned yet: the warning is still being delivered");
  // Confirmed (the delivery was tried): the stop follows.
  history.warning_unconfirmed.clear();
  d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome, Outcome::kTaken);
  EXPECT_EQ(d[0].per_hour_freed, Money::FromUnits(2));
}

TEST(InterventionsTest, AJobHeldForLessThanTheEvidenceWindowIsNotIdleYet) {
  InterventionRule rule = StopIdleNotebooks();
  rule.idle_for_ms = 2 * kMsPerHour;
  ledger::HeldJob young = IdleNotebook("a", kT0);
  young.held_since_ms = kT0 - kMsPerHour;
  DecisionInputs in{.at_ms = kT0, .held = {young}};
  InterventionHistory history;
  EXPECT_TRUE(Decide({rule}, in, history).empty());
}

TEST(InterventionsTest, AHoldWarnsThenHoldsThePendingJobsOfItsTeam) {
  InterventionRule rule{.name = "over-budget", .action = InterventionAction::kHold, .enforce = true,
                        .objective = "nlp-budget", .team = "nlp", .grace_ms = 15 * kMsPerMinute};
  Job pending{.id = "p1", .team = "nlp", .pool = "training", .requested_gpus = 8, .submit_ms = kT0 - kMsPerHour};
  Job other{.id = "p2", .team = "vision", .pool = "training", .requested_gpus = 8, .submit_ms = kT0 - kMsPerHour};
  DecisionInputs in{.at_ms = kT0, .pending = {pending, other}, .firing_objectives = {"nlp-budget"}};
  InterventionHistory history;
  std::vector<Decision> d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].job.id, "p1");
  EXPECT_EQ(d[0].outcome, Outcome::kWarned);
  in.at_ms += 15 * kMsPerMinute;
  d = Decide({rule}, in, history);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].outcome, Outcome::kTaken);
  EXPECT_EQ(d[0].evidence, "objective nlp-budget is firing");
}

TEST(InterventionsTest, PendingAtKnowsOnlyWhatWasKnownThen) {
  std::vector<Job> jobs = {Job{.id = "later", .submit_ms = kT0 + 1},
                           Job{.id = "waiting", .submit_ms = kT0 - 1, .start_ms = kT0 + 5},
                           Job{.id = "started", .submit_ms = kT0 - 10, .start_ms = kT0 - 5},
                           Job{.id = "cancelled", .submit_ms = kT0 - 10, .end_ms = kT0 - 1}};
  std::vector<Job> pending = PendingAt(jobs, kT0);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].id, "waiting");
}

}  // namespace
}  // namespace gpuledger::objectives
