#include "kube/pod_resources.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <chrono>

#include <fmt/format.h>

#include "pod_resources.grpc.pb.h"

namespace gpuledger::kube {

struct PodResourcesClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::PodResourcesClient(std::string socket_path, int64_t timeout_ms)
    : socket_path_(std::move(socket_path)), timeout_ms_(timeout_ms) {}

PodResourcesClient::~PodResourcesClient() = default;

namespace {

// Calls `rpc` on a fresh or kept stub; on failure the stub is dropped so that the next
// call connects again.
template <typename Call>
Status Invoke(const std::string& socket, int64_t timeout_ms, std::unique_ptr<PodResourcesClient::Impl>& impl,
              const char* what, Call call) {
  struct stat st {};
  if (::stat(socket.c_str(), &st) != 0) {
    impl.reset();
    return Unavailable(fmt::format("kubelet pod-resources socket {}: not there", socket));
  }
  if (!impl) {
    impl = std::make_unique<PodResourcesClient::Impl>();
    impl->channel = grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
    impl->stub = v1::PodResourcesLister::NewStub(impl->channel);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  grpc::Status s = call(*impl->stub, ctx);
  if (!s.ok()) {
    impl.reset();
    return Unavailable(fmt::format("kubelet pod-resources {} on {}: {} (gRPC code {})", what, socket,
                                   s.error_message(), static_cast<int>(s.error_code())));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<PodDevice>> PodResourcesClient::List() {
  v1::ListPodResourcesResponse resp;
  GPULEDGER_RETURN_IF_ERROR(Invoke(socket_path_, timeout_ms_, impl_, "List",
                                   [&](v1::PodResourcesLister::Stub& stub, grpc::ClientContext& ctx) {
                                     return stub.List(&ctx, v1::ListPodResourcesRequest(), &resp);
                                   }));
  std::vector<PodDevice> out;
  for (const v1::PodResources& pod : resp.pod_resources()) {
    for (const v1::ContainerResources& c : pod.containers()) {
      for (const v1::ContainerDevices& d : c.devices()) {
        for (const std::string& id : d.device_ids()) {
          out.push_back({pod.namespace_(), pod.name(), c.name(), d.resource_name(), id});
        }
      }
    }
  }
  return out;
}

Result<std::vector<AllocatableDevice>> PodResourcesClient::Allocatable() {
  v1::AllocatableResourcesResponse resp;
  GPULEDGER_RETURN_IF_ERROR(Invoke(socket_path_, timeout_ms_, impl_, "GetAllocatableResources",
                                   [&](v1::PodResourcesLister::Stub& stub, grpc::ClientContext& ctx) {
                                     return stub.GetAllocatableResources(&ctx, v1::AllocatableResourcesRequest(),
                                                                         &resp);
                                   }));
  std::vector<AllocatableDevice> out;
  for (const v1::ContainerDevices& d : resp.devices()) {
    for (const std::string& id : d.device_ids()) out.push_back({d.resource_name(), id});
  }
  return out;
}

std::string DeviceKeyOfPluginId(const std::string& device_id) {
  std::string id = device_id;
  if (size_t replica = id.find("::"); replica != std::string::npos) id.resize(replica);
  if (id.starts_with("MIG-GPU-")) {
    // MIG-GPU-<uuid>/<gi>/<ci>: keep the GPU's UUID and the GPU instance.
    std::string rest = id.substr(4);
    size_t gi = rest.find('/');
    if (gi == std::string::npos) return rest;
    size_t ci = rest.find('/', gi + 1);
    return ci == std::string::npos ? rest : rest.substr(0, ci);
  }
  return id;
}

}  // namespace gpuledger::kube
