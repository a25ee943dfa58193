#include "report/experiments_format.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/csv.h"
#include "report/format_internal.h"
#include "report/table.h"

namespace gpuledger::report {

std::string RenderExperiments(const ledger::ExperimentReport& r, Format f) {
  const std::string from = FormatTime(r.window.begin_ms), to = FormatTime(r.window.end_ms);
  if (f == Format::kJson) {
    nlohmann::json j;
    j["window"] = {{"from", from}, {"to", to}};
    j["requested"] = {{"from", FormatTime(r.requested.begin_ms)}, {"to", FormatTime(r.requested.end_ms)}};
    AddCurrencyJson(j, r.currency);
    j["teams"] = nlohmann::json::array();
    for (const ledger::TeamExperiments& t : r.teams) {
      const ledger::CostDistribution& d = t.distribution;
      nlohmann::json jt{{"team", t.team},
                        {"cost", t.cost.ToString()},
                        {"waste", t.waste.ToString()},
                        {"gpu_hours", t.gpu_hours}};
      jt["distribution"] = {{"count", d.count},
                            {"total", d.total.ToString()},
                            {"median", d.median.ToString()},
                            {"p90", d.p90.ToString()},
                            {"costliest", d.count ? nlohmann::json{{"experiment", d.costliest},
                                                                   {"cost", d.costliest_cost.ToString()}}
                                                  : nlohmann::json(nullptr)}};
      jt["experiments"] = nlohmann::json::array();
      for (const ledger::ExperimentCost& e : t.experiments) {
        jt["experiments"].push_back({{"experiment", e.experiment},
                                     {"labeled", e.labeled},
                                     {"gpu_hours", e.gpu_hours},
                                     {"active_gpu_hours", e.active_gpu_hours},
                                     {"effective_utilization", e.effective_utilization()},
                                     {"cost", e.cost.ToString()},
                                     {"waste", e.waste.ToString()}});
      }
      j["teams"].push_back(std::move(jt));
    }
    j["unpriced"] = UnpricedJson(r.unpriced);
    return j.dump(2) + "\n";
  }
  if (f == Format::kCsv) {
    std::string out =
        "period_start,period_end,team,experiment,labeled,gpu_hours,active_gpu_hours,effective_utilization,"
        "cost,waste,currency\n";
    for (const ledger::TeamExperiments& t : r.teams) {
      for (const ledger::ExperimentCost& e : t.experiments) {
        out += CsvRow({from, to, t.team, e.experiment, e.labeled ? "true" : "false", fmt::format("{:.6f}", e.gpu_hours),
                       fmt::format("{:.6f}", e.active_gpu_hours), fmt::format("{:.6f}", e.effective_utilization()),
                       e.cost.ToString(), e.waste.ToString(), r.currency.name()});
      }
    }
    return out;
  }
  std::string out = fmt::format("Cost per experiment {} .. {}{} ({})\n", from, to, WindowNote(r.window, r.requested),
                                CurrencyNote(r.currency));
  if (r.teams.empty()) out += "\n(no team's jobs held GPUs in this period)\n";
  for (const ledger::TeamExperiments& t : r.teams) {
    const ledger::CostDistribution& d = t.distribution;
    out += fmt::format("\nteam {}: {} {}", t.team, d.count, d.count == 1 ? "experiment" : "experiments");
    if (d.count > 0) {
      out += fmt::format(", median {}, p90 {}, costliest {} ({})", d.median.ToDisplay(), d.p90.ToDisplay(),
                         d.costliest, d.costliest_cost.ToDisplay());
    }
    out += "\n";
    std::vector<std::vector<std::string>> rows = {
        {"experiment", "GPU-h", "effective util.", CostHeading("waste", r.currency), CostHeading("cost", r.currency)}};
    for (const ledger::ExperimentCost& e : t.experiments) {
      rows.push_back({e.experiment, Hours(e.gpu_hours), Percent(e.effective_utilization()), e.waste.ToDisplay(),
                      e.cost.ToDisplay()});
    }
    rows.push_back({"(team total)", Hours(t.gpu_hours), "", t.waste.ToDisplay(), t.cost.ToDisplay()});
    out += Table(rows, 1);
  }
  return out + UnpricedNote(r.unpriced);
}

}  // namespace gpuledger::report
