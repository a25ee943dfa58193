#include "cli/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gpuledger::cli {
namespace {

using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              (name + "-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(ConfigTest, ReadsEveryKey) {
  auto path = Write("full", R"(
db = "fleet.db"
[ledger]
staleness_limit = "45s"
max_future_skew = "2m"
raw_retention = "30d"
[[price]]
model = "NVIDIA H100 80GB HBM3"
type = "reserved"
per_gpu_hour = "2.49"
from = "2026-01-01T00:00:00Z"
[[price]]
per_gpu_hour = "1.00"
[targets]
fleet = 0.65
pools = { serving = 0.4 }
[budgets]
nlp = "40000.00"
vision = "12500.5"
)");
  auto c = LoadConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->db_path, "fleet.db");
  EXPECT_EQ(c->ledger.staleness_override_ms, 45'000);
  EXPECT_EQ(c->ledger.max_future_skew_ms, 120'000);
  EXPECT_EQ(c->raw_retention_ms, 30 * kMsPerDay);
  ASSERT_EQ(c->prices->size(), 2u);
  EXPECT_EQ((*c->prices)[0].per_gpu_hour.micros(), 2'490'000);
  EXPECT_EQ((*c->prices)[0].capacity_type, CapacityType::kReserved);
  EXPECT_EQ((*c->prices)[1].model, "*");
  EXPECT_DOUBLE_EQ(c->goals.fleet_target, 0.65);
  EXPECT_DOUBLE_EQ(c->goals.TargetFor("serving"), 0.4);
  EXPECT_DOUBLE_EQ(c->goals.TargetFor("training"), 0.65);
  EXPECT_EQ(c->goals.monthly_budgets.at("nlp").micros(), 40'000'000'000);
  EXPECT_EQ(c->goals.monthly_budgets.at("vision").micros(), 12'500'500'000);
  std::filesystem::remove(path);
}

TEST(ConfigTest, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* expected;
  } cases[] = {
      {"db = 3\n", ":1: db: want a path string"},
      {"colour = \"blue\"\n", ":1: colour: unknown key"},
      {"[ledger]\nstaleness = \"3s\"\n", ":2: ledger.staleness: unknown key"},
      {"[ledger]\nstaleness_limit = \"soon\"\n", "staleness_limit: duration \"soon\""},
      {"[[price]]\nper_gpu_hour = 2.49\n", "per_gpu_hour: want a decimal string"},
      {"[[price]]\nper_gpu_hour = \"2.49\"\ntype = \"cheap\"\n", "capacity type \"cheap\""},
      {"[[price]]\nper_gpu_hour = \"1\"\nfrom = \"2026-01-01T00:30:00Z\"\n", "whole UTC hour"},
      {"[targets]\nfleet = 1.5\n", ":2: targets.fleet: want a ratio in 0..1"},
      {"[targets]\npools = { serving = \"low\" }\n", "targets.pools.serving: want a ratio"},
      {"[targets]\ngoal = 0.5\n", ":2: targets.goal: unknown key"},
      {"[budgets]\nnlp = 40000\n", ":2: budgets.nlp: want a decimal string"},
      {"[budgets]\nnlp = \"-5\"\n", "budgets.nlp: \"-5\" is not a positive amount"},
      {"db = \n", "toml"},
  };
  for (const auto& c : cases) {
    auto path = Write("bad", c.text);
    auto r = LoadConfig(path);
    ASSERT_FALSE(r.ok()) << c.text;
    if (std::string(c.expected) != "toml") {
      EXPECT_THAT(r.status().message(), HasSubstr(c.expected)) << c.text;
    }
    EXPECT_THAT(r.status().message(), HasSubstr(path)) << c.text;
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace gpuledger::cli
