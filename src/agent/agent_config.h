// The agent's options: the [agent] section of gpuledger.toml (config::Load reads it;
// docs/agent.md lists every key), then the command's flags, then FinishAgentConfig.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "core/model.h"
#include "core/status.h"
#include "kube/pod_rules.h"

namespace gpuledger::agent {

// The label names of the DCGM_FI_* families: dcgm-exporter's (`modelName`), so that its
// dashboards and alerts keep working, or lint-clean ones (`model_name`) that
// `promtool check metrics` accepts.
enum class ExpositionLabels : uint8_t { kDcgm, kLint };

// [agent.kubernetes], after FinishAgentConfig.
struct KubernetesConfig {
  // Unset: on when the pod-resources socket exists when the agent starts.
  std::optional<bool> enabled;
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  // Empty: the in-cluster server (KUBERNETES_SERVICE_HOST/PORT) when set; "none": none.
  std::string api_server;
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  int64_t stale_after_ms = 60'000;
  kube::PodRules rules = kube::PodRules::Defaults();
};

struct AgentConfig {
  std::string server_url;   // "http://ledger:8080"; empty: spool only, nothing sent
  std::string token;        // the `agent` token; or read from token_file
  std::string token_file;
  std::string node;         // default: the host name
  std::string pool;         // pool of this node's devices
  CapacityType capacity_type = CapacityType::kOnDemand;
  int64_t interval_ms = 1'000;        // collection interval
  int64_t push_interval_ms = 10'000;  // one batch per push interval
  std::string spool_dir = "/var/lib/gpuledger/spool";
  uint64_t spool_max_bytes = uint64_t{1} << 30;
  std::string listen_address = "0.0.0.0:9400";  // /metrics; empty: no exporter
  std::string mapping_file;
  std::string hpc_job_mapping_dir;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string proc_root = "/proc";
  bool slurm = true;               // ask scontrol about Slurm jobs
  std::string scontrol = "scontrol";
  ExpositionLabels exposition_labels = ExpositionLabels::kDcgm;
  std::string exposition_labels_text;  // from the file, checked by FinishAgentConfig
  KubernetesConfig kubernetes;
  config::KubernetesSection kubernetes_section;  // the file's rules, checked by FinishAgentConfig
  // Where each value came from (the file's line, a flag), for FinishAgentConfig's errors.
  config::Where where{"", 0, "agent"};
};

// Overlays the values the [agent] section sets onto `config` (keys absent keep their
// value) and records where each was set.
void ApplyAgentConfig(const config::AgentSection& section, AgentConfig& config);

// The pod rules [agent.kubernetes] sets (kube/pod_rules.h): each rule list the file sets
// replaces that field's defaults, the rest keep theirs. Used by the agent, and by `serve`,
// whose Kubernetes actuator finds a job's pods by the same rules. Fails on a source, keep
// pattern or kind the rules do not know, naming its FILE:LINE and key.
Result<kube::PodRules> PodRulesFromConfig(const config::KubernetesSection& section);

// Checks what cannot be checked key by key, after the flags have been applied: intervals
// (collection at least 100 ms, push interval at least the collection interval and at most
// 5 min), spool size at least 1 MiB, node non-empty, exposition_labels, the Kubernetes
// rules' sources and kinds; reads token_file into token. Fails
// naming the key and, where it was set in the file, its FILE:LINE (or the flag).
Status FinishAgentConfig(AgentConfig& config);

}  // namespace gpuledger::agent
