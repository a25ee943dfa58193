#include "kube/pod_directory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "kube/fake_api_server.h"
#include "kube/fake_kubelet.h"
#include "kube/test_util.h"

namespace gpuledger::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Jobs(const std::vector<const PodHolder*>& holders) {
  std::vector<std::string> out;
  for (const PodHolder* h : holders) out.push_back(h->job.id);
  return out;
}

class PodDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto k = testing::FakeKubelet::Start(dir_ / "kubelet.sock");
    ASSERT_TRUE(k.ok()) << k.status().message();
    kubelet_ = std::move(k).value();
  }
  std::unique_ptr<PodDirectory> Directory(bool with_api) {
    PodDirectory::Options o;
    o.socket_path = dir_ / "kubelet.sock";
    o.timeout_ms = 500;
    if (with_api) {
      std::ofstream(dir_ / "token") << "t0ken";
      auto api = testing::FakeApiServer::Start("t0ken");
      EXPECT_TRUE(api.ok());
      api_ = std::move(api).value();
      o.api = ApiServerOptions{api_->url(), dir_ / "token", "", 500};
    }
    auto d = PodDirectory::Create(std::move(o));
    EXPECT_TRUE(d.ok()) << d.status().message();
    return std::move(d).value();
  }
  testing::SocketDir dir_;
  std::unique_ptr<testing::FakeKubelet> kubelet_;
  std::unique_ptr<testing::FakeApiServer> api_;
};

TEST_F(PodDirectoryTest, MigInstancesAreHeldByThePodsTheKubeletGaveThemTo) {
  kubelet_->SetPods({{"infer", "small-a", "server", "nvidia.com/mig-1g.18gb", "MIG-1111"},
                     {"infer", "small-b", "server", "nvidia.com/mig-1g.18gb", "MIG-2222"},
                     {"legacy", "old-c", "main", "nvidia.com/mig-3g.71gb", "MIG-GPU-9999/5/0"}});
  auto dir = Directory(false);
  ASSERT_TRUE(dir->Refresh(1'000).ok());
  EXPECT_THAT(Jobs(dir->Holders("MIG-1111")), ElementsAre("k8s/infer/small-a"));
  EXPECT_THAT(Jobs(dir->Holders("MIG-2222")), ElementsAre("k8s/infer/small-b"));
  // The old id form names the GPU and its GPU instance.
  EXPECT_THAT(Jobs(dir->Holders("MIG-5555", "GPU-9999", 5)), ElementsAre("k8s/legacy/old-c"));
  EXPECT_THAT(dir->Holders("MIG-6666", "GPU-9999", 6), IsEmpty());
  EXPECT_TRUE(dir->status().pod_resources_up);
  EXPECT_FALSE(dir->status().api_configured);
}

TEST_F(PodDirectoryTest, ATimeSlicedGpuIsHeldByEveryPodSharingIt) {
  kubelet_->SetPods({{"a", "nb-0", "jupyter", "nvidia.com/gpu", "GPU-aaaa::0"},
                     {"b", "nb-0", "jupyter", "nvidia.com/gpu", "GPU-aaaa::1"},
                     {"c", "svc-1", "main", "nvidia.com/gpu", "GPU-aaaa::2"},
                     {"c", "svc-1", "main", "cpu", "3"}});
  auto dir = Directory(false);
  ASSERT_TRUE(dir->Refresh(1'000).ok());
  EXPECT_THAT(Jobs(dir->Holders("GPU-aaaa")), ElementsAre("k8s/a/nb-0", "k8s/b/nb-0", "k8s/c/svc-1"));
  EXPECT_EQ(dir->status().holders, 3);  // the CPU is not a GPU resource
}

TEST_F(PodDirectoryTest, PodsComingAndGoingBetweenCollectionsAreFollowed) {
  auto dir = Directory(true);
  api_->AddPod({.name = "t-0", .ns = "ml", .uid = "uid-t0", .labels = {{"team", "vision"}},
                .owners = {{"Job", "resnet", true}}});
  kubelet_->SetPods({{"ml", "t-0", "main", "nvidia.com/gpu", "GPU-aaaa"}});
  ASSERT_TRUE(dir->Refresh(1'000).ok());
  EXPECT_THAT(Jobs(dir->Holders("GPU-aaaa")), ElementsAre("k8s/ml/resnet"));
  ASSERT_NE(dir->ByUid("uid-t0"), nullptr);
  EXPECT_EQ(dir->ByUid("uid-t0")->job.team, "vision");
  int requests = api_->requests();
  ASSERT_TRUE(dir->Refresh(2'000).ok());
  EXPECT_EQ(api_->requests(), requests);  // metadata is fetched once per pod

  // t-0 ends; u-0 takes the GPU.
  api_->AddPod({.name = "u-0", .ns = "ml", .uid = "uid-u0", .labels = {{"team", "nlp"}}});
  kubelet_->SetPods({{"ml", "u-0", "main", "nvidia.com/gpu", "GPU-aaaa"}});
  ASSERT_TRUE(dir->Refresh(3'000).ok());
  EXPECT_THAT(Jobs(dir->Holders("GPU-aaaa")), ElementsAre("k8s/ml/u-0"));
  EXPECT_EQ(dir->ByUid("uid-t0"), nullptr);
  EXPECT_EQ(dir->Holders("GPU-aaaa")[0]->job.team, "nlp");

  kubelet_->SetPods({});
  ASSERT_TRUE(dir->Refresh(4'000).ok());
  EXPECT_THAT(dir->Holders("GPU-aaaa"), IsEmpty());
}

TEST_F(PodDirectoryTest, WithoutTheApiServerJobsComeFromWhatTheKubeletGivesAndTheStatusSaysSo) {
  auto dir = Directory(true);
  api_->AddPod({.name = "t-0", .ns = "ml", .labels = {{"team", "vision"}}});
  api_->SetDown(true);
  kubelet_->SetPods({{"ml", "t-0", "main", "nvidia.com/gpu", "GPU-aaaa"}});
  ASSERT_TRUE(dir->Refresh(1'000).ok());
  ASSERT_THAT(Jobs(dir->Holders("GPU-aaaa")), ElementsAre("k8s/ml/t-0"));
  EXPECT_EQ(dir->Holders("GPU-aaaa")[0]->job.team, "ml");
  EXPECT_FALSE(dir->Holders("GPU-aaaa")[0]->from_api);
  EXPECT_TRUE(dir->status().api_configured);
  EXPECT_FALSE(dir->status().api_up);
  EXPECT_GT(dir->status().api_failures, 0);

  // One failed request rests the API for retry_ms: the other pods are not asked.
  int requests_while_down = api_->requests();
  kubelet_->SetPods({{"ml", "t-0", "main", "nvidia.com/gpu", "GPU-aaaa"},
                     {"ml", "t-1", "main", "nvidia.com/gpu", "GPU-bbbb"},
                     {"ml", "t-2", "main", "nvidia.com/gpu", "GPU-cccc"}});
  ASSERT_TRUE(dir->Refresh(1'500).ok());
  EXPECT_EQ(api_->requests(), requests_while_down);
  EXPECT_EQ(dir->Holders("GPU-cccc")[0]->job.id, "k8s/ml/t-2");

  // Back: retried after retry_ms, not on every collection.
  api_->SetDown(false);
  ASSERT_TRUE(dir->Refresh(2'000).ok());
  EXPECT_EQ(dir->Holders("GPU-aaaa")[0]->job.team, "ml");
  ASSERT_TRUE(dir->Refresh(1'000 + 30'000).ok());
  EXPECT_EQ(dir->Holders("GPU-aaaa")[0]->job.team, "vision");
  EXPECT_TRUE(dir->status().api_up);
}

TEST_F(PodDirectoryTest, ForbiddenNamespacesLeaveThePodsOwnMetadata) {
  auto dir = Directory(true);
  api_->AddPod({.name = "t-0", .ns = "ml", .labels = {{"project", "p1"}}});
  api_->ForbidNamespaces(true);
  kubelet_->SetPods({{"ml", "t-0", "main", "nvidia.com/gpu", "GPU-aaaa"}});
  ASSERT_TRUE(dir->Refresh(1'000).ok());
  EXPECT_EQ(dir->Holders("GPU-aaaa")[0]->job.project, "p1");
  EXPECT_EQ(dir->Holders("GPU-aaaa")[0]->job.team, "ml");
  EXPECT_TRUE(dir->status().api_up);
}

TEST_F(PodDirectoryTest, ASocketThatDisappearsKeepsTheListingUntilItIsStale) {
  kubelet_->SetPods({{"ml", "t-0", "main", "nvidia.com/gpu", "GPU-aaaa"}});
  auto dir = Directory(false);
  ASSERT_TRUE(dir->Refresh(1'000).ok());
  kubelet_->Stop();
  EXPECT_FALSE(dir->Refresh(2'000).ok());
  EXPECT_FALSE(dir->status().pod_resources_up);
  EXPECT_EQ(dir->status().list_failures, 1);
  EXPECT_THAT(Jobs(dir->Holders("GPU-aaaa")), ElementsAre("k8s/ml/t-0"));  // a kubelet restart
  EXPECT_FALSE(dir->Refresh(1'000 + 60'000).ok());
  EXPECT_THAT(dir->Holders("GPU-aaaa"), IsEmpty());

  auto again = testing::FakeKubelet::Start(dir_ / "kubelet.sock");
  ASSERT_TRUE(again.ok());
  (*again)->SetPods({{"ml", "t-1", "main", "nvidia.com/gpu", "GPU-aaaa"}});
  ASSERT_TRUE(dir->Refresh(70'000).ok());
  EXPECT_TRUE(dir->status().pod_resources_up);
  EXPECT_THAT(Jobs(dir->Holders("GPU-aaaa")), ElementsAre("k8s/ml/t-1"));
}

}  // namespace
}  // namespace gpuledger::kube
