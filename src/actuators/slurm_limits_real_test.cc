// Hard quotas enforced by a real Slurm (docs/quotas.md, "Enforcement"): the local cluster
// of agent/local_slurm.h with slurmdbd on a MariaDB of its own, started once for the
// suite (ctest runs the suite as one process: actuators_test:slurmdbd). The quota's limit
// is ledger::SlurmLimits'; it goes in and comes back through actuators::SyncSlurmLimits,
// the code `gpuledger quota slurm [--push]` and GET /api/v1/quotas/drift run, with the
// real sacctmgr. Needs root and the Debian packages slurmctld, slurmd, slurm-client,
// munge, slurmdbd, slurm-wlm-mysql-plugin and mariadb-server; skipped with a message
// elsewhere (a failure with CI=true).
//
// The numbers: with AccountingStorageEnforce=limits,safe Slurm starts a job only if its
// GPUs x time limit fit in what the account has left, counting the time limits still to
// run of its running jobs. So jobs of `sleep 300` with time limits of tens of minutes use
// up a 1-GPU-hour quota at once, and the test waits for nothing but the scheduler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "actuators/actuators.h"
#include "agent/local_slurm.h"
#include "agent/slurm.h"
#include "core/testing/missing_component.h"
#include "ledger/quotas.h"

namespace gpuledger::actuators {
namespace {

namespace local_slurm = agent::local_slurm;
using ::testing::HasSubstr;

CommandRunner RealRunner() {
  return [](const std::vector<std::string>& argv) { return agent::RunCommand(argv, 30'000); };
}

// The hard quota of `team`: `gpu_hours` a month.
std::vector<ledger::SlurmLimit> HardQuota(const std::string& team, int64_t gpu_hours) {
  std::vector<QuotaSpec> quotas = {
      QuotaSpec{.name = team, .mode = QuotaMode::kHard, .gpu_hours = gpu_hours, .source = "quotas.toml:1"}};
  std::vector<std::string> skipped;
  std::vector<ledger::SlurmLimit> want = ledger::SlurmLimits(quotas, &skipped);
  EXPECT_TRUE(skipped.empty());
  return want;
}

class SlurmdbdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!local_slurm::MissingAccounting().empty()) return;
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("gpuledger-slurmdbd-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    cluster_ = new local_slurm::Cluster((*dir_ / "slurm").string(), local_slurm::Accounting::kSlurmdbd);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (std::string why = local_slurm::MissingAccounting(); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
    if (!cluster_->error().empty()) {
      GPULEDGER_SKIP_OR_FAIL_IN_CI() << "the local Slurm with slurmdbd did not start: " << cluster_->error();
    }
  }
  // Each test starts from an account with no jobs and no limit.
  void TearDown() override {
    if (cluster_ == nullptr || !cluster_->error().empty()) return;
    (void)local_slurm::Run({"scancel", "--account=nlp"});
    (void)local_slurm::Run({"sacctmgr", "-i", "modify", "account", "name=nlp", "set", "GrpTRESMins=gres/gpu=-1"});
  }

  // sbatch's id for a job of account nlp on one GPU, running `sleep 300` under a time
  // limit of `minutes`.
  static std::string Submit(int minutes) {
    auto out = local_slurm::Run({"sbatch", "--parsable", "-A", "nlp", "--gres=gpu:1", "--time=" + std::to_string(minutes),
                                 "-J", "gl-quota", "-o", "/dev/null", "--wrap", "exec sleep 300"});
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? out->substr(0, out->find_first_of(";\n")) : "";
  }

  static std::filesystem::path* dir_;
  static local_slurm::Cluster* cluster_;
};

std::filesystem::path* SlurmdbdTest::dir_ = nullptr;
local_slurm::Cluster* SlurmdbdTest::cluster_ = nullptr;

TEST_F(SlurmdbdTest, APushedHardQuotaMakesTheJobPastItPendWithAssocGrpGresMinutes) {
  // A hard quota of 1 GPU-hour a month: 60 GPU-minutes on account nlp.
  std::vector<ledger::SlurmLimit> want = HardQuota("nlp", 1);
  std::vector<ledger::SlurmLimit> pushed;
  auto limits = SyncSlurmLimits(RealRunner(), want, /*push=*/true, "sacctmgr", ledger::Scope::All(), &pushed);
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  ASSERT_EQ(pushed.size(), 1u);
  EXPECT_EQ(pushed[0].gpu_minutes, 60);
  auto nlp = std::find_if(limits->begin(), limits->end(), [](const auto& a) { return a.account == "nlp"; });
  ASSERT_NE(nlp, limits->end());
  EXPECT_EQ(nlp->state, ledger::SlurmLimitState::kInForce);
  EXPECT_EQ(nlp->have_gpu_minutes, 60);

  // 45 of the 60 GPU-minutes: it runs.
  std::string first = Submit(45);
  ASSERT_TRUE(local_slurm::WaitForJob(first, "JobState=RUNNING")) << local_slurm::ShowJob(first);
  // 30 more would make 75: it pends for the account's GPU-minutes, though a GPU is free.
  std::string over = Submit(30);
  ASSERT_TRUE(local_slurm::WaitForJob(over, "Reason=AssocGrpGRESMinutes")) << local_slurm::ShowJob(over);
  EXPECT_THAT(local_slurm::ShowJob(over), HasSubstr("JobState=PENDING"));
  auto reason = local_slurm::Run({"squeue", "-h", "-j", over, "-o", "%r"});
  ASSERT_TRUE(reason.ok()) << reason.status().ToString();
  EXPECT_EQ(*reason, "AssocGrpGRESMinutes\n");
  // The 15 left fit exactly: that job takes the free GPU (the limit is to the minute, and
  // the GPU was free for the one that pends).
  std::string last = Submit(15);
  ASSERT_TRUE(local_slurm::WaitForJob(last, "JobState=RUNNING")) << local_slurm::ShowJob(last);
  EXPECT_THAT(local_slurm::ShowJob(over), HasSubstr("JobState=PENDING"));
  // The running jobs were not touched by the limit (safe).
  EXPECT_THAT(local_slurm::ShowJob(first), HasSubstr("JobState=RUNNING"));
}

TEST_F(SlurmdbdTest, ALimitChangedByHandWithSacctmgrIsReportedAsDriftAndPushMendsIt) {
  std::vector<ledger::SlurmLimit> want = HardQuota("nlp", 1);
  auto before = SyncSlurmLimits(RealRunner(), want, /*push=*/false);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ((*before)[0].state, ledger::SlurmLimitState::kNotPushed);

  ASSERT_TRUE(SyncSlurmLimits(RealRunner(), want, /*push=*/true).ok());
  // Someone raises the limit by hand, and limits an account no quota names.
  ASSERT_TRUE(local_slurm::Run({"sacctmgr", "-i", "modify", "account", "name=nlp", "set", "GrpTRESMins=gres/gpu=120"}).ok());
  ASSERT_TRUE(local_slurm::Run({"sacctmgr", "-i", "modify", "account", "name=root", "set", "GrpTRESMins=gres/gpu=7"}).ok());

  auto drift = SyncSlurmLimits(RealRunner(), want, /*push=*/false);
  (void)local_slurm::Run({"sacctmgr", "-i", "modify", "account", "name=root", "set", "GrpTRESMins=gres/gpu=-1"});
  ASSERT_TRUE(drift.ok()) << drift.status().ToString();
  ASSERT_EQ(drift->size(), 2u);
  EXPECT_EQ((*drift)[0].account, "nlp");
  EXPECT_EQ((*drift)[0].state, ledger::SlurmLimitState::kDiffers);
  EXPECT_EQ((*drift)[0].want_gpu_minutes, 60);
  EXPECT_EQ((*drift)[0].have_gpu_minutes, 120);
  EXPECT_EQ((*drift)[1].account, "root");
  EXPECT_EQ((*drift)[1].state, ledger::SlurmLimitState::kUnmanaged);
  EXPECT_EQ((*drift)[1].have_gpu_minutes, 7);
  // A viewer of team nlp sees its own account only.
  auto scoped = SyncSlurmLimits(RealRunner(), want, /*push=*/false, "sacctmgr", ledger::Scope::Teams({"nlp"}));
  ASSERT_TRUE(scoped.ok()) << scoped.status().ToString();
  ASSERT_EQ(scoped->size(), 1u);
  EXPECT_EQ((*scoped)[0].account, "nlp");

  // --push sets it back, and Slurm then enforces the quota's number again.
  auto mended = SyncSlurmLimits(RealRunner(), want, /*push=*/true);
  ASSERT_TRUE(mended.ok()) << mended.status().ToString();
  ASSERT_EQ(mended->size(), 1u);
  EXPECT_EQ((*mended)[0].state, ledger::SlurmLimitState::kInForce);
  auto text = local_slurm::Run({"sacctmgr", "-n", "-P", "show", "assoc", "where", "account=nlp",
                                "format=Account,User,GrpTRESMins"});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_THAT(*text, HasSubstr("nlp||gres/gpu=60\n"));
}

}  // namespace
}  // namespace gpuledger::actuators
