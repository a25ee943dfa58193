// The server's objectives loop carrying out its rules' decisions: an enforce rule against
// the project's real local Slurm (src/agent/testdata/slurm), warning first and stopping the
// job after its grace, every decision read back from the audit log; the owner's warning
// delivered through the alert sinks (local HTTP receivers), and no stop without it; a restarted loop
// keeping the cooldown the log holds; a dry-run rule recording proposals and acting on
// nothing; the API showing a viewer its own team's decisions and objectives only. Slurm
// needs root and the packages slurmctld, slurmd, slurm-client and munge.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "actuators/actuators.h"
#include "actuators/testing/eviction_stand_in.h"
#include "agent/local_slurm.h"
#include "agent/slurm.h"
#include "core/testing/http_server.h"
#include "core/testing/missing_component.h"
#include "kube/api_client.h"
#include "kube/fake_api_server.h"
#include "kube/pod_rules.h"
#include "ledger/actions.h"
#include "ledger/test_fixture.h"
#include "server/objectives_loop.h"
#include "server/test_support.h"
#include "wire/batch.h"

namespace gpuledger::server {
namespace {

using ledger::testing::kBaseMs;

constexpr auto RunSlurm = &agent::local_slurm::Run;

// An actuator that must never be called (a dry-run rule's).
class NeverCalled final : public actuators::Actuator {
 public:
  Result<std::string> Apply(const objectives::Decision& d) override {
    ADD_FAILURE() << "a dry-run rule acted on " << d.job.id;
    return std::string("acted");
  }
};

// An actuator that records what it was asked to do (and does it: "done").
class Recording final : public actuators::Actuator {
 public:
  Result<std::string> Apply(const objectives::Decision& d) override {
    std::lock_guard lock(mu_);
    applied_.push_back(d.job.id + " " + std::string(InterventionActionName(d.action)));
    return std::string("done");
  }
  std::vector<std::string> applied() {
    std::lock_guard lock(mu_);
    return applied_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> applied_;
};

// A loop over `t`'s ledger with `config`, its Slurm actuator a Recording one.
struct RecordedLoop {
  RecordedLoop(ledger::testing::TempLedger& t, MetricsRegistry& metrics, const config::Config& config) {
    LoopActuators a;
    a.slurm.reset(actuator);
    loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, config, std::move(a));
  }
  Recording* actuator = new Recording;  // owned by the loop
  Result<std::unique_ptr<ObjectivesLoop>> loop = Internal("not created");
};

// A local HTTP receiver (a Slack or generic webhook, an Alertmanager) that records each
// body it gets and answers `status`; while held, it keeps each request waiting.
class Receiver {
 public:
  explicit Receiver(int status = 200) : status_(status) {}
  ~Receiver() { Release(); }
  std::string url(const std::string& path = "/hook") const { return server_.url(path); }
  std::vector<nlohmann::json> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int status_;
  bool held_ = false;
  std::vector<nlohmann::json> bodies_;
  test_env::LoopbackHttpServer server_{[this](httplib::Server& http) {
    http.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !held_; });
      bodies_.push_back(nlohmann::json::parse(req.body));
      res.status = status_;
      res.set_content(status_ == 200 ? "ok" : "refused", "text/plain");
    });
  }};
};

// Notebook `job` of team vision holding GPU-1 from kBaseMs, idle at every sample of
// [from, to] (one a minute).
Batch IdleNotebook(const std::string& batch_id, const std::string& job, int64_t from, int64_t to) {
  Batch b;
  b.batch_id = batch_id;
  b.source = "n1";
  b.devices.push_back(Device{.uuid = "GPU-1", .node = "n1", .model = "GPU", .pool = "dev",
                             .sample_interval_ms = kMsPerMinute});
  b.jobs.push_back(Job{.id = job, .team = "vision", .user = "ada", .kind = JobKind::kNotebook, .pool = "dev"});
  if (from == kBaseMs) b.allocations.push_back(Allocation{"GPU-1", job, kBaseMs, std::nullopt});
  for (int64_t at = from; at <= to; at += kMsPerMinute) {
    b.samples.push_back(Sample{.device_uuid = "GPU-1", .t_ms = at, .sm_active = 0.0});
  }
  return b;
}

config::Config StopIdleNotebooks(bool enforce, int64_t grace_ms) {
  config::Config c;
  c.interventions.push_back(InterventionRule{.name = "idle-notebooks", .action = InterventionAction::kStop,
                                             .enforce = enforce, .kind = JobKind::kNotebook,
                                             .idle_for_ms = kMsPerHour, .grace_ms = grace_ms,
                                             .cooldown_ms = 6 * kMsPerHour});
  return c;
}

std::vector<ledger::RecordedAction> AuditLog(ledger::Ledger& l) {
  auto all = ledger::Actions(l, {});
  EXPECT_TRUE(all.ok()) << all.status().ToString();
  return all.ok() ? *all : std::vector<ledger::RecordedAction>{};
}

struct SlurmCluster {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gpuledger-loop-slurm-" + std::to_string(::getpid()));
  bool made = std::filesystem::create_directories(dir);
  agent::local_slurm::Cluster slurm{(dir / "slurm").string()};
  ~SlurmCluster() {
    (void)RunSlurm({"scancel", "--user=root"});
    slurm.Stop();  // before its folder goes: the harness finds the daemons by their pid files
    std::filesystem::remove_all(dir);
  }
};

TEST(ObjectivesLoopActionsTest, AnEnforcedRuleWarnsThenStopsARealSlurmJobAndLogsEachDecision) {
  if (std::string why = agent::local_slurm::Missing(); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  SlurmCluster cluster;
  if (!cluster.slurm.error().empty()) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "the local Slurm cluster did not start: " << cluster.slurm.error();
  }
  auto submitted = RunSlurm({"sbatch", "--parsable", "-J", "gl-notebook", "-o", "/dev/null", "--gres=gpu:1",
                             "--wrap", "exec sleep 300"});
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  std::string job = submitted->substr(0, submitted->find_first_of(";\n"));
  ASSERT_TRUE(agent::local_slurm::WaitForJob(job, "JobState=RUNNING")) << agent::local_slurm::ShowJob(job);

  ledger::testing::TempLedger t;
  // Idle for two hours: the rule's evidence (idle an hour) holds.
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b1", job, kBaseMs, kBaseMs + 2 * kMsPerHour)).ok());
  MetricsRegistry metrics;
  Receiver owner;  // team vision's webhook: the warning goes there
  config::Config config = StopIdleNotebooks(/*enforce=*/true, 10 * kMsPerMinute);
  config.alerting.routes.push_back({.team = "vision", .webhook_url = owner.url(), .name = "vision"});
  auto make_loop = [&] {
    LoopActuators a;
    a.slurm = actuators::SlurmActuator(RunSlurm, {.term_grace_ms = 1'000});
    return ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, config, std::move(a));
  };
  auto loop = make_loop();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();

  // First the owner's warning: the job still runs.
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  ASSERT_TRUE((*loop)->WaitDelivered(5'000));
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());  // records the warning with its delivery
  std::vector<ledger::RecordedAction> log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].outcome, "warned");
  EXPECT_EQ(log[0].job, job);
  EXPECT_TRUE(log[0].enforce);
  EXPECT_EQ(log[0].result, "delivered to webhook:vision");
  EXPECT_EQ(owner.bodies().size(), 1u);
  EXPECT_NE(agent::local_slurm::ShowJob(job).find("JobState=RUNNING"), std::string::npos) << agent::local_slurm::ShowJob(job);

  // Evaluating the same moment again (a retry) records nothing new.
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_EQ(AuditLog(t.ledger()).size(), 1u);

  // Still idle when the grace has passed: stopped, in Slurm and in the log.
  ASSERT_TRUE(
      t.ledger().Ingest(IdleNotebook("b2", job, kBaseMs + 2 * kMsPerHour + kMsPerMinute, kBaseMs + 2 * kMsPerHour + 15 * kMsPerMinute))
          .ok());
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_TRUE(agent::local_slurm::WaitForJob(job, "JobState=CANCELLED") || agent::local_slurm::WaitForJob(job, "JobState=COMPLETED"))
      << agent::local_slurm::ShowJob(job);
  log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].outcome, "taken");
  EXPECT_EQ(log[1].action, "stop");
  EXPECT_EQ(log[1].team, "vision");
  EXPECT_EQ(log[1].result, "SIGTERM; scancel follows in 1 s");
  EXPECT_GE(log[1].at_ms - log[0].at_ms, 10 * kMsPerMinute);
  EXPECT_FALSE(log[1].evidence.empty());
  EXPECT_EQ(metrics.Value(MetricId::kInterventionActions, {"idle-notebooks", "stop", "ok"}), 1);
  EXPECT_EQ(metrics.Value(MetricId::kAuditLogPending, {}), 0);

  // A restarted loop reads the cooldown back from the log: the job (still allocated as
  // far as the ledger knows) is not acted on again.
  loop->reset();
  loop = make_loop();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b3", job, kBaseMs + 2 * kMsPerHour + 16 * kMsPerMinute,
                                             kBaseMs + 2 * kMsPerHour + 20 * kMsPerMinute))
                  .ok());
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2].outcome, "skipped");
  EXPECT_NE(log[2].reason.find("cooldown"), std::string::npos) << log[2].reason;
}

TEST(ObjectivesLoopActionsTest, ADryRunRuleRecordsProposalsAndActsOnNothing) {
  ledger::testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b1", "4242", kBaseMs, kBaseMs + 2 * kMsPerHour)).ok());
  MetricsRegistry metrics;
  LoopActuators a;
  a.slurm = std::make_unique<NeverCalled>();
  auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, StopIdleNotebooks(/*enforce=*/false, /*grace_ms=*/0), std::move(a));
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  std::vector<ledger::RecordedAction> log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].outcome, "proposed");  // the stop enforce would make
  EXPECT_EQ(log[0].action, "stop");
  EXPECT_FALSE(log[0].enforce);
  EXPECT_TRUE(log[0].result.empty());
  EXPECT_EQ(metrics.Value(MetricId::kInterventionActions, {"idle-notebooks", "stop", "ok"}), 0);
  EXPECT_EQ(metrics.Value(MetricId::kInterventionDecisions, {"idle-notebooks", "proposed"}), 1);
}

// Two servers on one store: the one that leads stops the idle notebook; when it stops and
// the other takes over, the other reads the stop back from the audit log and keeps its
// cooldown instead of stopping the job a second time.
TEST(ObjectivesLoopActionsTest, AServerTakingOverKeepsTheStopsTheOtherMade) {
  ledger::testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b1", "4242", kBaseMs, kBaseMs + 2 * kMsPerHour)).ok());
  MetricsRegistry ma, mb;
  RecordedLoop a(t, ma, StopIdleNotebooks(/*enforce=*/true, /*grace_ms=*/0));
  RecordedLoop b(t, mb, StopIdleNotebooks(/*enforce=*/true, /*grace_ms=*/0));
  ASSERT_TRUE(a.loop.ok() && b.loop.ok());
  ASSERT_TRUE((*a.loop)->EvaluateOnce().ok());
  ASSERT_TRUE((*b.loop)->EvaluateOnce().ok());  // stands by
  EXPECT_EQ(a.actuator->applied(), std::vector<std::string>{"4242 stop"});
  EXPECT_TRUE(b.actuator->applied().empty());

  (*a.loop)->Stop();
  t.clock().Advance(10 * kMsPerMinute);  // the notebook is still there and still idle
  ASSERT_TRUE(t.ledger()
                  .Ingest(IdleNotebook("b2", "4242", kBaseMs + 2 * kMsPerHour + kMsPerMinute,
                                       kBaseMs + 2 * kMsPerHour + 10 * kMsPerMinute))
                  .ok());
  ASSERT_TRUE((*b.loop)->EvaluateOnce().ok());
  EXPECT_EQ(mb.Value(MetricId::kObjectivesLeader, {}), 1);
  EXPECT_TRUE(b.actuator->applied().empty()) << "stopped twice";
  int taken = 0;
  for (const ledger::RecordedAction& r : AuditLog(t.ledger())) taken += r.outcome == "taken";
  EXPECT_EQ(taken, 1);
}

// The owner's warning before a stop, delivered through the alert sinks: the team's route
// (a webhook here) and every Alertmanager get it, the shared webhook does not (the team has
// its own route); the audit log records where it was delivered; the stop follows only once
// the grace has passed.
TEST(ObjectivesLoopActionsTest, TheOwnersWarningReachesItsTeamsRouteAndAlertmanagerBeforeTheStop) {
  ledger::testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b1", "4242", kBaseMs, kBaseMs + 2 * kMsPerHour)).ok());
  Receiver team_hook, alertmanager, platform;
  config::Config config = StopIdleNotebooks(/*enforce=*/true, 10 * kMsPerMinute);
  config.alerting.routes.push_back({.team = "vision", .webhook_url = team_hook.url(), .name = "vision"});
  config.alerting.alertmanagers.push_back({.url = alertmanager.url(""), .name = "am"});
  config.alerting.webhooks.push_back({.url = platform.url(), .name = "platform"});
  MetricsRegistry metrics;
  RecordedLoop recorded(t, metrics, config);
  ASSERT_TRUE(recorded.loop.ok()) << recorded.loop.status().ToString();
  auto& loop = recorded.loop;
  Recording* actuator = recorded.actuator;

  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  ASSERT_TRUE((*loop)->WaitDelivered(5'000));
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());  // the same moment again: records what the sinks reported
  std::vector<ledger::RecordedAction> log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].outcome, "warned");
  EXPECT_TRUE(log[0].result.starts_with("delivered to ")) << log[0].result;
  EXPECT_NE(log[0].result.find("webhook:vision"), std::string::npos) << log[0].result;
  EXPECT_NE(log[0].result.find("alertmanager:am"), std::string::npos) << log[0].result;
  EXPECT_TRUE(actuator->applied().empty());

  int64_t at = kBaseMs + 2 * kMsPerHour;
  ASSERT_EQ(team_hook.bodies().size(), 1u);
  const nlohmann::json notice = team_hook.bodies()[0]["alerts"][0];
  EXPECT_EQ(notice["labels"]["alertname"], "GpuledgerIntervention");
  EXPECT_EQ(notice["labels"]["job"], "4242");
  EXPECT_EQ(notice["labels"]["rule"], "idle-notebooks");
  EXPECT_EQ(notice["annotations"]["deadline"], FormatTime(at + 10 * kMsPerMinute));
  EXPECT_EQ(notice["endsAt"], FormatTime(at + 10 * kMsPerMinute));
  EXPECT_EQ(notice["annotations"]["evidence"], log[0].evidence);
  EXPECT_EQ(notice["annotations"]["per_hour"], "0.00 unnamed unit");  // no price book
  ASSERT_EQ(alertmanager.bodies().size(), 1u);
  const nlohmann::json alert = alertmanager.bodies()[0][0];  // API v2: a list of alerts
  EXPECT_EQ(alert["labels"]["team"], "vision");
  EXPECT_EQ(alert["labels"]["job"], "4242");
  EXPECT_EQ(alert["labels"]["rule"], "idle-notebooks");
  EXPECT_TRUE(platform.bodies().empty());

  // Within the grace: nothing; after it, still idle: stopped.
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b2", "4242", at + kMsPerMinute, at + 9 * kMsPerMinute)).ok());
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_TRUE(actuator->applied().empty());
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b3", "4242", at + 10 * kMsPerMinute, at + 11 * kMsPerMinute)).ok());
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_EQ(actuator->applied(), std::vector<std::string>{"4242 stop"});
  log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].outcome, "taken");
  EXPECT_EQ(log[1].result, "done");
}

// No stop follows a warning that was not at least attempted: while its delivery is in
// flight the stop waits (a skip saying so); a warning the sink refused was still tried,
// and the stop follows; an owner no sink reaches is never warned, and never stopped.
TEST(ObjectivesLoopActionsTest, AStopWaitsForItsWarningToBeTriedAndNeverFollowsOneNobodyCouldGet) {
  ledger::testing::TempLedger t;
  int64_t at = kBaseMs + 2 * kMsPerHour;
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b1", "4242", kBaseMs, at)).ok());
  Receiver slow_then_refusing(400);
  slow_then_refusing.Hold();
  config::Config config = StopIdleNotebooks(/*enforce=*/true, 10 * kMsPerMinute);
  config.alerting.webhooks.push_back({.url = slow_then_refusing.url(), .name = "shared"});
  MetricsRegistry metrics;
  RecordedLoop recorded(t, metrics, config);
  ASSERT_TRUE(recorded.loop.ok()) << recorded.loop.status().ToString();
  auto& loop = recorded.loop;
  Recording* actuator = recorded.actuator;
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());  // warned; the receiver holds the request

  // The grace has passed, the warning is still in flight: no stop.
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b2", "4242", at + kMsPerMinute, at + 11 * kMsPerMinute)).ok());
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_TRUE(actuator->applied().empty());
  std::vector<ledger::RecordedAction> log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 1u);  // the warning itself waits for its sink's report
  EXPECT_EQ(log[0].outcome, "skipped");
  EXPECT_EQ(log[0].reason, "owner not warned yet: the warning is still being delivered");

  // The sink answers 400: tried, refused, given up. The stop follows.
  slow_then_refusing.Release();
  ASSERT_TRUE((*loop)->WaitDelivered(5'000));
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_EQ(actuator->applied(), std::vector<std::string>{"4242 stop"});
  log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].outcome, "warned");
  EXPECT_TRUE(log[0].result.starts_with("failed: webhook:shared after 1 attempt: ")) << log[0].result;
  EXPECT_NE(log[0].result.find("HTTP 400"), std::string::npos) << log[0].result;
  EXPECT_EQ(log[2].outcome, "taken");

  // Team vision has no route and there is no shared sink: the owner cannot be warned.
  ledger::testing::TempLedger t2;
  ASSERT_TRUE(t2.ledger().Ingest(IdleNotebook("b1", "4243", kBaseMs, at)).ok());
  Receiver speech;
  config = StopIdleNotebooks(/*enforce=*/true, 10 * kMsPerMinute);
  config.alerting.routes.push_back({.team = "speech", .slack_url = speech.url()});
  RecordedLoop recorded2(t2, metrics, config);
  ASSERT_TRUE(recorded2.loop.ok()) << recorded2.loop.status().ToString();
  auto& loop2 = recorded2.loop;
  Recording* untouched = recorded2.actuator;
  ASSERT_TRUE((*loop2)->EvaluateOnce().ok());
  ASSERT_TRUE(t2.ledger().Ingest(IdleNotebook("b2", "4243", at + kMsPerMinute, at + 11 * kMsPerMinute)).ok());
  ASSERT_TRUE((*loop2)->EvaluateOnce().ok());
  EXPECT_TRUE(untouched->applied().empty());
  EXPECT_TRUE(speech.bodies().empty());
  log = AuditLog(t2.ledger());
  ASSERT_EQ(log.size(), 1u);  // recorded once, not at every evaluation
  EXPECT_EQ(log[0].outcome, "skipped");
  EXPECT_EQ(log[0].reason, "owner not warned: no alert sink reaches team vision (no [[alerting.route]] for it or its "
                           "user, and no shared sink)");
}

// Three notebook pods of team vision in namespace ml-dev, each holding a GPU from kBaseMs,
// idle at every sample of [from, to]; nb-keep's user is exempt from the rule below.
// `kept`: the labels and annotations the agent's pod rules kept of nb-keep's pod (the other
// two pods carry none the rules keep).
Batch IdlePods(const std::string& batch_id, int64_t from, int64_t to, const Job& kept = {}) {
  Batch b;
  b.batch_id = batch_id;
  b.source = "n1";
  int gpu = 0;
  for (const char* pod : {"nb-idle", "nb-guarded", "nb-keep"}) {
    std::string uuid = "GPU-" + std::to_string(++gpu), job = std::string("ml-dev/") + pod;
    b.devices.push_back(Device{.uuid = uuid, .node = "n1", .model = "GPU", .pool = "dev", .sample_interval_ms = kMsPerMinute});
    b.jobs.push_back(Job{.id = job, .team = "vision", .user = "ada", .kind = JobKind::kNotebook, .pool = "dev"});
    if (pod == std::string("nb-keep")) {
      b.jobs.back().labels = kept.labels;
      b.jobs.back().annotations = kept.annotations;
    }
    if (from == kBaseMs) b.allocations.push_back(Allocation{uuid, job, kBaseMs, std::nullopt});
    for (int64_t at = from; at <= to; at += kMsPerMinute) {
      b.samples.push_back(Sample{.device_uuid = uuid, .t_ms = at, .sm_active = 0.0});
    }
  }
  // As the agent sends it: written in the v1 format and read back as the server's ingest does.
  auto parsed = wire::ParseBatch(wire::WriteBatch(b));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? std::move(*parsed) : b;
}

// What the agent's real pod rules (kube/pod_rules.h, the defaults) keep of nb-keep's pod,
// its metadata read with the agent's API client from the API server's stand-in: the
// gpuledger.io/exempt label, and not kubectl's large annotation.
Job KeptOfTheExemptPod() {
  auto api = kube::testing::FakeApiServer::Start("t0ken");
  EXPECT_TRUE(api.ok()) << api.status().ToString();
  if (!api.ok()) return {};
  (*api)->AddPod(kube::ObjectMeta{
      .name = "nb-keep", .ns = "ml-dev",
      .labels = {{"gpuledger.io/exempt", "true"}, {"notebook-name", "nb-keep"}},
      .annotations = {{"kubectl.kubernetes.io/last-applied-configuration", std::string(4'000, 'x')}}});
  testing::TempDir dir;
  std::ofstream(dir.File("token")) << "t0ken\n";
  auto client = kube::ApiClient::Create({(*api)->url(), dir.File("token"), "", 2'000});
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  if (!client.ok()) return {};
  auto meta = (*client)->GetPod("ml-dev", "nb-keep");
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  if (!meta.ok()) return {};
  Job kept = kube::ApplyPodRules(kube::PodRules::Defaults(), kube::PodFacts{"ml-dev", "nb-keep", "main", &*meta});
  EXPECT_EQ(kept.labels, (JobMetadata{{"gpuledger.io/exempt", "true"}}));
  EXPECT_EQ(kept.annotations, JobMetadata{});
  return kept;
}

std::vector<ledger::RecordedAction> RowsOf(const std::vector<ledger::RecordedAction>& log, const std::string& job,
                                           const std::string& outcome) {
  std::vector<ledger::RecordedAction> out;
  for (const auto& a : log) {
    if (a.job == job && a.outcome == outcome) out.push_back(a);
  }
  return out;
}

// The loop as `serve` runs it, a rule in enforce mode, against the Kubernetes Eviction API
// (the contract stand-in; the client is real): idle notebook pods are warned, then evicted
// after the grace; a 429 from a PodDisruptionBudget is recorded as "retry later" and
// retried at the next evaluation, without waiting out a cooldown; the pod labelled
// gpuledger.io/exempt=true is left alone, its label having come from its pod's metadata
// through the agent's pod rules and a batch into the store, and shown by the job API.
TEST(ObjectivesLoopActionsTest, AnEnforcedRuleWarnsThenEvictsIdlePodsAndRetriesAPodDisruptionBudgetsRefusal) {
  actuators::testing::StandInApiServer api;
  api.AddPod("ml-dev", "nb-idle", 201);
  api.AddPod("ml-dev", "nb-guarded", 429);
  api.AddPod("ml-dev", "nb-keep", 201);
  ledger::testing::TempLedger t;
  int64_t at = kBaseMs + 2 * kMsPerHour;
  const Job pod_rules = KeptOfTheExemptPod();
  ASSERT_TRUE(t.ledger().Ingest(IdlePods("b1", kBaseMs, at, pod_rules)).ok());
  Receiver owner;
  config::Config config = StopIdleNotebooks(/*enforce=*/true, 10 * kMsPerMinute);
  config.interventions[0].exempt = {"user:keeper", "label:gpuledger.io/exempt=true"};
  config.alerting.routes.push_back({.team = "vision", .webhook_url = owner.url(), .name = "vision"});
  MetricsRegistry metrics;
  LoopActuators a;
  auto kube = actuators::KubernetesActuator({.api_server = api.url()});
  ASSERT_TRUE(kube.ok()) << kube.status().ToString();
  a.kubernetes = std::move(*kube);
  auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, config, std::move(a));
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();

  // Warned, both idle pods; nothing evicted yet.
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  ASSERT_TRUE((*loop)->WaitDelivered(5'000));
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_EQ(owner.bodies().size(), 2u);
  EXPECT_EQ(api.eviction_requests(), 0);

  // After the grace: nb-idle evicted; nb-guarded refused by its budget, to retry.
  ASSERT_TRUE(t.ledger().Ingest(IdlePods("b2", at + kMsPerMinute, at + 11 * kMsPerMinute, pod_rules)).ok());
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/nb-idle"}));
  // The budget allows it now: the next evaluation evicts it.
  api.AddPod("ml-dev", "nb-guarded", 201);
  ASSERT_TRUE(t.ledger().Ingest(IdlePods("b3", at + 12 * kMsPerMinute, at + 12 * kMsPerMinute, pod_rules)).ok());
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/nb-idle", "ml-dev/nb-guarded"}));
  EXPECT_EQ(api.eviction_requests(), 3);  // nb-keep never asked for
  EXPECT_EQ(*actuators::ListPods({.api_server = api.url()}, "ml-dev"), std::vector<std::string>{"nb-keep"});

  std::vector<ledger::RecordedAction> log = AuditLog(t.ledger());
  for (const char* pod : {"ml-dev/nb-idle", "ml-dev/nb-guarded"}) {
    auto warned = RowsOf(log, pod, "warned");
    ASSERT_EQ(warned.size(), 1u) << pod;
    EXPECT_EQ(warned[0].result, "delivered to webhook:vision") << pod;
  }
  auto idle = RowsOf(log, "ml-dev/nb-idle", "taken");
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].result, "evicted 1 pod: nb-idle");
  EXPECT_EQ(idle[0].at_ms, at + 11 * kMsPerMinute);
  auto guarded = RowsOf(log, "ml-dev/nb-guarded", "taken");
  ASSERT_EQ(guarded.size(), 2u);
  EXPECT_TRUE(guarded[0].result.starts_with("retry later: ")) << guarded[0].result;
  EXPECT_NE(guarded[0].result.find("PodDisruptionBudget"), std::string::npos) << guarded[0].result;
  EXPECT_EQ(guarded[1].result, "evicted 1 pod: nb-guarded");
  EXPECT_EQ(guarded[1].at_ms, at + 12 * kMsPerMinute);
  auto kept = RowsOf(log, "ml-dev/nb-keep", "skipped");
  ASSERT_EQ(kept.size(), 1u);  // recorded once, not at each evaluation
  EXPECT_EQ(kept[0].reason, "exempt (label:gpuledger.io/exempt=true)");
  EXPECT_TRUE(RowsOf(log, "ml-dev/nb-keep", "warned").empty());
  // The evicted pod is still allocated as far as the data knows: its cooldown holds.
  auto cooled = RowsOf(log, "ml-dev/nb-idle", "skipped");
  ASSERT_EQ(cooled.size(), 1u);
  EXPECT_NE(cooled[0].reason.find("cooldown"), std::string::npos) << cooled[0].reason;
  EXPECT_EQ(metrics.Value(MetricId::kInterventionActions, {"idle-notebooks", "stop", "ok"}), 2);
  EXPECT_EQ(metrics.Value(MetricId::kInterventionActions, {"idle-notebooks", "stop", "retry_later"}), 1);
}

// A Kubeflow notebook as the agent reports it: its job id is what the agent's default pod
// rules make of the pod's metadata (read with the agent's API client from the same stand-in
// the actuator asks), k8s/ml-dev/my-notebook, while its pod is the StatefulSet's
// my-notebook-0. The enforced rule's stop evicts that pod, and not the namespace's other pod.
TEST(ObjectivesLoopActionsTest, AnEnforcedStopOfAKubeflowNotebookEvictsThePodTheAgentsRulesNamedItFrom) {
  actuators::testing::StandInApiServer api;
  api.AddPod(kube::ObjectMeta{.name = "my-notebook-0", .ns = "ml-dev",
                              .labels = {{"notebook-name", "my-notebook"}, {"team", "vision"}},
                              .annotations = {{"notebooks.kubeflow.org/creator", "ada"}},
                              .owners = {{"StatefulSet", "my-notebook", true}}},
             201);
  api.AddPod(kube::ObjectMeta{.name = "my-notebook", .ns = "ml-dev", .owners = {{"ReplicaSet", "web-5d8", true}}}, 201);
  auto client = kube::ApiClient::Create({.url = api.url(), .timeout_ms = 2'000});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto listed = (*client)->ListPods("ml-dev");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);
  const kube::PodListItem& pod = (*listed)[0].meta.name == "my-notebook-0" ? (*listed)[0] : (*listed)[1];
  Job job = kube::ApplyPodRules(kube::PodRules::Defaults(), kube::PodFacts{"ml-dev", pod.meta.name, "main", &pod.meta});
  ASSERT_EQ(job.id, "k8s/ml-dev/my-notebook");
  ASSERT_EQ(job.kind, JobKind::kNotebook);
  job.pool = "dev";

  ledger::testing::TempLedger t;
  Batch b = IdleNotebook("b1", job.id, kBaseMs, kBaseMs + 2 * kMsPerHour);
  b.jobs = {job};
  ASSERT_TRUE(t.ledger().Ingest(b).ok());
  MetricsRegistry metrics;
  LoopActuators a;
  auto kube = actuators::KubernetesActuator({.api_server = api.url()});
  ASSERT_TRUE(kube.ok()) << kube.status().ToString();
  a.kubernetes = std::move(*kube);
  auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, StopIdleNotebooks(/*enforce=*/true, 0),
                                     std::move(a));
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());

  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/my-notebook-0"}));
  EXPECT_EQ(api.eviction_requests(), 1);
  auto taken = RowsOf(AuditLog(t.ledger()), "k8s/ml-dev/my-notebook", "taken");
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].result, "evicted 1 pod: my-notebook-0");
  EXPECT_EQ(metrics.Value(MetricId::kInterventionActions, {"idle-notebooks", "stop", "ok"}), 1);
}

// A Slurm stop's 30 s SIGTERM grace is the actuator's to wait, on its own thread: the
// evaluation that takes the stop returns at once, and the cancel follows (here when the
// loop, and its actuator, go: the server stopping cancels what is still in its grace).
TEST(ObjectivesLoopActionsTest, ASlurmStopsGraceDoesNotHoldTheEvaluation) {
  ledger::testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(IdleNotebook("b1", "4242", kBaseMs, kBaseMs + 2 * kMsPerHour)).ok());
  std::mutex mu;
  std::vector<std::string> ran;
  auto record = [&](const std::vector<std::string>& argv) -> Result<std::string> {
    std::lock_guard lock(mu);
    ran.push_back(argv[0] + " " + argv[1]);
    return std::string();
  };
  MetricsRegistry metrics;
  {
    LoopActuators a;
    a.slurm = actuators::SlurmActuator(record, {.term_grace_ms = 30'000});
    auto loop = ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, StopIdleNotebooks(/*enforce=*/true, 0), std::move(a));
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    auto started = std::chrono::steady_clock::now();
    ASSERT_TRUE((*loop)->EvaluateOnce().ok());
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
    std::lock_guard lock(mu);
    EXPECT_EQ(ran, std::vector<std::string>{"scancel --signal=TERM"});
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"scancel --signal=TERM", "scancel 4242"}));
  std::vector<ledger::RecordedAction> log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].result, "SIGTERM; scancel follows in 30 s");
}

// GET /api/v1/actions and /api/v1/objectives, role-scoped: a viewer of team vision sees
// vision's decisions and objectives only; an admin sees every one.
TEST(ObjectivesLoopActionsTest, TheApiShowsAViewerItsOwnTeamsActionsAndObjectivesOnly) {
  testing::TempDir dir;
  ManualClock clock(kBaseMs + 3 * kMsPerHour);
  ServerOptions options;
  options.tokens = {testing::TokenEntryFor("admin-token", "admin", Role::kAdmin, {}),
                    testing::TokenEntryFor("vision-token", "vision", Role::kViewer, {"vision"})};
  options.objectives = {
      ObjectiveSpec{.name = "fleet-utilization", .kind = ObjectiveKind::kUtilization, .target = 0.6,
                    .window_ms = kMsPerDay},
      ObjectiveSpec{.name = "vision-utilization", .kind = ObjectiveKind::kUtilization,
                    .scope = {ObjectiveScope::Of::kTeam, "vision"}, .target = 0.5, .window_ms = kMsPerDay}};
  testing::Harness h(dir.File("ledger.db"), clock, options);
  ASSERT_TRUE(h.error.empty()) << h.error;
  ASSERT_TRUE(h.ledger->Ingest(IdleNotebook("b1", "4242", kBaseMs, kBaseMs + 2 * kMsPerHour)).ok());
  ledger::RecordedAction other{.decision_id = "d-speech", .at_ms = kBaseMs + 2 * kMsPerHour, .rule = "idle-notebooks",
                               .job = "5151", .team = "speech", .action = "stop", .outcome = "proposed"};
  ledger::RecordedAction mine = other;
  mine.decision_id = "d-vision";
  mine.job = "4242";
  mine.team = "vision";
  ASSERT_TRUE(ledger::RecordActions(*h.ledger, {other, mine}).ok());

  auto [host, port] = *ParseListenAddress(h.url().substr(7));
  httplib::Client c(host, port);
  auto get = [&](const std::string& path, const std::string& token) {
    auto r = c.Get(path, {{"Authorization", "Bearer " + token}});
    EXPECT_TRUE(r) << path;
    return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string());
  };
  auto [admin_status, admin_body] = get("/api/v1/actions", "admin-token");
  ASSERT_EQ(admin_status, 200) << admin_body;
  EXPECT_EQ(nlohmann::json::parse(admin_body)["actions"].size(), 2u);
  auto [viewer_status, viewer_body] = get("/api/v1/actions", "vision-token");
  ASSERT_EQ(viewer_status, 200) << viewer_body;
  auto seen = nlohmann::json::parse(viewer_body);
  ASSERT_EQ(seen["actions"].size(), 1u);
  EXPECT_EQ(seen["actions"][0]["job"], "4242");
  EXPECT_EQ(seen["totals"]["proposed"].get<int>(), 1);
  EXPECT_EQ(viewer_body.find("speech"), std::string::npos);
  EXPECT_EQ(get("/api/v1/actions?outcome=done", "admin-token").first, 400);

  // Paged: one decision a page, through `next`, each once; the cursor in a header too.
  std::vector<std::string> paged;
  std::string after;
  for (int i = 0; i < 5; ++i) {
    auto r = c.Get("/api/v1/actions?limit=1" + (after.empty() ? "" : "&after=" + httplib::detail::encode_query_param(after)),
                   {{"Authorization", "Bearer admin-token"}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    auto page = nlohmann::json::parse(r->body);
    EXPECT_EQ(page["limit"], 1);
    for (const auto& a : page["actions"]) paged.push_back(a["decision_id"]);
    after = page["next"].is_null() ? "" : page["next"].get<std::string>();
    EXPECT_EQ(r->get_header_value("Gpuledger-Next-After"), after);
    if (after.empty()) break;
  }
  EXPECT_EQ(paged, (std::vector<std::string>{"d-speech", "d-vision"}));
  for (const char* bad : {"limit=0", "limit=5001", "limit=5abc", "limit=-1"}) {
    auto [status, body] = get(std::string("/api/v1/actions?") + bad, "admin-token");
    EXPECT_EQ(status, 400) << bad;
    EXPECT_NE(body.find("limit"), std::string::npos) << body;
  }
  auto [bad_cursor, cursor_body] = get("/api/v1/actions?after=yesterday", "admin-token");
  EXPECT_EQ(bad_cursor, 400);
  EXPECT_NE(cursor_body.find("after \\\"yesterday\\\": not a cursor a page gave"), std::string::npos) << cursor_body;

  auto [objectives_status, objectives_body] = get("/api/v1/objectives?history=3h", "vision-token");
  ASSERT_EQ(objectives_status, 200) << objectives_body;
  auto objectives = nlohmann::json::parse(objectives_body)["objectives"];
  ASSERT_EQ(objectives.size(), 1u);
  EXPECT_EQ(objectives[0]["name"], "vision-utilization");
  EXPECT_EQ(objectives[0]["history"]["times"].size(), 3u);
  EXPECT_EQ(objectives[0]["value"].get<double>(), 0.0);  // its notebook idled throughout
  EXPECT_FALSE(objectives[0]["met"].get<bool>());
  EXPECT_EQ(nlohmann::json::parse(get("/api/v1/objectives", "admin-token").second)["objectives"].size(), 2u);
}

}  // namespace
}  // namespace gpuledger::server
