// The Slack and webhook sinks against a local HTTP receiver that records what it got, and
// the delivery queue's retries, backoff, Retry-After and rate limit.
#include "alerting/sinks.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "alerting/delivery.h"
#include "core/testing/http_server.h"

namespace gpuledger::alerting {
namespace {

using nlohmann::json;
using Steady = std::chrono::steady_clock;

// An HTTP receiver on a free loopback port: records each request's body and time, and
// answers with the statuses it is given in turn (then 200).
class Receiver {
 public:
  explicit Receiver(std::vector<int> statuses = {}, std::string retry_after = "")
      : statuses_(std::move(statuses)), retry_after_(std::move(retry_after)) {}
  std::string url(const std::string& path = "/hook") const { return server_.url(path); }
  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::vector<Steady::time_point> times() const {
    std::lock_guard lock(mu_);
    return times_;
  }

 private:
  void Answer(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    bodies_.push_back(req.body);
    times_.push_back(Steady::now());
    int status = calls_ < statuses_.size() ? statuses_[calls_] : 200;
    ++calls_;
    res.status = status;
    if (status == 429 && !retry_after_.empty()) res.set_header("Retry-After", retry_after_);
    res.set_content(status == 200 ? "ok" : "rate_limited", "text/plain");
  }

  mutable std::mutex mu_;
  std::vector<int> statuses_;
  std::string retry_after_;
  size_t calls_ = 0;
  std::vector<std::string> bodies_;
  std::vector<Steady::time_point> times_;
  // Last: destroyed (its thread stopped) before the state its handler uses.
  test_env::LoopbackHttpServer server_{[this](httplib::Server& http) {
    http.Post(".*", [this](const httplib::Request& req, httplib::Response& res) { Answer(req, res); });
  }};
};

Alert MakeAlert(int i, std::string description = "utilization 50% against 65%") {
  Alert a;
  a.labels = {{"alertname", "GpuledgerObjectiveBurn"}, {"slo", "slo-" + std::to_string(i)}, {"window", "3d/6h"}};
  a.annotations = {{"summary", "slo-" + std::to_string(i) + " burns 2.0x"}, {"description", std::move(description)}};
  a.starts_at_ms = 1'795'392'000'000;
  a.ends_at_ms = a.starts_at_ms + 4 * kMsPerMinute;
  return a;
}

double Seconds(Steady::time_point a, Steady::time_point b) { return std::chrono::duration<double>(b - a).count(); }

TEST(SlackSinkTest, SendsTextAndBlocksWithinSlacksLimits) {
  Receiver slack;
  auto sink = SlackSink(slack.url("/services/T0/B0/x"), "platform");
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_EQ((*sink)->name(), "slack:platform");
  std::vector<Alert> alerts;
  for (int i = 0; i < 60; ++i) alerts.push_back(MakeAlert(i, i == 0 ? std::string(5000, 'x') : "short"));
  ASSERT_TRUE((*sink)->Send(alerts).status.ok());
  ASSERT_EQ(slack.bodies().size(), 1u);
  json msg = json::parse(slack.bodies()[0]);
  EXPECT_TRUE(msg["text"].get<std::string>().starts_with("gpuledger: 60 objective alerts firing, 0 resolved"));
  const json& blocks = msg["blocks"];
  ASSERT_EQ(blocks.size(), kSlackMaxBlocks);
  EXPECT_EQ(blocks[0]["type"], "header");
  for (size_t i = 1; i + 1 < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i]["type"], "section");
    EXPECT_LE(blocks[i]["text"]["text"].get<std::string>().size(), kSlackMaxSectionChars);
  }
  EXPECT_TRUE(blocks[1]["text"]["text"].get<std::string>().ends_with("..."));
  // 48 alerts have their section; the last block counts the 12 left out.
  EXPECT_EQ(blocks.back()["type"], "context");
  EXPECT_EQ(blocks.back()["elements"][0]["text"], "and 12 more alerts");
}

TEST(DeliveryQueueTest, ASinkThatFailsIsRetriedWithBackoffUntilItRecovers) {
  Receiver hook({500, 503});
  auto sink = WebhookSink(hook.url());
  ASSERT_TRUE(sink.ok());
  DeliveryQueue queue(std::move(*sink), {.initial_backoff_ms = 100, .max_backoff_ms = 1000});
  Steady::time_point enqueued = Steady::now();
  queue.Enqueue({MakeAlert(1)});  // returns at once: the sink is failing
  EXPECT_LT(Seconds(enqueued, Steady::now()), 0.05);
  ASSERT_TRUE(queue.WaitIdle(10'000));
  DeliveryCounters c = queue.counters();
  EXPECT_EQ(c.sent_total, 1);
  EXPECT_EQ(c.failed_attempts_total, 2);
  EXPECT_EQ(c.given_up_total, 0);
  EXPECT_NE(c.last_error.find("HTTP 503"), std::string::npos) << c.last_error;
  auto times = hook.times();
  ASSERT_EQ(times.size(), 3u);
  // Backoff: 100 ms, then 200 ms.
  EXPECT_GE(Seconds(times[0], times[1]), 0.09);
  EXPECT_GE(Seconds(times[1], times[2]), 0.19);
  json body = json::parse(hook.bodies()[2]);
  EXPECT_EQ(body["version"], "1");
  EXPECT_EQ(body["alerts"][0]["status"], "firing");
  EXPECT_EQ(body["alerts"][0]["labels"]["slo"], "slo-1");
}

TEST(DeliveryQueueTest, HonoursRetryAfterOn429AndSlacksPace) {
  Receiver slack({429}, "2");
  auto sink = SlackSink(slack.url());
  ASSERT_TRUE(sink.ok());
  DeliveryQueue queue(std::move(*sink), {.initial_backoff_ms = 50});
  queue.Enqueue({MakeAlert(1)});
  queue.Enqueue({MakeAlert(2)});
  ASSERT_TRUE(queue.WaitIdle(20'000));
  auto times = slack.times();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_GE(Seconds(times[0], times[1]), 1.95);  // Retry-After: 2, not the 50 ms backoff
  EXPECT_GE(Seconds(times[1], times[2]), 0.95);  // about one message a second
  EXPECT_EQ(queue.counters().sent_total, 2);
}

TEST(DeliveryQueueTest, ARefusalIsNotRetriedAndAFullQueueDropsTheOldest) {
  Receiver hook({400});
  auto sink = WebhookSink(hook.url());
  ASSERT_TRUE(sink.ok());
  DeliveryQueue queue(std::move(*sink), {.initial_backoff_ms = 10});
  queue.Enqueue({MakeAlert(1)});
  ASSERT_TRUE(queue.WaitIdle(5'000));
  EXPECT_EQ(queue.counters().given_up_total, 1);
  EXPECT_EQ(hook.bodies().size(), 1u);

  // Nothing listens here: every attempt fails, and batches pile up behind the first.
  auto dead = WebhookSink("http://127.0.0.1:1/hook");
  ASSERT_TRUE(dead.ok());
  DeliveryQueue stuck(std::move(*dead), {.initial_backoff_ms = 60'000, .max_queued = 2});
  for (int i = 0; i < 5; ++i) stuck.Enqueue({MakeAlert(i)});
  EXPECT_FALSE(stuck.WaitIdle(200));
  DeliveryCounters c = stuck.counters();
  EXPECT_GE(c.dropped_total, 2);
  EXPECT_LE(c.queued, 3);  // two waiting and the one in flight
}

TEST(DeliveryQueueTest, TellsEachBatchsCallbackHowItsDeliveryEnded) {
  Receiver hook({500});
  auto sink = WebhookSink(hook.url(), "owner");
  ASSERT_TRUE(sink.ok());
  DeliveryQueue queue(std::move(*sink), {.initial_backoff_ms = 10});
  std::mutex mu;
  std::vector<DeliveryReport> reports;
  auto record = [&](const DeliveryReport& r) {
    std::lock_guard lock(mu);
    reports.push_back(r);
  };
  queue.Enqueue({MakeAlert(1)}, record);  // one 500, then delivered
  ASSERT_TRUE(queue.WaitIdle(5'000));
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(reports.size(), 1u);  // reported before the queue read idle
    EXPECT_EQ(reports[0].sink, "webhook:owner");
    EXPECT_TRUE(reports[0].delivered);
    EXPECT_EQ(reports[0].attempts, 2);
  }

  // Given up after its attempts: not delivered, the last error kept.
  auto dead = WebhookSink("http://127.0.0.1:1/hook", "dead");
  ASSERT_TRUE(dead.ok());
  DeliveryQueue failing(std::move(*dead), {.initial_backoff_ms = 10, .max_attempts = 2});
  failing.Enqueue({MakeAlert(2)}, record);
  ASSERT_TRUE(failing.WaitIdle(10'000));
  std::lock_guard lock(mu);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_FALSE(reports[1].delivered);
  EXPECT_EQ(reports[1].attempts, 2);
  EXPECT_NE(reports[1].error.find("webhook:dead: POST"), std::string::npos) << reports[1].error;
}

TEST(DeliveryQueueTest, ABatchDroppedFromAFullQueueIsReportedNeverTried) {
  auto dead = WebhookSink("http://127.0.0.1:1/hook");
  ASSERT_TRUE(dead.ok());
  DeliveryQueue stuck(std::move(*dead), {.initial_backoff_ms = 60'000, .max_queued = 1});
  std::mutex mu;
  std::vector<DeliveryReport> reports;
  for (int i = 0; i < 3; ++i) {
    stuck.Enqueue({MakeAlert(i)}, [&](const DeliveryReport& r) {
      std::lock_guard lock(mu);
      reports.push_back(r);
    });
  }
  // The first is in flight or queued; at least one was pushed out unsent.
  std::lock_guard lock(mu);
  ASSERT_GE(reports.size(), 1u);
  EXPECT_FALSE(reports[0].delivered);
  EXPECT_EQ(reports[0].attempts, 0);
  EXPECT_EQ(reports[0].error, "dropped unsent: the delivery queue was full");
}

// The warning before a stop, as the owner reads it in Slack and as Alertmanager gets it.
objectives::Decision Warning() {
  objectives::Decision d;
  d.rule = "idle-notebooks";
  d.at_ms = 1'795'392'000'000;  // 2026-11-23T00:00:00Z
  d.action = InterventionAction::kStop;
  d.outcome = objectives::Outcome::kWarned;
  d.job = Job{.id = "ml/nb-7", .team = "vision", .user = "ada", .kind = JobKind::kNotebook};
  d.gpus = 2;
  d.evidence = "notebook idle for 1h 0m: every sample of its 2 GPUs under 5% activity (highest 0.0%, 60 samples)";
  d.per_hour_held = Money::FromMicros(6'500'000);
  d.deadline_ms = d.at_ms + 30 * kMsPerMinute;
  return d;
}

TEST(NoticeTest, AWarningNamesTheJobRuleEvidenceDeadlineAndMoneyPerHour) {
  auto eur = Currency::Iso4217("EUR");
  ASSERT_TRUE(eur.ok());
  objectives::Decision d = Warning();
  Alert a = NoticeOf(d, *eur, d.deadline_ms);
  EXPECT_TRUE(IsNotice(a));
  EXPECT_EQ(a.labels, (std::map<std::string, std::string>{{"alertname", "GpuledgerIntervention"},
                                                          {"rule", "idle-notebooks"},
                                                          {"action", "stop"},
                                                          {"job", "ml/nb-7"},
                                                          {"team", "vision"},
                                                          {"user", "ada"},
                                                          {"severity", "warning"}}));
  EXPECT_EQ(a.annotations["deadline"], "2026-11-23T00:30:00Z");
  EXPECT_EQ(a.annotations["per_hour"], "6.50 EUR");
  EXPECT_EQ(a.annotations["evidence"], d.evidence);
  EXPECT_EQ(a.annotations["description"],
            "Job ml/nb-7 (team vision, user ada): " + d.evidence +
                ". Its 2 GPUs cost 6.50 EUR per hour. Rule idle-notebooks will stop it at 2026-11-23T00:30:00Z unless "
                "the evidence changes.");
  EXPECT_EQ(a.starts_at_ms, d.at_ms);
  EXPECT_EQ(a.ends_at_ms, d.deadline_ms);

  Receiver slack;
  auto sink = SlackSink(slack.url("/services/T0/B0/x"), "vision");
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Send({a}).status.ok());
  json msg = json::parse(slack.bodies().at(0));
  EXPECT_EQ(msg["blocks"][0]["text"]["text"], "gpuledger: 1 intervention notice");
  std::string section = msg["blocks"][1]["text"]["text"];
  EXPECT_TRUE(section.starts_with("*Warning* `idle-notebooks` on job `ml/nb-7`\n")) << section;
  EXPECT_NE(section.find("6.50 EUR per hour"), std::string::npos) << section;
  EXPECT_NE(msg["text"].get<std::string>().find("WARNING job ml/nb-7 (team vision, user ada): rule idle-notebooks "
                                                "will stop it at 2026-11-23T00:30:00Z"),
            std::string::npos)
      << msg["text"];

  // A notify rule's notice: no deadline, severity info.
  d.outcome = objectives::Outcome::kTaken;
  d.action = InterventionAction::kNotify;
  Alert n = NoticeOf(d, *eur, d.at_ms + kMsPerHour);
  EXPECT_EQ(n.labels["severity"], "info");
  EXPECT_EQ(n.annotations.count("deadline"), 0u);
  EXPECT_EQ(n.annotations["summary"], "job ml/nb-7 (team vision, user ada): rule idle-notebooks notifies its owner");
}

TEST(SinkTest, RefusesAnUrlThatIsNotHttp) {
  EXPECT_FALSE(SlackSink("hooks.slack.com/x").ok());
  EXPECT_FALSE(AlertmanagerSink("ftp://am:9093").ok());
}

}  // namespace
}  // namespace gpuledger::alerting
