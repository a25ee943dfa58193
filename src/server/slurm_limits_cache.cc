#include "server/slurm_limits_cache.h"

#include <utility>

namespace gpuledger::server {

SlurmLimitsCache::SlurmLimitsCache(actuators::CommandRunner run, std::string sacctmgr, const Clock& clock,
                                   int64_t ttl_ms)
    : run_(std::move(run)), sacctmgr_(std::move(sacctmgr)), clock_(clock), ttl_ms_(ttl_ms) {}

Result<SlurmLimitsReading> SlurmLimitsCache::Read(bool refresh) {
  MutexLock lock(mu_);
  if (!refresh && !in_flight_ && latest_ && clock_.NowMs() - latest_->read_at_ms < ttl_ms_) return *latest_;
  if (in_flight_) {
    // Join the read in flight, whatever started it: its answer is as fresh as any.
    int64_t joined = generation_;
    done_.Wait(mu_, [&]() REQUIRES(mu_) { return generation_ != joined; });
    return *last_result_;
  }
  in_flight_ = true;
  ++reads_;
  int64_t started_ms = clock_.NowMs();
  Result<std::map<std::string, int64_t>> enforced = InvalidArgument("unread");
  {
    // sacctmgr runs without the lock: callers meanwhile wait on done_, not on mu_.
    mu_.unlock();
    enforced = actuators::ReadSlurmLimits(run_, sacctmgr_);
    mu_.lock();
  }
  Result<SlurmLimitsReading> result =
      enforced.ok() ? Result<SlurmLimitsReading>(SlurmLimitsReading{std::move(*enforced), started_ms})
                    : Result<SlurmLimitsReading>(enforced.status());
  if (result.ok()) latest_ = *result;
  last_result_ = std::make_shared<const Result<SlurmLimitsReading>>(result);
  in_flight_ = false;
  ++generation_;
  done_.NotifyAll();
  return result;
}

int64_t SlurmLimitsCache::Reads() const {
  MutexLock lock(mu_);
  return reads_;
}

}  // namespace gpuledger::server
