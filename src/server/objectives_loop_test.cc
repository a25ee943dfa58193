// The server's objectives loop on a real ledger: an objective that burns its budget sends
// its alert to a webhook (a local receiver recording what it got) and counts it in the
// server's metrics, while a sink that cannot be reached holds nothing up.
#include "server/objectives_loop.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/testing/http_server.h"
#include "ledger/test_fixture.h"

namespace gpuledger::server {
namespace {

using ledger::testing::kBaseMs;

class Recorder {
 public:
  std::string url() const { return server_.url("/hook"); }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> bodies_;
  test_env::LoopbackHttpServer server_{[this](httplib::Server& http) {
    http.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      bodies_.push_back(req.body);
      res.set_content("ok", "text/plain");
    });
  }};
};

// One training GPU standing idle for six hours from kBaseMs.
Batch IdleTrainingGpu() {
  Batch b;
  b.batch_id = "idle";
  b.devices.push_back(Device{.uuid = "GPU-1", .node = "n1", .model = "GPU", .pool = "training",
                             .sample_interval_ms = kMsPerMinute});
  for (int64_t at = kBaseMs; at <= kBaseMs + 6 * kMsPerHour; at += kMsPerMinute) {
    b.samples.push_back(Sample{.device_uuid = "GPU-1", .t_ms = at, .sm_active = 0.0});
  }
  return b;
}

TEST(ObjectivesLoopTest, SendsWhatFiresAndCountsItInMetrics) {
  ledger::testing::TempLedger t;
  // One GPU standing idle for six hours: 0% against a 50% target burns 2x its budget.
  ASSERT_TRUE(t.ledger().Ingest(IdleTrainingGpu()).ok());

  Recorder hook;
  config::Config config;
  config.objectives.push_back(ObjectiveSpec{.name = "training-utilization", .kind = ObjectiveKind::kUtilization,
                                            .scope = {ObjectiveScope::Of::kPool, "training"}, .target = 0.5,
                                            .window_ms = kMsPerDay});
  config.alerting.webhooks.push_back({.url = hook.url(), .name = "recorder"});
  config.alerting.webhooks.push_back({.url = "http://127.0.0.1:1/nobody-listens", .name = "dead"});
  MetricsRegistry metrics;
  auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, config);
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  ASSERT_NE(*loop, nullptr);

  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  // The dead sink retries on its own thread: the evaluation did not wait for it.
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  (*loop)->WaitDelivered(3'000);

  ASSERT_EQ(hook.bodies().size(), 1u);
  auto body = nlohmann::json::parse(hook.bodies()[0]);
  ASSERT_EQ(body["alerts"].size(), 1u);  // only the 1x alert can fire at 50%
  EXPECT_EQ(body["alerts"][0]["labels"]["slo"], "training-utilization");
  EXPECT_EQ(body["alerts"][0]["labels"]["window"], "3d/6h");
  EXPECT_EQ(body["alerts"][0]["labels"]["pool"], "training");
  EXPECT_EQ(body["alerts"][0]["status"], "firing");

  EXPECT_EQ(metrics.Value(MetricId::kAlertsFiring, {}), 1);
  EXPECT_NEAR(metrics.Value(MetricId::kObjectiveBurnRate, {"training-utilization", "3d/6h"}), 2.0, 1e-9);
  EXPECT_NEAR(metrics.Value(MetricId::kObjectiveBudgetLeft, {"training-utilization"}), -1.0, 1e-9);
  EXPECT_EQ(metrics.Value(MetricId::kObjectiveEvaluations, {"training-utilization", "ok"}), 1);
  EXPECT_EQ(metrics.Value(MetricId::kAlertDeliveries, {"webhook:recorder", "sent"}), 1);
  EXPECT_GE(metrics.Value(MetricId::kAlertDeliveries, {"webhook:dead", "failed_attempt"}), 1);
  auto text = metrics.Render();
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("gpuledger_alert_deliveries_total{sink=\"webhook:dead\",outcome=\"failed_attempt\"}"),
            std::string::npos)
      << *text;
}

TEST(ObjectivesLoopTest, SendsAQuotasHighestThresholdAndItsProjectedOverrun) {
  ledger::testing::TempLedger t;
  // nlp holds one GPU for 30 hours at 1.00 an hour: 30.00 of a 50.00 monthly budget (60%),
  // and at the trailing 30 hours' pace projected far past it by November's end.
  auto book = PriceBook::Create({PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromUnits(1), {0, kForever}}});
  ASSERT_TRUE(book.ok());
  ASSERT_TRUE(t.ledger().SetPrices(*book).ok());
  Batch b;
  b.batch_id = "busy";
  b.devices.push_back(Device{.uuid = "GPU-1", .node = "n1", .model = "GPU", .pool = "training",
                             .sample_interval_ms = kMsPerMinute});
  b.jobs.push_back(Job{.id = "j1", .team = "nlp"});
  b.allocations.push_back({"GPU-1", "j1", kBaseMs, std::nullopt});
  for (int64_t at = kBaseMs; at <= kBaseMs + 30 * kMsPerHour; at += kMsPerMinute) {
    b.samples.push_back(Sample{.device_uuid = "GPU-1", .t_ms = at, .sm_active = 1.0});
  }
  ASSERT_TRUE(t.ledger().Ingest(b).ok());

  Recorder hook;
  config::Config config;
  config.quotas.push_back(QuotaSpec{.name = "nlp", .budget = Money::FromUnits(50), .source = "q.toml:3"});
  config.alerting.webhooks.push_back({.url = hook.url(), .name = "recorder"});
  MetricsRegistry metrics;
  auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, config);
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  ASSERT_NE(*loop, nullptr);  // quotas alone are something to run
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  (*loop)->WaitDelivered(3'000);

  ASSERT_EQ(hook.bodies().size(), 1u);
  auto body = nlohmann::json::parse(hook.bodies()[0]);
  ASSERT_EQ(body["alerts"].size(), 2u) << body.dump();
  std::map<std::string, nlohmann::json> by_threshold;
  for (const auto& a : body["alerts"]) by_threshold[a["labels"]["threshold"]] = a;
  ASSERT_EQ(by_threshold.count("50%"), 1u) << body.dump();  // 60%: past 50%, not yet 80%
  ASSERT_EQ(by_threshold.count("projected"), 1u) << body.dump();
  const auto& half = by_threshold["50%"];
  EXPECT_EQ(half["labels"]["alertname"], "GpuledgerQuota");
  EXPECT_EQ(half["labels"]["team"], "nlp");
  EXPECT_EQ(half["labels"]["period"], "2026-11");
  EXPECT_EQ(half["labels"]["severity"], "ticket");
  EXPECT_EQ(half["status"], "firing");
  EXPECT_EQ(half["annotations"]["value"], "30.00 of 50.00 unnamed unit (60.0%)");
  EXPECT_EQ(half["annotations"]["basis"], "trailing 30h rate (2026-11-23T00:00:00Z to 2026-11-24T06:00:00Z)");
  EXPECT_EQ(metrics.Value(MetricId::kAlertsFiring, {}), 2);
}

// Several servers on one store (replicas on PostgreSQL; here two loops on one ledger, as
// two servers would be): one leads and sends, the others stand by; a stopping leader hands
// over at once, a silent one when its lease runs out (three intervals).
TEST(ObjectivesLoopTest, OfSeveralServersOnOneStoreOneSends) {
  ledger::testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(IdleTrainingGpu()).ok());
  struct Server {
    Recorder hook;
    MetricsRegistry metrics;
    std::unique_ptr<ObjectivesLoop> loop;
    double leads() { return metrics.Value(MetricId::kObjectivesLeader, {}); }
    size_t sent() {
      loop->WaitDelivered(3'000);
      return hook.bodies().size();
    }
  };
  auto start = [&](Server& s) {
    config::Config config;
    config.objectives.push_back(ObjectiveSpec{.name = "training-utilization", .kind = ObjectiveKind::kUtilization,
                                              .scope = {ObjectiveScope::Of::kPool, "training"}, .target = 0.5,
                                              .window_ms = kMsPerDay});
    config.alerting.webhooks.push_back({.url = s.hook.url(), .name = "recorder"});
    auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), s.metrics, config);
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    s.loop = std::move(*loop);
  };
  Server a, b2, c;
  start(a);
  start(b2);
  ASSERT_TRUE(a.loop->EvaluateOnce().ok());
  ASSERT_TRUE(b2.loop->EvaluateOnce().ok());
  EXPECT_EQ(a.leads(), 1);
  EXPECT_EQ(b2.leads(), 0);
  EXPECT_EQ(a.sent(), 1u);
  EXPECT_EQ(b2.sent(), 0u);  // the alert went out once

  a.loop->Stop();  // releases the lease: b takes over at its next evaluation
  ASSERT_TRUE(b2.loop->EvaluateOnce().ok());
  EXPECT_EQ(b2.leads(), 1);
  EXPECT_EQ(b2.sent(), 1u);

  start(c);
  ASSERT_TRUE(c.loop->EvaluateOnce().ok());
  EXPECT_EQ(c.leads(), 0);
  t.clock().Advance(3 * kMsPerMinute - 1);  // b falls silent; its lease has 1 ms left
  ASSERT_TRUE(c.loop->EvaluateOnce().ok());
  EXPECT_EQ(c.leads(), 0);
  t.clock().Advance(1);
  ASSERT_TRUE(c.loop->EvaluateOnce().ok());
  EXPECT_EQ(c.leads(), 1);
  EXPECT_EQ(c.sent(), 1u);
  ASSERT_TRUE(b2.loop->EvaluateOnce().ok());  // b comes back: c leads now
  EXPECT_EQ(b2.leads(), 0);
  EXPECT_EQ(b2.sent(), 1u);
}

TEST(ObjectivesLoopTest, NothingToRunWithoutObjectivesOrRules) {
  ledger::testing::TempLedger t;
  MetricsRegistry metrics;
  auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, config::Config{});
  ASSERT_TRUE(loop.ok());
  EXPECT_EQ(*loop, nullptr);
}

}  // namespace
}  // namespace gpuledger::server
