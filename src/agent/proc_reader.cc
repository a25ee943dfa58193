#include "agent/proc_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace gpuledger::agent {

bool IsAttributionVariable(std::string_view name) {
  return name.starts_with("GPULEDGER_") || name.starts_with("SLURM_");
}

Environment ParseEnviron(std::string_view text) {
  Environment env;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\0', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view entry = text.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string_view name = entry.substr(0, eq);
    if (!IsAttributionVariable(name)) continue;
    env.try_emplace(std::string(name), std::string(entry.substr(eq + 1)));
  }
  return env;
}

Result<std::string> ProcReader::ReadFile(uint32_t pid, std::string_view name) const {
  std::string path = fmt::format("{}/{}/{}", root_, pid, name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT || err == ESRCH) return NotFound(fmt::format("{}: no such process", path));
    if (err == EACCES || err == EPERM) {
      return Status(StatusCode::kPermissionDenied, fmt::format("{}: {}", path, std::strerror(err)));
    }
    return Unavailable(fmt::format("{}: {}", path, std::strerror(err)));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      // Reading a dead process' environ fails with ESRCH on some kernels.
      if (err == ESRCH) return NotFound(fmt::format("{}: no such process", path));
      if (err == EACCES || err == EPERM) {
        return Status(StatusCode::kPermissionDenied, fmt::format("{}: {}", path, std::strerror(err)));
      }
      return Unavailable(fmt::format("{}: {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    // An environment is bounded by ARG_MAX; a runaway file is not ours to read whole.
    if (out.size() > (size_t{8} << 20)) break;
  }
  ::close(fd);
  return out;
}

Result<Environment> ProcReader::ReadEnvironment(uint32_t pid) const {
  GPULEDGER_ASSIGN_OR_RETURN(std::string text, ReadFile(pid, "environ"));
  return ParseEnviron(text);
}

Result<std::string> ProcReader::ReadCgroup(uint32_t pid) const { return ReadFile(pid, "cgroup"); }

}  // namespace gpuledger::agent
