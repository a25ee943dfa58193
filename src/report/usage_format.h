// Renders ledger reports for people (aligned tables), programs (JSON) and spreadsheets
// and FinOps tools (CSV).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/goals.h"
#include "core/status.h"
#include "ledger/ledger.h"
#include "ledger/rightsizing.h"
#include "ledger/serving.h"

namespace gpuledger::report {

enum class Format { kTable, kJson, kCsv };
Result<Format> ParseFormat(std::string_view text);

// With `goals`, every row carries the effective-utilization target it is held to: its
// pool's own when the report is grouped by pool, else the fleet's (JSON "target" and
// "target_source", the table's "target" column and a last line, Goals::Describe, saying
// where each target was set).
std::string RenderUsage(const ledger::UsageReport& r, Format f, const Goals* goals = nullptr);
std::string RenderChargeback(const ledger::ChargebackReport& r, Format f);

// {"window": {...}, "recommendations": [...], "groups": [...], "totals": {...}}: the
// CLI's and the API's JSON of the advice, listed group by group (kind and team, the
// largest net saving first), with the totals per kind, team and pool.
std::string RecommendationsJson(const std::vector<ledger::Recommendation>& recs,
                                const TimeRange& window);
// The same as text for `gpuledger recommend`: the totals, then each group and its advice.
std::string RecommendationsText(const std::vector<ledger::Recommendation>& recs, const TimeRange& window);
// {"job": ..., "engines": [...]}: a serving job's pressure, figures not reported null.
std::string ServingJson(const std::string& job_id,
                        const std::vector<ledger::JobServingReport>& reports);

// The demo's and the CLI's fleet summary: effective utilization, the buckets in
// GPU-hours and money, cost per team, and the largest sources of waste.
std::string RenderFleetSummary(const ledger::UsageReport& by_pool,
                               const ledger::UsageReport& by_team,
                               const std::vector<ledger::WasteItem>& waste);

}  // namespace gpuledger::report
