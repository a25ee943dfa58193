// A small client for the Kubernetes API server endpoints the agent and the eviction
// actuator read: GET /api/v1/namespaces/{ns}/pods/{name}, GET /api/v1/namespaces/{name}
// and the pod list GET /api/v1/namespaces/{ns}/pods, with the pod's service-account token
// as the bearer (or a token given as such) and the cluster's CA (the in-cluster
// convention: /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}).
// cpp-httplib stays inside the .cc file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuledger::kube {

struct OwnerReference {
  std::string kind;  // "Job", "RayCluster", "StatefulSet", ...
  std::string name;
  bool controller = false;
};

// What the agent keeps of an object's metadata.
struct ObjectMeta {
  std::string name;
  std::string ns;  // empty for a namespace
  std::string uid;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerReference> owners;
};

// The `metadata` of a Pod or Namespace object in the API's JSON. Fails naming the JSON
// path of what is missing or of the wrong type.
Result<ObjectMeta> ParseObjectMeta(std::string_view json);

// One pod of a namespace's pod list: its metadata and what tells whether it still runs.
struct PodListItem {
  ObjectMeta meta;
  std::string phase;                    // status.phase: Pending, Running, Succeeded, Failed, Unknown; "" if absent
  bool deleting = false;                // metadata.deletionTimestamp is set: the pod is terminating
  std::vector<std::string> containers;  // spec.containers[].name, in order
  // Succeeded or Failed: its containers have ended and will not restart.
  bool Finished() const { return phase == "Succeeded" || phase == "Failed"; }
};

// One page of a PodList: its items, and metadata.continue (empty on the last page).
struct PodListPage {
  std::vector<PodListItem> items;
  std::string continue_token;
};

// A PodList in the API's JSON. Each item's metadata is read as ParseObjectMeta reads an
// object's; fails naming the JSON path of what is missing or of the wrong type
// ("items[3].metadata.name: missing").
Result<PodListPage> ParsePodList(std::string_view json);

struct ApiServerOptions {
  std::string url;         // "https://10.96.0.1:443"; http:// for a local stand-in
  std::string token_file;  // read before every request (projected tokens rotate); empty: none
  std::string ca_file;     // https only; empty: the system's CAs
  int64_t timeout_ms = 2'000;
  std::string token;        // a bearer token given as such, used when token_file is empty
  int64_t list_limit = 500;  // items per page of a list (the API's `limit`; it pages with `continue`)
};

// The in-cluster API server URL from KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT (https), or empty when they are not set.
std::string InClusterApiUrl();

class ApiClient {
 public:
  // Fails on a URL that is not http(s)://host[:port].
  static Result<std::unique_ptr<ApiClient>> Create(ApiServerOptions options);
  ~ApiClient();

  // NotFound when the object does not exist (404), PermissionDenied-like
  // FailedPrecondition on 401/403 (RBAC), Unavailable when the server cannot be reached
  // or answers 5xx. Each error names the path.
  Result<ObjectMeta> GetPod(const std::string& ns, const std::string& name);
  Result<ObjectMeta> GetNamespace(const std::string& name);
  // Every pod of `ns` (GET /api/v1/namespaces/NS/pods, page by page with `limit` and
  // `continue`), in the server's order, finished and terminating ones included: the
  // caller decides what they count for (PodListItem says which they are). Errors as
  // GetPod's, naming the page's path; a continue token the server no longer knows (410
  // Gone, the list changed too much between pages) is Unavailable: list again.
  Result<std::vector<PodListItem>> ListPods(const std::string& ns);

 private:
  struct Impl;
  explicit ApiClient(std::unique_ptr<Impl> impl);
  Result<ObjectMeta> Get(const std::string& path);
  // The body of a 200 answer to GET `path`; the errors above otherwise.
  Result<std::string> GetBody(const std::string& path);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger::kube
