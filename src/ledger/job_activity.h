// A job's own activity finer than the hour: the GPUs it held, attributed from their raw
// samples minute by minute exactly as the rollups are (ledger/attribution.h), so that the
// steps of an hour add up to that hour's figures for the job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

struct JobActivity {
  // The part of the asked window it covers: all of it, or its latest part whose
  // device-hours fit the limit (window.begin moved later, on a step).
  TimeRange window;
  TimeRange requested;
  int64_t step_ms = 0;
  std::vector<int64_t> times_ms;  // each step's start: window.begin + i x step
  // Per step, the job's GPU-milliseconds x kShareScale (a MIG slice counts its share):
  // active, and allocated_idle. A step the job held nothing in is 0 and 0.
  std::vector<int64_t> active_ticks_ms;
  std::vector<int64_t> idle_ticks_ms;
  int64_t device_hours = 0;  // device-hours of samples read (the work done)
};

// The activity of job `job_id` (its key) over `window` in steps of `step_ms`, from the
// samples of the devices it held, read in one snapshot. At most `max_device_hours` of
// samples are read: when the job's devices over the window need more, the window starts
// later (its latest part that fits, at least one step). NotFound for an unknown job.
// REQUIRES: step_ms a whole number of minutes; window.begin and end on a step of it
// (the caller aligns them); max_device_hours > 0.
Result<JobActivity> JobActivityOf(Ledger& ledger, const std::string& job_id, const TimeRange& window,
                                  int64_t step_ms, int64_t max_device_hours);

}  // namespace gpuledger::ledger
