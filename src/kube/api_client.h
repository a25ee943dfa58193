// A small client for the two Kubernetes API server endpoints the agent reads:
// GET /api/v1/namespaces/{ns}/pods/{name} and GET /api/v1/namespaces/{name}, with the
// pod's service-account token as the bearer and the cluster's CA (the in-cluster
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

struct ApiServerOptions {
  std::string url;         // "https://10.96.0.1:443"; http:// for a local stand-in
  std::string token_file;  // read before every request (projected tokens rotate); empty: none
  std::string ca_file;     // https only; empty: the system's CAs
  int64_t timeout_ms = 2'000;
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

 private:
  struct Impl;
  explicit ApiClient(std::unique_ptr<Impl> impl);
  Result<ObjectMeta> Get(const std::string& path);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger::kube
