#include "nvml/test_support.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace gpuledger::nvml::testing {

ScenarioClock::ScenarioClock() {
  static std::atomic<int> counter{0};
  file_ = ::testing::TempDir() + "fake_nvml_clock_" + std::to_string(getpid()) + "_" +
          std::to_string(counter++);
  Set(0);
}

ScenarioClock::~ScenarioClock() { std::remove(file_.c_str()); }

void ScenarioClock::Set(int64_t t_ms) {
  t_ms_ = t_ms;
  // Written whole, then renamed over the old file: the fake never reads half a number.
  std::string tmp = file_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << t_ms << "\n";
  }
  std::filesystem::rename(tmp, file_);
}

std::string FakeLibraryPath(Driver driver) {
  return std::string(driver == Driver::kOld ? GPULEDGER_FAKE_NVML_OLD_DIR : GPULEDGER_FAKE_NVML_DIR) +
         "/libnvidia-ml.so.1";
}

std::string TestdataPath(std::string_view name) {
  return std::string(GPULEDGER_SOURCE_DIR) + "/src/nvml/testdata/" + std::string(name);
}

Result<std::unique_ptr<NvmlLibrary>> LoadFakeFromPath(const std::string& scenario_path,
                                                      const ScenarioClock& clock, Driver driver) {
  setenv("GPULEDGER_FAKE_NVML_SCENARIO", scenario_path.c_str(), 1);
  setenv("GPULEDGER_FAKE_NVML_CLOCK_FILE", clock.file().c_str(), 1);
  return NvmlApi::Load(FakeLibraryPath(driver));
}

Result<std::unique_ptr<NvmlLibrary>> LoadFake(std::string_view scenario, const ScenarioClock& clock,
                                              Driver driver) {
  return LoadFakeFromPath(TestdataPath(scenario), clock, driver);
}

}  // namespace gpuledger::nvml::testing
