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

// A PodList as the API server writes it (kubectl get pods -o json, trimmed): each item's
// metadata as a pod's, its phase, whether it is being deleted, its containers.
TEST(ApiClientTest, ParsesAPodListsItems) {
  auto page = ParsePodList(R"({"apiVersion":"v1","kind":"PodList",
    "metadata":{"resourceVersion":"9","continue":"tok-2"},
    "items":[
      {"metadata":{"name":"nb-0","namespace":"ml-dev","uid":"u0","labels":{"notebook-name":"nb"},
                   "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"nb","controller":true}]},
       "spec":{"containers":[{"name":"nb","image":"jupyter"},{"name":"sidecar"}]},
       "status":{"phase":"Running"}},
      {"metadata":{"name":"done-0","namespace":"ml-dev"},"status":{"phase":"Succeeded"}},
      {"metadata":{"name":"going-0","namespace":"ml-dev","deletionTimestamp":"2026-11-23T00:00:00Z"},
       "status":{"phase":"Running"}},
      {"metadata":{"name":"new-0","namespace":"ml-dev"}}
    ]})");
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_EQ(page->continue_token, "tok-2");
  ASSERT_EQ(page->items.size(), 4u);
  const PodListItem& nb = page->items[0];
  EXPECT_EQ(nb.meta.name, "nb-0");
  EXPECT_EQ(nb.meta.ns, "ml-dev");
  EXPECT_THAT(nb.meta.labels, ElementsAre(Pair("notebook-name", "nb")));
  EXPECT_THAT(nb.meta.owners, ElementsAre(FieldsAre("StatefulSet", "nb", true)));
  EXPECT_THAT(nb.containers, ElementsAre("nb", "sidecar"));
  EXPECT_EQ(nb.phase, "Running");
  EXPECT_FALSE(nb.Finished());
  EXPECT_FALSE(nb.deleting);
  EXPECT_TRUE(page->items[1].Finished());
  EXPECT_TRUE(page->items[2].deleting);
  EXPECT_FALSE(page->items[2].Finished());
  EXPECT_EQ(page->items[3].phase, "");  // not reported yet: not finished
  EXPECT_FALSE(page->items[3].Finished());

  auto empty = ParsePodList(R"({"kind":"PodList","metadata":{},"items":null})");
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->items.empty());
  EXPECT_EQ(empty->continue_token, "");
}

TEST(ApiClientTest, ABadPodListIsAnErrorNamingTheItem) {
  EXPECT_THAT(ParsePodList("{").status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(ParsePodList(R"({"items":{}})").status().message(), HasSubstr("items: want an array"));
  EXPECT_EQ(ParsePodList(R"({"items":[{"metadata":{"name":"a"}},{"metadata":{"namespace":"ml"}}]})").status().message(),
            "items[1].metadata.name: missing");
  EXPECT_EQ(ParsePodList(R"({"items":[{"metadata":{"name":"a","labels":{"team":7}}}]})").status().message(),
            "items[0].metadata.labels.team: want a string");
  EXPECT_EQ(ParsePodList(R"({"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b",)"
                         R"("ownerReferences":[{"kind":"Job"}]}}]})")
                .status()
                .message(),
            "items[1].metadata.ownerReferences[0]: want kind and name");
  EXPECT_EQ(ParsePodList(R"({"items":[{"metadata":{"name":"a"},"status":"Running"}]})").status().message(),
            "items[0].status: want an object");
  EXPECT_EQ(ParsePodList(R"({"items":[{"metadata":{"name":"a"},"spec":{"containers":[{}]}}]})").status().message(),
            "items[0].spec.containers[0].name: missing");
  EXPECT_EQ(ParsePodList(R"({"items":[7]})").status().message(), "items[0]: want an object");
}

// Five pods in ml, pages of two: three requests, each after the one before's continue
// token, and every pod once, with its phase; ml-dev's pod is not ml's. The token is given
// as such (the actuator's way), not from a file.
TEST(ApiClientTest, ListsANamespacesPodsPageByPage) {
  auto api = testing::FakeApiServer::Start("s3cret");
  ASSERT_TRUE(api.ok()) << api.status().message();
  for (const char* name : {"p1", "p2", "p3", "p4"}) (*api)->AddPod({.name = name, .ns = "ml"});
  (*api)->AddPod({.name = "p5", .ns = "ml"}, "Failed", false);
  (*api)->AddPod({.name = "other", .ns = "ml-dev"});
  ApiServerOptions options{.url = (*api)->url(), .timeout_ms = 1'000, .token = "s3cret", .list_limit = 2};
  auto client = ApiClient::Create(options);
  ASSERT_TRUE(client.ok()) << client.status().message();
  auto pods = (*client)->ListPods("ml");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  std::vector<std::string> names;
  for (const PodListItem& p : *pods) names.push_back(p.meta.name + ":" + p.phase);
  EXPECT_THAT(names, ElementsAre("p1:Running", "p2:Running", "p3:Running", "p4:Running", "p5:Failed"));
  EXPECT_THAT((*api)->list_requests(),
              ElementsAre("/api/v1/namespaces/ml/pods?limit=2", "/api/v1/namespaces/ml/pods?continue=after:p2&limit=2",
                          "/api/v1/namespaces/ml/pods?continue=after:p4&limit=2"));

  auto none = (*client)->ListPods("empty");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());

  (*api)->SetDown(true);
  auto down = (*client)->ListPods("ml");
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(down.status().message(), HasSubstr("GET /api/v1/namespaces/ml/pods?limit=2: HTTP 503"));

  auto anonymous = ApiClient::Create({.url = (*api)->url(), .timeout_ms = 1'000});
  ASSERT_TRUE(anonymous.ok());
  (*api)->SetDown(false);
  EXPECT_EQ((*anonymous)->ListPods("ml").status().code(), StatusCode::kFailedPrecondition);  // 401
}

TEST(ApiClientTest, RefusesAUrlThatIsNotHttp) {
  auto client = ApiClient::Create({"kubernetes.default.svc", "", "", 1'000});
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(), HasSubstr("kubernetes.default.svc"));
}

}  // namespace
}  // namespace gpuledger::kube
