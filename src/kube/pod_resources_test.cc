#include "kube/pod_resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/fake_kubelet.h"
#include "kube/test_util.h"

namespace gpuledger::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::FieldsAre;
using ::testing::HasSubstr;

TEST(PodResourcesTest, ListsEveryContainersDevicesFromTheKubeletsSocket) {
  testing::SocketDir dir;
  auto kubelet = testing::FakeKubelet::Start(dir / "kubelet.sock");
  ASSERT_TRUE(kubelet.ok()) << kubelet.status().message();
  (*kubelet)->SetPods({
      {"ml", "trainer-0", "main", "nvidia.com/gpu", "GPU-aaaa"},
      {"ml", "trainer-0", "main", "nvidia.com/gpu", "GPU-bbbb"},
      {"ml", "trainer-0", "sidecar", "cpu", "0"},
      {"infer", "llm-7f9c", "server", "nvidia.com/mig-1g.10gb", "MIG-cccc"},
  });
  PodResourcesClient client(dir / "kubelet.sock");
  auto list = client.List();
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_THAT(*list, ElementsAre(FieldsAre("ml", "trainer-0", "main", "nvidia.com/gpu", "GPU-aaaa"),
                                 FieldsAre("ml", "trainer-0", "main", "nvidia.com/gpu", "GPU-bbbb"),
                                 FieldsAre("ml", "trainer-0", "sidecar", "cpu", "0"),
                                 FieldsAre("infer", "llm-7f9c", "server", "nvidia.com/mig-1g.10gb", "MIG-cccc")));
}

TEST(PodResourcesTest, ListsAllocatableDevices) {
  testing::SocketDir dir;
  auto kubelet = testing::FakeKubelet::Start(dir / "kubelet.sock");
  ASSERT_TRUE(kubelet.ok());
  (*kubelet)->SetAllocatable({{"nvidia.com/gpu", "GPU-aaaa"}, {"nvidia.com/gpu", "GPU-bbbb"}});
  PodResourcesClient client(dir / "kubelet.sock");
  auto all = client.Allocatable();
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_THAT(*all, ElementsAre(FieldsAre("nvidia.com/gpu", "GPU-aaaa"), FieldsAre("nvidia.com/gpu", "GPU-bbbb")));
}

TEST(PodResourcesTest, ASocketThatDisappearsFailsNamingItAndIsFoundAgainWhenItReturns) {
  testing::SocketDir dir;
  std::string socket = dir / "kubelet.sock";
  auto kubelet = testing::FakeKubelet::Start(socket);
  ASSERT_TRUE(kubelet.ok());
  (*kubelet)->SetPods({{"ml", "a", "main", "nvidia.com/gpu", "GPU-aaaa"}});
  PodResourcesClient client(socket, 500);
  ASSERT_TRUE(client.List().ok());

  (*kubelet)->Stop();
  auto gone = client.List();
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(gone.status().message(), HasSubstr(socket));

  auto again = testing::FakeKubelet::Start(socket);  // the kubelet restarted
  ASSERT_TRUE(again.ok());
  (*again)->SetPods({{"ml", "b", "main", "nvidia.com/gpu", "GPU-bbbb"}});
  auto back = client.List();
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_THAT(*back, ElementsAre(FieldsAre("ml", "b", "main", "nvidia.com/gpu", "GPU-bbbb")));
}

TEST(PodResourcesTest, ANeverCreatedSocketIsUnavailable) {
  testing::SocketDir dir;
  PodResourcesClient client(dir / "absent.sock", 200);
  auto list = client.List();
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kUnavailable);
}

TEST(PodResourcesTest, DeviceKeysDropTimeSlicingReplicasAndKeepMigInstances) {
  EXPECT_EQ(DeviceKeyOfPluginId("GPU-5d1c07a3-aaaa"), "GPU-5d1c07a3-aaaa");
  EXPECT_EQ(DeviceKeyOfPluginId("GPU-5d1c07a3-aaaa::3"), "GPU-5d1c07a3-aaaa");
  EXPECT_EQ(DeviceKeyOfPluginId("MIG-0d7e3b9f-bbbb"), "MIG-0d7e3b9f-bbbb");
  EXPECT_EQ(DeviceKeyOfPluginId("MIG-GPU-5d1c07a3-aaaa/7/0"), "GPU-5d1c07a3-aaaa/7");
}

}  // namespace
}  // namespace gpuledger::kube
