// The Kubernetes actuator's real HTTP clients against a stand-in API server: Debian ships
// no kube-apiserver, so the stand-in implements only the documented contract the actuator
// uses: the pod list of a namespace (with each pod's metadata, containers and phase), the
// namespace, and the pod's eviction subresource (policy/v1 Eviction), answering 201 when
// evicted, 429 when a PodDisruptionBudget refuses, 404 for an unknown pod and 500 on a
// server error. Which pods are a job's is the agent's pod rules' answer (kube/pod_rules.h).
#include <gtest/gtest.h>
#include <httplib.h>

#include <set>

#include <gmock/gmock.h>

#include "actuators/actuators.h"
#include "actuators/testing/eviction_stand_in.h"

namespace gpuledger::actuators {
namespace {

using testing::StandInApiServer;
using ::testing::HasSubstr;
using ::testing::Not;

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
  EXPECT_EQ(*done, "evicted 1 pod: nb-priya-0");
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
  // An unknown pod, and job ids that name no pod. A job's value may hold a '/' (the rules
  // may read an annotation): it is looked for, and not found.
  auto gone = (*k8s)->Apply(Stop("ml-dev/gone"));
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(gone.status().message(), HasSubstr("job ml-dev/gone: no pod in namespace ml-dev"));
  EXPECT_EQ((*k8s)->Apply(Stop("104233")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*k8s)->Apply(Stop("k8s/ml-dev")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*k8s)->Apply(Stop("k8s/ml-dev/")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*k8s)->Apply(Stop("k8s/ml-dev/a/b")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(api.evicted().size(), 1u);

  // The agent's id for a pod it named by the pod's own name.
  api.AddPod("ml-dev", "nb-ada-0", 201);
  auto agents = (*k8s)->Apply(Stop("k8s/ml-dev/nb-ada-0"));
  ASSERT_TRUE(agents.ok()) << agents.status().ToString();
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/nb-priya-0", "ml-dev/nb-ada-0"}));

  // A pod the rules name after its controller (a Deployment's ReplicaSet), stopped by its
  // own name in the form the actuator always read: still that pod.
  api.AddPod(kube::ObjectMeta{.name = "web-7f9c-x2", .ns = "ml-dev", .owners = {{"ReplicaSet", "web-7f9c", true}}}, 201);
  auto by_name = (*k8s)->Apply(Stop("ml-dev/web-7f9c-x2"));
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_EQ(*by_name, "evicted 1 pod: web-7f9c-x2");
}

// A Kubeflow notebook's pod as the notebook controller makes it: a StatefulSet's pod NB-0
// with the `notebook-name` label. The agent's default rules name its job k8s/ml-dev/NB, so
// that job's stop evicts NB-0, and neither another notebook's pod nor a pod that happens to
// be named NB (another job by the rules).
TEST(KubernetesActuatorTest, AKubeflowNotebooksStopEvictsItsPodByTheAgentsRules) {
  StandInApiServer api;
  kube::ObjectMeta notebook{.name = "my-notebook-0", .ns = "ml-dev",
                            .labels = {{"notebook-name", "my-notebook"}, {"app", "my-notebook"},
                                       {"statefulset.kubernetes.io/pod-name", "my-notebook-0"}},
                            .annotations = {{"notebooks.kubeflow.org/creator", "priya@example.com"}},
                            .owners = {{"StatefulSet", "my-notebook", true}}};
  kube::ObjectMeta other = notebook;
  other.name = "other-nb-0";
  other.labels = {{"notebook-name", "other-nb"}};
  other.owners = {{"StatefulSet", "other-nb", true}};
  kube::ObjectMeta namesake{.name = "my-notebook", .ns = "ml-dev", .owners = {{"ReplicaSet", "web-5d8", true}}};
  api.AddPod(notebook, 201);
  api.AddPod(other, 201);
  api.AddPod(namesake, 201);
  // The premise, from the agent's side: its rules give this pod that job id.
  ASSERT_EQ(kube::ApplyPodRules(kube::PodRules::Defaults(), {"ml-dev", "my-notebook-0", "main", &notebook}).id,
            "k8s/ml-dev/my-notebook");

  auto k8s = KubernetesActuator({.api_server = api.url()});
  ASSERT_TRUE(k8s.ok()) << k8s.status().ToString();
  auto done = (*k8s)->Apply(Stop("k8s/ml-dev/my-notebook"));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, "evicted 1 pod: my-notebook-0");
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/my-notebook-0"}));
  EXPECT_EQ(api.eviction_requests(), 1);
  EXPECT_EQ(api.namespace_requests(), 0) << "the default job rules read no namespace";

  // Stopped again, the pod gone and its StatefulSet's new one not there yet: nothing is the
  // job's, and the pod named my-notebook is still another job's, not taken for this one.
  auto again = (*k8s)->Apply(Stop("k8s/ml-dev/my-notebook"));
  EXPECT_EQ(again.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(again.status().message(), HasSubstr("job k8s/ml-dev/my-notebook: no pod in namespace ml-dev"));
  EXPECT_EQ(api.eviction_requests(), 1);
  // A job id in the plain NAMESPACE/POD form names a pod: that one.
  auto plain = (*k8s)->Apply(Stop("ml-dev/my-notebook"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(*plain, "evicted 1 pod: my-notebook");
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml-dev/my-notebook-0", "ml-dev/my-notebook"}));
  EXPECT_EQ(api.eviction_requests(), 2) << "other-nb-0 never asked for";
}

// A PyTorchJob's gang: the training operator labels every pod with the job's name. Its
// stop evicts all its running pods, names them, leaves its finished pod alone and does not
// ask again for one already terminating; an unrelated pod of the namespace is never asked for.
TEST(KubernetesActuatorTest, AGangJobsStopEvictsEveryRunningPodOfIt) {
  StandInApiServer api;
  auto pod = [](const std::string& name) {
    return kube::ObjectMeta{.name = name, .ns = "research",
                            .labels = {{"training.kubeflow.org/job-name", "train"},
                                       {"training.kubeflow.org/replica-type", name.find("master") != std::string::npos ? "master" : "worker"}},
                            .owners = {{"PyTorchJob", "train", true}}};
  };
  api.AddPod(pod("train-master-0"), 201);
  api.AddPod(pod("train-worker-0"), 201);
  api.AddPod(pod("train-worker-1"), 201, "Succeeded");
  api.AddPod(pod("train-worker-2"), 201, "Running", /*deleting=*/true);
  api.AddPod(kube::ObjectMeta{.name = "tensorboard-0", .ns = "research", .owners = {{"StatefulSet", "tensorboard", true}}},
             201);
  auto k8s = KubernetesActuator({.api_server = api.url()});
  ASSERT_TRUE(k8s.ok()) << k8s.status().ToString();
  auto done = (*k8s)->Apply(Stop("k8s/research/train"));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, "evicted 2 pods: train-master-0, train-worker-0; already being deleted: train-worker-2");
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"research/train-master-0", "research/train-worker-0"}));
  EXPECT_EQ(api.eviction_requests(), 2);

  // Only the finished and the terminating pods are left of it: nothing to evict.
  auto again = (*k8s)->Apply(Stop("k8s/research/train"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, "nothing to evict: already being deleted: train-worker-2");
  EXPECT_EQ(api.eviction_requests(), 2);
}

// A PodDisruptionBudget refuses one of a gang's two pods: retry later, naming the pod
// evicted and the pod not; the retry, once the budget allows it, evicts only the other.
TEST(KubernetesActuatorTest, ARefusalOfOneOfAJobsPodsIsRetriedForTheRestOnly) {
  StandInApiServer api;
  for (const char* name : {"gang-a", "gang-b"}) {
    api.AddPod(kube::ObjectMeta{.name = name, .ns = "ml", .labels = {{"gpuledger.io/job", "sweep-7"}}},
               name == std::string("gang-a") ? 201 : 429);
  }
  auto k8s = KubernetesActuator({.api_server = api.url()});
  ASSERT_TRUE(k8s.ok()) << k8s.status().ToString();
  auto refused = (*k8s)->Apply(Stop("k8s/ml/sweep-7"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("job k8s/ml/sweep-7: evicted 1 pod: gang-a; not evicted: gang-b ("));
  EXPECT_THAT(refused.status().message(), HasSubstr("HTTP 429"));
  EXPECT_THAT(refused.status().message(), HasSubstr("retry later"));
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml/gang-a"}));

  api.AddPod("ml", "gang-b", 201);  // the budget allows it now (its labels kept)
  auto retried = (*k8s)->Apply(Stop("k8s/ml/sweep-7"));
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ(*retried, "evicted 1 pod: gang-b");
  EXPECT_EQ(api.evicted(), (std::set<std::string>{"ml/gang-a", "ml/gang-b"}));
  EXPECT_EQ(api.eviction_requests(), 3) << "gang-a asked for once";
}

TEST(KubernetesActuatorTest, APodListThatFailsEvictsNothingAndNamesItsPath) {
  StandInApiServer api;
  api.AddPod("ml-dev", "nb-0", 201);
  api.FailPodLists(500);
  auto k8s = KubernetesActuator({.api_server = api.url()});
  ASSERT_TRUE(k8s.ok()) << k8s.status().ToString();
  auto failed = (*k8s)->Apply(Stop("k8s/ml-dev/nb-0"));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr("k8s/ml-dev/nb-0"));
  EXPECT_THAT(failed.status().message(), HasSubstr("GET /api/v1/namespaces/ml-dev/pods"));
  EXPECT_THAT(failed.status().message(), HasSubstr("HTTP 500"));
  EXPECT_EQ(api.eviction_requests(), 0);
}

// Rules that name the job from the namespace's label read the namespace once per stop; a
// namespace the RBAC hides (403) gives no facts, as in the agent, so the pods are named as
// the agent then names them (here after their controller); any other failure evicts nothing.
TEST(KubernetesActuatorTest, RulesReadingTheNamespaceReadItAsTheAgentDoes) {
  StandInApiServer api;
  KubernetesOptions options{.api_server = api.url()};
  options.rules.job = {*kube::ParseMetaSource("namespace_label:gpuledger.io/job"), *kube::ParseMetaSource("controller")};
  api.AddNamespace({.name = "team-x", .labels = {{"gpuledger.io/job", "x-sweep"}}});
  for (const char* name : {"x-0", "x-1"}) {
    api.AddPod(kube::ObjectMeta{.name = name, .ns = "team-x", .owners = {{"Job", "x-batch", true}}}, 201);
  }
  auto k8s = KubernetesActuator(options);
  ASSERT_TRUE(k8s.ok()) << k8s.status().ToString();

  api.FailNamespaces(500);
  auto unreadable = (*k8s)->Apply(Stop("k8s/team-x/x-sweep"));
  EXPECT_EQ(unreadable.status().code(), StatusCode::kUnavailable) << unreadable.status().ToString();
  EXPECT_THAT(unreadable.status().message(), HasSubstr("/api/v1/namespaces/team-x"));
  api.FailNamespaces(403);
  EXPECT_EQ((*k8s)->Apply(Stop("k8s/team-x/x-sweep")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(api.eviction_requests(), 0);

  api.FailNamespaces(200);
  auto done = (*k8s)->Apply(Stop("k8s/team-x/x-sweep"));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, "evicted 2 pods: x-0, x-1");
  EXPECT_EQ(api.namespace_requests(), 3);  // once per stop

  // Hidden namespace: the agent names them k8s/team-x/x-batch; that job's stop finds them.
  api.AddPod(kube::ObjectMeta{.name = "x-2", .ns = "team-x", .owners = {{"Job", "x-batch", true}}}, 201);
  api.FailNamespaces(403);
  auto hidden = (*k8s)->Apply(Stop("k8s/team-x/x-batch"));
  ASSERT_TRUE(hidden.ok()) << hidden.status().ToString();
  EXPECT_EQ(*hidden, "evicted 1 pod: x-2");
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
