// A fake libnvidia-ml.so.1 for tests: the C entry points gpuledger's binding calls,
// answering from a scenario file (scenario.h; format in docs/nvml.md).
//
// Environment, read by nvmlInit when the library is first initialized:
//   GPULEDGER_FAKE_NVML_SCENARIO    path of the TOML scenario (required)
//   GPULEDGER_FAKE_NVML_CLOCK_FILE  path of a file holding the scenario time in ms as
//                                   decimal text, re-read on every call; without it the
//                                   scenario time is the real time since nvmlInit.
// Built twice from this file: `fake_nvml/` exports everything; `fake_nvml_old/`
// (GPULEDGER_FAKE_NVML_OLD_DRIVER) lacks what drivers before R520 lacked: GPM, the _v2
// and _v3 process lists and nvmlDeviceGetMemoryInfo_v2, so that dlsym fails for them
// exactly as with an old driver.
//
// Every entry point locks one mutex; a fault's block sleeps outside it, so other threads
// keep being answered while one call is stuck.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include <sys/stat.h>
#include <string>
#include <thread>
#include <type_traits>

#include "nvml/fake/scenario.h"
#include "nvml/nvml_abi.h"

#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpuledger::nvml::fake {
namespace {

using abi::Return;

constexpr int64_t kSampleBufferSize = 120;  // samples the driver's ring keeps per GPU
// As a driver of the middle generation (GPM; unused by the old driver's build).
[[maybe_unused]] constexpr uint32_t kFakeGpmMetricsMax = 210;
constexpr unsigned kMemoryClockMhz = 2619;

struct GpmSampleState {
  const FakeDevice* device = nullptr;  // set by a sample get
  int64_t t_ms = 0;
};

struct State {
  Scenario scenario;
  std::string clock_file;
  int64_t last_clock_ms = 0;
  ino_t clock_inode = 0;
  struct timespec clock_mtime {};
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::map<const void*, std::unique_ptr<GpmSampleState>> gpm_samples;

  int64_t NowMs() {
    if (clock_file.empty()) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - start)
          .count();
    }
    // The test replaces the file (write, then rename) to move time: a file with the same
    // inode and modification time holds the same time, so one stat() per call is enough.
    struct stat st {};
    if (::stat(clock_file.c_str(), &st) == 0 && st.st_ino == clock_inode &&
        st.st_mtim.tv_sec == clock_mtime.tv_sec && st.st_mtim.tv_nsec == clock_mtime.tv_nsec) {
      return last_clock_ms;
    }
    std::ifstream in(clock_file);
    long long v = 0;  // NOLINT(google-runtime-int)
    if (in >> v) {
      last_clock_ms = v;  // a half-written file keeps the last time
      clock_inode = st.st_ino;
      clock_mtime = st.st_mtim;
    }
    return last_clock_ms;
  }
};

std::mutex g_mu;
std::unique_ptr<State> g_state;  // GUARDED_BY(g_mu)
int g_init_count = 0;            // GUARDED_BY(g_mu)
std::string g_init_error;        // GUARDED_BY(g_mu): why the last nvmlInit failed

abi::Device Handle(const FakeDevice* dev) {
  return reinterpret_cast<abi::Device>(const_cast<FakeDevice*>(dev));
}

// One entry point's call: holds the lock, knows the time, applies faults.
class Call {
 public:
  explicit Call(const char* symbol) : symbol_(symbol), lock_(g_mu) {
    if (g_state == nullptr) {
      rc_ = abi::kErrorUninitialized;
      return;
    }
    now_ms_ = g_state->NowMs();
  }

  // Applies the faults that match this call on `dev` (nullptr: no device). Returns
  // true when the call should go on to answer normally.
  bool Begin(const FakeDevice* dev) {
    if (rc_ != abi::kSuccess) return false;
    dev_ = dev;
    int64_t block_ms = 0;
    for (Fault& f : g_state->scenario.faults) {
      if (!f.Matches(symbol_, dev, now_ms_)) continue;
      ++f.fired;
      block_ms += f.block_ms;
      if (rc_ == abi::kSuccess) rc_ = f.code;
    }
    if (block_ms > 0) {
      lock_.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(block_ms));
      lock_.lock();
      if (g_state == nullptr) rc_ = abi::kErrorUninitialized;
    }
    return rc_ == abi::kSuccess;
  }

  // Validates a device handle, then Begin(device).
  bool Begin(abi::Device handle) {
    if (rc_ != abi::kSuccess) return false;
    for (const FakeDevice& d : g_state->scenario.devices) {
      if (Handle(&d) == handle) return Begin(&d);
    }
    rc_ = abi::kErrorInvalidArgument;
    return false;
  }

  Return rc() const { return rc_; }
  const FakeDevice& dev() const { return *dev_; }
  const Scenario& scenario() const { return g_state->scenario; }
  State& state() const { return *g_state; }
  int64_t now_ms() const { return now_ms_; }
  unsigned long long ToUs(int64_t t_ms) const {  // NOLINT(google-runtime-int)
    return static_cast<unsigned long long>(scenario().epoch_ms + t_ms) * 1000;  // NOLINT
  }
  int64_t FromUs(unsigned long long us) const {  // NOLINT(google-runtime-int)
    return static_cast<int64_t>(us / 1000) - scenario().epoch_ms;
  }

 private:
  const std::string symbol_;
  std::unique_lock<std::mutex> lock_;
  Return rc_ = abi::kSuccess;
  const FakeDevice* dev_ = nullptr;
  int64_t now_ms_ = 0;
};

Return CopyString(const std::string& s, char* out, unsigned size) {
  if (out == nullptr) return abi::kErrorInvalidArgument;
  if (s.size() + 1 > size) return abi::kErrorInsufficientSize;
  std::memcpy(out, s.c_str(), s.size() + 1);
  return abi::kSuccess;
}

unsigned Percent(double ratio) { return static_cast<unsigned>(std::lround(ratio * 100)); }

// Answers a list call: on INSUFFICIENT_SIZE (too small a buffer, or injected by a
// fault) reports the count needed; else writes the entries and their count.
template <typename Rec, typename Entry, typename Fill>
Return AnswerList(const Call& c, unsigned* count, Rec* buf, const std::vector<Entry>& entries,
                  Fill fill) {
  if (count == nullptr) return abi::kErrorInvalidArgument;
  unsigned needed = static_cast<unsigned>(entries.size());
  if (c.rc() == abi::kErrorInsufficientSize || *count < needed) {
    *count = needed;
    return abi::kErrorInsufficientSize;
  }
  if (needed > 0 && buf == nullptr) return abi::kErrorInvalidArgument;
  for (unsigned i = 0; i < needed; ++i) buf[i] = fill(entries[i]);
  *count = needed;
  return abi::kSuccess;
}

// The processes a list call on `dev` reports now: a GPU lists its instances' too.
std::vector<const FakeProcess*> LiveProcesses(const Call& c) {
  std::vector<const FakeProcess*> out;
  for (const FakeProcess& p : c.scenario().processes) {
    if (!p.AliveAt(c.now_ms())) continue;
    if (p.device == &c.dev() || p.device->parent == &c.dev()) out.push_back(&p);
  }
  return out;
}

template <typename Rec>
Return ProcessList(const char* symbol, abi::Device d, unsigned* count, Rec* infos) {
  Call c(symbol);
  if (!c.Begin(d) && c.rc() != abi::kErrorInsufficientSize) return c.rc();
  return AnswerList(c, count, infos, LiveProcesses(c), [](const FakeProcess* p) {
    Rec r{};
    r.pid = p->pid;
    r.used_gpu_memory = static_cast<unsigned long long>(p->memory_mib) << 20;  // NOLINT
    if constexpr (std::is_same_v<Rec, abi::ProcessInfo>) {
      r.gpu_instance_id = p->device->is_mig() ? p->device->gpu_instance_id : abi::kNoInstanceId;
      r.compute_instance_id =
          p->device->is_mig() ? p->device->compute_instance_id : abi::kNoInstanceId;
    }
    return r;
  });
}

// Utilization figures exist for a whole GPU without MIG only, as with the real driver.
bool WholeGpuOnly(Call& c) {
  if (c.dev().is_mig() || c.dev().mig_enabled) return false;
  return true;
}

template <typename Mem>
Return MemoryInfo(const char* symbol, abi::Device d, Mem* mem) {
  Call c(symbol);
  if (!c.Begin(d)) return c.rc();
  if (mem == nullptr) return abi::kErrorInvalidArgument;
  if constexpr (std::is_same_v<Mem, abi::MemoryV2>) {
    if (mem->version != abi::kMemoryV2Version) return abi::kErrorArgumentVersionMismatch;
    mem->reserved = 0;
  }
  uint64_t total = static_cast<uint64_t>(c.dev().memory_mib) << 20;
  uint64_t used = static_cast<uint64_t>(UsedMib(c.scenario(), c.dev(), c.now_ms())) << 20;
  mem->total = total;
  mem->used = std::min(used, total);
  mem->free = total - mem->used;
  return abi::kSuccess;
}

#ifndef GPULEDGER_FAKE_NVML_OLD_DRIVER
GpmSampleState* FindGpmSample(Call& c, abi::GpmSample s) {
  auto it = c.state().gpm_samples.find(s);
  return it == c.state().gpm_samples.end() ? nullptr : it->second.get();
}

double GpmValue(const FakeDevice& dev, uint32_t id, int64_t a, int64_t b, bool* known) {
  *known = true;
  switch (id) {
    case abi::kGpmGraphicsUtil: return 100 * MeanMetric(dev, Metric::kGpuUtil, a, b);
    case abi::kGpmSmUtil: return 100 * MeanMetric(dev, Metric::kSmActive, a, b);
    case abi::kGpmSmOccupancy: return 100 * MeanMetric(dev, Metric::kSmOccupancy, a, b);
    case abi::kGpmAnyTensorUtil: return 100 * MeanMetric(dev, Metric::kTensorActive, a, b);
    case abi::kGpmDramBwUtil: return 100 * MeanMetric(dev, Metric::kDramActive, a, b);
    default: *known = false; return 0;
  }
}
#endif  // GPULEDGER_FAKE_NVML_OLD_DRIVER

Return InitFake() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count > 0) {
    ++g_init_count;
    return abi::kSuccess;
  }
  const char* path = std::getenv("GPULEDGER_FAKE_NVML_SCENARIO");
  if (path == nullptr || *path == '\0') {
    g_init_error = "fake NVML: GPULEDGER_FAKE_NVML_SCENARIO is not set";
    return abi::kErrorDriverNotLoaded;
  }
  std::string error;
  std::optional<Scenario> scenario = LoadScenario(path, &error);
  if (!scenario) {
    g_init_error = "fake NVML: " + error;
    return abi::kErrorDriverNotLoaded;
  }
  g_init_error.clear();
  g_state = std::make_unique<State>();
  g_state->scenario = std::move(*scenario);
  if (const char* clock = std::getenv("GPULEDGER_FAKE_NVML_CLOCK_FILE")) {
    g_state->clock_file = clock;
  }
  g_init_count = 1;
  return abi::kSuccess;
}

}  // namespace
}  // namespace gpuledger::nvml::fake

using gpuledger::nvml::abi::Device;
using gpuledger::nvml::abi::Return;
namespace abi = gpuledger::nvml::abi;
namespace fk = gpuledger::nvml::fake;

FAKE_NVML_EXPORT Return nvmlInit_v2() { return fk::InitFake(); }
FAKE_NVML_EXPORT Return nvmlInit() { return fk::InitFake(); }

FAKE_NVML_EXPORT Return nvmlShutdown() {
  std::lock_guard<std::mutex> lock(fk::g_mu);
  if (fk::g_init_count == 0) return abi::kErrorUninitialized;
  if (--fk::g_init_count == 0) fk::g_state.reset();
  return abi::kSuccess;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(Return rc) {
  switch (rc) {
    case abi::kSuccess: return "Success";
    case abi::kErrorUninitialized: return "Uninitialized";
    case abi::kErrorInvalidArgument: return "Invalid Argument";
    case abi::kErrorNotSupported: return "Not Supported";
    case abi::kErrorNoPermission: return "Insufficient Permissions";
    case abi::kErrorNotFound: return "Not Found";
    case abi::kErrorInsufficientSize: return "Insufficient Size";
    case abi::kErrorDriverNotLoaded: {
      // Names the scenario problem; the text lives until the next nvmlInit.
      std::lock_guard<std::mutex> lock(fk::g_mu);
      return fk::g_init_error.empty() ? "Driver Not Loaded" : fk::g_init_error.c_str();
    }
    case abi::kErrorFunctionNotFound: return "Function Not Found";
    case abi::kErrorGpuIsLost: return "GPU is lost";
    case abi::kErrorArgumentVersionMismatch: return "Argument Version Mismatch";
    default: return "Unknown Error";
  }
}

FAKE_NVML_EXPORT Return nvmlSystemGetDriverVersion(char* version, unsigned length) {
  fk::Call c("nvmlSystemGetDriverVersion");
  if (!c.Begin(static_cast<const fk::FakeDevice*>(nullptr))) return c.rc();
  return fk::CopyString(c.scenario().driver_version, version, length);
}

static Return DeviceCount(const char* symbol, unsigned* count) {
  fk::Call c(symbol);
  if (!c.Begin(static_cast<const fk::FakeDevice*>(nullptr))) return c.rc();
  if (count == nullptr) return abi::kErrorInvalidArgument;
  *count = static_cast<unsigned>(c.scenario().gpus.size());
  return abi::kSuccess;
}
FAKE_NVML_EXPORT Return nvmlDeviceGetCount_v2(unsigned* count) {
  return DeviceCount("nvmlDeviceGetCount_v2", count);
}
FAKE_NVML_EXPORT Return nvmlDeviceGetCount(unsigned* count) {
  return DeviceCount("nvmlDeviceGetCount", count);
}

static Return HandleByIndex(const char* symbol, unsigned index, Device* device) {
  fk::Call c(symbol);
  if (c.rc() != abi::kSuccess) return c.rc();
  if (device == nullptr || index >= c.scenario().gpus.size()) return abi::kErrorInvalidArgument;
  const fk::FakeDevice* gpu = c.scenario().gpus[index];
  if (!c.Begin(gpu)) return c.rc();
  *device = fk::Handle(gpu);
  return abi::kSuccess;
}
FAKE_NVML_EXPORT Return nvmlDeviceGetHandleByIndex_v2(unsigned index, Device* device) {
  return HandleByIndex("nvmlDeviceGetHandleByIndex_v2", index, device);
}
FAKE_NVML_EXPORT Return nvmlDeviceGetHandleByIndex(unsigned index, Device* device) {
  return HandleByIndex("nvmlDeviceGetHandleByIndex", index, device);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetUUID(Device d, char* uuid, unsigned length) {
  fk::Call c("nvmlDeviceGetUUID");
  if (!c.Begin(d)) return c.rc();
  return fk::CopyString(c.dev().uuid, uuid, length);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetName(Device d, char* name, unsigned length) {
  fk::Call c("nvmlDeviceGetName");
  if (!c.Begin(d)) return c.rc();
  return fk::CopyString(c.dev().name, name, length);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetCudaComputeCapability(Device d, int* major, int* minor) {
  fk::Call c("nvmlDeviceGetCudaComputeCapability");
  if (!c.Begin(d)) return c.rc();
  if (major == nullptr || minor == nullptr) return abi::kErrorInvalidArgument;
  *major = c.dev().gpu().cc_major;
  *minor = c.dev().gpu().cc_minor;
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetMemoryInfo(Device d, abi::MemoryV1* memory) {
  return fk::MemoryInfo("nvmlDeviceGetMemoryInfo", d, memory);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetPowerUsage(Device d, unsigned* milliwatts) {
  fk::Call c("nvmlDeviceGetPowerUsage");
  if (!c.Begin(d)) return c.rc();
  if (milliwatts == nullptr) return abi::kErrorInvalidArgument;
  if (c.dev().is_mig()) return abi::kErrorNotSupported;
  double watts = fk::MeanPowerWatts(c.dev(), c.now_ms(), c.now_ms() + 1);
  *milliwatts = static_cast<unsigned>(std::lround(watts * 1000));
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetTotalEnergyConsumption(Device d,
                                                            unsigned long long* mj) {  // NOLINT
  fk::Call c("nvmlDeviceGetTotalEnergyConsumption");
  if (!c.Begin(d)) return c.rc();
  if (mj == nullptr) return abi::kErrorInvalidArgument;
  if (c.dev().is_mig()) return abi::kErrorNotSupported;
  *mj = static_cast<unsigned long long>(fk::EnergyMillijoules(c.dev(), c.now_ms()));  // NOLINT
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetClockInfo(Device d, int type, unsigned* mhz) {
  fk::Call c("nvmlDeviceGetClockInfo");
  if (!c.Begin(d)) return c.rc();
  if (mhz == nullptr) return abi::kErrorInvalidArgument;
  if (c.dev().is_mig()) return abi::kErrorNotSupported;
  switch (type) {
    case abi::kClockGraphics:
    case abi::kClockSm: *mhz = fk::SmClockMhz(c.dev(), c.now_ms()); return abi::kSuccess;
    case abi::kClockMemory: *mhz = fk::kMemoryClockMhz; return abi::kSuccess;
    default: return abi::kErrorInvalidArgument;
  }
}

FAKE_NVML_EXPORT Return nvmlDeviceGetTemperature(Device d, int sensor, unsigned* celsius) {
  fk::Call c("nvmlDeviceGetTemperature");
  if (!c.Begin(d)) return c.rc();
  if (celsius == nullptr || sensor != abi::kTemperatureGpu) return abi::kErrorInvalidArgument;
  if (c.dev().is_mig()) return abi::kErrorNotSupported;
  *celsius = c.dev().gpu().temperature_c;
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetUtilizationRates(Device d, abi::Utilization* util) {
  fk::Call c("nvmlDeviceGetUtilizationRates");
  if (!c.Begin(d)) return c.rc();
  if (util == nullptr) return abi::kErrorInvalidArgument;
  if (!fk::WholeGpuOnly(c)) return abi::kErrorNotSupported;
  // The last complete sample period of the driver.
  int64_t period = c.dev().sample_period_ms;
  int64_t end = c.now_ms() / period * period;
  util->gpu = fk::Percent(fk::MeanMetric(c.dev(), fk::Metric::kGpuUtil, end - period, end));
  util->memory = fk::Percent(fk::MeanMetric(c.dev(), fk::Metric::kDramActive, end - period, end));
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetSamples(Device d, int type,
                                             unsigned long long last_seen_us,  // NOLINT
                                             int* value_type, unsigned* count,
                                             abi::Sample* samples) {
  fk::Call c("nvmlDeviceGetSamples");
  if (!c.Begin(d)) return c.rc();
  if (count == nullptr || value_type == nullptr) return abi::kErrorInvalidArgument;
  if (type != abi::kSamplingGpuUtilization) return abi::kErrorNotSupported;
  if (!fk::WholeGpuOnly(c)) return abi::kErrorNotSupported;
  // The ring holds the last kSampleBufferSize periods; each sample is the busy share of
  // the period that ends at its timestamp.
  int64_t period = c.dev().sample_period_ms;
  int64_t last = c.now_ms() / period;
  int64_t first = std::max<int64_t>(1, last - fk::kSampleBufferSize + 1);
  std::vector<abi::Sample> ready;
  for (int64_t k = first; k <= last; ++k) {
    int64_t t = k * period;
    if (c.ToUs(t) <= last_seen_us) continue;
    abi::Sample s{};
    s.timestamp_us = c.ToUs(t);
    s.value.ui = fk::Percent(fk::MeanMetric(c.dev(), fk::Metric::kGpuUtil, t - period, t));
    ready.push_back(s);
  }
  *value_type = abi::kValueUnsignedInt;
  if (ready.empty()) return abi::kErrorNotFound;
  if (samples == nullptr) {
    *count = static_cast<unsigned>(ready.size());
    return abi::kSuccess;
  }
  unsigned n = std::min(*count, static_cast<unsigned>(ready.size()));
  std::copy(ready.begin(), ready.begin() + n, samples);
  *count = n;
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetComputeRunningProcesses(Device d, unsigned* count,
                                                             abi::ProcessInfoV1* infos) {
  return fk::ProcessList("nvmlDeviceGetComputeRunningProcesses", d, count, infos);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetProcessUtilization(Device d,
                                                        abi::ProcessUtilizationSample* util,
                                                        unsigned* count,
                                                        unsigned long long last_seen_us) {  // NOLINT
  fk::Call c("nvmlDeviceGetProcessUtilization");
  if (!c.Begin(d) && c.rc() != abi::kErrorInsufficientSize) return c.rc();
  if (!fk::WholeGpuOnly(c)) return abi::kErrorNotSupported;
  // Each process's mean share of SM time over (last_seen, now]; only processes with
  // some utilization in that window have a sample, as with the real driver.
  int64_t since = last_seen_us == 0 ? 0 : std::max<int64_t>(0, c.FromUs(last_seen_us));
  int64_t now = c.now_ms();
  if (now <= since) return abi::kErrorNotFound;
  std::vector<abi::ProcessUtilizationSample> entries;
  for (const fk::FakeProcess& p : c.scenario().processes) {
    if (p.device != &c.dev()) continue;
    int64_t overlap = std::min(now, p.to_ms) - std::max(since, p.from_ms);
    if (overlap <= 0 || p.sm_share <= 0) continue;
    abi::ProcessUtilizationSample s{};
    s.pid = p.pid;
    s.timestamp_us = c.ToUs(now);
    s.sm_util = fk::Percent(p.sm_share * static_cast<double>(overlap) /
                            static_cast<double>(now - since));
    entries.push_back(s);
  }
  if (entries.empty() && c.rc() == abi::kSuccess) return abi::kErrorNotFound;
  return fk::AnswerList(c, count, util, entries, [](const abi::ProcessUtilizationSample& s) {
    return s;
  });
}

FAKE_NVML_EXPORT Return nvmlDeviceGetMigMode(Device d, unsigned* current, unsigned* pending) {
  fk::Call c("nvmlDeviceGetMigMode");
  if (!c.Begin(d)) return c.rc();
  if (current == nullptr || pending == nullptr) return abi::kErrorInvalidArgument;
  if (c.dev().is_mig()) return abi::kErrorInvalidArgument;
  if (c.dev().cc_major < 8) return abi::kErrorNotSupported;
  *current = *pending = c.dev().mig_enabled ? 1 : 0;
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetMaxMigDeviceCount(Device d, unsigned* count) {
  fk::Call c("nvmlDeviceGetMaxMigDeviceCount");
  if (!c.Begin(d)) return c.rc();
  if (count == nullptr || c.dev().is_mig()) return abi::kErrorInvalidArgument;
  if (c.dev().cc_major < 8) return abi::kErrorNotSupported;
  *count = c.dev().mig_slices;
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceGetMigDeviceHandleByIndex(Device d, unsigned index,
                                                            Device* mig) {
  fk::Call c("nvmlDeviceGetMigDeviceHandleByIndex");
  if (!c.Begin(d)) return c.rc();
  if (mig == nullptr || c.dev().is_mig() || index >= c.dev().mig_slices) {
    return abi::kErrorInvalidArgument;
  }
  if (index >= c.dev().instances.size()) return abi::kErrorNotFound;
  *mig = fk::Handle(c.dev().instances[index]);
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlDeviceIsMigDeviceHandle(Device d, unsigned* is_mig) {
  fk::Call c("nvmlDeviceIsMigDeviceHandle");
  if (!c.Begin(d)) return c.rc();
  if (is_mig == nullptr) return abi::kErrorInvalidArgument;
  *is_mig = c.dev().is_mig() ? 1 : 0;
  return abi::kSuccess;
}

static Return InstanceId(const char* symbol, Device d, unsigned* id,
                         unsigned fk::FakeDevice::*field) {
  fk::Call c(symbol);
  if (!c.Begin(d)) return c.rc();
  if (id == nullptr || !c.dev().is_mig()) return abi::kErrorInvalidArgument;
  *id = c.dev().*field;
  return abi::kSuccess;
}
FAKE_NVML_EXPORT Return nvmlDeviceGetGpuInstanceId(Device d, unsigned* id) {
  return InstanceId("nvmlDeviceGetGpuInstanceId", d, id, &fk::FakeDevice::gpu_instance_id);
}
FAKE_NVML_EXPORT Return nvmlDeviceGetComputeInstanceId(Device d, unsigned* id) {
  return InstanceId("nvmlDeviceGetComputeInstanceId", d, id,
                    &fk::FakeDevice::compute_instance_id);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetDeviceHandleFromMigDeviceHandle(Device mig, Device* gpu) {
  fk::Call c("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  if (!c.Begin(mig)) return c.rc();
  if (gpu == nullptr || !c.dev().is_mig()) return abi::kErrorInvalidArgument;
  *gpu = fk::Handle(c.dev().parent);
  return abi::kSuccess;
}

static Return Attributes(const char* symbol, Device d, abi::DeviceAttributes* attr) {
  fk::Call c(symbol);
  if (!c.Begin(d)) return c.rc();
  if (attr == nullptr) return abi::kErrorInvalidArgument;
  const fk::FakeDevice& dev = c.dev();
  const fk::FakeDevice& gpu = dev.gpu();
  if (!dev.is_mig() && !dev.mig_enabled) return abi::kErrorNotSupported;
  unsigned slices = dev.is_mig() ? dev.slices : gpu.mig_slices;
  *attr = {};
  attr->multiprocessor_count = gpu.sm_count * slices / gpu.mig_slices;
  attr->gpu_instance_slice_count = slices;
  attr->compute_instance_slice_count = slices;
  attr->memory_size_mb = static_cast<unsigned long long>(dev.memory_mib);  // NOLINT
  return abi::kSuccess;
}
FAKE_NVML_EXPORT Return nvmlDeviceGetAttributes_v2(Device d, abi::DeviceAttributes* attr) {
  return Attributes("nvmlDeviceGetAttributes_v2", d, attr);
}
FAKE_NVML_EXPORT Return nvmlDeviceGetAttributes(Device d, abi::DeviceAttributes* attr) {
  return Attributes("nvmlDeviceGetAttributes", d, attr);
}

#ifndef GPULEDGER_FAKE_NVML_OLD_DRIVER

FAKE_NVML_EXPORT Return nvmlDeviceGetMemoryInfo_v2(Device d, abi::MemoryV2* memory) {
  return fk::MemoryInfo("nvmlDeviceGetMemoryInfo_v2", d, memory);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetComputeRunningProcesses_v2(Device d, unsigned* count,
                                                                abi::ProcessInfo* infos) {
  return fk::ProcessList("nvmlDeviceGetComputeRunningProcesses_v2", d, count, infos);
}

FAKE_NVML_EXPORT Return nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned* count,
                                                                abi::ProcessInfo* infos) {
  return fk::ProcessList("nvmlDeviceGetComputeRunningProcesses_v3", d, count, infos);
}

FAKE_NVML_EXPORT Return nvmlGpmQueryDeviceSupport(Device d, abi::GpmSupport* support) {
  fk::Call c("nvmlGpmQueryDeviceSupport");
  if (!c.Begin(d)) return c.rc();
  if (support == nullptr) return abi::kErrorInvalidArgument;
  if (support->version != abi::kGpmSupportVersion) return abi::kErrorArgumentVersionMismatch;
  support->is_supported_device = c.dev().gpu().gpm ? 1 : 0;
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlGpmSampleAlloc(abi::GpmSample* sample) {
  fk::Call c("nvmlGpmSampleAlloc");
  if (!c.Begin(static_cast<const fk::FakeDevice*>(nullptr))) return c.rc();
  if (sample == nullptr) return abi::kErrorInvalidArgument;
  auto state = std::make_unique<fk::GpmSampleState>();
  *sample = reinterpret_cast<abi::GpmSample>(state.get());
  c.state().gpm_samples[state.get()] = std::move(state);
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlGpmSampleFree(abi::GpmSample sample) {
  fk::Call c("nvmlGpmSampleFree");
  if (c.rc() != abi::kSuccess) return c.rc();
  return c.state().gpm_samples.erase(sample) == 1 ? abi::kSuccess : abi::kErrorInvalidArgument;
}

static Return FillGpmSample(fk::Call& c, const fk::FakeDevice& dev, abi::GpmSample sample) {
  fk::GpmSampleState* s = fk::FindGpmSample(c, sample);
  if (s == nullptr) return abi::kErrorInvalidArgument;
  if (!dev.gpu().gpm) return abi::kErrorNotSupported;
  s->device = &dev;
  s->t_ms = c.now_ms();
  return abi::kSuccess;
}

FAKE_NVML_EXPORT Return nvmlGpmSampleGet(Device d, abi::GpmSample sample) {
  fk::Call c("nvmlGpmSampleGet");
  if (!c.Begin(d)) return c.rc();
  return FillGpmSample(c, c.dev(), sample);
}

FAKE_NVML_EXPORT Return nvmlGpmMigSampleGet(Device d, unsigned gpu_instance_id,
                                            abi::GpmSample sample) {
  fk::Call c("nvmlGpmMigSampleGet");
  if (!c.Begin(d)) return c.rc();
  if (c.dev().is_mig() || !c.dev().mig_enabled) return abi::kErrorInvalidArgument;
  for (const fk::FakeDevice* mig : c.dev().instances) {
    if (mig->gpu_instance_id == gpu_instance_id) return FillGpmSample(c, *mig, sample);
  }
  return abi::kErrorNotFound;
}

FAKE_NVML_EXPORT Return nvmlGpmMetricsGet(abi::GpmMetricsGet* request) {
  fk::Call c("nvmlGpmMetricsGet");
  if (c.rc() != abi::kSuccess) return c.rc();
  if (request == nullptr) return abi::kErrorInvalidArgument;
  if (request->version != abi::kGpmMetricsGetVersion) return abi::kErrorArgumentVersionMismatch;
  if (request->num_metrics > fk::kFakeGpmMetricsMax) return abi::kErrorInvalidArgument;
  fk::GpmSampleState* first = fk::FindGpmSample(c, request->sample1);
  fk::GpmSampleState* second = fk::FindGpmSample(c, request->sample2);
  if (first == nullptr || second == nullptr || first->device == nullptr ||
      first->device != second->device || second->t_ms <= first->t_ms) {
    return abi::kErrorInvalidArgument;
  }
  if (!c.Begin(first->device)) return c.rc();
  for (uint32_t i = 0; i < request->num_metrics; ++i) {
    abi::GpmMetric& m = request->metrics[i];
    bool known = false;
    m.value = fk::GpmValue(*first->device, m.metric_id, first->t_ms, second->t_ms, &known);
    m.nvml_return = known ? abi::kSuccess : abi::kErrorNotSupported;
  }
  return abi::kSuccess;
}

#endif  // GPULEDGER_FAKE_NVML_OLD_DRIVER

// The exports must have exactly the types the binding calls them through.
static_assert(std::is_same_v<decltype(&nvmlInit_v2), abi::FnReturnVoid>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), abi::FnErrorString>);
static_assert(std::is_same_v<decltype(&nvmlSystemGetDriverVersion), abi::FnSystemString>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), abi::FnGetCount>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), abi::FnHandleByIndex>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUUID), abi::FnDeviceString>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCudaComputeCapability), abi::FnDeviceInt2>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo), abi::FnMemoryV1>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerUsage), abi::FnDeviceUint>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTotalEnergyConsumption), abi::FnDeviceUll>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetClockInfo), abi::FnClockInfo>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetTemperature), abi::FnTemperature>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetUtilizationRates), abi::FnUtilization>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSamples), abi::FnSamples>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses),
                             abi::FnProcessesV1>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetProcessUtilization),
                             abi::FnProcessUtilization>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigMode), abi::FnDeviceUint2>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMigDeviceHandleByIndex),
                             abi::FnMigHandleByIndex>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetDeviceHandleFromMigDeviceHandle),
                             abi::FnMigParent>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetAttributes_v2), abi::FnAttributes>);
#ifndef GPULEDGER_FAKE_NVML_OLD_DRIVER
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMemoryInfo_v2), abi::FnMemoryV2>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetComputeRunningProcesses_v3),
                             abi::FnProcesses>);
static_assert(std::is_same_v<decltype(&nvmlGpmQueryDeviceSupport), abi::FnGpmSupport>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleAlloc), abi::FnGpmSampleAlloc>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleFree), abi::FnGpmSampleFree>);
static_assert(std::is_same_v<decltype(&nvmlGpmSampleGet), abi::FnGpmSampleGet>);
static_assert(std::is_same_v<decltype(&nvmlGpmMigSampleGet), abi::FnGpmMigSampleGet>);
static_assert(std::is_same_v<decltype(&nvmlGpmMetricsGet), abi::FnGpmMetricsGet>);
#endif
