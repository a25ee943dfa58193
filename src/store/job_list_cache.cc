#include "store/job_list_cache.h"

namespace gpuledger::store {

std::shared_ptr<const std::vector<JobRecord>> JobListCache::Find(int64_t version) const {
  std::lock_guard lock(mu_);
  return jobs_ && version_ == version ? jobs_ : nullptr;
}

void JobListCache::Put(int64_t version, std::shared_ptr<const std::vector<JobRecord>> jobs) {
  std::lock_guard lock(mu_);
  version_ = version;
  jobs_ = std::move(jobs);
}

Result<std::shared_ptr<const std::vector<JobRecord>>> SharedJobsThrough(
    JobListCache& cache, std::optional<int64_t> current,
    const std::function<Result<std::vector<JobRecord>>(std::optional<int64_t>& version)>& read) {
  if (current) {
    if (auto kept = cache.Find(*current)) return kept;
  }
  std::optional<int64_t> version;
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, read(version));
  auto shared = std::make_shared<const std::vector<JobRecord>>(std::move(jobs));
  if (version) cache.Put(*version, shared);
  return shared;
}

}  // namespace gpuledger::store
