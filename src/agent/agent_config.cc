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
  c.where = s.where;
}

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
