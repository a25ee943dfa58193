// Availability: the share of GPU requests that started within a bound, from each job's
// submit and start times (core::Job), with the waits' percentiles, overall and per pool,
// priority class and job size (docs/objectives.md).
//
// Rules, for the requests known at `now_ms` (nothing after now is read, so a replay of
// history sees what was known then):
//  - a request weighs its requested GPUs (a job that names none weighs 1);
//  - it is judged when its outcome is known: good when it starts within the bound (at
//    its start), bad once it has waited longer than the bound (at submit + bound, whether
//    it starts later, ends unstarted or still waits). A window counts the requests judged
//    in it, so that a short alert window sees an incident as it happens;
//  - one still waiting within the bound is not judged yet; it is counted as waiting;
//  - a job without a submit time is not a request the ledger can judge (counted apart).
// Percentiles are of the wait per request (not weighted by GPUs), nearest rank, over the
// requests judged in the window and those submitted in it still undecided; a request still
// waiting counts with its wait so far (a lower bound), so a queue that never moves shows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/objective.h"
#include "core/time.h"

namespace gpuledger::objectives {

struct WaitSummary {
  int64_t requests = 0;       // judged requests (started, or waited past the bound)
  int64_t waiting = 0;        // requests counted here not started by now
  double gpus = 0;            // GPUs requested by the judged requests
  double gpus_in_time = 0;    // of which started within the bound
  // Nearest-rank percentiles and the mean of the waits (judged and undecided requests).
  std::optional<int64_t> p50_ms, p90_ms, p99_ms, max_ms;
  std::optional<int64_t> mean_ms;
  // gpus_in_time / gpus; empty when nothing was judged.
  std::optional<double> attainment() const;
};

struct AvailabilityReport {
  TimeRange window;
  int64_t bound_ms = 0;
  WaitSummary all;
  // By "pool", "priority" (the job's priority, e.g. "10") and "size" ("1 GPU",
  // "2-4 GPUs", "5-8 GPUs", "9+ GPUs"), each value to its summary.
  std::map<std::string, std::map<std::string, WaitSummary>> by;
  int64_t without_submit = 0;  // jobs in the scope with no submit time at all
};

// "1 GPU", "2-4 GPUs", "5-8 GPUs", "9+ GPUs".
std::string JobSizeClass(int32_t gpus);

// Whether `job` is in `scope` (its pool, team or kind).
bool InScope(const ObjectiveScope& scope, const Job& job);

// The availability of the requests of `jobs` in `scope` judged in `window` (and those
// submitted in it still undecided), as known at `now_ms`.
AvailabilityReport JudgeAvailability(const std::vector<Job>& jobs, const ObjectiveScope& scope,
                                     const TimeRange& window, int64_t now_ms, int64_t bound_ms);

}  // namespace gpuledger::objectives
