// GET /api/v1/actions: the interventions' audit log (ledger/actions.h), role-scoped: a
// viewer sees only its own teams' jobs' decisions. Internal to the server library.
#pragma once

#include "server/api.h"

namespace gpuledger::server {

// ?window=7d (the default; ending where the loop last evaluated: the data's end, or now
// if earlier) | from=&to= (RFC 3339, both included), rule=, outcome=proposed|taken|warned|skipped,
// format=json|csv|table (report::RenderActions).
HttpReply ActionsReply(const QueryContext& q, const QueryParams& params);

}  // namespace gpuledger::server
