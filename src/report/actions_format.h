// The audit log of the intervention rules rendered (ledger/actions.h): for `gpuledger
// actions` (a table, JSON or CSV) and GET /api/v1/actions (JSON). Money in the price
// book's currency, per hour.
#pragma once

#include <string>
#include <vector>

#include "core/currency.h"
#include "ledger/actions.h"
#include "report/usage_format.h"

namespace gpuledger::report {

// JSON: {"window", "actions": [...], "totals": {...}, currency}; CSV: one row per decision
// with the currency as its last column; the table: one line per decision, then the totals.
std::string RenderActions(const std::vector<ledger::RecordedAction>& actions, const TimeRange& window, Format f,
                          const Currency& currency);

}  // namespace gpuledger::report
