// Test helpers: load the project's fake libnvidia-ml.so.1 through the real dlopen path,
// with a scenario from src/nvml/testdata and a clock that the test and the fake share.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/time.h"
#include "nvml/nvml_api.h"

namespace gpuledger::nvml::testing {

// Unix time of scenario time 0; every testdata scenario sets `epoch_ms` to it.
inline constexpr int64_t kScenarioEpochMs = 1'800'000'000'000;

// The clock of a scenario: NowMs() is kScenarioEpochMs + the scenario time, and every
// Set() writes the scenario time to the file the fake reads its time from
// (GPULEDGER_FAKE_NVML_CLOCK_FILE), so both sides agree.
class ScenarioClock final : public Clock {
 public:
  ScenarioClock();
  ~ScenarioClock() override;
  int64_t NowMs() const override { return kScenarioEpochMs + t_ms_; }
  void Set(int64_t t_ms);
  void Advance(int64_t ms) { Set(t_ms_ + ms); }
  int64_t t_ms() const { return t_ms_; }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  int64_t t_ms_ = 0;
};

enum class Driver { kCurrent, kOld };

// Points the fake at the scenario file `scenario_path` and at `clock`, then loads it
// with NvmlApi::Load. The fake reads both when first initialized: load one at a time.
Result<std::unique_ptr<NvmlLibrary>> LoadFakeFromPath(const std::string& scenario_path,
                                                      const ScenarioClock& clock,
                                                      Driver driver = Driver::kCurrent);
// LoadFakeFromPath with src/nvml/testdata/`scenario`.
Result<std::unique_ptr<NvmlLibrary>> LoadFake(std::string_view scenario, const ScenarioClock& clock,
                                              Driver driver = Driver::kCurrent);

// The path of the fake library of `driver`.
std::string FakeLibraryPath(Driver driver);
// The path of testdata/`name`.
std::string TestdataPath(std::string_view name);

}  // namespace gpuledger::nvml::testing
