#include "agent/agent_config.h"

#include <unistd.h>

#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/time.h"

namespace gpuledger::agent {

Result<int64_t> ParseAgentDuration(std::string_view text) {
  if (text.ends_with("ms")) {
    std::string_view digits = text.substr(0, text.size() - 2);
    int64_t ms = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ms);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || ms <= 0) {
      return InvalidArgument(fmt::format("duration \"{}\": want e.g. \"500ms\", \"1s\" or \"5m\"", text));
    }
    return ms;
  }
  return ParseDuration(text);
}

Result<uint64_t> ParseByteSize(std::string_view text) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr == text.data()) {
    return InvalidArgument(fmt::format("size \"{}\": want a number of bytes or e.g. \"512MiB\"", text));
  }
  std::string_view unit = text.substr(static_cast<size_t>(ptr - text.data()));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  struct U {
    std::string_view name;
    uint64_t factor;
  };
  static constexpr U kUnits[] = {{"", 1},
                                 {"B", 1},
                                 {"KiB", uint64_t{1} << 10},
                                 {"MiB", uint64_t{1} << 20},
                                 {"GiB", uint64_t{1} << 30},
                                 {"TiB", uint64_t{1} << 40},
                                 {"KB", 1'000},
                                 {"MB", 1'000'000},
                                 {"GB", 1'000'000'000},
                                 {"TB", 1'000'000'000'000}};
  for (const U& u : kUnits) {
    if (unit == u.name) {
      if (n > UINT64_MAX / u.factor) return InvalidArgument(fmt::format("size \"{}\": too large", text));
      return n * u.factor;
    }
  }
  return InvalidArgument(fmt::format("size \"{}\": unknown unit \"{}\" (B, KiB, MiB, GiB, TiB)", text, unit));
}

Result<AgentConfig> LoadAgentConfig(const std::string& path, AgentConfig c) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(fmt::format("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column,
                                       e.description()));
  }
  const toml::node* section = t.get("agent");
  if (section == nullptr) return c;
  const toml::table* a = section->as_table();
  if (a == nullptr) return InvalidArgument(fmt::format("{}:{}: [agent] must be a table", path, section->source().begin.line));
  for (auto&& [key, node] : *a) {
    std::string k(key.str());
    std::string where = fmt::format("{}:{}: agent.{}", path, node.source().begin.line, k);
    auto str = [&]() -> Result<std::string> {
      auto v = node.value<std::string>();
      if (!v) return InvalidArgument(where + ": want a string");
      return *v;
    };
    auto duration = [&]() -> Result<int64_t> {
      GPULEDGER_ASSIGN_OR_RETURN(std::string s, str());
      auto d = ParseAgentDuration(s);
      if (!d.ok()) return d.status().WithContext(where);
      return *d;
    };
    if (k == "server_url") {
      GPULEDGER_ASSIGN_OR_RETURN(c.server_url, str());
    } else if (k == "token") {
      GPULEDGER_ASSIGN_OR_RETURN(c.token, str());
    } else if (k == "token_file") {
      GPULEDGER_ASSIGN_OR_RETURN(c.token_file, str());
    } else if (k == "node") {
      GPULEDGER_ASSIGN_OR_RETURN(c.node, str());
    } else if (k == "pool") {
      GPULEDGER_ASSIGN_OR_RETURN(c.pool, str());
    } else if (k == "capacity_type") {
      GPULEDGER_ASSIGN_OR_RETURN(std::string s, str());
      auto ct = ParseCapacityType(s);
      if (!ct.ok()) return ct.status().WithContext(where);
      c.capacity_type = *ct;
    } else if (k == "interval") {
      GPULEDGER_ASSIGN_OR_RETURN(c.interval_ms, duration());
    } else if (k == "push_interval") {
      GPULEDGER_ASSIGN_OR_RETURN(c.push_interval_ms, duration());
    } else if (k == "spool_dir") {
      GPULEDGER_ASSIGN_OR_RETURN(c.spool_dir, str());
    } else if (k == "spool_size") {
      if (auto n = node.value<int64_t>()) {
        if (*n <= 0) return InvalidArgument(where + ": must be positive");
        c.spool_max_bytes = static_cast<uint64_t>(*n);
      } else {
        GPULEDGER_ASSIGN_OR_RETURN(std::string s, str());
        auto size = ParseByteSize(s);
        if (!size.ok()) return size.status().WithContext(where);
        c.spool_max_bytes = *size;
      }
    } else if (k == "listen") {
      GPULEDGER_ASSIGN_OR_RETURN(c.listen_address, str());
    } else if (k == "mapping_file") {
      GPULEDGER_ASSIGN_OR_RETURN(c.mapping_file, str());
    } else if (k == "hpc_job_mapping_dir") {
      GPULEDGER_ASSIGN_OR_RETURN(c.hpc_job_mapping_dir, str());
    } else if (k == "nvml_library") {
      GPULEDGER_ASSIGN_OR_RETURN(c.nvml_library, str());
    } else if (k == "proc_root") {
      GPULEDGER_ASSIGN_OR_RETURN(c.proc_root, str());
    } else if (k == "slurm") {
      auto b = node.value<bool>();
      if (!b) return InvalidArgument(where + ": want true or false");
      c.slurm = *b;
    } else if (k == "scontrol") {
      GPULEDGER_ASSIGN_OR_RETURN(c.scontrol, str());
    } else {
      return InvalidArgument(where + ": unknown key");
    }
  }
  return c;
}

Status FinishAgentConfig(AgentConfig& c) {
  if (c.node.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) c.node = host;
  }
  if (c.node.empty()) return InvalidArgument("agent.node: empty and the host name cannot be read");
  if (c.interval_ms < 100) return InvalidArgument("agent.interval: must be at least 100ms (GPM needs 100 ms between samples)");
  if (c.push_interval_ms < c.interval_ms || c.push_interval_ms > 5 * kMsPerMinute) {
    return InvalidArgument("agent.push_interval: must be at least the collection interval and at most 5m");
  }
  if (c.spool_max_bytes < (uint64_t{1} << 20)) return InvalidArgument("agent.spool_size: must be at least 1MiB");
  if (c.spool_dir.empty()) return InvalidArgument("agent.spool_dir: must be set");
  if (!c.token_file.empty()) {
    std::ifstream in(c.token_file);
    if (!in) return NotFound(fmt::format("agent.token_file: {}: cannot open", c.token_file));
    std::ostringstream buf;
    buf << in.rdbuf();
    std::string tok = buf.str();
    while (!tok.empty() && (tok.back() == '\n' || tok.back() == '\r' || tok.back() == ' ')) tok.pop_back();
    if (tok.empty()) return InvalidArgument(fmt::format("agent.token_file: {}: empty", c.token_file));
    c.token = tok;
  }
  return Status::Ok();
}

}  // namespace gpuledger::agent
