// Renders simulation results for people (a terminal table with the differences between
// runs stated) and for tools (JSON, CSV summary, CSV time series).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sim/simulator.h"

namespace gpuledger::sim {

enum class OutputFormat { kTable, kJson, kCsv };
Result<OutputFormat> ParseOutputFormat(std::string_view text);  // "table", "json", "csv"

// "3d 4h", "2h 05m", "4m 10s", "850ms": a duration for people.
std::string HumanDuration(int64_t ms);

// An availability SLO's row: its name with the wait limit, "SLO (GPUs started within
// 10m)", and each run's cell with the target it was held to, "66.7%, target 95%: MISSED"
// (of the GPUs requested, the share started within the wait limit).
std::string SloLabel(int64_t wait_ms);
std::string SloText(double granted_ratio, double target_ratio, bool met);

// One column per run: the summary metrics, then each queue's SLO, then the differences.
std::string RenderTable(const std::vector<SimResult>& runs);
// Everything but per-job outcomes, as one JSON document {"runs": [...]}.
std::string RenderJson(const std::vector<SimResult>& runs);
// Every figure the table shows, quoted by core/csv.h: per run one row of scope "run"
// (queue empty), then one row of scope "queue" per queue (the figures a queue has; the
// others empty). Header first.
std::string RenderSummaryCsv(const std::vector<SimResult>& runs);
// Per-job outcomes of every run (the runs must have kept them, and `jobs` be their
// workload): run, cluster, policy, placement, job_id, queue, gpus, submit, start, end,
// wait_s, completion_s, slowdown, preemptions, restarts, status, pool, nodes. Times are
// RFC 3339; what a job never did is empty.
std::string RenderJobsCsv(const std::vector<SimJob>& jobs, const std::vector<SimResult>& runs);
// The same as one JSON object per line (NDJSON); absent figures are null.
std::string RenderJobsNdjson(const std::vector<SimJob>& jobs, const std::vector<SimResult>& runs);
// The label of a run in reports: policy, its duration estimate when not the oracle,
// placement when not topology, and the cluster when `with_cluster`.
std::string RunLabel(const SimResult& r, bool with_cluster);
// run,policy,pool,bin_start,allocated_gpus,capacity_gpus,allocated_ratio,active_ratio:
// one row per run, pool and time step.
std::string RenderTimeseriesCsv(const std::vector<SimResult>& runs);
// Sentences comparing each run with the first: waits, utilization, makespan, cost,
// preemptions and SLOs, with the direction and size of each change.
std::vector<std::string> DescribeDifferences(const std::vector<SimResult>& runs);

}  // namespace gpuledger::sim
