// The Slurm actuator against a real local Slurm (munged, slurmctld and slurmd from Debian,
// started by the agent's harness, src/agent/testdata/slurm): jobs are submitted, the
// actuator acts on them as an enforced rule's decisions say, and `scontrol show job`
// tells what Slurm did: held, priority changed, requeued, cancelled. Needs root and the
// packages slurmctld, slurmd, slurm-client and munge; skipped with a message elsewhere.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "actuators/actuators.h"
#include "agent/local_slurm.h"
#include "agent/slurm.h"
#include "core/testing/missing_component.h"

namespace gpuledger::actuators {
namespace {

constexpr auto RunSlurm = &agent::local_slurm::Run;

struct Cluster {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gpuledger-actuators-slurm-" + std::to_string(::getpid()));
  bool made = std::filesystem::create_directories(dir);
  agent::local_slurm::Cluster slurm{(dir / "slurm").string()};
  ~Cluster() {
    (void)RunSlurm({"scancel", "--user=root"});
    slurm.Stop();  // before its folder goes: the harness finds the daemons by their pid files
    std::filesystem::remove_all(dir);
  }
  // sbatch's job id for a job running `sleep 300`, with `extra` options.
  std::string Submit(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {"sbatch", "--parsable", "-J", "gl-actuator", "-o", "/dev/null"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"--wrap", "exec sleep 300"});
    auto out = RunSlurm(argv);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->substr(0, out->find_first_of(";\n")) : "";
  }
};

objectives::Decision Acting(InterventionAction action, const std::string& job, int32_t priority = 0) {
  objectives::Decision d;
  d.rule = "rule";
  d.action = action;
  d.outcome = objectives::Outcome::kTaken;
  d.job.id = job;
  d.new_priority = priority;
  return d;
}

// The commands a stop runs, with when they ran: Apply returns once the SIGTERM is sent,
// and the cancel follows after the grace on the actuator's thread, so that a loop stopping
// several jobs is not held for a grace each.
TEST(SlurmActuatorTest, AStopReturnsAtOnceAndCancelsAfterItsGraceOnItsOwnThread) {
  using Steady = std::chrono::steady_clock;
  std::mutex mu;
  std::vector<std::pair<std::string, Steady::time_point>> ran;
  CommandRunner record = [&](const std::vector<std::string>& argv) -> Result<std::string> {
    std::string line;
    for (const std::string& a : argv) line += (line.empty() ? "" : " ") + a;
    std::lock_guard lock(mu);
    ran.emplace_back(line, Steady::now());
    return std::string();
  };
  auto ran_now = [&] {
    std::lock_guard lock(mu);
    return ran;
  };
  Steady::time_point started = Steady::now();
  {
    auto slurm = SlurmActuator(record, {.term_grace_ms = 400});
    for (const char* job : {"41", "42"}) {
      auto stopped = slurm->Apply(Acting(InterventionAction::kStop, job));
      ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
      EXPECT_EQ(*stopped, "SIGTERM; scancel follows in 400 ms");
    }
    EXPECT_LT(Steady::now() - started, std::chrono::milliseconds(300));  // no grace waited here
    ASSERT_EQ(ran_now().size(), 2u);
    EXPECT_EQ(ran_now()[0].first, "scancel --signal=TERM 41");
    EXPECT_EQ(ran_now()[1].first, "scancel --signal=TERM 42");
    for (int i = 0; i < 100 && ran_now().size() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<std::pair<std::string, Steady::time_point>> all = ran_now();
    ASSERT_EQ(all.size(), 4u);
    EXPECT_EQ(all[2].first, "scancel 41");
    EXPECT_EQ(all[3].first, "scancel 42");
    EXPECT_GE(all[2].second - all[0].second, std::chrono::milliseconds(390));
    // Both graces ran side by side, not one after the other.
    EXPECT_LT(all[3].second - all[0].second, std::chrono::milliseconds(790));

    // A stop still in its grace when the actuator goes (the server stopping) is cancelled then.
    ASSERT_TRUE(slurm->Apply(Acting(InterventionAction::kStop, "43")).ok());
  }
  std::vector<std::pair<std::string, Steady::time_point>> all = ran_now();
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[4].first, "scancel --signal=TERM 43");
  EXPECT_EQ(all[5].first, "scancel 43");
  EXPECT_LT(all[5].second - all[4].second, std::chrono::milliseconds(300));
}

TEST(SlurmActuatorTest, HoldsReprioritizesRequeuesAndStopsRealJobs) {
  if (std::string why = agent::local_slurm::Missing(); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  Cluster cluster;
  if (!cluster.slurm.error().empty()) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "the local Slurm cluster did not start: " << cluster.slurm.error();
  }
  auto slurm = SlurmActuator(RunSlurm, {.term_grace_ms = 1'000});

  // Two pending jobs (they may not begin for an hour), two running ones.
  std::string pending_a = cluster.Submit({"--begin=now+1hour"});
  std::string pending_b = cluster.Submit({"--begin=now+1hour"});
  std::string running_a = cluster.Submit({"--gres=gpu:1"});
  std::string running_b = cluster.Submit({"--gres=gpu:1"});
  ASSERT_TRUE(agent::local_slurm::WaitForJob(running_a, "JobState=RUNNING")) << agent::local_slurm::ShowJob(running_a);
  ASSERT_TRUE(agent::local_slurm::WaitForJob(running_b, "JobState=RUNNING")) << agent::local_slurm::ShowJob(running_b);

  auto held = slurm->Apply(Acting(InterventionAction::kHold, pending_a));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(*held, "held");
  EXPECT_TRUE(agent::local_slurm::WaitForJob(pending_a, "Priority=0 ")) << agent::local_slurm::ShowJob(pending_a);
  EXPECT_TRUE(agent::local_slurm::WaitForJob(pending_a, "JobHeld")) << agent::local_slurm::ShowJob(pending_a);

  auto raised = slurm->Apply(Acting(InterventionAction::kReprioritize, pending_b, 4242));
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  EXPECT_EQ(*raised, "priority 4242");
  EXPECT_TRUE(agent::local_slurm::WaitForJob(pending_b, "Priority=4242 ")) << agent::local_slurm::ShowJob(pending_b);

  auto requeued = slurm->Apply(Acting(InterventionAction::kRequeue, running_a));
  ASSERT_TRUE(requeued.ok()) << requeued.status().ToString();
  EXPECT_TRUE(agent::local_slurm::WaitForJob(running_a, "Restarts=1")) << agent::local_slurm::ShowJob(running_a);

  auto stopped = slurm->Apply(Acting(InterventionAction::kStop, running_b));
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_TRUE(agent::local_slurm::WaitForJob(running_b, "JobState=CANCELLED") || agent::local_slurm::WaitForJob(running_b, "JobState=COMPLETED"))
      << agent::local_slurm::ShowJob(running_b);

  // A job id Slurm does not know is an error naming the command.
  auto unknown = slurm->Apply(Acting(InterventionAction::kHold, "999999"));
  EXPECT_FALSE(unknown.ok());
  EXPECT_FALSE(slurm->Apply(Acting(InterventionAction::kHold, "ml-dev/nb")).ok());
}

}  // namespace
}  // namespace gpuledger::actuators
