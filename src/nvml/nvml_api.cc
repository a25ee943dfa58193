#include "nvml/nvml_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>

#include "nvml/nvml_abi.h"

namespace gpuledger::nvml {
namespace {

// Logical entry points. Each resolves once, at load, to the first of its candidate
// symbols that the library exports; the index of that candidate says which struct
// layout the call uses.
enum Entry : size_t {
  kInit,
  kShutdown,
  kErrorString,
  kDriverVersion,
  kCount,
  kHandleByIndex,
  kUuid,
  kName,
  kComputeCapability,
  kMemoryV2,
  kMemoryV1,
  kPower,
  kEnergy,
  kClock,
  kTemperature,
  kUtilization,
  kSamples,
  kProcesses,
  kProcessUtilization,
  kMigMode,
  kMaxMigCount,
  kMigByIndex,
  kIsMig,
  kGpuInstanceId,
  kComputeInstanceId,
  kMigParent,
  kAttributes,
  kGpmSupport,
  kGpmAlloc,
  kGpmFree,
  kGpmSampleGet,
  kGpmMigSampleGet,
  kGpmMetricsGet,
  kEntryCount,
};

struct EntrySpec {
  Entry entry;
  std::initializer_list<const char*> candidates;  // newest first; the last is the plain name
};

// Candidate index of the version-1 process struct.
constexpr size_t kProcessesV1Candidate = 2;

const std::array<EntrySpec, kEntryCount>& Specs() {
  static const std::array<EntrySpec, kEntryCount> kSpecs = {{
      {kInit, {"nvmlInit_v2", "nvmlInit"}},
      {kShutdown, {"nvmlShutdown"}},
      {kErrorString, {"nvmlErrorString"}},
      {kDriverVersion, {"nvmlSystemGetDriverVersion"}},
      {kCount, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}},
      {kHandleByIndex, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}},
      {kUuid, {"nvmlDeviceGetUUID"}},
      {kName, {"nvmlDeviceGetName"}},
      {kComputeCapability, {"nvmlDeviceGetCudaComputeCapability"}},
      // Two entry points, not candidates of one: a driver may refuse our _v2 struct
      // version at call time, and then the version-1 call still answers.
      {kMemoryV2, {"nvmlDeviceGetMemoryInfo_v2"}},
      {kMemoryV1, {"nvmlDeviceGetMemoryInfo"}},
      {kPower, {"nvmlDeviceGetPowerUsage"}},
      {kEnergy, {"nvmlDeviceGetTotalEnergyConsumption"}},
      {kClock, {"nvmlDeviceGetClockInfo"}},
      {kTemperature, {"nvmlDeviceGetTemperature"}},
      {kUtilization, {"nvmlDeviceGetUtilizationRates"}},
      {kSamples, {"nvmlDeviceGetSamples"}},
      {kProcesses,
       {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetComputeRunningProcesses"}},
      {kProcessUtilization, {"nvmlDeviceGetProcessUtilization"}},
      {kMigMode, {"nvmlDeviceGetMigMode"}},
      {kMaxMigCount, {"nvmlDeviceGetMaxMigDeviceCount"}},
      {kMigByIndex, {"nvmlDeviceGetMigDeviceHandleByIndex"}},
      {kIsMig, {"nvmlDeviceIsMigDeviceHandle"}},
      {kGpuInstanceId, {"nvmlDeviceGetGpuInstanceId"}},
      {kComputeInstanceId, {"nvmlDeviceGetComputeInstanceId"}},
      {kMigParent, {"nvmlDeviceGetDeviceHandleFromMigDeviceHandle"}},
      {kAttributes, {"nvmlDeviceGetAttributes_v2", "nvmlDeviceGetAttributes"}},
      {kGpmSupport, {"nvmlGpmQueryDeviceSupport"}},
      {kGpmAlloc, {"nvmlGpmSampleAlloc"}},
      {kGpmFree, {"nvmlGpmSampleFree"}},
      {kGpmSampleGet, {"nvmlGpmSampleGet"}},
      {kGpmMigSampleGet, {"nvmlGpmMigSampleGet"}},
      {kGpmMetricsGet, {"nvmlGpmMetricsGet"}},
  }};
  return kSpecs;
}

// The unversioned name of an entry point: its last candidate.
std::string WantedName(const EntrySpec& spec) { return *(spec.candidates.end() - 1); }

constexpr unsigned kInitialListCapacity = 32;
constexpr int kMaxListAttempts = 4;
// A count above this from the driver is taken as garbage, not allocated.
constexpr unsigned kMaxListCapacity = 1u << 16;

abi::Device Dev(NvmlDevice d) { return static_cast<abi::Device>(d.raw); }
abi::GpmSample GpmRaw(void* raw) { return static_cast<abi::GpmSample>(raw); }

// Reads a list through `call(unsigned* count, Rec* buffer)`: starts with a buffer of
// kInitialListCapacity and, on INSUFFICIENT_SIZE, retries with the count the driver
// reported (or twice the buffer where it reported no more than it got). Returns the
// last nvmlReturn_t; on success `out` holds exactly the entries written.
template <typename Rec, typename Call>
int FetchList(Call call, std::vector<Rec>& out) {
  unsigned capacity = kInitialListCapacity;
  int rc = abi::kErrorInsufficientSize;
  for (int attempt = 0; attempt < kMaxListAttempts; ++attempt) {
    out.assign(capacity, Rec{});
    unsigned count = capacity;
    rc = call(&count, out.data());
    if (rc == abi::kErrorInsufficientSize) {
      capacity = count > capacity ? count : capacity * 2;
      if (capacity > kMaxListCapacity) return rc;
      continue;
    }
    if (rc == abi::kSuccess) out.resize(std::min(count, capacity));
    return rc;
  }
  return rc;
}

}  // namespace

std::string NvmlCodeName(int code) {
  switch (static_cast<NvmlCode>(code)) {
    case NvmlCode::kSuccess: return "SUCCESS";
    case NvmlCode::kUninitialized: return "UNINITIALIZED";
    case NvmlCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case NvmlCode::kNotSupported: return "NOT_SUPPORTED";
    case NvmlCode::kNoPermission: return "NO_PERMISSION";
    case NvmlCode::kNotFound: return "NOT_FOUND";
    case NvmlCode::kInsufficientSize: return "INSUFFICIENT_SIZE";
    case NvmlCode::kDriverNotLoaded: return "DRIVER_NOT_LOADED";
    case NvmlCode::kLibraryNotFound: return "LIBRARY_NOT_FOUND";
    case NvmlCode::kFunctionNotFound: return "FUNCTION_NOT_FOUND";
    case NvmlCode::kGpuIsLost: return "GPU_IS_LOST";
    case NvmlCode::kArgumentVersionMismatch: return "ARGUMENT_VERSION_MISMATCH";
    case NvmlCode::kUnknown: return "UNKNOWN";
  }
  return fmt::format("ERROR_{}", code);
}

std::string NvmlError::ToString() const {
  std::string s = fmt::format("{}: {}", function, NvmlCodeName(code));
  if (!message.empty()) s += fmt::format(" ({})", message);
  return s;
}

struct NvmlLibrary::Impl {
  std::string path;
  void* handle = nullptr;
  std::array<void*, kEntryCount> fns{};
  std::array<size_t, kEntryCount> candidate{};  // which candidate resolved
  std::array<std::string, kEntryCount> names{};  // resolved symbol, else the plain name
  std::array<bool, kEntryCount> present{};

  ~Impl() {
    if (auto shutdown = Fn<abi::FnReturnVoid>(kShutdown)) shutdown();
    if (handle != nullptr) dlclose(handle);
  }

  void Resolve() {
    for (const EntrySpec& spec : Specs()) {
      names[spec.entry] = WantedName(spec);
      size_t i = 0;
      for (const char* symbol : spec.candidates) {
        if (void* fn = dlsym(handle, symbol)) {
          fns[spec.entry] = fn;
          candidate[spec.entry] = i;
          names[spec.entry] = symbol;
          present[spec.entry] = true;
          break;
        }
        ++i;
      }
    }
  }

  template <typename F>
  F Fn(Entry e) const {
    return reinterpret_cast<F>(fns[e]);
  }

  // Calls entry `e` as type F; FUNCTION_NOT_FOUND when the driver lacks it.
  template <typename F, typename... Args>
  int Call(Entry e, Args... args) const {
    F fn = Fn<F>(e);
    if (fn == nullptr) return abi::kErrorFunctionNotFound;
    return fn(args...);
  }

  NvmlError Error(Entry e, int code) const {
    NvmlError err{code, names[e], ""};
    if (!present[e]) {
      err.message = "symbol not exported by this driver";
    } else if (auto error_string = Fn<abi::FnErrorString>(kErrorString)) {
      const char* text = error_string(code);
      if (text != nullptr) err.message = text;
    }
    return err;
  }

  // The common shape "rc = f(in..., &out)".
  template <typename F, typename T, typename... In>
  NvmlResult<T> Out(Entry e, In... in) const {
    T out{};
    int rc = Call<F>(e, in..., &out);
    if (rc != abi::kSuccess) return Error(e, rc);
    return out;
  }

  NvmlResult<std::string> String(Entry e, abi::Device d, unsigned size) const {
    std::string buf(size, '\0');
    int rc = Call<abi::FnDeviceString>(e, d, buf.data(), size);
    if (rc != abi::kSuccess) return Error(e, rc);
    buf.resize(std::strlen(buf.c_str()));
    return buf;
  }
};

NvmlLibrary::NvmlLibrary(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvmlLibrary::~NvmlLibrary() = default;

const std::string& NvmlLibrary::path() const { return impl_->path; }

std::vector<SymbolBinding> NvmlLibrary::Symbols() const {
  std::vector<SymbolBinding> out;
  for (const EntrySpec& spec : Specs()) {
    out.push_back({WantedName(spec), impl_->present[spec.entry] ? impl_->names[spec.entry] : ""});
  }
  return out;
}

bool NvmlLibrary::Has(std::string_view wanted) const {
  for (const EntrySpec& spec : Specs()) {
    if (WantedName(spec) == wanted) return impl_->present[spec.entry];
  }
  return false;
}

NvmlResult<std::string> NvmlLibrary::DriverVersion() const {
  std::string buf(abi::kDriverVersionBufferSize, '\0');
  int rc = impl_->Call<abi::FnSystemString>(kDriverVersion, buf.data(),
                                            abi::kDriverVersionBufferSize);
  if (rc != abi::kSuccess) return impl_->Error(kDriverVersion, rc);
  buf.resize(std::strlen(buf.c_str()));
  return buf;
}

NvmlResult<unsigned> NvmlLibrary::DeviceCount() const {
  return impl_->Out<abi::FnGetCount, unsigned>(kCount);
}

NvmlResult<NvmlDevice> NvmlLibrary::DeviceByIndex(unsigned index) const {
  auto r = impl_->Out<abi::FnHandleByIndex, abi::Device>(kHandleByIndex, index);
  if (!r.ok()) return r.error();
  return NvmlDevice{r.value()};
}

NvmlResult<std::string> NvmlLibrary::Uuid(NvmlDevice d) const {
  return impl_->String(kUuid, Dev(d), abi::kUuidBufferSize);
}

NvmlResult<std::string> NvmlLibrary::Name(NvmlDevice d) const {
  return impl_->String(kName, Dev(d), abi::kNameBufferSize);
}

NvmlResult<std::pair<int, int>> NvmlLibrary::CudaComputeCapability(NvmlDevice d) const {
  int major = 0;
  int minor = 0;
  int rc = impl_->Call<abi::FnDeviceInt2>(kComputeCapability, Dev(d), &major, &minor);
  if (rc != abi::kSuccess) return impl_->Error(kComputeCapability, rc);
  return std::pair<int, int>(major, minor);
}

NvmlResult<MemoryInfo> NvmlLibrary::Memory(NvmlDevice d) const {
  if (impl_->present[kMemoryV2]) {
    abi::MemoryV2 m{};
    m.version = abi::kMemoryV2Version;
    int rc = impl_->Call<abi::FnMemoryV2>(kMemoryV2, Dev(d), &m);
    if (rc == abi::kSuccess) return MemoryInfo{m.total, m.used, m.free, m.reserved};
    if (rc != abi::kErrorArgumentVersionMismatch || !impl_->present[kMemoryV1]) {
      return impl_->Error(kMemoryV2, rc);
    }
  }
  auto r = impl_->Out<abi::FnMemoryV1, abi::MemoryV1>(kMemoryV1, Dev(d));
  if (!r.ok()) return r.error();
  return MemoryInfo{r.value().total, r.value().used, r.value().free, 0};
}

NvmlResult<unsigned> NvmlLibrary::PowerUsageMilliwatts(NvmlDevice d) const {
  return impl_->Out<abi::FnDeviceUint, unsigned>(kPower, Dev(d));
}

NvmlResult<uint64_t> NvmlLibrary::TotalEnergyMillijoules(NvmlDevice d) const {
  auto r = impl_->Out<abi::FnDeviceUll, unsigned long long>(kEnergy, Dev(d));  // NOLINT
  if (!r.ok()) return r.error();
  return static_cast<uint64_t>(r.value());
}

NvmlResult<unsigned> NvmlLibrary::ClockMhz(NvmlDevice d, ClockType type) const {
  return impl_->Out<abi::FnClockInfo, unsigned>(kClock, Dev(d), static_cast<int>(type));
}

NvmlResult<unsigned> NvmlLibrary::TemperatureCelsius(NvmlDevice d) const {
  return impl_->Out<abi::FnTemperature, unsigned>(kTemperature, Dev(d), abi::kTemperatureGpu);
}

NvmlResult<UtilizationRates> NvmlLibrary::Utilization(NvmlDevice d) const {
  auto r = impl_->Out<abi::FnUtilization, abi::Utilization>(kUtilization, Dev(d));
  if (!r.ok()) return r.error();
  return UtilizationRates{r.value().gpu, r.value().memory};
}

NvmlResult<std::vector<UtilizationSample>> NvmlLibrary::UtilizationSamples(
    NvmlDevice d, uint64_t last_seen_us) const {
  // The documented protocol: a call without a buffer says how many samples there are;
  // the second fills as many as fit and says how many it wrote.
  int value_type = abi::kValueUnsignedInt;
  unsigned count = 0;
  int rc = impl_->Call<abi::FnSamples>(kSamples, Dev(d), abi::kSamplingGpuUtilization,
                                       last_seen_us, &value_type, &count, nullptr);
  std::vector<UtilizationSample> out;
  if (rc == abi::kErrorNotFound) return out;
  if (rc != abi::kSuccess) return impl_->Error(kSamples, rc);
  if (count == 0) return out;
  count = std::min(count, kMaxListCapacity);
  std::vector<abi::Sample> buf(count);
  unsigned capacity = count;
  rc = impl_->Call<abi::FnSamples>(kSamples, Dev(d), abi::kSamplingGpuUtilization, last_seen_us,
                                   &value_type, &count, buf.data());
  if (rc == abi::kErrorNotFound) return out;
  if (rc != abi::kSuccess) return impl_->Error(kSamples, rc);
  buf.resize(std::min(count, capacity));
  for (const abi::Sample& s : buf) {
    double v = 0;
    switch (value_type) {
      case abi::kValueDouble: v = s.value.d; break;
      case abi::kValueUnsignedInt: v = s.value.ui; break;
      case abi::kValueUnsignedLong: v = static_cast<double>(s.value.ul); break;
      case abi::kValueUnsignedLongLong: v = static_cast<double>(s.value.ull); break;
      case abi::kValueSignedLongLong: v = static_cast<double>(s.value.sll); break;
      case abi::kValueSignedInt: v = s.value.si; break;
      default: return NvmlError{abi::kErrorUnknown, impl_->names[kSamples],
                                fmt::format("unknown sample value type {}", value_type)};
    }
    out.push_back({s.timestamp_us, v});
  }
  std::sort(out.begin(), out.end(), [](const UtilizationSample& a, const UtilizationSample& b) {
    return a.timestamp_us < b.timestamp_us;
  });
  return out;
}

NvmlResult<std::vector<ProcessInfo>> NvmlLibrary::ComputeProcesses(NvmlDevice d) const {
  std::vector<ProcessInfo> out;
  int rc = 0;
  if (impl_->present[kProcesses] && impl_->candidate[kProcesses] == kProcessesV1Candidate) {
    std::vector<abi::ProcessInfoV1> buf;
    rc = FetchList(
        [&](unsigned* count, abi::ProcessInfoV1* data) {
          return impl_->Call<abi::FnProcessesV1>(kProcesses, Dev(d), count, data);
        },
        buf);
    for (const auto& p : buf) out.push_back({p.pid, p.used_gpu_memory});
  } else {
    std::vector<abi::ProcessInfo> buf;
    rc = FetchList(
        [&](unsigned* count, abi::ProcessInfo* data) {
          return impl_->Call<abi::FnProcesses>(kProcesses, Dev(d), count, data);
        },
        buf);
    for (const auto& p : buf) {
      out.push_back({p.pid, p.used_gpu_memory, p.gpu_instance_id, p.compute_instance_id});
    }
  }
  if (rc != abi::kSuccess) return impl_->Error(kProcesses, rc);
  return out;
}

NvmlResult<std::vector<ProcessUtilization>> NvmlLibrary::ProcessUtilizations(
    NvmlDevice d, uint64_t last_seen_us) const {
  std::vector<abi::ProcessUtilizationSample> buf;
  int rc = FetchList(
      [&](unsigned* count, abi::ProcessUtilizationSample* data) {
        return impl_->Call<abi::FnProcessUtilization>(kProcessUtilization, Dev(d), data, count,
                                                      last_seen_us);
      },
      buf);
  std::vector<ProcessUtilization> out;
  if (rc == abi::kErrorNotFound) return out;
  if (rc != abi::kSuccess) return impl_->Error(kProcessUtilization, rc);
  for (const auto& s : buf) out.push_back({s.pid, s.timestamp_us, s.sm_util, s.mem_util});
  return out;
}

NvmlResult<std::pair<unsigned, unsigned>> NvmlLibrary::MigMode(NvmlDevice d) const {
  unsigned current = 0;
  unsigned pending = 0;
  int rc = impl_->Call<abi::FnDeviceUint2>(kMigMode, Dev(d), &current, &pending);
  if (rc != abi::kSuccess) return impl_->Error(kMigMode, rc);
  return std::pair<unsigned, unsigned>(current, pending);
}

NvmlResult<unsigned> NvmlLibrary::MaxMigDeviceCount(NvmlDevice d) const {
  return impl_->Out<abi::FnDeviceUint, unsigned>(kMaxMigCount, Dev(d));
}

NvmlResult<NvmlDevice> NvmlLibrary::MigDeviceByIndex(NvmlDevice parent, unsigned index) const {
  auto r = impl_->Out<abi::FnMigHandleByIndex, abi::Device>(kMigByIndex, Dev(parent), index);
  if (!r.ok()) return r.error();
  return NvmlDevice{r.value()};
}

NvmlResult<bool> NvmlLibrary::IsMigDevice(NvmlDevice d) const {
  auto r = impl_->Out<abi::FnDeviceUint, unsigned>(kIsMig, Dev(d));
  if (!r.ok()) return r.error();
  return r.value() != 0;
}

NvmlResult<unsigned> NvmlLibrary::GpuInstanceId(NvmlDevice mig) const {
  return impl_->Out<abi::FnDeviceUint, unsigned>(kGpuInstanceId, Dev(mig));
}

NvmlResult<unsigned> NvmlLibrary::ComputeInstanceId(NvmlDevice mig) const {
  return impl_->Out<abi::FnDeviceUint, unsigned>(kComputeInstanceId, Dev(mig));
}

NvmlResult<NvmlDevice> NvmlLibrary::ParentOfMig(NvmlDevice mig) const {
  auto r = impl_->Out<abi::FnMigParent, abi::Device>(kMigParent, Dev(mig));
  if (!r.ok()) return r.error();
  return NvmlDevice{r.value()};
}

NvmlResult<DeviceAttributes> NvmlLibrary::Attributes(NvmlDevice d) const {
  auto r = impl_->Out<abi::FnAttributes, abi::DeviceAttributes>(kAttributes, Dev(d));
  if (!r.ok()) return r.error();
  const abi::DeviceAttributes& a = r.value();
  return DeviceAttributes{a.multiprocessor_count, a.gpu_instance_slice_count,
                          a.compute_instance_slice_count, a.memory_size_mb};
}

NvmlResult<bool> NvmlLibrary::GpmSupported(NvmlDevice d) const {
  abi::GpmSupport support{abi::kGpmSupportVersion, 0};
  int rc = impl_->Call<abi::FnGpmSupport>(kGpmSupport, Dev(d), &support);
  if (rc != abi::kSuccess) return impl_->Error(kGpmSupport, rc);
  return support.is_supported_device != 0;
}

NvmlResult<GpmSample> NvmlLibrary::GpmSampleAlloc() const {
  // Without the matching free, an allocated sample would leak: require both.
  if (!impl_->present[kGpmFree]) return impl_->Error(kGpmFree, abi::kErrorFunctionNotFound);
  auto r = impl_->Out<abi::FnGpmSampleAlloc, abi::GpmSample>(kGpmAlloc);
  if (!r.ok()) return r.error();
  return GpmSample(this, r.value());
}

void NvmlLibrary::FreeGpmSample(void* raw) const {
  // The only failure would be an invalid handle, which GpmSample never holds.
  (void)impl_->Call<abi::FnGpmSampleFree>(kGpmFree, GpmRaw(raw));
}

NvmlStatus NvmlLibrary::GpmSampleGet(NvmlDevice d, const GpmSample& sample) const {
  int rc = impl_->Call<abi::FnGpmSampleGet>(kGpmSampleGet, Dev(d), GpmRaw(sample.raw_));
  if (rc != abi::kSuccess) return impl_->Error(kGpmSampleGet, rc);
  return NvmlDone{};
}

NvmlStatus NvmlLibrary::GpmMigSampleGet(NvmlDevice parent, unsigned gpu_instance_id,
                                        const GpmSample& sample) const {
  int rc = impl_->Call<abi::FnGpmMigSampleGet>(kGpmMigSampleGet, Dev(parent), gpu_instance_id,
                                               GpmRaw(sample.raw_));
  if (rc != abi::kSuccess) return impl_->Error(kGpmMigSampleGet, rc);
  return NvmlDone{};
}

NvmlResult<std::vector<GpmMetricValue>> NvmlLibrary::GpmMetrics(
    const GpmSample& first, const GpmSample& second, std::span<const GpmMetricId> ids) const {
  if (ids.size() > abi::kGpmMetricsMax || !first.valid() || !second.valid()) {
    return NvmlError{abi::kErrorInvalidArgument, impl_->names[kGpmMetricsGet],
                     "needs two allocated samples and at most 333 metric ids"};
  }
  // 13 KB: on the heap, zeroed, so that a driver with a smaller maximum reads only zeros.
  auto request = std::make_unique<abi::GpmMetricsGet>();
  request->version = abi::kGpmMetricsGetVersion;
  request->num_metrics = static_cast<uint32_t>(ids.size());
  request->sample1 = GpmRaw(first.raw_);
  request->sample2 = GpmRaw(second.raw_);
  for (size_t i = 0; i < ids.size(); ++i) {
    request->metrics[i].metric_id = static_cast<uint32_t>(ids[i]);
  }
  int rc = impl_->Call<abi::FnGpmMetricsGet>(kGpmMetricsGet, request.get());
  if (rc != abi::kSuccess) return impl_->Error(kGpmMetricsGet, rc);
  std::vector<GpmMetricValue> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const abi::GpmMetric& m = request->metrics[i];
    out.push_back({ids[i], m.nvml_return, m.value});
  }
  return out;
}

GpmSample::GpmSample(GpmSample&& other) noexcept
    : lib_(std::exchange(other.lib_, nullptr)), raw_(std::exchange(other.raw_, nullptr)) {}

GpmSample& GpmSample::operator=(GpmSample&& other) noexcept {
  if (this != &other) {
    Reset();
    lib_ = std::exchange(other.lib_, nullptr);
    raw_ = std::exchange(other.raw_, nullptr);
  }
  return *this;
}

GpmSample::~GpmSample() { Reset(); }

void GpmSample::Reset() {
  if (lib_ != nullptr && raw_ != nullptr) lib_->FreeGpmSample(raw_);
  lib_ = nullptr;
  raw_ = nullptr;
}

Result<std::unique_ptr<NvmlLibrary>> NvmlApi::Load(std::string path) {
  dlerror();  // clear a stale error
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Unavailable(fmt::format("cannot load NVML library '{}': {}", path,
                                   why != nullptr ? why : "dlopen failed"));
  }
  auto impl = std::make_unique<NvmlLibrary::Impl>();
  impl->path = path;
  impl->handle = handle;
  impl->Resolve();
  // Until nvmlInit succeeds, nvmlShutdown must not run: take it out of the table.
  void* shutdown = std::exchange(impl->fns[kShutdown], nullptr);
  if (!impl->present[kInit]) {
    return Unavailable(
        fmt::format("'{}' exports neither nvmlInit_v2 nor nvmlInit: not an NVML library", path));
  }
  int rc = impl->Fn<abi::FnReturnVoid>(kInit)();
  if (rc != abi::kSuccess) {
    return Unavailable(fmt::format("NVML library '{}': {}", path,
                                   impl->Error(kInit, rc).ToString()));
  }
  impl->fns[kShutdown] = shutdown;
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(std::move(impl)));
}

}  // namespace gpuledger::nvml
