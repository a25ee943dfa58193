// What the weekly and the monthly HTML reports share: escaping, the figures' formats, the
// page's style, and the sections both print the same way (the advice they lead with, SLO
// rows, the largest sources of waste). Internal to the report library.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/currency.h"
#include "core/objective.h"
#include "core/status.h"
#include "ledger/ledger.h"
#include "ledger/rightsizing.h"
#include "ledger/targets.h"

namespace gpuledger::report::html {

// Text for HTML: < > & " ' escaped.
std::string Esc(std::string_view s);
// "62.5%".
std::string Pct(double r);
// "7d", "36h", "90m": an objective's window as a config writes it.
std::string WindowText(int64_t ms);
// GPU-hours as the dashboard shows them: one decimal, thousands grouped ("12,288.0").
std::string GpuHours(double h);
// A bucket in words, as the dashboard's legends say it: "allocated idle".
std::string BucketWords(Bucket b);
// Why a source of waste cost what it did: the idle causes by money for held GPUs, what
// the bucket means otherwise.
std::string WasteCauses(const ledger::WasteItem& w);
// "+3.2 pts" for ratios; "+12.5%" for money ("new" when there was none before).
std::string DeltaPoints(double now, double before);
std::string DeltaMoney(Money now, Money before);
// A KPI tile; `value` and `detail` are HTML already.
std::string Kpi(const std::string& label, const std::string& value, const std::string& detail,
                const std::string& cls = "");
// The page's end: the footer naming the currency, the activity source and the span.
std::string Footer(const std::string& currency, std::string_view activity_source, const TimeRange& span);
// The reports' one stylesheet (screen and print).
extern const char* const kStyle;

// "Where the money is": the top `n` pieces of advice (ledger::TopAdvice's order) of
// `recs`, found over `period_words` ("week", "month"), and their net saving in all.
std::string AdviceSection(const std::vector<ledger::Recommendation>& recs, size_t n, std::string_view period_words);
// One row of an SLO table: <tr data-slo="key">what, target, actual, met or missed.
std::string SloRow(const std::string& key, const std::string& what, const std::string& target,
                   const std::string& actual, bool met);
// The fleet's and each pool's utilization against its target (ledger::JudgeTargets), as
// SLO rows.
std::string TargetRows(const std::vector<ledger::TargetStatus>& targets);
// The config's objectives judged at `at_ms` as `gpuledger slo status` judges them
// (objectives::Evaluate over the ledger), as SLO rows. Fails when one cannot be judged.
Result<std::string> ObjectiveRows(ledger::Ledger& ledger, const std::vector<ObjectiveSpec>& objectives,
                                  int64_t at_ms);
// "Largest sources of waste": a table of `waste` in `currency`.
std::string WasteSection(const std::vector<ledger::WasteItem>& waste, const std::string& currency);

}  // namespace gpuledger::report::html
