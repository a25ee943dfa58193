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

// One column per run: the summary metrics, then each queue's SLO, then the differences.
std::string RenderTable(const std::vector<SimResult>& runs);
// Everything but per-job outcomes, as one JSON document {"runs": [...]}.
std::string RenderJson(const std::vector<SimResult>& runs);
// One row per run with the summary metrics; header first.
std::string RenderSummaryCsv(const std::vector<SimResult>& runs);
// run,policy,pool,bin_start,allocated_gpus,capacity_gpus,allocated_ratio,active_ratio:
// one row per run, pool and time step.
std::string RenderTimeseriesCsv(const std::vector<SimResult>& runs);
// Sentences comparing each run with the first: waits, utilization, makespan, cost,
// preemptions and SLOs, with the direction and size of each change.
std::vector<std::string> DescribeDifferences(const std::vector<SimResult>& runs);

}  // namespace gpuledger::sim
