// What the kubelet source costs the agent per collection: one PodResources List over the
// unix socket and the pod directory's refresh (cached metadata), for a node of 8 GPUs x
// 7 MIG instances held by 56 pods. The stand-in kubelet runs in the same process.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include "kube/fake_kubelet.h"
#include "kube/pod_directory.h"
#include "kube/test_util.h"

namespace gpuledger::kube {
namespace {

std::vector<PodDevice> Node56() {
  std::vector<PodDevice> pods;
  for (int g = 0; g < 8; ++g) {
    for (int m = 0; m < 7; ++m) {
      pods.push_back({fmt::format("team-{}", g), fmt::format("infer-{}-{}", g, m), "server",
                      "nvidia.com/mig-1g.18gb", fmt::format("MIG-{:08x}-0000-4000-8000-{:012x}", g, m)});
    }
  }
  return pods;
}

// The stand-in kubelet listing Node56(), or null with the benchmark skipped.
std::unique_ptr<testing::FakeKubelet> StartKubelet(const testing::SocketDir& dir, benchmark::State& state) {
  auto kubelet = testing::FakeKubelet::Start(dir / "kubelet.sock");
  if (!kubelet.ok()) {
    state.SkipWithError(kubelet.status().message().c_str());
    return nullptr;
  }
  (*kubelet)->SetPods(Node56());
  return std::move(kubelet).value();
}

void BM_PodResourcesList(benchmark::State& state) {
  testing::SocketDir dir;
  auto kubelet = StartKubelet(dir, state);
  if (!kubelet) return;
  PodResourcesClient client(dir / "kubelet.sock");
  for (auto _ : state) {
    auto list = client.List();
    if (!list.ok() || list->size() != 56) state.SkipWithError("List failed");
    benchmark::DoNotOptimize(list);
  }
}
BENCHMARK(BM_PodResourcesList)->Unit(benchmark::kMicrosecond);

void BM_PodDirectoryRefresh(benchmark::State& state) {
  testing::SocketDir dir;
  auto kubelet = StartKubelet(dir, state);
  if (!kubelet) return;
  PodDirectory::Options o;
  o.socket_path = dir / "kubelet.sock";
  auto directory = PodDirectory::Create(o);
  int64_t t = 0;
  for (auto _ : state) {
    t += 1'000;
    if (!(*directory)->Refresh(t).ok()) state.SkipWithError("Refresh failed");
  }
}
BENCHMARK(BM_PodDirectoryRefresh)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuledger::kube

BENCHMARK_MAIN();
