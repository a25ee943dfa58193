// A stand-in for the kubelet in tests (Debian ships no kubelet): a gRPC server that
// implements the PodResources v1 service (List and GetAllocatableResources) on a unix
// socket and answers with the pods a test sets.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/pod_resources.h"

namespace gpuledger::kube::testing {

class FakeKubelet {
 public:
  // Listens on `socket_path` (created; a stale file there is removed first).
  static Result<std::unique_ptr<FakeKubelet>> Start(const std::string& socket_path);
  ~FakeKubelet();

  // What List answers from now on: the devices grouped by pod and container, in order.
  void SetPods(std::vector<PodDevice> devices);
  // What GetAllocatableResources answers.
  void SetAllocatable(std::vector<AllocatableDevice> devices);
  // Stops serving and removes the socket file, as a kubelet that goes away does.
  void Stop();
  // List calls answered so far.
  int list_calls() const;

  const std::string& socket_path() const { return socket_path_; }

 private:
  struct Impl;
  explicit FakeKubelet(std::string socket_path);
  std::string socket_path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger::kube::testing
