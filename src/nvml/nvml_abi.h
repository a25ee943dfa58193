// The slice of NVML's C ABI that gpuledger uses, declared from the documented facts
// (docs/nvml.md, NVML API v12/v13, x86-64 LP64). No NVIDIA header is used.
//
// Internal to src/nvml: the binding (nvml_api.cc) and the fake library (fake/) both
// include it, so they cannot drift apart silently; the static_asserts pin every struct
// to the size and field offsets the real driver expects. Nothing outside src/nvml may
// include this header: the public face is nvml_api.h, which exposes none of these types.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuledger::nvml::abi {

// nvmlReturn_t is a C enum, passed as an int.
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorArgumentVersionMismatch = 25;
inline constexpr Return kErrorUnknown = 999;

// Opaque handles: pointers to driver-owned structs we never dereference.
struct DeviceSt;
using Device = DeviceSt*;
struct GpmSampleSt;
using GpmSample = GpmSampleSt*;

inline constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
inline constexpr unsigned kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned kDriverVersionBufferSize = 96;

// A versioned struct carries sizeof(struct) | (version << 24) in its first field.
constexpr uint32_t StructVersion(size_t size, uint32_t version) {
  return static_cast<uint32_t>(size) | (version << 24);
}

// Clock types of nvmlDeviceGetClockInfo.
inline constexpr int kClockGraphics = 0;
inline constexpr int kClockSm = 1;
inline constexpr int kClockMemory = 2;
// Sensor of nvmlDeviceGetTemperature (NVML_TEMPERATURE_GPU: the GPU die).
inline constexpr int kTemperatureGpu = 0;

// Sampling types of nvmlDeviceGetSamples.
inline constexpr int kSamplingGpuUtilization = 1;

// nvmlValueType_t: how nvmlDeviceGetSamples filled the value union.
inline constexpr int kValueDouble = 0;
inline constexpr int kValueUnsignedInt = 1;
inline constexpr int kValueUnsignedLong = 2;
inline constexpr int kValueUnsignedLongLong = 3;
inline constexpr int kValueSignedLongLong = 4;
inline constexpr int kValueSignedInt = 5;

// gpuInstanceId / computeInstanceId of a process that is not in a MIG instance.
inline constexpr uint32_t kNoInstanceId = 0xFFFFFFFFu;

// nvmlMemory_t (version 1, used by nvmlDeviceGetMemoryInfo): bytes.
struct MemoryV1 {
  uint64_t total;
  uint64_t free;
  uint64_t used;
};
static_assert(sizeof(MemoryV1) == 24);

// nvmlMemory_v2_t (nvmlDeviceGetMemoryInfo_v2): bytes; `reserved` is held by the driver.
struct MemoryV2 {
  uint32_t version;
  uint64_t total;
  uint64_t reserved;
  uint64_t free;
  uint64_t used;
};
static_assert(sizeof(MemoryV2) == 40);
static_assert(offsetof(MemoryV2, total) == 8);
inline constexpr uint32_t kMemoryV2Version = StructVersion(sizeof(MemoryV2), 2);

// nvmlUtilization_t: percent of the last sample period.
struct Utilization {
  uint32_t gpu;
  uint32_t memory;
};
static_assert(sizeof(Utilization) == 8);

// nvmlValue_t: an 8-byte union.
union Value {
  double d;
  uint32_t ui;
  unsigned long ul;  // NOLINT(google-runtime-int): the C ABI's type
  unsigned long long ull;  // NOLINT(google-runtime-int)
  long long sll;  // NOLINT(google-runtime-int)
  int si;
};
static_assert(sizeof(Value) == 8);

// nvmlSample_t: one entry of the driver's sample buffer.
struct Sample {
  unsigned long long timestamp_us;  // NOLINT(google-runtime-int): CPU time, microseconds
  Value value;
};
static_assert(sizeof(Sample) == 16);

// nvmlProcessInfo_v1_t: what the unversioned nvmlDeviceGetComputeRunningProcesses fills.
struct ProcessInfoV1 {
  uint32_t pid;
  unsigned long long used_gpu_memory;  // NOLINT(google-runtime-int): bytes
};
static_assert(sizeof(ProcessInfoV1) == 16);

// nvmlProcessInfo_t as filled by the _v2 and _v3 entry points.
struct ProcessInfo {
  uint32_t pid;
  unsigned long long used_gpu_memory;  // NOLINT(google-runtime-int): bytes
  uint32_t gpu_instance_id;            // kNoInstanceId when not MIG
  uint32_t compute_instance_id;
};
static_assert(sizeof(ProcessInfo) == 24);
static_assert(offsetof(ProcessInfo, gpu_instance_id) == 16);

// nvmlProcessUtilizationSample_t: percent of the period since lastSeenTimeStamp.
struct ProcessUtilizationSample {
  uint32_t pid;
  unsigned long long timestamp_us;  // NOLINT(google-runtime-int)
  uint32_t sm_util;
  uint32_t mem_util;
  uint32_t enc_util;
  uint32_t dec_util;
};
static_assert(sizeof(ProcessUtilizationSample) == 32);
static_assert(offsetof(ProcessUtilizationSample, sm_util) == 16);

// nvmlDeviceAttributes_t: slice counts give a MIG instance's share of its parent.
struct DeviceAttributes {
  uint32_t multiprocessor_count;
  uint32_t shared_copy_engine_count;
  uint32_t shared_decoder_count;
  uint32_t shared_encoder_count;
  uint32_t shared_jpeg_count;
  uint32_t shared_ofa_count;
  uint32_t gpu_instance_slice_count;
  uint32_t compute_instance_slice_count;
  unsigned long long memory_size_mb;  // NOLINT(google-runtime-int)
};
static_assert(sizeof(DeviceAttributes) == 40);

// nvmlGpmSupport_t.
struct GpmSupport {
  uint32_t version;  // kGpmSupportVersion
  uint32_t is_supported_device;
};
static_assert(sizeof(GpmSupport) == 8);
inline constexpr uint32_t kGpmSupportVersion = 1;

// nvmlGpmMetric_t: one requested metric and its answer.
struct GpmMetric {
  uint32_t metric_id;
  Return nvml_return;
  double value;
  struct {
    char* short_name;
    char* long_name;
    char* unit;
  } metric_info;
};
static_assert(sizeof(GpmMetric) == 40);

// The length of nvmlGpmMetricsGet_t.metrics grew across driver releases (98, 210, 333)
// while the struct version stayed 1. Callers allocate the largest and set num_metrics
// to what they fill; a driver reads only num_metrics entries.
inline constexpr uint32_t kGpmMetricsMax = 333;
inline constexpr uint32_t kGpmMetricsGetVersion = 1;

// nvmlGpmMetricsGet_t.
struct GpmMetricsGet {
  uint32_t version;
  uint32_t num_metrics;
  GpmSample sample1;
  GpmSample sample2;
  GpmMetric metrics[kGpmMetricsMax];
};
static_assert(offsetof(GpmMetricsGet, sample1) == 8);
static_assert(offsetof(GpmMetricsGet, metrics) == 24);
static_assert(sizeof(GpmMetricsGet) == 24 + 40 * kGpmMetricsMax);

// GPM metric ids (nvmlGpmMetricId_t). Values are percent unless named per second.
inline constexpr uint32_t kGpmGraphicsUtil = 1;
inline constexpr uint32_t kGpmSmUtil = 2;
inline constexpr uint32_t kGpmSmOccupancy = 3;
inline constexpr uint32_t kGpmAnyTensorUtil = 5;
inline constexpr uint32_t kGpmDramBwUtil = 10;

// Function types, one per entry point gpuledger calls. The fake checks its exports
// against these, so a signature mismatch fails to compile.
using FnReturnVoid = Return (*)();                                   // nvmlInit_v2, nvmlShutdown
using FnErrorString = const char* (*)(Return);                       // nvmlErrorString
using FnSystemString = Return (*)(char*, unsigned);                  // nvmlSystemGetDriverVersion
using FnGetCount = Return (*)(unsigned*);                            // nvmlDeviceGetCount_v2
using FnHandleByIndex = Return (*)(unsigned, Device*);               // nvmlDeviceGetHandleByIndex_v2
using FnDeviceString = Return (*)(Device, char*, unsigned);          // UUID, name
using FnDeviceUint = Return (*)(Device, unsigned*);                  // power, max MIG count, GI/CI id
using FnDeviceUint2 = Return (*)(Device, unsigned*, unsigned*);      // MIG mode
using FnDeviceInt2 = Return (*)(Device, int*, int*);                 // compute capability
using FnDeviceUll = Return (*)(Device, unsigned long long*);         // NOLINT: energy
using FnMemoryV1 = Return (*)(Device, MemoryV1*);
using FnMemoryV2 = Return (*)(Device, MemoryV2*);
using FnClockInfo = Return (*)(Device, int, unsigned*);
using FnTemperature = Return (*)(Device, int, unsigned*);  // sensor, degrees C
using FnUtilization = Return (*)(Device, Utilization*);
using FnSamples = Return (*)(Device, int, unsigned long long, int*, unsigned*,  // NOLINT
                             Sample*);
using FnProcessesV1 = Return (*)(Device, unsigned*, ProcessInfoV1*);
using FnProcesses = Return (*)(Device, unsigned*, ProcessInfo*);
using FnProcessUtilization = Return (*)(Device, ProcessUtilizationSample*, unsigned*,
                                        unsigned long long);  // NOLINT
using FnMigHandleByIndex = Return (*)(Device, unsigned, Device*);
using FnMigParent = Return (*)(Device, Device*);
using FnAttributes = Return (*)(Device, DeviceAttributes*);
using FnGpmSupport = Return (*)(Device, GpmSupport*);
using FnGpmSampleAlloc = Return (*)(GpmSample*);
using FnGpmSampleFree = Return (*)(GpmSample);
using FnGpmSampleGet = Return (*)(Device, GpmSample);
using FnGpmMigSampleGet = Return (*)(Device, unsigned, GpmSample);
using FnGpmMetricsGet = Return (*)(GpmMetricsGet*);

}  // namespace gpuledger::nvml::abi
