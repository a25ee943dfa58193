#include "agent/slurm.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include <algorithm>

#include "core/batch.h"

namespace gpuledger::agent {

Result<SlurmJobInfo> ParseScontrolJob(std::string_view text) {
  SlurmJobInfo info;
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t')) ++pos;
    size_t end = pos;
    while (end < text.size() && text[end] != ' ' && text[end] != '\n' && text[end] != '\t') ++end;
    std::string_view token = text.substr(pos, end - pos);
    pos = end;
    size_t eq = token.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = token.substr(0, eq);
    std::string_view value = token.substr(eq + 1);
    if (value == "(null)") value = {};
    if (key == "JobId" && info.job_id.empty()) {
      info.job_id = std::string(value);
    } else if (key == "JobName") {
      info.name = std::string(value);
    } else if (key == "Account") {
      info.account = std::string(value);
    } else if (key == "UserId") {
      info.user = std::string(value.substr(0, value.find('(')));
    } else if (key == "Partition") {
      info.partition = std::string(value);
    } else if (key == "JobState") {
      info.state = std::string(value);
    } else if (key == "Comment") {
      info.comment = std::string(value);
    } else if (key == "TresPerNode" || key == "TresPerJob" || key == "Gres") {
      // "gres:gpu:2", "gres/gpu:2", "gpu:2", "gres/gpu=2"
      size_t g = value.find("gpu");
      if (g != std::string_view::npos && info.gpus == 0) {
        size_t digits = value.find_last_of(":=");
        if (digits != std::string_view::npos && digits > g) {
          int32_t n = 0;
          for (char c : value.substr(digits + 1)) {
            if (c < '0' || c > '9') break;
            n = n * 10 + (c - '0');
          }
          info.gpus = n;
        }
      }
    }
  }
  if (info.job_id.empty()) {
    return InvalidArgument(fmt::format("scontrol output has no JobId: \"{}\"",
                                       text.substr(0, std::min<size_t>(text.size(), 120))));
  }
  return info;
}

JobMetadata SlurmCommentLabels(std::string_view comment) {
  constexpr std::string_view kForm = "gpuledger:";
  JobMetadata out;
  if (!comment.starts_with(kForm)) return out;
  comment.remove_prefix(kForm.size());
  while (!comment.empty() && out.size() < kMaxJobMetadataEntries) {
    std::string_view entry = comment.substr(0, comment.find(','));
    comment.remove_prefix(std::min(comment.size(), entry.size() + 1));
    size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = entry.substr(0, eq), value = entry.substr(eq + 1);
    if (JobMetadataEntryError(key, value).empty()) out.emplace(std::string(key), std::string(value));
  }
  return out;
}

Result<std::string> RunCommand(const std::vector<std::string>& argv, int64_t timeout_ms) {
  if (argv.empty()) return InvalidArgument("RunCommand: empty argv");
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Unavailable(fmt::format("pipe: {}", std::strerror(errno)));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return Unavailable(fmt::format("pipe: {}", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return Unavailable(fmt::format("fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  std::string out, err;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    int r = ::poll(fds, 2, static_cast<int>(left));
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? out : err).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (n < 0 && errno != EINTR)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return Unavailable(fmt::format("{}: no answer within {} ms", argv[0], timeout_ms));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return Unavailable(fmt::format("{} exited with {}{}{}", argv[0], code, err.empty() ? "" : ": ", err));
  }
  return out;
}

ScontrolResolver::ScontrolResolver(const Clock& clock, Options options, Runner runner)
    : clock_(clock), options_(std::move(options)), runner_(std::move(runner)) {
  if (!runner_) {
    int64_t timeout = options_.timeout_ms;
    runner_ = [timeout](const std::vector<std::string>& argv) { return RunCommand(argv, timeout); };
  }
}

Result<SlurmJobInfo> ScontrolResolver::Lookup(const std::string& job_id) {
  int64_t now = clock_.NowMs();
  {
    MutexLock lock(mu_);
    auto it = cache_.find(job_id);
    if (it != cache_.end() && it->second.expires_ms > now) return it->second.info;
    ++queries_;
  }
  // Run outside the lock: another job's lookup need not wait for this one.
  Result<std::string> out = runner_({options_.scontrol, "show", "job", "-o", job_id});
  Result<SlurmJobInfo> info = out.ok() ? ParseScontrolJob(*out) : Result<SlurmJobInfo>(out.status());
  if (!info.ok() && out.ok()) info = NotFound(fmt::format("slurm job {}: {}", job_id, info.status().message()));
  if (!out.ok() && out.status().message().find("Invalid job id") != std::string::npos) {
    info = NotFound(fmt::format("slurm job {}: unknown to slurmctld", job_id));
  }
  MutexLock lock(mu_);
  Entry& e = cache_[job_id];
  e.info = info;
  e.expires_ms = now + (info.ok() ? options_.ttl_ms : options_.failure_ttl_ms);
  // Bounded: jobs that ended are forgotten once their answer expired.
  if (cache_.size() > 4096) {
    std::erase_if(cache_, [now](const auto& kv) { return kv.second.expires_ms <= now; });
  }
  return info;
}

int64_t ScontrolResolver::queries() const {
  MutexLock lock(mu_);
  return queries_;
}

}  // namespace gpuledger::agent
