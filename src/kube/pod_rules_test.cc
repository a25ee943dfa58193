#include "kube/pod_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

namespace gpuledger::kube {
namespace {

using ::testing::HasSubstr;

PodFacts Facts(const ObjectMeta* pod, const ObjectMeta* ns = nullptr) {
  return {pod ? pod->ns : "ml", pod ? pod->name : "p-0", "main", pod, ns};
}

TEST(PodRulesTest, ParsesEverySourceFormAndRefusesOthers) {
  for (const char* s : {"label:team", "annotation:a/b", "namespace_label:team", "namespace_annotation:owner",
                        "owner:Job", "controller", "namespace", "pod", "container"}) {
    auto src = ParseMetaSource(s);
    ASSERT_TRUE(src.ok()) << s << ": " << src.status().message();
    EXPECT_EQ(src->ToString(), s);
  }
  EXPECT_THAT(ParseMetaSource("label:").status().message(), HasSubstr("a key after"));
  EXPECT_THAT(ParseMetaSource("labels:team").status().message(), HasSubstr("want label:KEY"));
}

TEST(PodRulesTest, WithoutMetadataTheJobIsThePodAndTheTeamItsNamespace) {
  PodFacts f{"research", "bert-7d9c-x2", "main", nullptr, nullptr};
  Job job = ApplyPodRules(PodRules::Defaults(), f);
  EXPECT_EQ(job.id, "k8s/research/bert-7d9c-x2");
  EXPECT_EQ(job.team, "research");
  EXPECT_EQ(job.project, "");
  EXPECT_EQ(job.kind, JobKind::kUnknown);
}

TEST(PodRulesTest, GpuledgerLabelsComeFirst) {
  ObjectMeta pod{.name = "p-0", .ns = "ml", .labels = {{"gpuledger.io/team", "search"}, {"team", "other"},
                                                         {"gpuledger.io/project", "ranker"},
                                                         {"gpuledger.io/job", "ranker-v2"},
                                                         {"gpuledger.io/user", "ana"}}};
  Job job = ApplyPodRules(PodRules::Defaults(), Facts(&pod));
  EXPECT_EQ(job.id, "k8s/ml/ranker-v2");
  EXPECT_EQ(job.team, "search");
  EXPECT_EQ(job.project, "ranker");
  EXPECT_EQ(job.user, "ana");
}

TEST(PodRulesTest, KubeflowNotebookIsANotebookOfItsProfilesOwner) {
  ObjectMeta pod{.name = "my-nb-0", .ns = "kubeflow-ana", .labels = {{"notebook-name", "my-nb"},
                                                                       {"statefulset", "my-nb"}},
                 .owners = {{"StatefulSet", "my-nb", true}}};
  ObjectMeta ns{.name = "kubeflow-ana", .annotations = {{"owner", "ana@example.com"}}};
  Job job = ApplyPodRules(PodRules::Defaults(), Facts(&pod, &ns));
  EXPECT_EQ(job.id, "k8s/kubeflow-ana/my-nb");
  EXPECT_EQ(job.kind, JobKind::kNotebook);
  EXPECT_EQ(job.user, "ana@example.com");
  EXPECT_EQ(job.team, "kubeflow-ana");
}

TEST(PodRulesTest, KubeRayWorkersAreOneJobPerRayCluster) {
  ObjectMeta head{.name = "rc-head-x", .ns = "ray", .labels = {{"ray.io/cluster", "rc"}, {"ray.io/node-type", "head"}},
                  .owners = {{"RayCluster", "rc", true}}};
  ObjectMeta worker{.name = "rc-worker-gpu-y", .ns = "ray",
                    .labels = {{"ray.io/cluster", "rc"}, {"ray.io/node-type", "worker"}},
                    .owners = {{"RayCluster", "rc", true}}};
  Job a = ApplyPodRules(PodRules::Defaults(), Facts(&head));
  Job b = ApplyPodRules(PodRules::Defaults(), Facts(&worker));
  EXPECT_EQ(a.id, "k8s/ray/rc");
  EXPECT_EQ(b.id, a.id);
  EXPECT_EQ(b.kind, JobKind::kTraining);
}

TEST(PodRulesTest, KueueQueueIsTheProjectAndABatchJobOwnsItsPods) {
  ObjectMeta pod{.name = "train-abc12", .ns = "team-a", .labels = {{"kueue.x-k8s.io/queue-name", "gpu-queue"},
                                                                     {"job-name", "train"}},
                 .owners = {{"Job", "train", true}}};
  ObjectMeta ns{.name = "team-a", .labels = {{"team", "nlp"}}};
  Job job = ApplyPodRules(PodRules::Defaults(), Facts(&pod, &ns));
  EXPECT_EQ(job.id, "k8s/team-a/train");
  EXPECT_EQ(job.project, "gpu-queue");
  EXPECT_EQ(job.team, "nlp");  // the namespace's label before the namespace's name
  EXPECT_EQ(job.kind, JobKind::kBatch);
}

TEST(PodRulesTest, ConfiguredRulesReplaceTheDefaults) {
  PodRules rules;
  rules.team = {ParseMetaSource("annotation:cost-center").value()};
  rules.kinds = {{JobKind::kServing, ParseMetaSource("label:app").value(), std::string("vllm")}};
  ObjectMeta pod{.name = "vllm-0", .ns = "serve", .labels = {{"app", "vllm"}, {"team", "ignored"}},
                 .annotations = {{"cost-center", "cc-42"}}};
  Job job = ApplyPodRules(rules, Facts(&pod));
  EXPECT_EQ(job.id, "k8s/serve/vllm-0");
  EXPECT_EQ(job.team, "cc-42");
  EXPECT_EQ(job.kind, JobKind::kServing);
  pod.labels["app"] = "other";
  EXPECT_EQ(ApplyPodRules(rules, Facts(&pod)).kind, JobKind::kUnknown);
}

}  // namespace
}  // namespace gpuledger::kube

namespace gpuledger::kube {
namespace {

TEST(PodRulesTest, DocsShowTheDefaultsAsTheConfigurationThatSetsThem) {
  std::ifstream in(std::string(GPULEDGER_SOURCE_DIR) + "/docs/agent.md");
  ASSERT_TRUE(in) << "docs/agent.md missing";
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(docs, HasSubstr("```toml\n" + DefaultPodRulesToml() + "```\n"))
      << "docs/agent.md's default pod rules differ from DefaultPodRulesToml():\n"
      << DefaultPodRulesToml();
}

}  // namespace
}  // namespace gpuledger::kube
