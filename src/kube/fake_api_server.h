// A contract stand-in for the Kubernetes API server in tests: serves
// GET /api/v1/namespaces/{ns}/pods/{name} and GET /api/v1/namespaces/{name} as the API
// does (a Pod or Namespace object, or a Status object with 404; 401 without the expected
// bearer token; 403 for namespaces when told to refuse them), on 127.0.0.1, port 0.
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
  void RemovePod(const std::string& ns, const std::string& name);
  void AddNamespace(const ObjectMeta& ns);
  // Namespaces answer 403, as with RBAC that grants pods only.
  void ForbidNamespaces(bool forbid);
  // Every request answers 503 while set.
  void SetDown(bool down);
  // Requests answered so far (any status).
  int requests() const;

  std::string url() const;

 private:
  struct Impl;
  FakeApiServer();
  std::unique_ptr<Impl> impl_;
};

// The JSON the API server gives for a Pod (or, when meta.ns is empty, a Namespace).
std::string ObjectJson(const ObjectMeta& meta);

}  // namespace gpuledger::kube::testing
