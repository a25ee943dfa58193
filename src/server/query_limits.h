// What one query may cost, checked before any work: every API query that attributes
// time (usage, series, heatmap, a job's series) is estimated from the inventory and the
// job list, and refused with 413 naming the limit when it would exceed it. Queries
// grouped by hour are then run a chunk of hours at a time, so that the ledger's rows
// held at once stay bounded whatever the window. The limits are listed in
// docs/server.md ("Limits"). Internal to the server library.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::server {

struct QueryContext;

struct QueryLimits {
  // Device-hours a query grouped by hour may attribute (the ledger's work is one pass
  // over every device for every hour): 1,000 GPUs for two months, 300 for seven.
  int64_t max_device_hours = 1'500'000;
  // Rows of one answer (/usage's rows; by=hour counts one row per group and hour).
  int64_t max_rows = 200'000;
  // Groups x steps of one /series answer.
  int64_t max_series_cells = 200'000;
  // Devices x steps of one /heatmap answer.
  int64_t max_heatmap_cells = 1'000'000;
  // Device-hours of raw samples a job's finer-than-hourly activity may read (its latest
  // steps that fit): 32 GPUs for two and a half days.
  int64_t max_job_sample_device_hours = 2'000;
  // Ledger rows held at once while a query grouped by hour runs (the chunk size).
  int64_t max_rows_in_flight = 100'000;
};

// q's limits (the defaults when it has none).
const QueryLimits& LimitsOf(const QueryContext& q);

// The part of `window` that holds data: from the hour the fleet's first device entered
// service to where the data ends (the fleet's latest sample, never after now). Empty
// (begin == end == window.begin_ms) when they do not meet, or when there is no data.
TimeRange DataWindow(const QueryContext& q, const TimeRange& window);

// An upper bound on what a query grouped by `dims` over a window costs, from the
// inventory and the job list: a row's key is a function of its hour, its device and its
// job (or none), so the groups of an hour are at most the product of each dimension's
// distinct values, and at most devices x (jobs + 1); jobs that ended before the window or
// started after it are not counted.
struct QueryCost {
  int64_t hours = 0;    // hours the window touches
  int64_t devices = 0;  // GPUs and slices in the inventory
  int64_t groups = 0;   // distinct keys of `dims` other than the hour, at most
  bool hourly = false;  // dims hold the hour
  int64_t device_hours() const { return hours * devices; }
  int64_t rows() const { return hourly ? hours * groups : groups; }
};
Result<QueryCost> EstimateCost(const QueryContext& q, const TimeRange& window,
                               const std::vector<ledger::Dimension>& dims);

// kResourceExhausted (413) naming the limit when `cost` is over one of q's limits: the
// device-hours when hourly, and the answer's rows when `rows_are_the_answer`.
Status CheckCost(const QueryContext& q, const QueryCost& cost, bool rows_are_the_answer);

// Runs Usage(window, dims) (dims[0] is the hour) a chunk of whole hours at a time and
// calls `fn` with every row, chunk by chunk, in no particular order within a chunk (its
// callers regroup the rows); `cost` (from EstimateCost of the same dims)
// sizes the chunks so that at most q's max_rows_in_flight rows are held at once (one
// hour, at least). Each chunk reads its own snapshot. Stops at the first error.
Status ForEachHourlyRow(const QueryContext& q, const TimeRange& window, const std::vector<ledger::Dimension>& dims,
                        const QueryCost& cost, const std::function<Status(const ledger::UsageRow&)>& fn);

}  // namespace gpuledger::server
