#include "alerting/alerts.h"

#include <gtest/gtest.h>

namespace gpuledger::alerting {
namespace {

constexpr int64_t kT0 = 1'795'392'000'000;  // 2026-11-23T00:00:00Z

objectives::ObjectiveStatus Status(bool firing, double long_burn = 2.0) {
  objectives::ObjectiveStatus st;
  st.spec = ObjectiveSpec{.name = "training-utilization", .kind = ObjectiveKind::kUtilization,
                          .scope = {ObjectiveScope::Of::kPool, "training"}, .target = 0.65};
  st.tally = objectives::RatioTally(50, 100, 0.65);
  st.budget_left = -0.43;
  st.at_stake = Money::FromUnits(120);
  for (size_t i = 0; i < st.alerts.size(); ++i) st.alerts[i].window = objectives::kBurnWindows[i];
  st.alerts[3].firing = firing;
  st.alerts[3].long_burn = long_burn;
  st.alerts[3].short_burn = long_burn;
  return st;
}

TEST(AlertTest, IdentityIsInLabelsAndValuesInAnnotations) {
  Alert a = AlertOf(Status(true), Status(true).alerts[3], kT0);
  EXPECT_EQ(a.labels.at("alertname"), "GpuledgerObjectiveBurn");
  EXPECT_EQ(a.labels.at("slo"), "training-utilization");
  EXPECT_EQ(a.labels.at("pool"), "training");
  EXPECT_EQ(a.labels.count("team"), 0u);
  EXPECT_EQ(a.labels.at("window"), "3d/6h");
  EXPECT_EQ(a.labels.at("severity"), "ticket");
  EXPECT_EQ(a.annotations.at("value"), "50.0%");
  EXPECT_EQ(a.annotations.at("budget_left"), "-43.0%");
  EXPECT_EQ(a.annotations.at("at_stake"), "120.000000");
  // A changing burn changes annotations only: the same alert.
  Alert b = AlertOf(Status(true, 5.0), Status(true, 5.0).alerts[3], kT0 + kMsPerHour);
  EXPECT_EQ(a.Identity(), b.Identity());
  EXPECT_NE(a.annotations.at("burn_long"), b.annotations.at("burn_long"));
}

TEST(AlertTrackerTest, ResendsWhileFiringAndForAWhileAfterResolving) {
  AlertTracker tracker({.resend_interval_ms = kMsPerMinute, .ends_at_intervals = 4,
                        .resolved_resend_ms = 3 * kMsPerMinute});
  std::vector<Alert> sent = tracker.Update({Status(true)}, kT0);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].starts_at_ms, kT0);
  EXPECT_EQ(sent[0].ends_at_ms, kT0 + 4 * kMsPerMinute);
  EXPECT_FALSE(sent[0].resolved);
  EXPECT_EQ(tracker.firing(), 1u);
  // Evaluated again within the interval: nothing to send.
  EXPECT_TRUE(tracker.Update({Status(true)}, kT0 + 20'000).empty());
  // A minute on: resent, same start, endsAt moved ahead.
  sent = tracker.Update({Status(true, 3.0)}, kT0 + kMsPerMinute);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].starts_at_ms, kT0);
  EXPECT_EQ(sent[0].ends_at_ms, kT0 + 5 * kMsPerMinute);
  EXPECT_EQ(sent[0].annotations.at("burn_long"), "3.000");
  // Resolved: endsAt = now, sent at once and then every interval for 3 minutes.
  int64_t resolved = kT0 + 2 * kMsPerMinute;
  sent = tracker.Update({Status(false)}, resolved);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].resolved);
  EXPECT_EQ(sent[0].ends_at_ms, resolved);
  EXPECT_EQ(tracker.firing(), 0u);
  int resends = 0;
  for (int64_t t = resolved + 30'000; t <= resolved + 5 * kMsPerMinute; t += 30'000) {
    for (const Alert& a : tracker.Update({Status(false)}, t)) {
      EXPECT_TRUE(a.resolved);
      EXPECT_EQ(a.ends_at_ms, resolved);
      ++resends;
    }
  }
  EXPECT_EQ(resends, 3);
  // Firing again later is a new alert with a new start.
  sent = tracker.Update({Status(true)}, kT0 + kMsPerHour);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].starts_at_ms, kT0 + kMsPerHour);
}

}  // namespace
}  // namespace gpuledger::alerting
