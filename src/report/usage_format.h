// Renders ledger reports for people (aligned tables), programs (JSON) and spreadsheets
// and FinOps tools (CSV).
#pragma once

#include <nlohmann/json_fwd.hpp>

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
// The JSON rendering's document, for callers that add to it (the API's page fields).
nlohmann::json UsageJson(const ledger::UsageReport& r, const Goals* goals = nullptr);
std::string RenderChargeback(const ledger::ChargebackReport& r, Format f);

// Every rendering names its money's currency (core/currency.h): JSON as "currency" (the
// ISO code or the unit's name; null when unset) and "currency_kind" beside
// "currency_unit", CSV as a last column, tables in the money column's heading and the
// title's note, which is this: "amounts in EUR", or one that says no currency was set.
std::string CurrencyNote(const Currency& c);
// Sets j's "currency_unit" ("1e-6"), "currency" and "currency_kind" (as above): for every
// JSON document with money in it, the server's too.
void AddCurrencyJson(nlohmann::json& j, const Currency& c);
// "" when everything had a price; else a line that says how many GPU-hours had none, of
// which model, pool and capacity type, and how to set prices. Tables end with it; the
// CLI writes it to stderr beside CSV and JSON.
std::string UnpricedNote(const std::vector<ledger::UnpricedCapacity>& unpriced);

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
