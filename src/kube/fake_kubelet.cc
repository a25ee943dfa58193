#include "kube/fake_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <mutex>

#include <fmt/format.h>

#include "pod_resources.grpc.pb.h"

namespace gpuledger::kube::testing {

namespace {

class Service final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* resp) override {
    std::lock_guard lock(mu_);
    ++list_calls_;
    for (const PodDevice& d : pods_) {
      v1::PodResources* pod = nullptr;
      for (auto& p : *resp->mutable_pod_resources()) {
        if (p.name() == d.pod && p.namespace_() == d.ns) pod = &p;
      }
      if (pod == nullptr) {
        pod = resp->add_pod_resources();
        pod->set_name(d.pod);
        pod->set_namespace_(d.ns);
      }
      v1::ContainerResources* ctr = nullptr;
      for (auto& c : *pod->mutable_containers()) {
        if (c.name() == d.container) ctr = &c;
      }
      if (ctr == nullptr) {
        ctr = pod->add_containers();
        ctr->set_name(d.container);
      }
      v1::ContainerDevices* devs = nullptr;
      for (auto& cd : *ctr->mutable_devices()) {
        if (cd.resource_name() == d.resource) devs = &cd;
      }
      if (devs == nullptr) {
        devs = ctr->add_devices();
        devs->set_resource_name(d.resource);
      }
      devs->add_device_ids(d.device_id);
    }
    return grpc::Status::OK;
  }

  grpc::Status GetAllocatableResources(grpc::ServerContext*, const v1::AllocatableResourcesRequest*,
                                       v1::AllocatableResourcesResponse* resp) override {
    std::lock_guard lock(mu_);
    for (const AllocatableDevice& d : allocatable_) {
      v1::ContainerDevices* cd = resp->add_devices();
      cd->set_resource_name(d.resource);
      cd->add_device_ids(d.device_id);
    }
    return grpc::Status::OK;
  }

  mutable std::mutex mu_;
  std::vector<PodDevice> pods_;
  std::vector<AllocatableDevice> allocatable_;
  int list_calls_ = 0;
};

}  // namespace

struct FakeKubelet::Impl {
  Service service;
  std::unique_ptr<grpc::Server> server;
};

FakeKubelet::FakeKubelet(std::string socket_path)
    : socket_path_(std::move(socket_path)), impl_(std::make_unique<Impl>()) {}

FakeKubelet::~FakeKubelet() { Stop(); }

Result<std::unique_ptr<FakeKubelet>> FakeKubelet::Start(const std::string& socket_path) {
  ::unlink(socket_path.c_str());
  std::unique_ptr<FakeKubelet> k(new FakeKubelet(socket_path));
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(&k->impl_->service);
  k->impl_->server = builder.BuildAndStart();
  if (!k->impl_->server) return Unavailable(fmt::format("fake kubelet: cannot listen on {}", socket_path));
  return k;
}

void FakeKubelet::SetPods(std::vector<PodDevice> devices) {
  std::lock_guard lock(impl_->service.mu_);
  impl_->service.pods_ = std::move(devices);
}

void FakeKubelet::SetAllocatable(std::vector<AllocatableDevice> devices) {
  std::lock_guard lock(impl_->service.mu_);
  impl_->service.allocatable_ = std::move(devices);
}

int FakeKubelet::list_calls() const {
  std::lock_guard lock(impl_->service.mu_);
  return impl_->service.list_calls_;
}

void FakeKubelet::Stop() {
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->server->Wait();
    impl_->server.reset();
  }
  ::unlink(socket_path_.c_str());
}

}  // namespace gpuledger::kube::testing
