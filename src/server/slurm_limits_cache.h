// What Slurm enforces, read for GET /api/v1/quotas/drift at most once at a time and kept
// a short while: sacctmgr may take seconds (the server's runner allows 30 s) and viewers
// may call the route, so N requests must not become N concurrent sacctmgr runs.
// Internal to the server library.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "actuators/actuators.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger::server {

// One read of Slurm's account limits (actuators::ReadSlurmLimits) and when it was made.
struct SlurmLimitsReading {
  std::map<std::string, int64_t> enforced;  // account -> gres/gpu GPU-minutes
  int64_t read_at_ms = 0;                   // when sacctmgr was started, by the server's clock
};

// Single flight with a short cache. Thread-safe: any number of callers at once.
class SlurmLimitsCache {
 public:
  // The reuse time the route documents (docs/quotas.md).
  static constexpr int64_t kDefaultTtlMs = 30'000;

  // `run` and `sacctmgr` as ServerOptions::slurm_runner and ::sacctmgr; `clock` (the
  // server's) must outlive the cache.
  SlurmLimitsCache(actuators::CommandRunner run, std::string sacctmgr, const Clock& clock,
                   int64_t ttl_ms = kDefaultTtlMs);

  // The latest reading when it is younger than the reuse time and `refresh` is false;
  // else the reading of the one read in flight, started by this call when none is. A
  // caller that finds a read in flight waits for it and shares its result, a failure
  // included; a failure is not kept, so the next caller after it reads again.
  Result<SlurmLimitsReading> Read(bool refresh) EXCLUDES(mu_);

  // How many reads were started (for tests and /metrics-like checks).
  int64_t Reads() const EXCLUDES(mu_);

 private:
  const actuators::CommandRunner run_;
  const std::string sacctmgr_;
  const Clock& clock_;
  const int64_t ttl_ms_;

  mutable Mutex mu_;
  CondVar done_;
  std::optional<SlurmLimitsReading> latest_ GUARDED_BY(mu_);  // the last successful read
  bool in_flight_ GUARDED_BY(mu_) = false;
  // Bumped when a read ends; its result stays here for the callers that waited on it.
  int64_t generation_ GUARDED_BY(mu_) = 0;
  std::shared_ptr<const Result<SlurmLimitsReading>> last_result_ GUARDED_BY(mu_);
  int64_t reads_ GUARDED_BY(mu_) = 0;
};

}  // namespace gpuledger::server
