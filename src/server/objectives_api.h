// GET /api/v1/objectives: the config's objectives judged as `gpuledger slo status` and the
// server's loop judge them (objectives::Evaluate), with their burn-rate history, for the
// dashboard's "SLOs and actions" page. Role-scoped: a viewer sees only the objectives of
// its own teams (scope team:NAME). Internal to the server library.
#pragma once

#include <vector>

#include "core/objective.h"
#include "server/api.h"

namespace gpuledger::server {

// ?history=24h (1h..7d, whole hours): each objective judged now (or where the data ends, if
// earlier) and at the end of every hour of the history before it.
HttpReply ObjectivesReply(const QueryContext& q, const QueryParams& params, const std::vector<ObjectiveSpec>& objectives);

}  // namespace gpuledger::server
