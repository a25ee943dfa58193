// The ledger's store, for the ledger library's own analyses (mfu.cc, serving.cc,
// rightsizing.cc, workload.cc) and for tests. Nothing outside src/ledger includes this:
// the server, the reports and the CLI go through Ledger's methods (docs/ARCHITECTURE.md).
#pragma once

#include "ledger/ledger.h"

namespace gpuledger::ledger {

// The store `ledger` owns. Queries should read a snapshot of it (Store::Snapshot), as
// Ledger's own queries do, so that they never wait for ingest.
store::Store& internal_StoreOf(Ledger& ledger);

// Ledger::Usage on a snapshot the caller holds: an analysis that reads the store too
// sees its costs and its samples at one committed moment.
Result<UsageReport> internal_UsageOn(Ledger& ledger, store::StoreReads& snapshot, const TimeRange& window,
                                     const std::vector<Dimension>& by);

// The snapshot `read` was read from (Ledger::ReadUsage): an analysis given a UsageRead
// reads the rest of what it needs there, at the same committed moment as its costs.
store::StoreSnapshot& internal_SnapshotOf(const UsageRead& read);

}  // namespace gpuledger::ledger
