#include "nvml/nvml_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <thread>

#include "nvml/test_support.h"

namespace gpuledger::nvml {
namespace {

using ::testing::HasSubstr;
using testing::Driver;
using testing::LoadFake;
using testing::ScenarioClock;

std::string Resolved(const NvmlLibrary& lib, std::string_view wanted) {
  for (const SymbolBinding& s : lib.Symbols()) {
    if (s.wanted == wanted) return s.resolved;
  }
  return "<no such entry point>";
}

TEST(NvmlApiTest, MissingLibraryIsAClearError) {
  auto lib = NvmlApi::Load("/nonexistent/dir/libnvidia-ml.so.1");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(lib.status().message(), HasSubstr("/nonexistent/dir/libnvidia-ml.so.1"));
  EXPECT_THAT(lib.status().message(), HasSubstr("cannot load NVML library"));
}

TEST(NvmlApiTest, ALibraryWithoutNvmlInitIsRefused) {
  auto lib = NvmlApi::Load("libc.so.6");
  ASSERT_FALSE(lib.ok());
  EXPECT_THAT(lib.status().message(), HasSubstr("neither nvmlInit_v2 nor nvmlInit"));
}

TEST(NvmlApiTest, FailedInitCarriesTheDriversReason) {
  ScenarioClock clock;
  auto lib = LoadFake("bad_key.toml", clock);
  ASSERT_FALSE(lib.ok());
  // The fake's nvmlErrorString names the file, line and key.
  EXPECT_THAT(lib.status().message(), HasSubstr("nvmlInit_v2: DRIVER_NOT_LOADED"));
  EXPECT_THAT(lib.status().message(), HasSubstr("bad_key.toml:8"));
  EXPECT_THAT(lib.status().message(), HasSubstr("gpu[0].phase[0]: unknown key 'sm_activ'"));
}

TEST(NvmlApiTest, ResolvesTheNewestVersionOfEachEntryPoint) {
  ScenarioClock clock;
  auto lib = LoadFake("timeshare.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ(Resolved(**lib, "nvmlInit"), "nvmlInit_v2");
  EXPECT_EQ(Resolved(**lib, "nvmlDeviceGetComputeRunningProcesses"),
            "nvmlDeviceGetComputeRunningProcesses_v3");
  EXPECT_EQ(Resolved(**lib, "nvmlDeviceGetMemoryInfo_v2"), "nvmlDeviceGetMemoryInfo_v2");
  EXPECT_TRUE((*lib)->Has("nvmlGpmMetricsGet"));
  EXPECT_EQ((*lib)->DriverVersion().value(), "550.54.15");
}

TEST(NvmlApiTest, OldDriverFallsBackToOlderSymbolsAndStructs) {
  ScenarioClock clock;
  auto lib = LoadFake("old_driver.toml", clock, Driver::kOld);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const NvmlLibrary& nvml = **lib;
  EXPECT_EQ(Resolved(nvml, "nvmlDeviceGetComputeRunningProcesses"),
            "nvmlDeviceGetComputeRunningProcesses");
  EXPECT_EQ(Resolved(nvml, "nvmlDeviceGetMemoryInfo_v2"), "");
  EXPECT_EQ(Resolved(nvml, "nvmlDeviceGetMemoryInfo"), "nvmlDeviceGetMemoryInfo");
  EXPECT_EQ(Resolved(nvml, "nvmlGpmSampleGet"), "");
  EXPECT_FALSE(nvml.Has("nvmlGpmQueryDeviceSupport"));

  NvmlDevice gpu = nvml.DeviceByIndex(0).value();
  // The version-1 structs are read with their own layout.
  auto mem = nvml.Memory(gpu);
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(mem.value().total_bytes, uint64_t{81559} << 20);
  EXPECT_EQ(mem.value().used_bytes, uint64_t{300 + 12000 + 2048} << 20);
  auto procs = nvml.ComputeProcesses(gpu);
  ASSERT_TRUE(procs.ok());
  ASSERT_EQ(procs.value().size(), 2u);
  EXPECT_EQ(procs.value()[0].pid, 7001u);
  EXPECT_EQ(procs.value()[0].used_memory_bytes, uint64_t{12000} << 20);
  EXPECT_EQ(procs.value()[0].gpu_instance_id, ProcessInfo::kNoInstance);
  EXPECT_EQ(procs.value()[1].pid, 7002u);

  // A missing symbol is an empty value with its reason, never a crash.
  auto support = nvml.GpmSupported(gpu);
  ASSERT_FALSE(support.ok());
  EXPECT_TRUE(support.Is(NvmlCode::kFunctionNotFound));
  EXPECT_EQ(support.error().ToString(),
            "nvmlGpmQueryDeviceSupport: FUNCTION_NOT_FOUND (symbol not exported by this driver)");
  EXPECT_FALSE(nvml.GpmSampleAlloc().ok());
}

TEST(NvmlApiTest, FailedCallNamesFunctionCodeAndDriverText) {
  ScenarioClock clock;
  auto lib = LoadFake("timeshare.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  NvmlDevice gpu = (*lib)->DeviceByIndex(0).value();
  auto energy = (*lib)->TotalEnergyMillijoules(gpu);
  ASSERT_FALSE(energy.ok());
  EXPECT_TRUE(energy.Is(NvmlCode::kNotSupported));
  EXPECT_EQ(energy.error().ToString(),
            "nvmlDeviceGetTotalEnergyConsumption: NOT_SUPPORTED (Not Supported)");
  EXPECT_FALSE((*lib)->DeviceByIndex(7).ok());
}

TEST(NvmlApiTest, MemoryFallsBackToVersion1WhenTheDriverRefusesTheV2Struct) {
  ScenarioClock clock;
  auto lib = LoadFake("version_mismatch.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  NvmlDevice gpu = (*lib)->DeviceByIndex(0).value();
  auto mem = (*lib)->Memory(gpu);
  ASSERT_TRUE(mem.ok()) << mem.error().ToString();
  EXPECT_EQ(mem.value().total_bytes, uint64_t{81559} << 20);
  EXPECT_EQ(mem.value().used_bytes, uint64_t{1024} << 20);
  EXPECT_EQ(mem.value().reserved_bytes, 0u);
}

TEST(NvmlApiTest, ListCallsRetryInsufficientSizeWithTheReportedCount) {
  ScenarioClock clock;
  clock.Set(2000);
  auto lib = LoadFake("insufficient_size.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  NvmlDevice gpu = (*lib)->DeviceByIndex(0).value();
  // 40 processes do not fit the first buffer of 32.
  auto procs = (*lib)->ComputeProcesses(gpu);
  ASSERT_TRUE(procs.ok()) << procs.error().ToString();
  ASSERT_EQ(procs.value().size(), 40u);
  EXPECT_EQ(procs.value()[39].pid, 8039u);
  EXPECT_EQ(procs.value()[39].used_memory_bytes, uint64_t{139} << 20);
  // The utilization call answers INSUFFICIENT_SIZE once, by injection.
  auto util = (*lib)->ProcessUtilizations(gpu, (testing::kScenarioEpochMs + 1000) * 1000);
  ASSERT_TRUE(util.ok()) << util.error().ToString();
  EXPECT_EQ(util.value().size(), 25u);  // only processes with utilization have samples
}

TEST(NvmlApiTest, UtilizationSamplesAreTheDriversBufferSinceLastSeen) {
  ScenarioClock clock;
  clock.Set(1000);
  auto lib = LoadFake("timeshare.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  NvmlDevice gpu = (*lib)->DeviceByIndex(0).value();
  uint64_t since = (testing::kScenarioEpochMs + 500) * 1000;
  auto samples = (*lib)->UtilizationSamples(gpu, since);
  ASSERT_TRUE(samples.ok());
  // Periods of 100 ms ending at 600..1000 ms; busy 0-300 and 500-800 of each 500 ms.
  ASSERT_EQ(samples.value().size(), 5u);
  std::array<double, 5> want = {100, 100, 100, 0, 0};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(samples.value()[i].timestamp_us, since + (i + 1) * 100'000);
    EXPECT_EQ(samples.value()[i].value_percent, want[i]) << i;
  }
  // Nothing newer than the last one: an empty answer, not an error.
  auto none = (*lib)->UtilizationSamples(gpu, samples.value().back().timestamp_us);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none.value().empty());
}

TEST(NvmlApiTest, GpmMetricsAverageBetweenTwoSamples) {
  ScenarioClock clock;
  clock.Set(10'000);
  auto lib = LoadFake("h200_mig7.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const NvmlLibrary& nvml = **lib;
  NvmlDevice gpu = nvml.DeviceByIndex(1).value();
  ASSERT_TRUE(nvml.GpmSupported(gpu).value());
  GpmSample first = nvml.GpmSampleAlloc().value();
  GpmSample second = nvml.GpmSampleAlloc().value();
  ASSERT_TRUE(nvml.GpmSampleGet(gpu, first).ok());
  clock.Advance(1000);
  ASSERT_TRUE(nvml.GpmSampleGet(gpu, second).ok());
  std::array<GpmMetricId, 3> ids = {GpmMetricId::kSmUtil, GpmMetricId::kAnyTensorUtil,
                                    static_cast<GpmMetricId>(250)};
  auto metrics = nvml.GpmMetrics(first, second, ids);
  ASSERT_TRUE(metrics.ok()) << metrics.error().ToString();
  ASSERT_EQ(metrics.value().size(), 3u);
  EXPECT_DOUBLE_EQ(metrics.value()[0].value, 75);
  EXPECT_DOUBLE_EQ(metrics.value()[1].value, 55);
  EXPECT_EQ(metrics.value()[2].code, static_cast<int>(NvmlCode::kNotSupported));

  // Per MIG instance through the parent and the GPU instance id.
  NvmlDevice parent = nvml.DeviceByIndex(0).value();
  ASSERT_TRUE(nvml.GpmMigSampleGet(parent, 7, first).ok());
  clock.Advance(1000);
  ASSERT_TRUE(nvml.GpmMigSampleGet(parent, 7, second).ok());
  auto mig = nvml.GpmMetrics(first, second, ids);
  ASSERT_TRUE(mig.ok());
  EXPECT_DOUBLE_EQ(mig.value()[0].value, 90);
  EXPECT_FALSE(nvml.GpmMigSampleGet(parent, 3, first).ok());  // no such instance
}

TEST(NvmlApiTest, ABlockedCallDoesNotHoldUpOtherThreads) {
  ScenarioClock clock;
  auto lib = LoadFake("blocking.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  NvmlDevice gpu = (*lib)->DeviceByIndex(0).value();
  using SteadyClock = std::chrono::steady_clock;
  auto start = SteadyClock::now();
  std::thread blocked([&] { EXPECT_EQ((*lib)->PowerUsageMilliwatts(gpu).value(), 400'000u); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it enter the driver
  auto uuid = (*lib)->Uuid(gpu);
  auto other_done = SteadyClock::now();
  blocked.join();
  auto all_done = SteadyClock::now();
  ASSERT_TRUE(uuid.ok());
  EXPECT_LT(other_done - start, std::chrono::milliseconds(1000));
  EXPECT_GE(all_done - start, std::chrono::milliseconds(1500));
}

TEST(NvmlApiTest, MigInventory) {
  ScenarioClock clock;
  auto lib = LoadFake("a100_mixed_mig.toml", clock);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const NvmlLibrary& nvml = **lib;
  NvmlDevice gpu = nvml.DeviceByIndex(0).value();
  EXPECT_EQ(nvml.MigMode(gpu).value(), (std::pair<unsigned, unsigned>(1, 1)));
  EXPECT_EQ(nvml.MaxMigDeviceCount(gpu).value(), 7u);
  NvmlDevice mig = nvml.MigDeviceByIndex(gpu, 1).value();
  EXPECT_TRUE(nvml.IsMigDevice(mig).value());
  EXPECT_FALSE(nvml.IsMigDevice(gpu).value());
  EXPECT_EQ(nvml.Name(mig).value(), "NVIDIA A100-SXM4-40GB MIG 2g.10gb");
  EXPECT_EQ(nvml.GpuInstanceId(mig).value(), 5u);
  EXPECT_EQ(nvml.Attributes(mig).value().gpu_instance_slice_count, 2u);
  EXPECT_EQ(nvml.ParentOfMig(mig).value(), gpu);
  EXPECT_TRUE(nvml.MigDeviceByIndex(gpu, 4).Is(NvmlCode::kNotFound));
  EXPECT_TRUE(nvml.Utilization(mig).Is(NvmlCode::kNotSupported));
}

}  // namespace
}  // namespace gpuledger::nvml
