#include "nvml/collector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nvml/test_support.h"

namespace gpuledger::nvml {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::Driver;
using testing::kScenarioEpochMs;
using testing::LoadFake;
using testing::ScenarioClock;

constexpr double kEps = 1e-9;

// A loaded fake and a collector over it, with the clock at `start_ms` at creation.
struct Rig {
  ScenarioClock clock;
  std::unique_ptr<NvmlLibrary> lib;
  std::unique_ptr<Collector> collector;

  Rig(std::string_view scenario, int64_t start_ms, Driver driver = Driver::kCurrent) {
    clock.Set(start_ms);
    auto loaded = LoadFake(scenario, clock, driver);
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status().ToString();
      return;
    }
    lib = std::move(loaded).value();
    auto created = Collector::Create(*lib, clock);
    if (!created.ok()) {
      ADD_FAILURE() << created.status().ToString();
      return;
    }
    collector = std::move(created).value();
  }
  bool ok() const { return collector != nullptr; }
  const std::vector<DeviceInfo>& devices() const { return collector->devices(); }
  Snapshot CollectAt(int64_t t_ms) {
    clock.Set(t_ms);
    return collector->Collect();
  }
};

std::vector<std::string> FailureStrings(const DeviceSnapshot& d) {
  std::vector<std::string> out;
  for (const NvmlError& e : d.failures) out.push_back(e.ToString());
  return out;
}

TEST(CollectorTest, H200WithSevenMigSlices) {
  Rig rig("h200_mig7.toml", 10'000);
  ASSERT_TRUE(rig.ok());
  EXPECT_THAT(rig.collector->enumeration_failures(), IsEmpty());
  const auto& devs = rig.devices();
  ASSERT_EQ(devs.size(), 9u);  // GPU 0, its 7 instances, GPU 1
  EXPECT_TRUE(devs[0].mig_enabled);
  EXPECT_FALSE(devs[0].gpm);
  EXPECT_EQ(devs[0].gpm_unavailable, "GPU in MIG mode: GPM is read per MIG instance");
  EXPECT_EQ(devs[0].model, "NVIDIA H200");
  for (size_t i = 1; i <= 7; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(devs[i].uuid, "MIG-a2000000-0000-4000-8000-00000000000" + std::to_string(i));
    EXPECT_EQ(devs[i].parent_uuid, devs[0].uuid);
    EXPECT_EQ(devs[i].model, "NVIDIA H200");
    EXPECT_EQ(devs[i].mig_profile, "1g.18gb");
    EXPECT_EQ(devs[i].share, (Share{1, 7}));
    EXPECT_EQ(devs[i].memory_mib, 16384);
    EXPECT_TRUE(devs[i].gpm) << devs[i].gpm_unavailable;
  }
  EXPECT_EQ(devs[7].gpu_instance_id, 7u);
  EXPECT_FALSE(devs[8].is_mig());
  EXPECT_EQ(devs[8].share, (Share{1, 1}));

  Snapshot snap = rig.CollectAt(11'000);
  EXPECT_EQ(snap.t_ms, kScenarioEpochMs + 11'000);
  EXPECT_EQ(snap.interval_ms, 1000);
  ASSERT_EQ(snap.devices.size(), 9u);
  for (const DeviceSnapshot& d : snap.devices) {
    EXPECT_THAT(FailureStrings(d), IsEmpty()) << d.uuid;
    EXPECT_EQ(d.health, Health::kOk);
  }
  // Per instance GPM: instance i is busy at i/10, the seventh at 0.9 since 10 s.
  for (size_t i = 1; i <= 6; ++i) {
    ASSERT_TRUE(snap.devices[i].sm_active) << i;
    EXPECT_NEAR(*snap.devices[i].sm_active, static_cast<double>(i) / 10, kEps);
    EXPECT_FALSE(snap.devices[i].coarse);
    EXPECT_EQ(snap.devices[i].gpm_window_ms, 1000);
  }
  EXPECT_NEAR(*snap.devices[1].sm_occupancy, 0.05, kEps);
  EXPECT_NEAR(*snap.devices[1].dram_active, 0.04, kEps);
  const DeviceSnapshot& busy = snap.devices[7];
  EXPECT_NEAR(*busy.sm_active, 0.9, kEps);
  EXPECT_NEAR(*busy.tensor_active, 0.7, kEps);
  EXPECT_NEAR(*busy.fb_used_mib, 15'512, kEps);
  EXPECT_FALSE(busy.gpu_util);  // no whole-GPU utilization on MIG
  ASSERT_EQ(busy.processes.size(), 2u);
  EXPECT_EQ(busy.processes[0].pid, 2007u);
  EXPECT_EQ(busy.processes[0].device_uuid, busy.uuid);
  EXPECT_NEAR(busy.processes[0].fb_used_mib, 15'000, kEps);
  EXPECT_FALSE(busy.processes[0].sm_share);  // process utilization: not on MIG

  // The MIG parent: power, clocks, energy and memory of the whole GPU; no activity.
  const DeviceSnapshot& parent = snap.devices[0];
  EXPECT_FALSE(parent.sm_active);
  EXPECT_FALSE(parent.gpu_util);
  EXPECT_NEAR(*parent.power_watts, 480, kEps);
  EXPECT_EQ(*parent.sm_clock_mhz, 1980u);
  EXPECT_EQ(*parent.energy_millijoules_total, 480u * 11'000u);
  EXPECT_NEAR(*parent.fb_used_mib, 9000 + 15'000 + 512, kEps);
  EXPECT_THAT(parent.processes, IsEmpty());

  // The whole H200 next to it.
  const DeviceSnapshot& whole = snap.devices[8];
  EXPECT_NEAR(*whole.sm_active, 0.75, kEps);
  EXPECT_NEAR(*whole.gpu_util, 1.0, kEps);
  ASSERT_EQ(whole.processes.size(), 1u);
  EXPECT_NEAR(*whole.processes[0].sm_share, 0.75, kEps);
  EXPECT_EQ(*whole.processes[0].sm_share_timestamp_us,
            static_cast<uint64_t>(kScenarioEpochMs + 11'000) * 1000);
  ASSERT_TRUE(whole.gaps);
  EXPECT_EQ(whole.gaps->sample_count, 10);
  EXPECT_EQ(whole.gaps->gap_count, 0);
  EXPECT_NEAR(whole.gaps->busy_ratio, 1.0, kEps);

  // The ledger's view.
  std::vector<Device> ledger_devices = ToDevices(devs, "node-7", 1000);
  ASSERT_EQ(ledger_devices.size(), 9u);
  EXPECT_EQ(ledger_devices[3].parent_uuid, devs[0].uuid);
  EXPECT_EQ(ledger_devices[3].share.ticks(), kShareScale / 7);
  EXPECT_EQ(ledger_devices[3].node, "node-7");
  EXPECT_EQ(ledger_devices[3].sample_interval_ms, 1000);
  EXPECT_TRUE(ledger_devices[3].is_mig());
  std::vector<Sample> samples = ToSamples(snap);
  ASSERT_EQ(samples.size(), 9u);
  EXPECT_NEAR(*samples[7].ActivityRatio(), 0.9, kEps);
  EXPECT_EQ(samples[7].activity_source(), ActivitySource::kSmActive);
  EXPECT_FALSE(samples[0].ActivityRatio());
  ASSERT_EQ(samples[8].processes.size(), 1u);
  EXPECT_EQ(samples[8].processes[0].pid, 3001);
  EXPECT_NEAR(*samples[8].processes[0].sm_share, 0.75, kEps);
}

TEST(CollectorTest, A100WithAMixedMigLayoutAndNoGpm) {
  Rig rig("a100_mixed_mig.toml", 0);
  ASSERT_TRUE(rig.ok());
  const auto& devs = rig.devices();
  ASSERT_EQ(devs.size(), 5u);
  EXPECT_EQ(devs[1].mig_profile, "3g.20gb");
  EXPECT_EQ(devs[1].share, (Share{3, 7}));
  EXPECT_EQ(devs[2].mig_profile, "2g.10gb");
  EXPECT_EQ(devs[2].share, (Share{2, 7}));
  EXPECT_EQ(devs[3].share, (Share{1, 7}));
  EXPECT_EQ(devs[4].share, (Share{1, 7}));
  EXPECT_EQ(devs[4].gpu_instance_id, 14u);
  EXPECT_EQ(devs[2].memory_mib, 9856);
  for (const DeviceInfo& d : devs) {
    EXPECT_FALSE(d.gpm);
    EXPECT_THAT(d.gpm_unavailable, HasSubstr("does not support GPM (compute capability 8.0)"));
  }

  Snapshot snap = rig.CollectAt(1000);
  for (const DeviceSnapshot& d : snap.devices) {
    EXPECT_THAT(FailureStrings(d), IsEmpty()) << d.uuid;
    // Ampere under MIG: NVML has no activity figure at all, and says nothing false.
    EXPECT_FALSE(d.sm_active);
    EXPECT_FALSE(d.gpu_util);
    EXPECT_FALSE(d.coarse);
  }
  ASSERT_EQ(snap.devices[1].processes.size(), 1u);
  EXPECT_EQ(snap.devices[1].processes[0].pid, 5001u);
  EXPECT_NEAR(*snap.devices[1].fb_used_mib, 18'000, kEps);
  EXPECT_THAT(snap.devices[2].processes, IsEmpty());
  ASSERT_EQ(snap.devices[4].processes.size(), 1u);
  EXPECT_EQ(snap.devices[4].processes[0].pid, 5002u);
  EXPECT_NEAR(*snap.devices[0].power_watts, 250, kEps);
}

TEST(CollectorTest, TwoProcessesTimeSharingOneGpu) {
  Rig rig("timeshare.toml", 10'000);
  ASSERT_TRUE(rig.ok());
  ASSERT_EQ(rig.devices().size(), 1u);
  EXPECT_TRUE(rig.devices()[0].gpm);

  Snapshot snap = rig.CollectAt(11'000);
  const DeviceSnapshot& d = snap.devices[0];
  // Bursts of 300 ms in every 500 ms: GPM sees 60% of the phase's levels.
  EXPECT_NEAR(*d.sm_active, 0.48, kEps);
  EXPECT_NEAR(*d.sm_occupancy, 0.24, kEps);
  EXPECT_NEAR(*d.tensor_active, 0.30, kEps);
  EXPECT_NEAR(*d.dram_active, 0.18, kEps);
  // The coarse figure is the driver's last period alone, (10.9 s, 11 s]: a gap.
  EXPECT_NEAR(*d.gpu_util, 0.0, kEps);
  EXPECT_FALSE(d.coarse);
  EXPECT_NEAR(*d.power_watts, 550, kEps);
  EXPECT_EQ(*d.sm_clock_mhz, 1755u);
  EXPECT_NEAR(*d.fb_used_mib, 500 + 30'000 + 10'000, kEps);
  // Energy is not supported on this GPU: empty, with the reason recorded.
  EXPECT_FALSE(d.energy_millijoules_total);
  EXPECT_THAT(FailureStrings(d),
              ::testing::ElementsAre(
                  "nvmlDeviceGetTotalEnergyConsumption: NOT_SUPPORTED (Not Supported)"));
  // Two 200 ms gaps in the second, the last one still open at its end.
  ASSERT_TRUE(d.gaps);
  EXPECT_EQ(d.gaps->sample_count, 10);
  EXPECT_NEAR(d.gaps->busy_ratio, 0.6, kEps);
  EXPECT_EQ(d.gaps->gap_count, 2);
  EXPECT_EQ(d.gaps->gap_total_ms, 400);
  EXPECT_EQ(d.gaps->gap_max_ms, 200);
  EXPECT_EQ(d.gaps->gap_histogram[0], 2);
  EXPECT_EQ(d.gaps->leading_idle_ms, 0);
  EXPECT_EQ(d.gaps->trailing_idle_ms, 200);
  EXPECT_EQ(d.gaps->short_gap_ms, 400);
  // The ledger's sample carries the gaps and the process count for the idle causes.
  Sample as_sample = ToSamples(snap)[0];
  ASSERT_TRUE(as_sample.gaps);
  EXPECT_EQ(as_sample.gaps->interval_ms, d.gaps->covered_ms);
  EXPECT_EQ(as_sample.gaps->idle_ms, 400);
  EXPECT_EQ(as_sample.gaps->short_idle_ms, 400);
  EXPECT_EQ(as_sample.process_count, 2);
  // Both processes, each with its SM share and the driver's timestamp.
  ASSERT_EQ(d.processes.size(), 2u);
  EXPECT_EQ(d.processes[0].pid, 4101u);
  EXPECT_NEAR(*d.processes[0].sm_share, 0.6, kEps);
  EXPECT_EQ(d.processes[1].pid, 4102u);
  EXPECT_NEAR(*d.processes[1].sm_share, 0.3, kEps);
  EXPECT_NEAR(d.processes[1].fb_used_mib, 10'000, kEps);
  EXPECT_EQ(*d.processes[1].sm_share_timestamp_us,
            static_cast<uint64_t>(kScenarioEpochMs + 11'000) * 1000);

  // After the second process ends, only the first remains.
  Snapshot later = rig.CollectAt(21'000);
  ASSERT_EQ(later.devices[0].processes.size(), 1u);
  EXPECT_EQ(later.devices[0].processes[0].pid, 4101u);
  EXPECT_NEAR(*later.devices[0].fb_used_mib, 30'500, kEps);
  std::vector<Sample> samples = ToSamples(later);
  EXPECT_EQ(samples[0].processes[0].job_id, "");
  EXPECT_NEAR(*samples[0].processes[0].sm_share, 0.6, kEps);
}

TEST(CollectorTest, GpmSamplesAreNeverCloserThan100Ms) {
  Rig rig("timeshare.toml", 11'000);
  ASSERT_TRUE(rig.ok());
  // 50 ms after the baseline: no GPM measurement; the coarse figure stands in, flagged.
  Snapshot soon = rig.CollectAt(11'050);
  EXPECT_FALSE(soon.devices[0].sm_active);
  EXPECT_EQ(soon.devices[0].gpm_window_ms, 0);
  ASSERT_TRUE(soon.devices[0].gpu_util);
  EXPECT_TRUE(soon.devices[0].coarse);
  EXPECT_EQ(ToSamples(soon)[0].activity_source(), ActivitySource::kGpuUtil);
  // The baseline was kept: the next measurement spans 11.0 s to 11.2 s, all in a burst.
  Snapshot next = rig.CollectAt(11'200);
  ASSERT_TRUE(next.devices[0].sm_active);
  EXPECT_NEAR(*next.devices[0].sm_active, 0.8, kEps);
  EXPECT_EQ(next.devices[0].gpm_window_ms, 200);
  EXPECT_FALSE(next.devices[0].coarse);
}

TEST(CollectorTest, GpuLostMidRunMarksItAndItsInstancesUnavailable) {
  Rig rig("gpu_lost.toml", 0);
  ASSERT_TRUE(rig.ok());
  ASSERT_EQ(rig.devices().size(), 4u);  // GPU 0, GPU 1 and its two instances

  Snapshot before = rig.CollectAt(2000);
  for (const DeviceSnapshot& d : before.devices) {
    EXPECT_EQ(d.health, Health::kOk) << d.uuid;
    EXPECT_THAT(FailureStrings(d), IsEmpty()) << d.uuid;
  }
  EXPECT_NEAR(*before.devices[2].sm_active, 0.5, kEps);
  ASSERT_EQ(before.devices[2].processes.size(), 1u);

  for (int64_t t : {6000, 7000}) {
    Snapshot after = rig.CollectAt(t);
    EXPECT_EQ(after.devices[0].health, Health::kOk);
    EXPECT_NEAR(*after.devices[0].sm_active, 0.6, kEps);
    const DeviceSnapshot& lost = after.devices[1];
    EXPECT_EQ(lost.health, Health::kLost);
    ASSERT_EQ(lost.failures.size(), 1u);  // nothing more is asked of a lost GPU
    EXPECT_TRUE(lost.failures[0].Is(NvmlCode::kGpuIsLost));
    EXPECT_THAT(lost.failures[0].ToString(), HasSubstr("GPU_IS_LOST"));
    EXPECT_FALSE(lost.fb_used_mib);
    for (size_t i : {2u, 3u}) {
      EXPECT_EQ(after.devices[i].health, Health::kLost);
      EXPECT_FALSE(after.devices[i].sm_active);
      EXPECT_THAT(after.devices[i].processes, IsEmpty());
    }
    std::vector<Sample> samples = ToSamples(after);
    EXPECT_TRUE(IsAvailable(samples[0].health));
    EXPECT_FALSE(IsAvailable(samples[1].health));
    EXPECT_FALSE(IsAvailable(samples[3].health));
  }
}

TEST(CollectorTest, OldDriverWithoutGpmFallsBackToCoarseUtilization) {
  Rig rig("old_driver.toml", 0, Driver::kOld);
  ASSERT_TRUE(rig.ok());
  const DeviceInfo& info = rig.devices()[0];
  EXPECT_FALSE(info.gpm);
  EXPECT_THAT(info.gpm_unavailable, HasSubstr("nvmlGpmQueryDeviceSupport: FUNCTION_NOT_FOUND"));

  Snapshot snap = rig.CollectAt(1300);
  const DeviceSnapshot& d = snap.devices[0];
  EXPECT_THAT(FailureStrings(d), IsEmpty());
  EXPECT_FALSE(d.sm_active);
  EXPECT_FALSE(d.tensor_active);
  ASSERT_TRUE(d.gpu_util);
  EXPECT_NEAR(*d.gpu_util, 1.0, kEps);  // (1.2 s, 1.3 s] is in a burst
  EXPECT_TRUE(d.coarse);
  Sample s = ToSamples(snap)[0];
  EXPECT_EQ(s.activity_source(), ActivitySource::kGpuUtil);
  EXPECT_NEAR(*s.ActivityRatio(), 1.0, kEps);
  // 400 ms busy, 600 ms idle: one 600 ms gap in the 1.3 s since the collector started.
  ASSERT_TRUE(d.gaps);
  EXPECT_EQ(d.gaps->sample_count, 13);
  EXPECT_EQ(d.gaps->gap_count, 1);
  EXPECT_EQ(d.gaps->gap_max_ms, 600);
  EXPECT_EQ(d.gaps->gap_histogram[1], 1);  // (250 ms, 1 s]
  EXPECT_NEAR(d.gaps->busy_ratio, 7.0 / 13.0, kEps);
  // Processes through the unversioned entry point and its 16-byte struct.
  ASSERT_EQ(d.processes.size(), 2u);
  EXPECT_EQ(d.processes[0].pid, 7001u);
  EXPECT_NEAR(d.processes[0].fb_used_mib, 12'000, kEps);
  EXPECT_NEAR(*d.processes[0].sm_share, 0.4, kEps);
  EXPECT_EQ(d.processes[1].pid, 7002u);
  EXPECT_NEAR(d.processes[1].fb_used_mib, 2048, kEps);
  EXPECT_NEAR(*d.processes[1].sm_share, 0.0, kEps);  // no sample: no utilization
  EXPECT_FALSE(d.processes[1].sm_share_timestamp_us);
}

TEST(CollectorTest, InsufficientSizeIsRetriedWithTheReportedSize) {
  Rig rig("insufficient_size.toml", 1000);
  ASSERT_TRUE(rig.ok());
  Snapshot snap = rig.CollectAt(2000);
  const DeviceSnapshot& d = snap.devices[0];
  EXPECT_THAT(FailureStrings(d), IsEmpty());
  ASSERT_EQ(d.processes.size(), 40u);
  int with_share = 0;
  for (size_t i = 0; i < d.processes.size(); ++i) {
    EXPECT_EQ(d.processes[i].pid, 8000u + i);
    EXPECT_NEAR(d.processes[i].fb_used_mib, 100.0 + static_cast<double>(i), kEps);
    ASSERT_TRUE(d.processes[i].sm_share);
    if (*d.processes[i].sm_share > 0) ++with_share;
  }
  EXPECT_EQ(with_share, 25);
}

TEST(CollectorTest, ABlockingCallIsOnlySlow) {
  Rig rig("blocking.toml", 0);
  ASSERT_TRUE(rig.ok());
  Snapshot slow = rig.CollectAt(1000);
  EXPECT_GE(slow.nvml_seconds, 1.4);
  const DeviceSnapshot& d = slow.devices[0];
  EXPECT_THAT(FailureStrings(d), IsEmpty());
  EXPECT_NEAR(*d.power_watts, 400, kEps);
  EXPECT_NEAR(*d.sm_active, 0.5, kEps);
  Snapshot fast = rig.CollectAt(2000);  // the fault blocks once
  EXPECT_LT(fast.nvml_seconds, 1.0);
  EXPECT_NEAR(*fast.devices[0].power_watts, 400, kEps);
}

}  // namespace
}  // namespace gpuledger::nvml
