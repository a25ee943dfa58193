// The NVML binding: one loader that dlopens libnvidia-ml.so.1, resolves each entry
// point once (newest versioned symbol first: `_v3` -> `_v2` -> unversioned) and wraps
// every call so that a failure, a missing symbol or an unsupported field becomes an
// empty value carrying its reason, never a crash.
//
// No NVML type appears here: devices are opaque `NvmlDevice` values and every figure is
// returned in our own structs. The C declarations live in nvml_abi.h (internal).
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"

namespace gpuledger::nvml {

inline constexpr std::string_view kDefaultNvmlLibrary = "libnvidia-ml.so.1";

// The NVML return codes gpuledger reacts to (values of nvmlReturn_t).
enum class NvmlCode : int {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kNoPermission = 4,
  kNotFound = 6,
  kInsufficientSize = 7,
  kDriverNotLoaded = 9,
  kLibraryNotFound = 12,
  kFunctionNotFound = 13,
  kGpuIsLost = 15,
  kArgumentVersionMismatch = 25,
  kUnknown = 999,
};

// "NOT_SUPPORTED", "GPU_IS_LOST", ...; "ERROR_<n>" for a code not listed above.
std::string NvmlCodeName(int code);

// Why an NVML call gave no value. `code` is the raw nvmlReturn_t; a symbol that the
// loaded driver lacks reads as FUNCTION_NOT_FOUND.
struct NvmlError {
  int code = static_cast<int>(NvmlCode::kUnknown);
  std::string function;  // the symbol called, e.g. "nvmlDeviceGetPowerUsage"
  std::string message;   // nvmlErrorString's text, or ours where the driver gave none

  bool Is(NvmlCode c) const { return code == static_cast<int>(c); }
  // "nvmlDeviceGetPowerUsage: NOT_SUPPORTED (Not Supported)"
  std::string ToString() const;
};

// The value of one NVML call, or why there is none. Reading value() of an error result
// is a programming error (asserted).
template <typename T>
class [[nodiscard]] NvmlResult {
 public:
  NvmlResult(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  NvmlResult(NvmlError error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  // REQUIRES: !ok().
  const NvmlError& error() const {
    assert(!ok());
    return std::get<NvmlError>(v_);
  }
  // SUCCESS (0) when ok.
  int code() const { return ok() ? 0 : error().code; }
  bool Is(NvmlCode c) const { return code() == static_cast<int>(c); }

 private:
  std::variant<T, NvmlError> v_;
};

// A call that returns nothing but success or its reason.
struct NvmlDone {};
using NvmlStatus = NvmlResult<NvmlDone>;

// An opaque device handle (a physical GPU or a MIG instance), valid while the library
// that produced it is loaded.
struct NvmlDevice {
  void* raw = nullptr;
  bool operator==(const NvmlDevice&) const = default;
};

struct MemoryInfo {
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t reserved_bytes = 0;  // 0 when read through the version-1 fallback
};

struct UtilizationRates {
  uint32_t gpu_percent = 0;     // share of the last sample period in which a kernel ran
  uint32_t memory_percent = 0;  // share in which device memory was read or written
};

// One entry of the driver's GPU-utilization sample buffer.
struct UtilizationSample {
  uint64_t timestamp_us = 0;  // CPU time, microseconds since the Unix epoch
  double value_percent = 0;   // busy share of the sample period ending at timestamp_us
};

struct ProcessInfo {
  uint32_t pid = 0;
  uint64_t used_memory_bytes = 0;
  // MIG instance ids, kNoInstance when the process is not in a MIG instance or the
  // driver's entry point predates them (unversioned nvmlDeviceGetComputeRunningProcesses).
  static constexpr uint32_t kNoInstance = 0xFFFFFFFFu;
  uint32_t gpu_instance_id = kNoInstance;
  uint32_t compute_instance_id = kNoInstance;
};

struct ProcessUtilization {
  uint32_t pid = 0;
  uint64_t timestamp_us = 0;  // when the driver took this sample
  uint32_t sm_percent = 0;
  uint32_t memory_percent = 0;
};

struct DeviceAttributes {
  uint32_t multiprocessor_count = 0;
  uint32_t gpu_instance_slice_count = 0;
  uint32_t compute_instance_slice_count = 0;
  uint64_t memory_size_mb = 0;
};

enum class ClockType : int { kGraphics = 0, kSm = 1, kMemory = 2 };

// GPM metric ids (nvmlGpmMetricId_t) that gpuledger reads.
enum class GpmMetricId : uint32_t {
  kGraphicsUtil = 1,
  kSmUtil = 2,
  kSmOccupancy = 3,
  kAnyTensorUtil = 5,
  kDramBwUtil = 10,
};

// One metric of a GPM measurement; `code` is that metric's own nvmlReturn_t.
struct GpmMetricValue {
  GpmMetricId id = GpmMetricId::kSmUtil;
  int code = 0;
  double value = 0;  // percent (0-100) for the ids above
};

class NvmlLibrary;

// A driver-allocated GPM sample buffer, freed on destruction. Move-only.
// REQUIRES: the NvmlLibrary that allocated it outlives it.
class GpmSample {
 public:
  GpmSample() = default;
  GpmSample(GpmSample&& other) noexcept;
  GpmSample& operator=(GpmSample&& other) noexcept;
  GpmSample(const GpmSample&) = delete;
  GpmSample& operator=(const GpmSample&) = delete;
  ~GpmSample();

  bool valid() const { return raw_ != nullptr; }

 private:
  friend class NvmlLibrary;
  GpmSample(const NvmlLibrary* lib, void* raw) : lib_(lib), raw_(raw) {}
  void Reset();

  const NvmlLibrary* lib_ = nullptr;
  void* raw_ = nullptr;
};

// Which symbol a logical entry point resolved to; `resolved` empty when none exists.
struct SymbolBinding {
  std::string wanted;    // e.g. "nvmlDeviceGetComputeRunningProcesses"
  std::string resolved;  // e.g. "nvmlDeviceGetComputeRunningProcesses_v2"
};

// A loaded and initialized NVML. Created by NvmlApi::Load; nvmlShutdown and dlclose
// run on destruction. Every method is const and thread-safe (NVML itself is), and
// never fails other than by returning an error value.
class NvmlLibrary {
 public:
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // The path given to dlopen.
  const std::string& path() const;
  // One row per entry point, in a fixed order: what it resolved to, if anything.
  std::vector<SymbolBinding> Symbols() const;
  // True when the logical entry point (its unversioned name) resolved to some symbol.
  bool Has(std::string_view wanted) const;

  NvmlResult<std::string> DriverVersion() const;
  NvmlResult<unsigned> DeviceCount() const;
  NvmlResult<NvmlDevice> DeviceByIndex(unsigned index) const;
  NvmlResult<std::string> Uuid(NvmlDevice d) const;
  NvmlResult<std::string> Name(NvmlDevice d) const;
  NvmlResult<std::pair<int, int>> CudaComputeCapability(NvmlDevice d) const;
  // nvmlDeviceGetMemoryInfo_v2; the version-1 call where the driver lacks it or
  // answers ARGUMENT_VERSION_MISMATCH (reserved_bytes is then 0).
  NvmlResult<MemoryInfo> Memory(NvmlDevice d) const;
  NvmlResult<unsigned> PowerUsageMilliwatts(NvmlDevice d) const;
  // Counter since the driver loaded.
  NvmlResult<uint64_t> TotalEnergyMillijoules(NvmlDevice d) const;
  NvmlResult<unsigned> ClockMhz(NvmlDevice d, ClockType type) const;
  // The GPU die's temperature (NVML_TEMPERATURE_GPU), whole GPUs only.
  NvmlResult<unsigned> TemperatureCelsius(NvmlDevice d) const;
  NvmlResult<UtilizationRates> Utilization(NvmlDevice d) const;
  // GPU-utilization samples newer than `last_seen_us` (0: the whole buffer), oldest
  // first. NOT_FOUND (no new sample) is reported as an empty vector.
  NvmlResult<std::vector<UtilizationSample>> UtilizationSamples(NvmlDevice d,
                                                                uint64_t last_seen_us) const;
  // Compute processes (_v3, _v2, else unversioned without MIG ids). INSUFFICIENT_SIZE is
  // retried with the count the driver reports, a few times; then it is returned.
  NvmlResult<std::vector<ProcessInfo>> ComputeProcesses(NvmlDevice d) const;
  // Per-process utilization since `last_seen_us`. NOT_FOUND (no process had a sample
  // since then) is an empty vector. INSUFFICIENT_SIZE is retried as above.
  NvmlResult<std::vector<ProcessUtilization>> ProcessUtilizations(NvmlDevice d,
                                                                  uint64_t last_seen_us) const;

  // MIG. `current` and `pending` modes: 1 = enabled.
  NvmlResult<std::pair<unsigned, unsigned>> MigMode(NvmlDevice d) const;
  NvmlResult<unsigned> MaxMigDeviceCount(NvmlDevice d) const;
  // NOT_FOUND for an index with no instance.
  NvmlResult<NvmlDevice> MigDeviceByIndex(NvmlDevice parent, unsigned index) const;
  NvmlResult<bool> IsMigDevice(NvmlDevice d) const;
  NvmlResult<unsigned> GpuInstanceId(NvmlDevice mig) const;
  NvmlResult<unsigned> ComputeInstanceId(NvmlDevice mig) const;
  NvmlResult<NvmlDevice> ParentOfMig(NvmlDevice mig) const;
  NvmlResult<DeviceAttributes> Attributes(NvmlDevice d) const;

  // GPM (Hopper and newer, driver R520 and newer).
  NvmlResult<bool> GpmSupported(NvmlDevice d) const;
  NvmlResult<GpmSample> GpmSampleAlloc() const;
  // Fills `sample` with the device's counters now (a MIG handle works too).
  NvmlStatus GpmSampleGet(NvmlDevice d, const GpmSample& sample) const;
  // Fills `sample` with the counters of MIG GPU instance `gpu_instance_id` of `parent`.
  NvmlStatus GpmMigSampleGet(NvmlDevice parent, unsigned gpu_instance_id,
                             const GpmSample& sample) const;
  // The metrics between two samples of the same device, taken > 100 ms apart.
  // Fails as a whole only when the call does; each metric carries its own code.
  NvmlResult<std::vector<GpmMetricValue>> GpmMetrics(const GpmSample& first,
                                                     const GpmSample& second,
                                                     std::span<const GpmMetricId> ids) const;

 private:
  friend class NvmlApi;
  friend class GpmSample;
  struct Impl;
  explicit NvmlLibrary(std::unique_ptr<Impl> impl);
  void FreeGpmSample(void* raw) const;

  std::unique_ptr<Impl> impl_;
};

// The loader.
class NvmlApi {
 public:
  // dlopens `path` (RTLD_NOW | RTLD_LOCAL), resolves every entry point once and calls
  // nvmlInit. Fails with kUnavailable naming the path and the reason when the library
  // cannot be opened, lacks nvmlInit, or nvmlInit fails; missing optional entry points
  // are not an error (their calls return FUNCTION_NOT_FOUND).
  static Result<std::unique_ptr<NvmlLibrary>> Load(
      std::string path = std::string(kDefaultNvmlLibrary));
};

}  // namespace gpuledger::nvml
