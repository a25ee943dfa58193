#include "agent/proc_reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "agent/test_util.h"

namespace gpuledger::agent {
namespace {

using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using testing::Child;
using testing::TempDir;
using testing::WriteFile;

// A string literal with embedded NULs, whole.
template <size_t N>
std::string Nul(const char (&s)[N]) {
  return std::string(s, N - 1);
}

TEST(ProcReaderTest, ParseEnvironKeepsOnlyAttributionVariables) {
  std::string text = Nul("HOME=/root\0GPULEDGER_JOB=j1\0SLURM_JOB_ID=42\0AWS_SECRET_ACCESS_KEY=x\0"
                         "GPULEDGER_TEAM=nlp\0GPULEDGER_JOB=second\0noequals\0=empty\0");
  Environment env = ParseEnviron(text);
  EXPECT_THAT(env, UnorderedElementsAre(Pair("GPULEDGER_JOB", "j1"), Pair("SLURM_JOB_ID", "42"),
                                        Pair("GPULEDGER_TEAM", "nlp")));
}

TEST(ProcReaderTest, ReadsAFakeTree) {
  TempDir dir;
  WriteFile(dir / "17/environ", Nul("GPULEDGER_JOB=a\0PATH=/bin\0"));
  WriteFile(dir / "17/cgroup", "0::/slurm/job_5/step_0\n");
  ProcReader proc(dir.path());
  auto env = proc.ReadEnvironment(17);
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_THAT(*env, UnorderedElementsAre(Pair("GPULEDGER_JOB", "a")));
  auto cg = proc.ReadCgroup(17);
  ASSERT_TRUE(cg.ok());
  EXPECT_EQ(*cg, "0::/slurm/job_5/step_0\n");
  auto gone = proc.ReadEnvironment(18);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), ::testing::HasSubstr("/18/environ"));
}

TEST(ProcReaderTest, ReadsARealChildsEnvironment) {
  Child child({"PATH=/bin", "GPULEDGER_JOB=spawned-7", "GPULEDGER_TEAM=vision", "SLURM_JOB_ID=991",
               "SECRET_TOKEN=hunter2"});
  ASSERT_GT(child.pid(), 0);
  ProcReader proc;
  auto env = proc.ReadEnvironment(static_cast<uint32_t>(child.pid()));
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_THAT(*env, UnorderedElementsAre(Pair("GPULEDGER_JOB", "spawned-7"), Pair("GPULEDGER_TEAM", "vision"),
                                         Pair("SLURM_JOB_ID", "991")));
}

}  // namespace
}  // namespace gpuledger::agent
