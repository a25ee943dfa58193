// Renders cost per experiment (ledger/experiments.h) for people (a table per team),
// programs (JSON) and spreadsheets (CSV): `gpuledger experiments`, /api/v1/experiments
// and the dashboard's "Download CSV" print the same figures. Rendering only: every
// figure, the distribution's too, comes from ledger::Experiments.
#pragma once

#include <string>

#include "ledger/experiments.h"
#include "report/usage_format.h"

namespace gpuledger::report {

// Table: per team a line with its distribution (count, median, p90, the costliest) and
// its experiments' rows, the currency in the title and the money headings.
// JSON: {"window", "requested", "currency"..., "teams": [{"team", "cost", "waste",
// "gpu_hours", "distribution": {"count", "total", "median", "p90", "costliest":
// {"experiment", "cost"} | null}, "experiments": [{"experiment", "labeled", "gpu_hours",
// "active_gpu_hours", "effective_utilization", "cost", "waste"}]}], "unpriced"}.
// CSV: one record per experiment: period_start, period_end, team, experiment, labeled,
// gpu_hours, active_gpu_hours, effective_utilization, cost, waste, currency.
// Money as exact decimal strings (six fractional digits) in JSON and CSV.
std::string RenderExperiments(const ledger::ExperimentReport& r, Format f);

}  // namespace gpuledger::report
