// The fake NVML's world: devices, MIG instances, processes, activity over time and
// injected faults, read from a TOML scenario file (format in docs/nvml.md). Internal
// to the fake library; the tests describe worlds through scenario files only.
//
// Time is scenario time: milliseconds since the scenario's start (t = 0). Every figure
// is a pure function of the scenario and the time it is asked at, so a test that sets
// the time gets the same answers on every run.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace gpuledger::nvml::fake {

inline constexpr int64_t kForeverMs = std::numeric_limits<int64_t>::max() / 4;

// A stretch of time with constant levels. While the optional burst pattern is "on"
// (`burst_ms` on, then `gap_ms` off, repeating from `from_ms`), the activity levels
// apply; while it is off they are 0. Without a pattern they apply throughout.
struct Phase {
  int64_t from_ms = 0;
  int64_t to_ms = kForeverMs;
  double gpu_util = 0;  // ratios 0..1
  double sm_active = 0;
  double sm_occupancy = 0;
  double tensor_active = 0;
  double dram_active = 0;
  int64_t burst_ms = 0;
  int64_t gap_ms = 0;
  std::optional<double> power_watts;    // the phase's mean draw, pattern or not
  std::optional<unsigned> sm_clock_mhz;
};

enum class Metric { kGpuUtil, kSmActive, kSmOccupancy, kTensorActive, kDramActive };

// A physical GPU or a MIG instance. Addresses are stable: handles point at these.
struct FakeDevice {
  std::string uuid;
  std::string name;
  int64_t memory_mib = 0;
  int64_t base_used_mib = 0;  // used by the driver and contexts, beyond processes
  std::vector<Phase> phases;

  // Physical GPU only.
  int cc_major = 9;
  int cc_minor = 0;
  unsigned sm_count = 132;
  bool gpm = true;
  bool mig_enabled = false;
  unsigned mig_slices = 7;  // compute slices of the whole GPU
  int64_t sample_period_ms = 100;
  double idle_power_watts = 75;
  unsigned temperature_c = 45;  // nvmlDeviceGetTemperature(GPU)
  unsigned idle_sm_clock_mhz = 345;
  std::vector<FakeDevice*> instances;  // MIG instances, in index order

  // MIG instance only.
  FakeDevice* parent = nullptr;
  std::string profile;  // "3g.71gb"
  unsigned slices = 0;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;

  bool is_mig() const { return parent != nullptr; }
  const FakeDevice& gpu() const { return parent != nullptr ? *parent : *this; }
};

struct FakeProcess {
  uint32_t pid = 0;
  const FakeDevice* device = nullptr;  // a GPU, or a MIG instance
  int64_t memory_mib = 0;
  int64_t from_ms = 0;
  int64_t to_ms = kForeverMs;
  double sm_share = 0;  // ratio of the GPU's SM time, while alive

  bool AliveAt(int64_t t_ms) const { return t_ms >= from_ms && t_ms < to_ms; }
};

// Makes matching calls answer `code` (when not 0) after sleeping `block_ms` (real time).
struct Fault {
  std::string function;  // a symbol, or its unversioned name matching every version; "" any
  std::string device;    // a uuid; matches the device and its MIG instances; "" any
  int64_t from_ms = 0;
  int64_t until_ms = kForeverMs;
  int code = 0;
  int64_t block_ms = 0;
  int64_t times = -1;  // how many matching calls it affects; -1 all
  int64_t fired = 0;

  bool Matches(const std::string& symbol, const FakeDevice* dev, int64_t t_ms) const;
};

struct Scenario {
  std::string driver_version = "550.54.15";
  int64_t epoch_ms = 0;  // Unix time of t = 0; timestamps the fake reports derive from it
  std::deque<FakeDevice> devices;  // GPUs and MIG instances
  std::vector<FakeDevice*> gpus;   // index order
  std::vector<FakeProcess> processes;
  std::vector<Fault> faults;
};

// Parses the scenario at `path`. On failure returns nullopt and sets `error` to a
// message naming the file, the line where known, and the field.
std::optional<Scenario> LoadScenario(const std::string& path, std::string* error);

// The mean of `metric` over [a_ms, b_ms) (b > a). A MIG-enabled GPU reads as the
// slice-weighted mean of its instances (its own phases set only power and clocks).
double MeanMetric(const FakeDevice& dev, Metric metric, int64_t a_ms, int64_t b_ms);
// The mean power draw over [a_ms, b_ms), and the energy since t = 0 in millijoules.
double MeanPowerWatts(const FakeDevice& gpu, int64_t a_ms, int64_t b_ms);
double EnergyMillijoules(const FakeDevice& gpu, int64_t t_ms);
unsigned SmClockMhz(const FakeDevice& gpu, int64_t t_ms);
// Memory used by the device: its base plus its live processes' (a GPU counts those of
// its MIG instances too).
int64_t UsedMib(const Scenario& s, const FakeDevice& dev, int64_t t_ms);

}  // namespace gpuledger::nvml::fake
