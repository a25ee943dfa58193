// Slurm job metadata for attribution: a job id found in a process' environment or
// cgroup is enriched with its account (the team), user, partition (the pool) and name,
// asked of Slurm itself with `scontrol show job -o <id>` and cached.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/model.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger::agent {

struct SlurmJobInfo {
  std::string job_id;
  std::string name;       // JobName
  std::string account;    // Account: the team
  std::string user;       // UserId without the "(uid)"
  std::string partition;  // Partition: the pool
  std::string state;      // JobState, e.g. RUNNING
  int32_t gpus = 0;       // GPUs requested through gres/TRES, 0 when not stated
  std::string comment;    // Comment (up to its first space)
};

// Labels a Slurm job gives itself in its comment, which has no labels of its own:
// `sbatch --comment=gpuledger:KEY=VALUE,KEY=VALUE` (no spaces: `scontrol -o` separates
// fields by them). Empty for any other comment (the job's whole set: none). An entry with
// no '=', or one the batch format would refuse (core/batch.h), is left out, and so is
// what exceeds 32 entries.
JobMetadata SlurmCommentLabels(std::string_view comment);

// Parses one line of `scontrol show job -o` (space-separated Key=Value pairs; a value
// may contain '=' but no space, except Command/WorkDir-like keys at the end, which are
// not read). Fails naming the text when there is no JobId.
Result<SlurmJobInfo> ParseScontrolJob(std::string_view text);

// Runs a program (argv[0] looked up in PATH) and returns its standard output. Fails
// with kUnavailable when it cannot start, exits non-zero (its stderr in the message) or
// runs past `timeout_ms` (it is then killed).
Result<std::string> RunCommand(const std::vector<std::string>& argv, int64_t timeout_ms);

// Resolves Slurm job ids. Implementations must be thread-safe.
class SlurmResolver {
 public:
  virtual ~SlurmResolver() = default;
  // The job's metadata; kNotFound when Slurm does not know the job, kUnavailable when
  // Slurm cannot be asked now.
  virtual Result<SlurmJobInfo> Lookup(const std::string& job_id) = 0;
};

// Asks `scontrol show job -o <id>` and caches each answer: a found job for
// `ttl_ms`, a failure for `failure_ttl_ms` (so a down slurmctld is not asked every
// second). Thread-safe.
class ScontrolResolver final : public SlurmResolver {
 public:
  using Runner = std::function<Result<std::string>(const std::vector<std::string>& argv)>;
  struct Options {
    std::string scontrol = "scontrol";
    int64_t ttl_ms = 5 * kMsPerMinute;
    int64_t failure_ttl_ms = 30 * kMsPerSecond;
    int64_t timeout_ms = 5 * kMsPerSecond;
  };
  // `runner` defaults to RunCommand with options.timeout_ms. REQUIRES: clock outlives this.
  ScontrolResolver(const Clock& clock, Options options, Runner runner = nullptr);

  Result<SlurmJobInfo> Lookup(const std::string& job_id) override;
  // How many times scontrol was run (for tests and the agent's own metrics).
  int64_t queries() const;

 private:
  struct Entry {
    Result<SlurmJobInfo> info = Status(StatusCode::kUnavailable, "not asked yet");
    int64_t expires_ms = 0;
  };
  const Clock& clock_;
  Options options_;
  Runner runner_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> cache_ GUARDED_BY(mu_);
  int64_t queries_ GUARDED_BY(mu_) = 0;
};

}  // namespace gpuledger::agent
