// A client for the kubelet's PodResources API v1 (gRPC over the kubelet's unix socket,
// pod_resources.proto): which pod, namespace and container holds each device the
// kubelet handed out. gRPC and the generated code stay inside the .cc files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuledger::kube {

// One device id handed to one container, as List reports it.
struct PodDevice {
  std::string ns;
  std::string pod;
  std::string container;
  std::string resource;   // "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  std::string device_id;  // as the device plugin names it ("GPU-...", "MIG-...", "GPU-...::2")
};

// A device the kubelet can hand out (GetAllocatableResources).
struct AllocatableDevice {
  std::string resource;
  std::string device_id;
};

class PodResourcesClient {
 public:
  // `socket_path` is a file path (the kubelet's is
  // /var/lib/kubelet/pod-resources/kubelet.sock). Connects lazily, on the first call.
  explicit PodResourcesClient(std::string socket_path, int64_t timeout_ms = 2'000);
  ~PodResourcesClient();
  PodResourcesClient(const PodResourcesClient&) = delete;
  PodResourcesClient& operator=(const PodResourcesClient&) = delete;

  // Every container's devices, one entry per device id, in the kubelet's order. Fails
  // (Unavailable, naming the socket) when the socket is missing or the call fails or
  // exceeds the timeout; the next call connects afresh, so a kubelet that restarts
  // (and recreates its socket) is found again without gRPC's reconnect backoff.
  Result<std::vector<PodDevice>> List();
  // The devices the kubelet can allocate, whether held or not.
  Result<std::vector<AllocatableDevice>> Allocatable();

  const std::string& socket_path() const { return socket_path_; }

  struct Impl;  // the gRPC channel and stub (pod_resources.cc)

 private:
  std::string socket_path_;
  int64_t timeout_ms_;
  std::unique_ptr<Impl> impl_;
};

// The physical key under which a device plugin's id matches an NVML device: the GPU or
// MIG UUID with a time-slicing replica suffix ("GPU-abc::3") removed. MIG ids of the
// old form "MIG-GPU-<uuid>/<gi>/<ci>" become "GPU-<uuid>/<gi>" (the GPU's UUID and the
// GPU instance), which DeviceKeys gives for a MIG instance too.
std::string DeviceKeyOfPluginId(const std::string& device_id);

}  // namespace gpuledger::kube
