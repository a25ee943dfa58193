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
#include <thread>

#include "actuators/actuators.h"
#include "agent/local_slurm.h"
#include "agent/slurm.h"
#include "core/testing/missing_component.h"

namespace gpuledger::actuators {
namespace {

Result<std::string> RunSlurm(const std::vector<std::string>& argv) { return agent::RunCommand(argv, 30'000); }

struct Cluster {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gpuledger-actuators-slurm-" + std::to_string(::getpid()));
  bool made = std::filesystem::create_directories(dir);
  agent::local_slurm::Cluster slurm{(dir / "slurm").string()};
  ~Cluster() {
    (void)RunSlurm({"scancel", "--user=root"});
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
  std::string Show(const std::string& id) {
    auto out = RunSlurm({"scontrol", "show", "job", id});
    return out.ok() ? *out : out.status().message();
  }
  // Waits until the job's `scontrol show job` contains `text`.
  bool WaitFor(const std::string& id, const std::string& text, int seconds = 30) {
    for (int i = 0; i < seconds * 10; ++i) {
      if (Show(id).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
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
  ASSERT_TRUE(cluster.WaitFor(running_a, "JobState=RUNNING")) << cluster.Show(running_a);
  ASSERT_TRUE(cluster.WaitFor(running_b, "JobState=RUNNING")) << cluster.Show(running_b);

  auto held = slurm->Apply(Acting(InterventionAction::kHold, pending_a));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ(*held, "held");
  EXPECT_TRUE(cluster.WaitFor(pending_a, "Priority=0 ")) << cluster.Show(pending_a);
  EXPECT_TRUE(cluster.WaitFor(pending_a, "JobHeld")) << cluster.Show(pending_a);

  auto raised = slurm->Apply(Acting(InterventionAction::kReprioritize, pending_b, 4242));
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  EXPECT_EQ(*raised, "priority 4242");
  EXPECT_TRUE(cluster.WaitFor(pending_b, "Priority=4242 ")) << cluster.Show(pending_b);

  auto requeued = slurm->Apply(Acting(InterventionAction::kRequeue, running_a));
  ASSERT_TRUE(requeued.ok()) << requeued.status().ToString();
  EXPECT_TRUE(cluster.WaitFor(running_a, "Restarts=1")) << cluster.Show(running_a);

  auto stopped = slurm->Apply(Acting(InterventionAction::kStop, running_b));
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_TRUE(cluster.WaitFor(running_b, "JobState=CANCELLED") || cluster.WaitFor(running_b, "JobState=COMPLETED"))
      << cluster.Show(running_b);

  // A job id Slurm does not know is an error naming the command.
  auto unknown = slurm->Apply(Acting(InterventionAction::kHold, "999999"));
  EXPECT_FALSE(unknown.ok());
  EXPECT_FALSE(slurm->Apply(Acting(InterventionAction::kHold, "ml-dev/nb")).ok());
}

}  // namespace
}  // namespace gpuledger::actuators
