// Hard quotas pushed into Slurm and read back, through a recording command runner (the
// commands and the parsing; a real slurmdbd is not part of this test).
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

}  // namespace
}  // namespace gpuledger::actuators
