// The server's objectives loop carrying out its rules' decisions: an enforce rule against
// the project's real local Slurm (src/agent/testdata/slurm), warning first and stopping the
// job after its grace, every decision read back from the audit log; a restarted loop
// keeping the cooldown the log holds; a dry-run rule recording proposals and acting on
// nothing; the API showing a viewer its own team's decisions and objectives only. Slurm
// needs root and the packages slurmctld, slurmd, slurm-client and munge.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "actuators/actuators.h"
#include "agent/local_slurm.h"
#include "agent/slurm.h"
#include "core/testing/missing_component.h"
#include "ledger/actions.h"
#include "ledger/test_fixture.h"
#include "server/objectives_loop.h"
#include "server/test_support.h"

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
  auto make_loop = [&] {
    LoopActuators a;
    a.slurm = actuators::SlurmActuator(RunSlurm, {.term_grace_ms = 1'000});
    return ObjectivesLoop::Create(t.ledger(), t.clock(), metrics, StopIdleNotebooks(/*enforce=*/true, 10 * kMsPerMinute), std::move(a));
  };
  auto loop = make_loop();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();

  // First the owner's warning: the job still runs.
  ASSERT_TRUE((*loop)->EvaluateOnce().ok());
  std::vector<ledger::RecordedAction> log = AuditLog(t.ledger());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].outcome, "warned");
  EXPECT_EQ(log[0].job, job);
  EXPECT_TRUE(log[0].enforce);
  EXPECT_TRUE(log[0].result.empty());
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
  EXPECT_EQ(log[1].result, "SIGTERM, then cancelled 1 s later");
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
