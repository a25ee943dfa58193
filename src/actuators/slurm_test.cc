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

constexpr auto RunSlurm = &agent::local_slurm::Run;

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
