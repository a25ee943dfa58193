// What src/objectives judges, read from the ledger: a scope's usage (at once, or hour by
// hour), and the jobs holding GPUs at an instant with the evidence an intervention rule
// weighs (their samples' activity, how fresh they are, what their GPUs cost per hour).
// Each call reads one store snapshot, like the ledger's other queries (ledger.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/money.h"
#include "core/objective.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

// The scope's figures over `window` (Usage's rules): the fleet's total, or the row of its
// pool, team or kind (an empty row, key set, when the scope held nothing). A team's or a
// kind's row holds only time its jobs held, so its capacity is what it was allocated.
Result<UsageRow> ScopeUsage(Ledger& ledger, const ObjectiveScope& scope, const TimeRange& window);

// The scope's figures per hour of `window` (Usage grouped by hour): one entry per hour
// that has any, by hour. Each hour's `key` is {its RFC 3339 start}.
struct ScopeHour {
  int64_t hour_ms = 0;
  UsageRow usage;
};
Result<std::vector<ScopeHour>> ScopeHours(Ledger& ledger, const ObjectiveScope& scope, const TimeRange& window);

// A job holding at least one device at `at_ms`, with its samples over the look-back.
struct HeldJob {
  Job job;
  std::vector<std::string> devices;  // uuids it holds at at_ms
  int64_t held_since_ms = 0;         // the earliest start of those allocations
  double gpus = 0;                   // the devices' capacity share, in GPUs
  // Over [max(at - look_back, held_since), at]: how many samples its devices sent, and
  // the highest activity among them, a sample with no process at all counting as 0.
  int64_t samples = 0;
  double max_activity = 0;
  // The oldest of its devices' latest samples at or before at_ms (0: none): how fresh
  // the evidence is.
  int64_t evidence_until_ms = 0;
  Money price_per_hour;  // its devices' price per hour at at_ms, by their shares (exact, rounded half up)
};

// Every job holding a device at `at_ms`, by job id. One snapshot: allocations open at
// at_ms, and one batched read of their devices' samples over the look-back.
Result<std::vector<HeldJob>> HeldJobs(Ledger& ledger, int64_t at_ms, int64_t look_back_ms);

}  // namespace gpuledger::ledger
