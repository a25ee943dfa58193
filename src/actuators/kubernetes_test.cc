// The Kubernetes actuator's real HTTP client against a stand-in API server: Debian ships
// no kube-apiserver, so the stand-in implements only the documented contract the actuator
// uses: the pod list of a namespace and the pod's eviction subresource (policy/v1
// Eviction), answering 201 when evicted, 429 when a PodDisruptionBudget refuses, 404 for an
// unknown pod and 500 on a server error.
#include <gtest/gtest.h>
#include <httplib.h>

#include <set>

#include "actuators/actuators.h"
#include "actuators/testing/eviction_stand_in.h"

namespace gpuledger::actuators {
namespace {

using testing::StandInApiServer;

objectives::Decision Stop(const std::string& job) {
  objectives::Decision d;
  d.rule = "idle-notebooks";
  d.action = InterventionAction::kStop;
  d.job.id = job;
  return d;
}

TEST(KubernetesActuatorTest, EvictsThePodOfAStopAndTellsARefusalFromAnError) {
  StandInApiServer api;
  api.AddPod("ml-dev", "nb-priya-0", 201);
  api.AddPod("ml-dev", "nb-guarded", 429);
  api.AddPod("ml-dev", "nb-broken", 500);
  KubernetesOptions options{.api_server = api.url(), .token = "s3cret"};
  auto pods = ListPods(options, "ml-dev");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  EXPECT_EQ(*pods, (std::vector<std::string>{"nb-broken", "nb-guarded", "nb-priya-0"}));

  auto k8s = KubernetesActuator(options);
  ASSERT_TRUE(k8s.ok()) << k8s.status().ToString();
  auto done = (*k8s)->Apply(Stop("ml-dev/nb-priya-0"));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, "evicted");
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/nb-priya-0"}));
  EXPECT_EQ(api.auth(), "Bearer s3cret");
  EXPECT_EQ(*ListPods(options, "ml-dev"), (std::vector<std::string>{"nb-broken", "nb-guarded"}));

  // 429 from a PodDisruptionBudget: retry later (Unavailable), nothing evicted.
  auto guarded = (*k8s)->Apply(Stop("ml-dev/nb-guarded"));
  ASSERT_FALSE(guarded.ok());
  EXPECT_EQ(guarded.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(guarded.status().message().find("retry later"), std::string::npos) << guarded.status().message();
  // 500: an error, not a refusal.
  auto broken = (*k8s)->Apply(Stop("ml-dev/nb-broken"));
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kInternal);
  EXPECT_NE(broken.status().message().find("HTTP 500"), std::string::npos);
  // An unknown pod, and job ids that name no pod.
  EXPECT_EQ((*k8s)->Apply(Stop("ml-dev/gone")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*k8s)->Apply(Stop("104233")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*k8s)->Apply(Stop("k8s/ml-dev")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*k8s)->Apply(Stop("k8s/ml-dev/a/b")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api.evicted().size(), 1u);

  // The agent's id for a pod it named by the pod's own name.
  api.AddPod("ml-dev", "nb-ada-0", 201);
  auto agents = (*k8s)->Apply(Stop("k8s/ml-dev/nb-ada-0"));
  ASSERT_TRUE(agents.ok()) << agents.status().ToString();
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/nb-priya-0", "ml-dev/nb-ada-0"}));
}

TEST(KubernetesActuatorTest, HoldAndReprioritizeAreNotKubernetesVerbs) {
  StandInApiServer api;
  auto k8s = KubernetesActuator({.api_server = api.url()});
  ASSERT_TRUE(k8s.ok());
  objectives::Decision d = Stop("ml-dev/nb");
  d.action = InterventionAction::kHold;
  EXPECT_EQ((*k8s)->Apply(d).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(KubernetesActuator({.api_server = "10.0.0.1:6443"}).ok());
}

}  // namespace
}  // namespace gpuledger::actuators
