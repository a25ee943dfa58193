// The backend-neutral half of applying a batch, decided once for every store: which
// rollup hours its samples and allocations make dirty, how its samples become chunks, and
// when a sample repeats an instant already stored. A store executes the plan as SQL
// (store/store.h, IngestPlan).
#pragma once

#include "core/batch.h"
#include "core/status.h"
#include "store/store.h"

namespace gpuledger::ledger {

// How far a sample reaches: it changes the hours it covers (up to the widest staleness
// limit after it) and those whose idle causes it informs (the idle-cause context either
// side). docs/ARCHITECTURE.md, "Rollups".
inline constexpr int64_t kSampleReachMs = store::kMaxStalenessMs + store::kIdleContextMs;

// Plans `batch` (which must outlive the plan). Fails with kInvalidArgument naming the
// sample when a device's samples are not in increasing time (ValidateBatch refuses that
// too; the chunk encoding depends on it). REQUIRES: ValidateBatch(batch) passed.
// `sender` is who sent it (BatchSender: the nodes it may report for are checked here for
// the batch's own declarations, and by the store against what it holds); `now_ms` when.
Result<store::IngestPlan> PlanIngest(const Batch& batch, const BatchSender& sender = {}, int64_t now_ms = 0);

}  // namespace gpuledger::ledger
