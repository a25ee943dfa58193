#include "kube/pod_rules.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/batch.h"

namespace gpuledger::kube {

namespace {

struct Form {
  std::string_view prefix;  // "label:" (with a key) or "controller" (without)
  MetaFrom from;
  bool keyed;
};

constexpr Form kForms[] = {
    {"label:", MetaFrom::kLabel, true},
    {"annotation:", MetaFrom::kAnnotation, true},
    {"namespace_label:", MetaFrom::kNamespaceLabel, true},
    {"namespace_annotation:", MetaFrom::kNamespaceAnnotation, true},
    {"owner:", MetaFrom::kOwner, true},
    {"controller", MetaFrom::kController, false},
    {"namespace", MetaFrom::kNamespace, false},
    {"pod", MetaFrom::kPod, false},
    {"container", MetaFrom::kContainer, false},
};

std::string Lookup(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

std::string FirstValue(const std::vector<MetaSource>& sources, const PodFacts& facts) {
  for (const MetaSource& s : sources) {
    if (std::string v = SourceValue(s, facts); !v.empty()) return v;
  }
  return "";
}

struct DefaultKind {
  JobKind kind;
  const char* when;
  const char* equals;  // null: any value
};

// Kubeflow notebooks carry `notebook-name`; the training operator's pods
// `training.kubeflow.org/job-name`; KubeRay's `ray.io/cluster`; a batch Job owns its pods.
constexpr DefaultKind kDefaultKinds[] = {
    {JobKind::kNotebook, "label:notebook-name", nullptr},
    {JobKind::kNotebook, "label:app.kubernetes.io/component", "notebook"},
    {JobKind::kTraining, "label:training.kubeflow.org/job-name", nullptr},
    {JobKind::kServing, "label:serving.kserve.io/inferenceservice", nullptr},
    {JobKind::kTraining, "label:ray.io/cluster", nullptr},
    {JobKind::kBatch, "owner:Job", nullptr},
};

constexpr const char* kDefaultKeep[] = {"label:gpuledger.io/*", "annotation:gpuledger.io/*"};

// The entries of `from` that `keep` keeps, for labels or annotations, within the batch
// format's rules; `bytes` counts what the job's kept sets take so far.
JobMetadata Kept(const std::map<std::string, std::string>& from, const std::vector<KeepPattern>& keep,
                 bool annotation, size_t& bytes) {
  JobMetadata out;
  for (const auto& entry : from) {
    const std::string& key = entry.first;  // clang 14 captures no structured binding in a lambda
    const std::string& value = entry.second;
    bool wanted = std::any_of(keep.begin(), keep.end(), [&](const KeepPattern& p) {
      return p.annotation == annotation && p.Matches(key);
    });
    if (!wanted || !JobMetadataEntryError(key, value).empty()) continue;
    if (out.size() == kMaxJobMetadataEntries || bytes + key.size() + value.size() > kMaxJobMetadataBytes) continue;
    bytes += key.size() + value.size();
    out.emplace(key, value);
  }
  return out;
}

struct DefaultField {
  const char* name;
  std::vector<const char*> sources;
};

const std::vector<DefaultField>& DefaultFields() {
  static const auto* fields = new std::vector<DefaultField>{
      {"job", {"label:gpuledger.io/job", "label:ray.io/cluster", "label:notebook-name",
               "label:training.kubeflow.org/job-name", "controller", "pod"}},
      {"team", {"label:gpuledger.io/team", "label:team", "namespace_label:gpuledger.io/team", "namespace_label:team",
                "namespace"}},
      {"project", {"label:gpuledger.io/project", "label:project", "label:kueue.x-k8s.io/queue-name",
                   "namespace_label:project"}},
      {"experiment", {"label:gpuledger.io/experiment", "label:experiment", "annotation:gpuledger.io/experiment"}},
      {"user", {"label:gpuledger.io/user", "annotation:notebooks.kubeflow.org/creator", "namespace_annotation:owner"}},
  };
  return *fields;
}

}  // namespace

std::string MetaSource::ToString() const {
  for (const Form& f : kForms) {
    if (f.from == from) return f.keyed ? fmt::format("{}{}", f.prefix, key) : std::string(f.prefix);
  }
  return "";
}

Result<MetaSource> ParseMetaSource(std::string_view text) {
  for (const Form& f : kForms) {
    if (f.keyed && text.starts_with(f.prefix)) {
      std::string_view key = text.substr(f.prefix.size());
      if (key.empty()) return InvalidArgument(fmt::format("source \"{}\": a key after \"{}\"", text, f.prefix));
      return MetaSource{f.from, std::string(key)};
    }
    if (!f.keyed && text == f.prefix) return MetaSource{f.from, ""};
  }
  return InvalidArgument(fmt::format(
      "source \"{}\": want label:KEY, annotation:KEY, namespace_label:KEY, namespace_annotation:KEY, "
      "owner:KIND, controller, namespace, pod or container",
      text));
}

std::string KeepPattern::ToString() const {
  return fmt::format("{}:{}{}", annotation ? "annotation" : "label", key, prefix ? "*" : "");
}

bool KeepPattern::Matches(std::string_view k) const { return prefix ? k.starts_with(key) : k == key; }

Result<KeepPattern> ParseKeepPattern(std::string_view text) {
  KeepPattern p;
  std::string_view key;
  if (text.starts_with("label:")) {
    key = text.substr(6);
  } else if (text.starts_with("annotation:")) {
    p.annotation = true;
    key = text.substr(11);
  } else {
    return InvalidArgument(fmt::format("\"{}\": want label:KEY or annotation:KEY (KEY may end in *)", text));
  }
  if (key.ends_with('*')) {
    p.prefix = true;
    key.remove_suffix(1);
    if (key.empty()) {
      return InvalidArgument(fmt::format(
          "\"{}\": a prefix before the * (keeping every {} would take large ones such as "
          "kubectl's last-applied-configuration)",
          text, p.annotation ? "annotation" : "label"));
    }
  }
  if (key.empty() || key.find('*') != std::string_view::npos) {
    return InvalidArgument(fmt::format("\"{}\": want label:KEY or annotation:KEY (KEY may end in *)", text));
  }
  p.key = std::string(key);
  return p;
}

PodRules PodRules::Defaults() {
  PodRules r;
  std::vector<MetaSource>* targets[] = {&r.job, &r.team, &r.project, &r.experiment, &r.user};
  const auto& fields = DefaultFields();
  for (size_t i = 0; i < fields.size(); ++i) {
    for (const char* s : fields[i].sources) targets[i]->push_back(ParseMetaSource(s).value());
  }
  for (const DefaultKind& k : kDefaultKinds) {
    KindRule rule{k.kind, ParseMetaSource(k.when).value(), std::nullopt};
    if (k.equals != nullptr) rule.equals = k.equals;
    r.kinds.push_back(std::move(rule));
  }
  for (const char* k : kDefaultKeep) r.keep.push_back(ParseKeepPattern(k).value());
  return r;
}

std::string DefaultPodRulesToml() {
  std::string out = "[agent.kubernetes]\n";
  for (const DefaultField& f : DefaultFields()) {
    std::string list;
    for (const char* s : f.sources) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", s);
    out += fmt::format("{} = [{}]\n", f.name, list);
  }
  std::string keep;
  for (const char* k : kDefaultKeep) keep += fmt::format("{}\"{}\"", keep.empty() ? "" : ", ", k);
  out += fmt::format("keep = [{}]\n", keep);
  for (const DefaultKind& k : kDefaultKinds) {
    out += fmt::format("\n[[agent.kubernetes.kind]]\nkind = \"{}\"\nwhen = \"{}\"\n", JobKindName(k.kind), k.when);
    if (k.equals != nullptr) out += fmt::format("equals = \"{}\"\n", k.equals);
  }
  return out;
}

std::string SourceValue(const MetaSource& s, const PodFacts& f) {
  switch (s.from) {
    case MetaFrom::kLabel: return f.pod_meta ? Lookup(f.pod_meta->labels, s.key) : "";
    case MetaFrom::kAnnotation: return f.pod_meta ? Lookup(f.pod_meta->annotations, s.key) : "";
    case MetaFrom::kNamespaceLabel: return f.namespace_meta ? Lookup(f.namespace_meta->labels, s.key) : "";
    case MetaFrom::kNamespaceAnnotation: return f.namespace_meta ? Lookup(f.namespace_meta->annotations, s.key) : "";
    case MetaFrom::kOwner:
      if (f.pod_meta) {
        for (const OwnerReference& o : f.pod_meta->owners) {
          if (o.kind == s.key) return o.name;
        }
      }
      return "";
    case MetaFrom::kController:
      if (f.pod_meta) {
        for (const OwnerReference& o : f.pod_meta->owners) {
          if (o.controller) return o.name;
        }
      }
      return "";
    case MetaFrom::kNamespace: return f.ns;
    case MetaFrom::kPod: return f.pod;
    case MetaFrom::kContainer: return f.container;
  }
  return "";
}

Job ApplyPodRules(const PodRules& rules, const PodFacts& facts) {
  Job job;
  std::string id = FirstValue(rules.job, facts);
  job.id = fmt::format("k8s/{}/{}", facts.ns, id.empty() ? facts.pod : id);
  job.team = FirstValue(rules.team, facts);
  job.project = FirstValue(rules.project, facts);
  job.experiment = FirstValue(rules.experiment, facts);
  job.user = FirstValue(rules.user, facts);
  for (const KindRule& k : rules.kinds) {
    std::string v = SourceValue(k.when, facts);
    if (v.empty() || (k.equals && v != *k.equals)) continue;
    job.kind = k.kind;
    break;
  }
  if (facts.pod_meta) {
    size_t bytes = 0;
    job.labels = Kept(facts.pod_meta->labels, rules.keep, false, bytes);
    job.annotations = Kept(facts.pod_meta->annotations, rules.keep, true, bytes);
  }
  return job;
}

}  // namespace gpuledger::kube
