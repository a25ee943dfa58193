#include "agent/agent_config.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/time.h"

namespace gpuledger::agent {

void ApplyAgentConfig(const config::AgentSection& s, AgentConfig& c) {
  using config::Overlay;
  Overlay(s.server_url, c.server_url);
  Overlay(s.token, c.token);
  Overlay(s.token_file, c.token_file);
  Overlay(s.node, c.node);
  Overlay(s.pool, c.pool);
  Overlay(s.capacity_type, c.capacity_type);
  Overlay(s.interval_ms, c.interval_ms);
  Overlay(s.push_interval_ms, c.push_interval_ms);
  Overlay(s.spool_dir, c.spool_dir);
  Overlay(s.spool_max_bytes, c.spool_max_bytes);
  Overlay(s.listen, c.listen_address);
  Overlay(s.mapping_file, c.mapping_file);
  Overlay(s.hpc_job_mapping_dir, c.hpc_job_mapping_dir);
  Overlay(s.nvml_library, c.nvml_library);
  Overlay(s.proc_root, c.proc_root);
  Overlay(s.slurm, c.slurm);
  Overlay(s.scontrol, c.scontrol);
  Overlay(s.exposition_labels, c.exposition_labels_text);
  const config::KubernetesSection& k = s.kubernetes;
  if (k.enabled) c.kubernetes.enabled = k.enabled;
  Overlay(k.pod_resources_socket, c.kubernetes.pod_resources_socket);
  Overlay(k.api_server, c.kubernetes.api_server);
  Overlay(k.token_file, c.kubernetes.token_file);
  Overlay(k.ca_file, c.kubernetes.ca_file);
  Overlay(k.stale_after_ms, c.kubernetes.stale_after_ms);
  c.kubernetes_section = k;
  c.where = s.where;
}

Result<kube::PodRules> PodRulesFromConfig(const config::KubernetesSection& s) {
  kube::PodRules rules = kube::PodRules::Defaults();
  const config::Where& w = s.where;
  struct Field {
    const char* key;
    const std::optional<std::vector<std::string>>& list;
    std::vector<kube::MetaSource>& out;
  };
  for (const Field& f : {Field{"job", s.job, rules.job}, Field{"team", s.team, rules.team},
                         Field{"project", s.project, rules.project},
                         Field{"experiment", s.experiment, rules.experiment}, Field{"user", s.user, rules.user}}) {
    if (!f.list) continue;
    f.out.clear();
    for (const std::string& text : *f.list) {
      auto src = kube::ParseMetaSource(text);
      if (!src.ok()) return InvalidArgument(fmt::format("{}: {}", w.Of(f.key), src.status().message()));
      f.out.push_back(std::move(src).value());
    }
  }
  if (s.keep) {
    rules.keep.clear();
    for (const std::string& text : *s.keep) {
      auto pattern = kube::ParseKeepPattern(text);
      if (!pattern.ok()) return InvalidArgument(fmt::format("{}: {}", w.Of("keep"), pattern.status().message()));
      rules.keep.push_back(std::move(pattern).value());
    }
  }
  if (s.kinds) {
    rules.kinds.clear();
    for (const config::KubernetesKindTable& t : *s.kinds) {
      auto kind = ParseJobKind(t.kind);
      if (!kind.ok()) return InvalidArgument(fmt::format("{}: {}", t.where.Of("kind"), kind.status().message()));
      auto when = kube::ParseMetaSource(t.when);
      if (!when.ok()) return InvalidArgument(fmt::format("{}: {}", t.where.Of("when"), when.status().message()));
      rules.kinds.push_back({*kind, std::move(when).value(), t.equals});
    }
  }
  return rules;
}

namespace {

// The rules the file set, over the defaults, and what else of [agent.kubernetes] is checked
// only once the flags are in.
Status FinishKubernetes(const config::KubernetesSection& s, KubernetesConfig& k) {
  GPULEDGER_ASSIGN_OR_RETURN(k.rules, PodRulesFromConfig(s));
  if (k.stale_after_ms < 0) return InvalidArgument(fmt::format("{}: must not be negative", s.where.Of("stale_after")));
  return Status::Ok();
}

}  // namespace

Status FinishAgentConfig(AgentConfig& c) {
  if (c.node.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) c.node = host;
  }
  const config::Where& w = c.where;
  if (c.node.empty()) return InvalidArgument(fmt::format("{}: empty and the host name cannot be read", w.Of("node")));
  if (c.interval_ms < 100) {
    return InvalidArgument(fmt::format("{}: must be at least 100ms (GPM needs 100 ms between samples)", w.Of("interval")));
  }
  if (c.push_interval_ms < c.interval_ms || c.push_interval_ms > 5 * kMsPerMinute) {
    return InvalidArgument(fmt::format("{}: must be at least the collection interval ({} ms) and at most 5m",
                                       w.Of("push_interval"), c.interval_ms));
  }
  if (c.spool_max_bytes < (uint64_t{1} << 20)) {
    return InvalidArgument(fmt::format("{}: must be at least 1MiB", w.Of("spool_size")));
  }
  if (c.spool_dir.empty()) return InvalidArgument(fmt::format("{}: must be set", w.Of("spool_dir")));
  if (c.exposition_labels_text == "dcgm") {
    c.exposition_labels = ExpositionLabels::kDcgm;
  } else if (c.exposition_labels_text == "lint") {
    c.exposition_labels = ExpositionLabels::kLint;
  } else if (!c.exposition_labels_text.empty()) {
    return InvalidArgument(fmt::format("{}: \"{}\": want \"dcgm\" (dcgm-exporter's label names) or \"lint\"",
                                       w.Of("exposition_labels"), c.exposition_labels_text));
  }
  GPULEDGER_RETURN_IF_ERROR(FinishKubernetes(c.kubernetes_section, c.kubernetes));
  if (!c.token_file.empty()) {
    std::ifstream in(c.token_file);
    if (!in) return NotFound(fmt::format("{}: {}: cannot open", w.Of("token_file"), c.token_file));
    std::ostringstream buf;
    buf << in.rdbuf();
    std::string tok = buf.str();
    while (!tok.empty() && (tok.back() == '\n' || tok.back() == '\r' || tok.back() == ' ')) tok.pop_back();
    if (tok.empty()) return InvalidArgument(fmt::format("{}: {}: empty", w.Of("token_file"), c.token_file));
    c.token = tok;
  }
  return Status::Ok();
}

}  // namespace gpuledger::agent
