// `gpuledger quota slurm` against a real Slurm with slurmdbd and MariaDB (agent/local_slurm.h,
// Accounting::kSlurmdbd): the config's hard quota, the binary, the real sacctmgr. What
// Slurm then does with the limit is actuators_test:slurmdbd's. Needs root and the Debian
// packages slurmctld, slurmd, slurm-client, munge, slurmdbd, slurm-wlm-mysql-plugin and
// mariadb-server; skipped with a message elsewhere (a failure with CI=true).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/local_slurm.h"
#include "cli/test_support.h"
#include "core/testing/missing_component.h"

namespace gpuledger::cli {
namespace {

namespace local_slurm = agent::local_slurm;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class QuotaSlurm : public testing::TempDirTest {};

TEST_F(QuotaSlurm, ReportsDriftUntilPushedAndAgainAfterAHandEdit) {
  if (std::string why = local_slurm::MissingAccounting(); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  local_slurm::Cluster slurm((dir_ / "slurm").string(), local_slurm::Accounting::kSlurmdbd);
  if (!slurm.error().empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << "the local Slurm with slurmdbd did not start: " << slurm.error();
  // 2 GPU-hours a month, hard: 120 GPU-minutes on account nlp. The config names no
  // database: `quota slurm` needs none.
  std::string config = File("quotas.toml", "[[quota]]\nteam = \"nlp\"\ngpu_hours = 2\nmode = \"hard\"\n");

  testing::Outcome never = testing::Gpuledger("quota slurm --config " + config);
  EXPECT_EQ(never.exit_code, 2) << never.output;
  EXPECT_THAT(never.output, ContainsRegex("nlp +120 +-  DRIFT \\(not_pushed\\)"));

  testing::Outcome pushed = testing::Gpuledger("quota slurm --push --config " + config);
  EXPECT_EQ(pushed.exit_code, 0) << pushed.output;
  EXPECT_THAT(pushed.output, HasSubstr("set nlp GrpTRESMins=gres/gpu=120\n"));
  EXPECT_THAT(pushed.output, ContainsRegex("nlp +120 +120  in force"));

  // Someone gives nlp more by hand.
  auto edit = local_slurm::Run({"sacctmgr", "-i", "modify", "account", "name=nlp", "set", "GrpTRESMins=gres/gpu=600"});
  ASSERT_TRUE(edit.ok()) << edit.status().ToString();
  testing::Outcome drifted = testing::Gpuledger("quota slurm --config " + config);
  EXPECT_EQ(drifted.exit_code, 2) << drifted.output;
  EXPECT_THAT(drifted.output, ContainsRegex("nlp +120 +600  DRIFT \\(differs\\)"));
  EXPECT_THAT(drifted.output, Not(HasSubstr("set nlp")));  // without --push nothing is set

  testing::Outcome mended = testing::Gpuledger("quota slurm --push --config " + config);
  EXPECT_EQ(mended.exit_code, 0) << mended.output;
  EXPECT_THAT(mended.output, ContainsRegex("nlp +120 +120  in force"));
}

}  // namespace
}  // namespace gpuledger::cli
