#include "kube/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "kube/fake_api_server.h"
#include "kube/test_util.h"

namespace gpuledger::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::FieldsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

ObjectMeta TrainerPod() {
  ObjectMeta m;
  m.name = "trainer-0";
  m.ns = "ml";
  m.uid = "3f1e2d4c-0000-4000-8000-000000000001";
  m.labels = {{"team", "vision"}, {"job-name", "resnet"}};
  m.annotations = {{"note", "x"}};
  m.owners = {{"Job", "resnet", true}};
  return m;
}

TEST(ApiClientTest, ParsesThePodsMetadata) {
  auto m = ParseObjectMeta(testing::ObjectJson(TrainerPod()));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "trainer-0");
  EXPECT_EQ(m->ns, "ml");
  EXPECT_EQ(m->uid, "3f1e2d4c-0000-4000-8000-000000000001");
  EXPECT_THAT(m->labels, ElementsAre(Pair("job-name", "resnet"), Pair("team", "vision")));
  EXPECT_THAT(m->owners, ElementsAre(FieldsAre("Job", "resnet", true)));
}

TEST(ApiClientTest, BadMetadataIsAnErrorNamingItsPath) {
  EXPECT_THAT(ParseObjectMeta("[").status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(ParseObjectMeta(R"({"kind":"Pod"})").status().message(), HasSubstr("metadata"));
  EXPECT_THAT(ParseObjectMeta(R"({"metadata":{"name":"p","labels":{"a":1}}})").status().message(),
              HasSubstr("metadata.labels.a"));
  EXPECT_THAT(ParseObjectMeta(R"({"metadata":{"name":"p","ownerReferences":[{"kind":"Job"}]}})").status().message(),
              HasSubstr("metadata.ownerReferences[0]"));
}

TEST(ApiClientTest, GetsPodsAndNamespacesWithTheServiceAccountToken) {
  testing::SocketDir dir;
  {
    std::ofstream(dir / "token") << "s3cret\n";
  }
  auto api = testing::FakeApiServer::Start("s3cret");
  ASSERT_TRUE(api.ok()) << api.status().message();
  (*api)->AddPod(TrainerPod());
  (*api)->AddNamespace({.name = "ml", .labels = {{"team", "research"}}});
  auto client = ApiClient::Create({(*api)->url(), dir / "token", "", 1'000});
  ASSERT_TRUE(client.ok()) << client.status().message();

  auto pod = (*client)->GetPod("ml", "trainer-0");
  ASSERT_TRUE(pod.ok()) << pod.status().message();
  EXPECT_EQ(pod->labels.at("team"), "vision");
  auto ns = (*client)->GetNamespace("ml");
  ASSERT_TRUE(ns.ok()) << ns.status().message();
  EXPECT_EQ(ns->labels.at("team"), "research");

  EXPECT_EQ((*client)->GetPod("ml", "gone").status().code(), StatusCode::kNotFound);
  (*api)->ForbidNamespaces(true);
  auto forbidden = (*client)->GetNamespace("ml");
  EXPECT_EQ(forbidden.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(forbidden.status().message(), HasSubstr("/api/v1/namespaces/ml"));
  (*api)->SetDown(true);
  EXPECT_EQ((*client)->GetPod("ml", "trainer-0").status().code(), StatusCode::kUnavailable);
}

TEST(ApiClientTest, AWrongTokenIsRefused) {
  testing::SocketDir dir;
  {
    std::ofstream(dir / "token") << "wrong";
  }
  auto api = testing::FakeApiServer::Start("s3cret");
  ASSERT_TRUE(api.ok());
  (*api)->AddPod(TrainerPod());
  auto client = ApiClient::Create({(*api)->url(), dir / "token", "", 1'000});
  ASSERT_TRUE(client.ok());
  auto pod = (*client)->GetPod("ml", "trainer-0");
  EXPECT_EQ(pod.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(pod.status().message(), HasSubstr("401"));
}

TEST(ApiClientTest, RefusesAUrlThatIsNotHttp) {
  auto client = ApiClient::Create({"kubernetes.default.svc", "", "", 1'000});
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(), HasSubstr("kubernetes.default.svc"));
}

}  // namespace
}  // namespace gpuledger::kube
