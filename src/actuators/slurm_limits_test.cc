// Hard quotas pushed into Slurm and read back, through a recording command runner (the
// commands and the parsing; slurm_limits_real_test.cc runs them against a real slurmdbd).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "actuators/actuators.h"

namespace gpuledger::actuators {
namespace {

using ::testing::HasSubstr;

TEST(SlurmLimitsTest, PushesTheAccountsGpuMinutesWithSacctmgr) {
  std::vector<std::vector<std::string>> ran;
  CommandRunner run = [&](const std::vector<std::string>& argv) -> Result<std::string> {
    ran.push_back(argv);
    return std::string();
  };
  ASSERT_TRUE(PushSlurmLimit(run, {"nlp", 30'000, "q.toml:1"}, "/usr/bin/sacctmgr").ok());
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0], (std::vector<std::string>{"/usr/bin/sacctmgr", "-i", "modify", "account", "name=nlp", "set",
                                              "GrpTRESMins=gres/gpu=30000"}));
  Status bad = PushSlurmLimit(run, {"nlp where name=root", 1, ""});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("account \"nlp where name=root\": not a Slurm account name"));
  EXPECT_EQ(ran.size(), 1u);  // nothing run for it
  CommandRunner failing = [](const std::vector<std::string>&) -> Result<std::string> {
    return Unavailable("sacctmgr: error: Problem talking to the database");
  };
  Status down = PushSlurmLimit(failing, {"nlp", 1, ""});
  EXPECT_THAT(down.message(), HasSubstr("account nlp"));
  EXPECT_THAT(down.message(), HasSubstr("Problem talking to the database"));
}

TEST(SlurmLimitsTest, ReadsEachAccountsGpuMinutesAndSkipsUsersAndOtherTres) {
  CommandRunner run = [](const std::vector<std::string>& argv) -> Result<std::string> {
    EXPECT_EQ(argv, (std::vector<std::string>{"sacctmgr", "-n", "-P", "show", "assoc",
                                              "format=Account,User,GrpTRESMins"}));
    return std::string("root||\nroot|root|\nnlp||cpu=100,gres/gpu=30000\nnlp|alice|gres/gpu=5\nvision||cpu=7\n");
  };
  auto limits = ReadSlurmLimits(run);
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  EXPECT_EQ(*limits, (std::map<std::string, int64_t>{{"nlp", 30'000}}));
}

TEST(SlurmLimitsTest, ALineItCannotReadIsNamed) {
  CommandRunner two_fields = [](const std::vector<std::string>&) -> Result<std::string> {
    return std::string("nlp||gres/gpu=1\nnlp|gres/gpu=3\n");
  };
  auto r = ReadSlurmLimits(two_fields);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("line 2: \"nlp|gres/gpu=3\""));
  CommandRunner not_a_number = [](const std::vector<std::string>&) -> Result<std::string> {
    return std::string("nlp||gres/gpu=lots\n");
  };
  auto n = ReadSlurmLimits(not_a_number);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), HasSubstr("\"gres/gpu=lots\": not a number of minutes"));
}

TEST(SlurmLimitsTest, PushSetsOnlyTheQuotasAccountsThatDifferAndAnswersWhatItReadsBack) {
  // Slurm, as a map the pushes change: nlp in force, cv changed by hand, ops limited by
  // nobody's quota; vision has no limit.
  std::map<std::string, int64_t> slurm = {{"nlp", 600}, {"cv", 999}, {"ops", 7}};
  std::vector<std::vector<std::string>> pushes;
  CommandRunner run = [&](const std::vector<std::string>& argv) -> Result<std::string> {
    if (argv[3] == "account") {  // sacctmgr -i modify account name=A set GrpTRESMins=gres/gpu=N
      pushes.push_back(argv);
      slurm[argv[4].substr(5)] = std::stoll(argv[6].substr(argv[6].rfind('=') + 1));
      return std::string();
    }
    std::string text;
    for (const auto& [account, minutes] : slurm) text += account + "||gres/gpu=" + std::to_string(minutes) + "\n";
    return text;
  };
  std::vector<ledger::SlurmLimit> want = {{"cv", 60, "q:1"}, {"nlp", 600, "q:5"}, {"vision", 120, "q:9"}};

  auto checked = SyncSlurmLimits(run, want, /*push=*/false);
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_TRUE(pushes.empty());
  ASSERT_EQ(checked->size(), 4u);
  EXPECT_EQ((*checked)[0].state, ledger::SlurmLimitState::kDiffers);  // cv

  std::vector<ledger::SlurmLimit> pushed;
  auto synced = SyncSlurmLimits(run, want, /*push=*/true, "sacctmgr", ledger::Scope::All(), &pushed);
  ASSERT_TRUE(synced.ok()) << synced.status().ToString();
  ASSERT_EQ(pushes.size(), 2u);  // cv and vision; not nlp (in force), not ops (unmanaged)
  EXPECT_EQ(pushes[0].back(), "GrpTRESMins=gres/gpu=60");
  EXPECT_EQ(pushes[1][4], "name=vision");
  ASSERT_EQ(pushed.size(), 2u);
  EXPECT_EQ(pushed[1].source, "q:9");
  ASSERT_EQ(synced->size(), 4u);
  for (const ledger::SlurmAccountLimit& a : *synced) {
    EXPECT_EQ(a.state, a.account == "ops" ? ledger::SlurmLimitState::kUnmanaged : ledger::SlurmLimitState::kInForce)
        << a.account;
  }
  EXPECT_EQ(slurm["ops"], 7);  // left as it was
}

}  // namespace
}  // namespace gpuledger::actuators
