// The job list of a store kept in memory (internal to the store library), so that every
// report, which starts from the whole list of jobs (88,110 rows in the 10,000-GPU
// benchmark's month), does not read and decode it again while no job changed.
//
// `catalog_versions` holds, in its row 'jobs', a random 64-bit version drawn anew by
// triggers on `jobs`, in the transaction that changes them: for every row inserted or
// deleted, and every row an update changes (an upsert restating a job as it is stored
// draws none, so the version stays put through the steady restating of running jobs).
// On PostgreSQL the triggers are deferred to the commit, so a transaction holds the
// version row's lock only while it commits: replicas ingesting at once do not queue on
// it for the rest of their transactions. So, as for whole days (store/day_cache.h):
//   the jobs are the same wherever the version is the same,
// and a list read in the same statement as its version is the list of any later read of
// that version, on any replica sharing the database, by a build of any age (the
// triggers are the database's). Random rather than a counter for the reason day
// versions are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/status.h"
#include "store/store.h"

namespace gpuledger::store {

// The latest list read, with its version. Thread-safe.
class JobListCache {
 public:
  // The list at `version`, or null when the list kept is another version's (or none).
  std::shared_ptr<const std::vector<JobRecord>> Find(int64_t version) const;
  // Keeps `jobs` as the list at `version`, in place of the one kept.
  void Put(int64_t version, std::shared_ptr<const std::vector<JobRecord>> jobs);

 private:
  mutable std::mutex mu_;
  int64_t version_ = 0;                                // guarded by mu_
  std::shared_ptr<const std::vector<JobRecord>> jobs_;  // guarded by mu_
};

// What a store's SharedJobs does with `cache`: the list kept at `current` (the version read
// just now; none when there is none), or else the list `read` gives, kept at the version
// it read in the same statement (none when there was no job).
Result<std::shared_ptr<const std::vector<JobRecord>>> SharedJobsThrough(
    JobListCache& cache, std::optional<int64_t> current,
    const std::function<Result<std::vector<JobRecord>>(std::optional<int64_t>& version)>& read);

}  // namespace gpuledger::store
