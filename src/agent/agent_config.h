// The agent's configuration: the [agent] section of the TOML config file
// (docs/agent.md lists every key). Other sections belong to other commands and are
// left alone.
#pragma once

#include <cstdint>
#include <string>

#include "core/model.h"
#include "core/status.h"

namespace gpuledger::agent {

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
};

// Reads the [agent] section of `path` over `defaults`. Errors name the file, line and
// key; unknown keys in [agent] are errors. Sizes are integers of bytes or strings with
// a unit ("512MiB", "1GiB"); durations strings such as "500ms", "1s", "10s".
Result<AgentConfig> LoadAgentConfig(const std::string& path, AgentConfig defaults = {});

// Checks what LoadAgentConfig cannot check key by key: intervals (collection at least
// 100 ms, push interval a multiple of it and at most 5 min), spool size at least 1 MiB,
// node non-empty; reads token_file into token. Fails naming the key.
Status FinishAgentConfig(AgentConfig& config);

// A duration as ParseDuration reads it ("1s", "10s", "5m"), or whole milliseconds
// ("500ms"). Fails naming the text.
Result<int64_t> ParseAgentDuration(std::string_view text);

// "1GiB" -> 1073741824. Units B, KiB, MiB, GiB, TiB (and KB/MB/GB as powers of 1000).
Result<uint64_t> ParseByteSize(std::string_view text);

}  // namespace gpuledger::agent
