// Runs the nvml_probe executable against the fake library, as scripts/device-check.sh
// runs it against the real one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "nvml/test_support.h"

namespace gpuledger::nvml {
namespace {

using ::testing::HasSubstr;

// Runs `command` through the shell; returns its stdout and sets `status`.
std::string RunShell(const std::string& command, int* status) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  *status = pclose(pipe);
  return out;
}

int CountLines(const std::string& text, const std::string& prefix) {
  int n = 0;
  size_t pos = 0;
  while ((pos = text.find("\n" + prefix, pos)) != std::string::npos) {
    ++n;
    ++pos;
  }
  return n;
}

TEST(NvmlProbeTest, PrintsSymbolsDevicesAndSamplesFromTheFake) {
  // Real time in the fake (no clock file), as on a real machine.
  std::string command = "GPULEDGER_FAKE_NVML_CLOCK_FILE= GPULEDGER_FAKE_NVML_SCENARIO='" +
                        testing::TestdataPath("timeshare.toml") + "' '" GPULEDGER_NVML_PROBE
                        "' --library '" + testing::FakeLibraryPath(testing::Driver::kCurrent) +
                        "' --seconds 1 --interval-ms 250";
  int status = -1;
  std::string out = RunShell(command, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("driver 550.54.15\n"));
  EXPECT_THAT(out, HasSubstr("symbol nvmlDeviceGetComputeRunningProcesses -> "
                             "nvmlDeviceGetComputeRunningProcesses_v3\n"));
  EXPECT_THAT(out, HasSubstr("device uuid=GPU-a3000000-0000-4000-8000-000000000000 "
                             "model=\"NVIDIA H100 80GB HBM3\""));
  EXPECT_THAT(out, HasSubstr(" gpm=true"));
  EXPECT_EQ(CountLines(out, "sample "), 4) << out;
  EXPECT_EQ(CountLines(out, "process "), 8) << out;
  EXPECT_THAT(out, HasSubstr("failure"));  // energy is not supported in this scenario
}

TEST(NvmlProbeTest, MissingLibraryExitsNonZeroWithTheReason) {
  int status = -1;
  std::string out = RunShell("'" GPULEDGER_NVML_PROBE "' --library /nonexistent/libnvidia-ml.so.1 "
                        "--seconds 1 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("cannot load NVML library '/nonexistent/libnvidia-ml.so.1'"));
}

}  // namespace
}  // namespace gpuledger::nvml
