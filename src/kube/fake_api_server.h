// A contract stand-in for the Kubernetes API server in tests: serves
// GET /api/v1/namespaces/{ns}/pods/{name}, GET /api/v1/namespaces/{name} and the pod list
// GET /api/v1/namespaces/{ns}/pods as the API does (a Pod, Namespace or PodList object, or
// a Status object with 404; 401 without the expected bearer token; 403 for namespaces when
// told to refuse them), on 127.0.0.1, port 0. The list pages as the API does: at most
// `limit` items, ordered by name, and metadata.continue (an opaque token) while more follow.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/api_client.h"

namespace gpuledger::kube::testing {

class FakeApiServer {
 public:
  // Requests must carry "Authorization: Bearer <token>".
  static Result<std::unique_ptr<FakeApiServer>> Start(std::string token);
  ~FakeApiServer();

  void AddPod(const ObjectMeta& pod);
  // With its status.phase, and a metadata.deletionTimestamp when `deleting`.
  void AddPod(const ObjectMeta& pod, const std::string& phase, bool deleting);
  void RemovePod(const std::string& ns, const std::string& name);
  void AddNamespace(const ObjectMeta& ns);
  // Namespaces answer 403, as with RBAC that grants pods only.
  void ForbidNamespaces(bool forbid);
  // Every request answers 503 while set.
  void SetDown(bool down);
  // Requests answered so far (any status).
  int requests() const;
  // The paths and query strings of the pod lists asked for so far ("/api/v1/namespaces/ml/pods?limit=2").
  std::vector<std::string> list_requests() const;

  std::string url() const;

 private:
  struct Impl;
  FakeApiServer();
  std::unique_ptr<Impl> impl_;
};

// The JSON the API server gives for a Pod (or, when meta.ns is empty, a Namespace).
// `phase`, when not empty, is the pod's status.phase (default "Running"); `deleting` adds a
// metadata.deletionTimestamp.
std::string ObjectJson(const ObjectMeta& meta, const std::string& phase = "", bool deleting = false);

}  // namespace gpuledger::kube::testing
