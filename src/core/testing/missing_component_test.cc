// GPULEDGER_SKIP_OR_FAIL_IN_CI: a skip on a developer's machine, a failure in CI, with
// the caller's message either way.
#include "core/testing/missing_component.h"

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace gpuledger::test_env {
namespace {

using ::testing::HasSubstr;
using ::testing::TestPartResult;

// Sets CI for one scope (unset when `value` is empty) and restores what was there.
class ScopedCi {
 public:
  explicit ScopedCi(std::optional<std::string> value) {
    if (const char* old = std::getenv("CI")) saved_ = old;
    if (value) {
      ::setenv("CI", value->c_str(), 1);
    } else {
      ::unsetenv("CI");
    }
  }
  ~ScopedCi() {
    if (saved_) {
      ::setenv("CI", saved_->c_str(), 1);
    } else {
      ::unsetenv("CI");
    }
  }
  ScopedCi(const ScopedCi&) = delete;
  ScopedCi& operator=(const ScopedCi&) = delete;

 private:
  std::optional<std::string> saved_;
};

// A test step that needs a tool; `went_on` tells whether it got past the check.
void NeedsTheFrobnicator(bool installed, bool& went_on) {
  went_on = false;
  if (!installed)
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "frobnicator not installed (Debian package frob)";
  went_on = true;
}

// What NeedsTheFrobnicator reports under `ci`, captured without touching this test.
struct Outcome {
  TestPartResult::Type type;
  std::string message;
  int parts;
  bool went_on;
};
Outcome RunStep(std::optional<std::string> ci, bool installed = false) {
  ScopedCi scoped(std::move(ci));
  ::testing::TestPartResultArray results;
  bool went_on = false;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    NeedsTheFrobnicator(installed, went_on);
  }
  if (results.size() == 0) return {TestPartResult::kSuccess, "", 0, went_on};
  const TestPartResult& r = results.GetTestPartResult(0);
  return {r.type(), r.message(), results.size(), went_on};
}

TEST(MissingComponentTest, SkipsWithTheMessageWhenCiIsUnset) {
  Outcome o = RunStep(std::nullopt);
  EXPECT_EQ(o.parts, 1);
  EXPECT_EQ(o.type, TestPartResult::kSkip);
  EXPECT_THAT(o.message, HasSubstr("frobnicator not installed (Debian package frob)"));
  EXPECT_FALSE(o.went_on) << "the step must stop where the component is missing";
}

TEST(MissingComponentTest, FailsWithTheSameMessageWhenCiIsTrue) {
  for (const char* ci : {"true", "1"}) {
    SCOPED_TRACE(ci);
    Outcome o = RunStep(ci);
    EXPECT_EQ(o.parts, 1);
    EXPECT_EQ(o.type, TestPartResult::kFatalFailure);
    EXPECT_THAT(o.message, HasSubstr("frobnicator not installed (Debian package frob)"));
    EXPECT_THAT(o.message, HasSubstr("CI=true"));
    EXPECT_FALSE(o.went_on);
  }
}

TEST(MissingComponentTest, OtherValuesOfCiStillSkip) {
  for (const char* ci : {"", "false", "0"}) {
    SCOPED_TRACE(ci);
    EXPECT_EQ(RunStep(ci).type, TestPartResult::kSkip);
  }
}

TEST(MissingComponentTest, APresentComponentNeitherSkipsNorFails) {
  for (std::optional<std::string> ci :
       {std::optional<std::string>(), std::optional<std::string>("true")}) {
    Outcome o = RunStep(ci, /*installed=*/true);
    EXPECT_EQ(o.parts, 0) << o.message;
    EXPECT_TRUE(o.went_on);
  }
}

TEST(MissingComponentTest, RunningInCiReadsTheEnvironment) {
  {
    ScopedCi ci("true");
    EXPECT_TRUE(RunningInCi());
  }
  {
    ScopedCi ci(std::nullopt);
    EXPECT_FALSE(RunningInCi());
  }
}

}  // namespace
}  // namespace gpuledger::test_env
