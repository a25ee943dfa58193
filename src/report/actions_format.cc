#include "report/actions_format.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/csv.h"
#include "report/table.h"

namespace gpuledger::report {
namespace {

std::string Mode(const ledger::RecordedAction& a) { return a.enforce ? "enforce" : "dry-run"; }

}  // namespace

std::string RenderActions(const std::vector<ledger::RecordedAction>& actions, const TimeRange& window, Format f,
                          const Currency& currency) {
  ledger::ActionTotals t = ledger::TotalActions(actions);
  if (f == Format::kJson) {
    nlohmann::json j;
    j["window"] = {{"from", FormatTime(window.begin_ms)}, {"to", FormatTime(window.end_ms)}};
    AddCurrencyJson(j, currency);
    j["actions"] = nlohmann::json::array();
    for (const ledger::RecordedAction& a : actions) {
      j["actions"].push_back({{"decision_id", a.decision_id}, {"at", FormatTime(a.at_ms)}, {"rule", a.rule},
                              {"job", a.job}, {"team", a.team}, {"action", a.action}, {"outcome", a.outcome},
                              {"mode", Mode(a)}, {"evidence", a.evidence}, {"reason", a.reason},
                              {"result", a.result}, {"per_hour_freed", a.per_hour_freed.ToString()}});
    }
    j["totals"] = {{"taken", t.taken}, {"proposed", t.proposed}, {"warned", t.warned}, {"skipped", t.skipped},
                   {"freed_per_hour", t.freed_per_hour.ToString()},
                   {"proposed_per_hour", t.proposed_per_hour.ToString()}};
    return j.dump(2) + "\n";
  }
  if (f == Format::kCsv) {
    std::string out = "at,rule,job,team,action,outcome,mode,evidence,reason,result,per_hour_freed,decision_id,currency\n";
    for (const ledger::RecordedAction& a : actions) {
      out += CsvRow({FormatTime(a.at_ms), a.rule, a.job, a.team, a.action, a.outcome, Mode(a), a.evidence, a.reason,
                     a.result, a.per_hour_freed.ToString(), a.decision_id, currency.name()});
    }
    return out;
  }
  std::vector<std::vector<std::string>> rows = {
      {"at", "rule", "job", "team", "action", "outcome", "mode", "evidence; reason; result",
       fmt::format("freed/h ({})", currency.Label())}};
  for (const ledger::RecordedAction& a : actions) {
    std::string why = a.evidence;
    for (const std::string* more : {&a.reason, &a.result}) {
      if (!more->empty()) why += (why.empty() ? "" : "; ") + *more;
    }
    rows.push_back({FormatTime(a.at_ms), a.rule, a.job, a.team, a.action, a.outcome, Mode(a), why,
                    a.per_hour_freed.ToDisplay()});
  }
  std::string out = fmt::format("Interventions {} to {}\n", FormatTime(window.begin_ms), FormatTime(window.end_ms));
  out += rows.size() == 1 ? "(no decisions in this window)\n" : Table(rows, 8, /*total_row=*/false);
  out += fmt::format("taken {}, proposed (dry-run) {}, warned {}, skipped {}; freed {} per hour, {} per hour proposed\n",
                     t.taken, t.proposed, t.warned, t.skipped, t.freed_per_hour.ToDisplay(),
                     t.proposed_per_hour.ToDisplay());
  return out;
}

}  // namespace gpuledger::report
