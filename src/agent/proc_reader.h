// Reading what the kernel says about a process: its environment and its cgroup, from
// /proc or from a tree shaped like it (tests point the root at a temp folder).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"

namespace gpuledger::agent {

using Environment = std::unordered_map<std::string, std::string>;

// Which variables of a process' environment the agent keeps: GPULEDGER_* and SLURM_*.
// The rest (secrets among them) is never copied out of the buffer it was read into.
bool IsAttributionVariable(std::string_view name);

// Parses /proc/<pid>/environ text (NUL-separated NAME=value) keeping only attribution
// variables. An entry without '=' is skipped; the first of two equal names wins, as in
// getenv.
Environment ParseEnviron(std::string_view text);

class ProcReader {
 public:
  // `root` is the folder that holds <pid>/environ and <pid>/cgroup: "/proc" on a host,
  // the host's /proc mounted elsewhere in a container, a temp tree in tests.
  explicit ProcReader(std::string root = "/proc") : root_(std::move(root)) {}

  // The attribution variables of `pid`. kNotFound when the process is gone (or not in
  // this PID namespace), kPermissionDenied when the agent may not read it (another
  // user's process without CAP_SYS_PTRACE); the message names the file.
  Result<Environment> ReadEnvironment(uint32_t pid) const;
  // The text of /proc/<pid>/cgroup. Same errors as ReadEnvironment.
  Result<std::string> ReadCgroup(uint32_t pid) const;

  const std::string& root() const { return root_; }

 private:
  Result<std::string> ReadFile(uint32_t pid, std::string_view name) const;
  std::string root_;
};

}  // namespace gpuledger::agent
