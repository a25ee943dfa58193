#include "kube/pod_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>

#include "core/batch.h"

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

// What the job keeps of its pod's metadata, for exemptions: by default every gpuledger.io/
// label and annotation, and nothing else (not kubectl's last-applied-configuration).
TEST(PodRulesTest, TheJobKeepsItsPodsGpuledgerLabelsAndAnnotationsByDefault) {
  ObjectMeta pod{.name = "nb-0", .ns = "ml",
                 .labels = {{"gpuledger.io/exempt", "true"}, {"app", "jupyter"}},
                 .annotations = {{"gpuledger.io/reason", "demo"},
                                 {"kubectl.kubernetes.io/last-applied-configuration", std::string(200, '{')}}};
  Job job = ApplyPodRules(PodRules::Defaults(), Facts(&pod));
  EXPECT_EQ(job.labels, (JobMetadata{{"gpuledger.io/exempt", "true"}}));
  EXPECT_EQ(job.annotations, (JobMetadata{{"gpuledger.io/reason", "demo"}}));
}

TEST(PodRulesTest, APodWithNoneKeptGivesAnEmptySetAndNoMetadataGivesNone) {
  ObjectMeta pod{.name = "nb-0", .ns = "ml", .labels = {{"app", "jupyter"}}};
  Job job = ApplyPodRules(PodRules::Defaults(), Facts(&pod));
  EXPECT_EQ(job.labels, JobMetadata{}) << "the whole set now: none (a label taken off is taken off the job)";
  EXPECT_EQ(job.annotations, JobMetadata{});
  Job kubelet_only = ApplyPodRules(PodRules::Defaults(), PodFacts{"ml", "nb-0", "main", nullptr, nullptr});
  EXPECT_FALSE(kubelet_only.labels.has_value()) << "without the API server the agent says nothing of them";
  EXPECT_FALSE(kubelet_only.annotations.has_value());
}

TEST(PodRulesTest, KeepPatternsAreExactKeysOrPrefixes) {
  PodRules rules;
  rules.keep = {ParseKeepPattern("label:app").value(), ParseKeepPattern("annotation:example.com/*").value()};
  ObjectMeta pod{.name = "p", .ns = "ml", .labels = {{"app", "vllm"}, {"application", "x"}},
                 .annotations = {{"example.com/owner", "ana"}, {"example.com/", "root"}, {"example.org/x", "no"},
                                 {"app", "not a label"}}};
  Job job = ApplyPodRules(rules, Facts(&pod));
  EXPECT_EQ(job.labels, (JobMetadata{{"app", "vllm"}}));
  EXPECT_EQ(job.annotations, (JobMetadata{{"example.com/", "root"}, {"example.com/owner", "ana"}}));
}

// What the batch format would refuse is left out, so one pod's odd annotation cannot cost
// the node its batch.
TEST(PodRulesTest, WhatTheBatchWouldRefuseIsLeftOut) {
  ObjectMeta pod{.name = "p", .ns = "ml"};
  pod.annotations["gpuledger.io/huge"] = std::string(1 << 20, 'a');
  pod.annotations["gpuledger.io/bell"] = "a\ab";
  pod.annotations["gpuledger.io/ok"] = "fine";
  for (int i = 0; i < 100; ++i) pod.labels[fmt::format("gpuledger.io/l{:03}", i)] = "v";
  Job job = ApplyPodRules(PodRules::Defaults(), Facts(&pod));
  EXPECT_EQ(job.annotations, (JobMetadata{{"gpuledger.io/ok", "fine"}}));
  ASSERT_TRUE(job.labels.has_value());
  EXPECT_EQ(job.labels->size(), 32u);
  EXPECT_EQ(job.labels->begin()->first, "gpuledger.io/l000") << "the first 32 in key order";
  Batch b;
  b.batch_id = "n-1";
  b.jobs.push_back(job);
  Status st = ValidateBatch(b, 0);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(PodRulesTest, ParsesKeepPatternsAndRefusesKeepingEverything) {
  for (const char* p : {"label:gpuledger.io/exempt", "annotation:gpuledger.io/*", "label:a*"}) {
    auto k = ParseKeepPattern(p);
    ASSERT_TRUE(k.ok()) << p << ": " << k.status().message();
    EXPECT_EQ(k->ToString(), p);
  }
  EXPECT_THAT(ParseKeepPattern("label:*").status().message(), HasSubstr("a prefix before the *"));
  EXPECT_THAT(ParseKeepPattern("annotation:*").status().message(), HasSubstr("last-applied-configuration"));
  for (const char* bad : {"*", "tag:x", "label:", "label:a*b", "labels:x"}) {
    EXPECT_THAT(ParseKeepPattern(bad).status().message(), HasSubstr("want label:KEY or annotation:KEY")) << bad;
  }
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
