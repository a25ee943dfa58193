// Tests that need a real component (Prometheus, promtool, Slurm, Chromium, the sqlite3
// shell) or the shared data beside the checkout skip where it is missing, so that a
// developer's machine without it still runs everything else. CI must never pass
// without them having run, so with the environment variable CI=true (as CI runs) the
// same condition is a fatal failure carrying the same message.
//
//   if (!std::filesystem::exists("/usr/bin/promtool"))
//     GPULEDGER_SKIP_OR_FAIL_IN_CI() << "promtool not installed (Debian package prometheus)";
//
// Like GTEST_SKIP() it returns from the current function, so it may be used in a test
// body, SetUp(), or a helper returning void (whose caller then checks
// IsSkipped() / HasFatalFailure()). For skips that do not mean "a component is
// missing" keep GTEST_SKIP().
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

// Not gpuledger::testing: inside namespace gpuledger that name would hide GoogleTest's
// ::testing from code that writes testing::Foo.
namespace gpuledger::test_env {

// True when the environment variable CI is "true" or "1" (what CI services set).
inline bool RunningInCi() {
  const char* v = std::getenv("CI");
  return v != nullptr && (std::string_view(v) == "true" || std::string_view(v) == "1");
}

// The outcome of a test whose component is missing: a skip, or in CI a fatal failure.
inline ::testing::TestPartResult::Type MissingComponentOutcome() {
  return RunningInCi() ? ::testing::TestPartResult::kFatalFailure
                       : ::testing::TestPartResult::kSkip;
}

// The line put before the caller's message in CI, saying why a skip became a failure.
inline const char* MissingComponentPreamble() {
  return RunningInCi()
             ? "CI=true: a missing component or shared file fails the test instead of skipping it"
             : "";
}

}  // namespace gpuledger::test_env

// GTEST_SKIP()'s own expansion (gtest-internal.h's GTEST_MESSAGE_) with the outcome
// chosen at run time; stream the reason into it as into GTEST_SKIP().
#define GPULEDGER_SKIP_OR_FAIL_IN_CI()                                     \
  return GTEST_MESSAGE_(::gpuledger::test_env::MissingComponentPreamble(), \
                        ::gpuledger::test_env::MissingComponentOutcome())
