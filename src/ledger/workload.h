// The ledger's records as a workload for the simulator's what-if (core/workload.h):
// the jobs that started in a window, with the GPUs they asked for (or held), their real
// durations, the activity and price the ledger attributed to them, the MIG profile
// right-sizing advises, and the fleet's pools.
#pragma once

#include "core/status.h"
#include "core/time.h"
#include "core/workload.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

// The window is `window` shrunk to what the fleet recorded: from its first device in
// service to its last sample (unchanged when that leaves nothing).
// Jobs that started within the window. Where the scheduler's record is silent the
// allocations tell: a job with no request asked for the GPUs it held; with no start or
// end it ran from its first allocation to its last release (an allocation still open
// ends at the window's end); with no submit it was submitted when it started. Jobs
// that held nothing in the window, or started before it, are not in it; jobs that
// still lack a start, an end or a request are counted in `left_out`.
// Pools are the physical GPUs in service before the window's end, by pool.
// Fails when the store or a usage report fails; never half-filled.
Result<Workload> RecordedWorkload(Ledger& ledger, const TimeRange& window);

}  // namespace gpuledger::ledger
