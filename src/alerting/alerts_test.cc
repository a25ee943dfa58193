#include "alerting/alerts.h"

#include <gtest/gtest.h>

#include "alerting/sinks.h"
#include <nlohmann/json.hpp>

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

// nlp's monthly budget of 100.00 (soft) with `spent` of it gone, judged to 2026-11-24.
ledger::QuotaStatus Budget(int64_t spent_units, std::vector<double> crossed) {
  ledger::QuotaStatus s;
  s.spec = QuotaSpec{.name = "nlp", .budget = Money::FromUnits(100), .source = "q.toml:1"};
  s.period_label = "2026-11";
  s.to_date = {kT0 - 22 * kMsPerDay, kT0 + kMsPerDay};
  s.used.cost = Money::FromUnits(spent_units);
  s.budget_burn = static_cast<double>(spent_units) / 100;
  s.crossed = std::move(crossed);
  s.basis_text = "trailing 7d rate (...)";
  return s;
}

TEST(QuotaAlertTest, ThresholdAndOwnerAreIdentityFiguresAreAnnotations) {
  ledger::QuotaReport r;
  r.quotas = {Budget(85, {0.5, 0.8})};
  auto q = objectives::QuotaAlerts(r);
  ASSERT_EQ(q.size(), 1u);
  Alert a = AlertOf(q[0], *Currency::Iso4217("EUR"), kT0);
  EXPECT_EQ(a.labels.at("alertname"), "GpuledgerQuota");
  EXPECT_EQ(a.labels.at("team"), "nlp");
  EXPECT_EQ(a.labels.at("quota"), "team:nlp month budget");
  EXPECT_EQ(a.labels.at("threshold"), "80%");
  EXPECT_EQ(a.labels.at("period"), "2026-11");
  EXPECT_EQ(a.labels.at("severity"), "ticket");
  EXPECT_EQ(a.annotations.at("value"), "85.00 of 100.00 EUR (85.0%)");
  EXPECT_EQ(a.annotations.at("summary"), "team:nlp has used 80% of its quota in 2026-11 (soft quota)");
  EXPECT_EQ(a.annotations.at("source"), "q.toml:1");
  // Slack renders it by its quota and threshold.
  auto msg = nlohmann::json::parse(SlackMessage({a}));
  EXPECT_NE(msg["blocks"][1]["text"]["text"].get<std::string>().find("`team:nlp month budget` (80%)"),
            std::string::npos)
      << msg.dump();
}

TEST(QuotaAlertTest, ReachingTheNextThresholdResolvesTheLowerOne) {
  AlertTracker tracker;
  const Currency none;
  ledger::QuotaReport at60, at85;
  at60.quotas = {Budget(60, {0.5})};
  at85.quotas = {Budget(85, {0.5, 0.8})};
  auto send = [&](const ledger::QuotaReport& r, int64_t now) {
    std::vector<Alert> firing;
    for (const auto& q : objectives::QuotaAlerts(r)) firing.push_back(AlertOf(q, none, now));
    return tracker.Update({}, firing, now);
  };
  auto first = send(at60, kT0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].labels.at("threshold"), "50%");
  auto second = send(at85, kT0 + kMsPerMinute);
  ASSERT_EQ(second.size(), 2u);
  std::map<std::string, bool> resolved;
  for (const Alert& a : second) resolved[a.labels.at("threshold")] = a.resolved;
  EXPECT_TRUE(resolved.at("50%"));
  EXPECT_FALSE(resolved.at("80%"));
  EXPECT_EQ(tracker.firing(), 1u);
}

}  // namespace
}  // namespace gpuledger::alerting
