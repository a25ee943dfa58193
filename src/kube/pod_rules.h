// Pod metadata to ledger fields, by declarative rules. Each ledger field (job, team,
// project, experiment, user) has an ordered list of sources; the first that gives a
// non-empty value wins. A source is one of
//   label:<key>                 the pod's label
//   annotation:<key>            the pod's annotation
//   namespace_label:<key>       the namespace's label (needs the API server)
//   namespace_annotation:<key>  the namespace's annotation
//   owner:<Kind>                the name of the pod's owner reference of that kind
//   controller                  the name of the pod's controlling owner reference
//   namespace | pod | container the names the kubelet reports
// The kind comes from kind rules, the first that matches: `kind` when `when` gives a
// value (equal to `equals` when that is set). The job id is "k8s/<namespace>/<value>".
// Without the API server only namespace, pod and container give values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "kube/api_client.h"

namespace gpuledger::kube {

enum class MetaFrom : uint8_t {
  kLabel, kAnnotation, kNamespaceLabel, kNamespaceAnnotation, kOwner, kController, kNamespace, kPod, kContainer
};

struct MetaSource {
  MetaFrom from = MetaFrom::kPod;
  std::string key;  // label/annotation key or owner kind; empty for the others
  std::string ToString() const;
};

// Parses one source ("label:team", "controller"). Fails naming the text and the forms.
Result<MetaSource> ParseMetaSource(std::string_view text);

struct KindRule {
  JobKind kind = JobKind::kUnknown;
  MetaSource when;
  std::optional<std::string> equals;
};

// Which of a pod's labels or annotations its job keeps (Job::labels, ::annotations), which
// intervention exemptions match: "label:KEY" or "annotation:KEY", where a KEY ending in '*'
// stands for every key starting with what is before it. That prefix may not be empty: pods
// carry large annotations (kubectl's last-applied-configuration) that are never to be kept
// wholesale.
struct KeepPattern {
  bool annotation = false;  // else a label
  std::string key;          // the key, or the prefix when `prefix`
  bool prefix = false;
  std::string ToString() const;  // as parsed
  bool Matches(std::string_view key) const;
};

// Parses one pattern; fails naming the text and the forms.
Result<KeepPattern> ParseKeepPattern(std::string_view text);

struct PodRules {
  std::vector<MetaSource> job, team, project, experiment, user;
  std::vector<KindRule> kinds;
  // The labels and annotations kept; by default every gpuledger.io/ label and annotation.
  std::vector<KeepPattern> keep;
  // The defaults: gpuledger.io/* labels first, then the conventions of Kubeflow
  // notebooks, KubeRay, Kueue, the Kubeflow training operator and batch Jobs
  // (docs/agent.md lists them, from DefaultPodRulesToml).
  static PodRules Defaults();
};

// The defaults as the [agent.kubernetes] TOML that sets them (docs/agent.md shows it).
std::string DefaultPodRulesToml();

// What is known about one container holding a device.
struct PodFacts {
  std::string ns, pod, container;
  const ObjectMeta* pod_meta = nullptr;        // null: no API server (or not fetched)
  const ObjectMeta* namespace_meta = nullptr;  // null: not readable
};

// The value `source` gives for `facts` (empty when it gives none).
std::string SourceValue(const MetaSource& source, const PodFacts& facts);

// The job the rules make of `facts`: id "k8s/<ns>/<job value>" (the pod's name when no
// job source gives a value), team, project, experiment, user and kind, and, when the pod's
// metadata is known, the labels and annotations `rules.keep` keeps (the whole set, even
// empty: it replaces what the ledger held). Without the metadata they are left absent, so
// a kubelet-only agent says nothing of them. A kept entry the batch format would refuse
// (core/batch.h: a key or value over 256 bytes, a control character), and entries beyond
// 32 of a kind or 8 KiB together (in key order), are left out rather than lose the batch.
Job ApplyPodRules(const PodRules& rules, const PodFacts& facts);

}  // namespace gpuledger::kube
