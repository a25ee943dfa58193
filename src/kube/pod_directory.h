// Which pods hold which devices on this node, with the ledger job each one is: the
// kubelet's PodResources listing (every collection) joined with pod and namespace
// metadata from the API server (fetched once per pod, namespaces cached) through the
// pod rules. Without an API server, or while it cannot be reached, the jobs are made
// from what the kubelet gives (namespace, pod, container) and the status says so.
// Not thread-safe: the agent's collection thread owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "kube/api_client.h"
#include "kube/pod_resources.h"
#include "kube/pod_rules.h"

namespace gpuledger::kube {

// One container holding one device.
struct PodHolder {
  std::string ns, pod, container, resource, device_id;
  std::string uid;     // from the API server; empty without it
  bool from_api = false;  // the job was made with the pod's metadata
  Job job;
};

struct PodDirectoryStatus {
  bool pod_resources_up = false;  // the last List answered
  bool api_configured = false;
  bool api_up = false;            // the last API request was answered (404 included)
  int64_t holders = 0;            // (container, device) pairs held now
  int64_t list_failures = 0;
  int64_t api_failures = 0;
  std::string last_error;
};

class PodDirectory {
 public:
  struct Options {
    std::string socket_path = "/var/lib/kubelet/pod-resources/kubelet.sock";
    std::optional<ApiServerOptions> api;  // none: kubelet facts only
    PodRules rules = PodRules::Defaults();
    // Resources that are GPUs: a resource name starting with one of these.
    std::vector<std::string> resource_prefixes{"nvidia.com/"};
    // A listing that cannot be refreshed is kept this long (a kubelet restarting), then
    // dropped, which ends the held-idle allocations it made.
    int64_t stale_after_ms = 60'000;
    int64_t namespace_ttl_ms = 300'000;
    int64_t retry_ms = 30'000;  // after a failed pod or namespace request
    int64_t timeout_ms = 2'000;
  };

  // Fails only on a bad API server URL.
  static Result<std::unique_ptr<PodDirectory>> Create(Options options);
  ~PodDirectory();

  // Lists the kubelet's pods and fetches the metadata of pods not seen before. On a
  // failed List the previous listing is kept until stale_after_ms, and the error is
  // returned.
  Status Refresh(int64_t now_ms);

  // Containers holding the device with this NVML UUID (or, for a MIG instance given its
  // GPU's UUID and GPU instance id, the old "GPU-<uuid>/<gi>" key), in listing order.
  std::vector<const PodHolder*> Holders(const std::string& uuid, const std::string& parent_uuid = "",
                                        std::optional<uint32_t> gpu_instance_id = std::nullopt) const;
  // The holder of a pod by its UID (the API server gives UIDs; the kubelet does not).
  const PodHolder* ByUid(const std::string& uid) const;

  const PodDirectoryStatus& status() const { return status_; }

 private:
  struct CachedMeta {
    std::optional<ObjectMeta> meta;
    int64_t fetched_ms = 0;
  };
  explicit PodDirectory(Options options, std::unique_ptr<ApiClient> api);
  const ObjectMeta* PodMeta(const PodDevice& d, int64_t now_ms);
  const ObjectMeta* NamespaceMeta(const std::string& ns, int64_t now_ms);
  void NoteApi(const Status& st, int64_t now_ms);
  bool ApiResting(int64_t now_ms) const { return now_ms < api_rest_until_ms_; }
  void Rebuild(const std::vector<PodDevice>& devices, int64_t now_ms);

  Options options_;
  PodResourcesClient client_;
  std::unique_ptr<ApiClient> api_;
  std::vector<PodHolder> holders_;
  std::unordered_map<std::string, std::vector<size_t>> by_key_;
  std::unordered_map<std::string, size_t> by_uid_;
  std::unordered_map<std::string, CachedMeta> pods_;        // "<ns>/<name>"
  std::unordered_map<std::string, CachedMeta> namespaces_;
  int64_t last_good_ms_ = -1;
  // After a request that does not reach the API server, none is made for retry_ms: a
  // server that times out costs one timeout, not one per pod, in a collection.
  int64_t api_rest_until_ms_ = 0;
  PodDirectoryStatus status_;
};

}  // namespace gpuledger::kube
