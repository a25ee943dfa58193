#include "report/monthly.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "ledger/actions.h"
#include "ledger/experiments.h"
#include "ledger/quotas.h"
#include "ledger/rightsizing.h"
#include "ledger/targets.h"
#include "ledger/workload.h"
#include "report/html_internal.h"
#include "report/usage_format.h"

namespace gpuledger::report {
namespace {

using html::DeltaMoney;
using html::DeltaPoints;
using html::Esc;
using html::GpuHours;
using html::Kpi;
using html::Pct;
using ledger::Dimension;
using ledger::UsageReport;
using ledger::UsageRow;

std::string MonthLabel(const TimeRange& month) { return FormatTime(month.begin_ms).substr(0, 7); }

// One month of the trend: its usage by team (utilization, capacity, each team's cost)
// and its chargeback (the spend, as `gpuledger chargeback --period` bills it).
struct MonthFigures {
  std::string label;
  TimeRange range;
  UsageReport by_team;
  ledger::ChargebackReport chargeback;
  bool has_data() const { return by_team.total.total_ticks_ms() > 0; }
};

// The month is read once for both; its read goes to `keep` when the caller needs more
// of the month.
Result<MonthFigures> FiguresOf(ledger::Ledger& ledger, const TimeRange& month,
                               std::optional<ledger::UsageRead>* keep = nullptr) {
  MonthFigures f;
  f.label = MonthLabel(month);
  f.range = month;
  GPULEDGER_ASSIGN_OR_RETURN(ledger::UsageRead read, ledger.ReadUsage(month));
  GPULEDGER_ASSIGN_OR_RETURN(f.by_team, read.By({Dimension::kTeam}));
  GPULEDGER_ASSIGN_OR_RETURN(f.chargeback, ledger.Chargeback(read, false));
  if (keep != nullptr) keep->emplace(std::move(read));
  return f;
}

// The month before `month`, and the months of its quarter up to `month`.
Result<std::vector<TimeRange>> TrendMonths(const TimeRange& month) {
  std::vector<TimeRange> out;
  const TimeRange quarter = QuotaPeriodContaining(QuotaPeriod::kQuarter, month.begin_ms);
  GPULEDGER_ASSIGN_OR_RETURN(TimeRange previous, ParseMonth(FormatTime(month.begin_ms - 1).substr(0, 7)));
  if (previous.begin_ms < quarter.begin_ms) out.push_back(previous);
  for (int64_t t = quarter.begin_ms; t <= month.begin_ms;) {
    GPULEDGER_ASSIGN_OR_RETURN(TimeRange m, ParseMonth(FormatTime(t).substr(0, 7)));
    out.push_back(m);
    t = m.end_ms;
  }
  return out;
}

std::string Optional(const std::optional<double>& ratio) { return ratio ? Pct(*ratio) : "—"; }

// The trend's tables: the fleet month by month, then each team's cost month by month.
std::string TrendSection(const std::vector<MonthFigures>& months, const std::string& quarter_label,
                         const TimeRange& quarter, const std::string& currency) {
  std::string out = fmt::format(
      "<h2>Month over month and the quarter</h2><p>Each month's spend is its chargeback "
      "(<code>gpuledger chargeback --period</code>); utilization is active time over the fleet's "
      "capacity. {} to date is the sum of its months below.</p>",
      Esc(quarter_label));
  out += "<table><thead><tr><th class=\"l\">month</th><th>capacity GPU-h</th><th>effective util.</th>"
         "<th>allocated eff.</th><th>idle spend</th><th>spend (" + currency + ")</th><th>m/m</th></tr></thead>";
  Money quarter_spend;
  const MonthFigures* before = nullptr;
  for (const MonthFigures& m : months) {
    const UsageRow& t = m.by_team.total;
    const bool in_quarter = m.range.begin_ms >= quarter.begin_ms;
    if (in_quarter) quarter_spend += m.chargeback.total;
    out += fmt::format(
        "<tr data-month=\"{}\"><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td data-spend=\"{}\">{}</td>"
        "<td>{}</td></tr>",
        m.label, m.label, in_quarter ? "" : " (previous quarter)", GpuHours(t.total_gpu_hours()),
        m.has_data() ? Pct(t.effective_utilization()) : "no data", m.has_data() ? Pct(t.allocated_efficiency()) : "—",
        Esc((t.cost[1] + t.cost[2]).ToDisplay()), m.chargeback.total.ToString(), Esc(m.chargeback.total.ToDisplay()),
        before == nullptr || !before->has_data()
            ? "—"
            : DeltaMoney(m.chargeback.total, before->chargeback.total) + " · " +
                  DeltaPoints(t.effective_utilization(), before->by_team.total.effective_utilization()));
    before = &m;
  }
  out += fmt::format(
      "<tr class=\"total\" data-month=\"{}\"><td>{} to date</td><td></td><td></td><td></td><td></td>"
      "<td data-spend=\"{}\">{}</td><td></td></tr></table>",
      Esc(quarter_label), Esc(quarter_label), quarter_spend.ToString(), Esc(quarter_spend.ToDisplay()));

  // Each team's cost per month, from the same usage reports.
  std::set<std::string> teams;
  for (const MonthFigures& m : months) {
    for (const UsageRow& row : m.by_team.rows) {
      if (!row.no_job) teams.insert(row.key[0]);
    }
  }
  out += "<table><thead><tr><th class=\"l\">team, cost (" + currency + ")</th>";
  for (const MonthFigures& m : months) out += fmt::format("<th>{}</th>", m.label);
  out += "</tr></thead>";
  for (const std::string& team : teams) {
    out += fmt::format("<tr data-team-trend=\"{}\"><td>{}</td>", Esc(team), Esc(team));
    for (const MonthFigures& m : months) {
      Money cost;
      for (const UsageRow& row : m.by_team.rows) {
        if (!row.no_job && row.key[0] == team) cost = row.total_cost();
      }
      out += fmt::format("<td>{}</td>", Esc(cost.ToDisplay()));
    }
    out += "</tr>";
  }
  return out + "</table>";
}

std::string QuotaRows(const ledger::QuotaReport& r) {
  std::string out;
  for (const ledger::QuotaStatus& s : r.quotas) {
    std::string owner = s.spec.OwnerLabel();
    if (!s.spec.pool.empty()) owner += " pool " + s.spec.pool;
    if (!s.spec.model.empty()) owner += " model " + s.spec.model;
    std::string hours = s.spec.gpu_hours ? fmt::format("{} of {}", GpuHours(s.used.gpu_hours()), *s.spec.gpu_hours)
                                         : "—";
    std::string money = s.spec.budget ? Esc(s.used.cost.ToDisplay()) + " of " + Esc(s.spec.budget->ToDisplay()) : "—";
    const bool over = s.burn() > 1.0;
    std::string status = over                    ? "over"
                         : s.projected_to_exceed ? "projected to exceed"
                                                 : "within";
    out += fmt::format(
        "<tr data-quota=\"{}\"><td class=\"l\">{}</td><td class=\"l\">{} ({})</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td class=\"l {}\">{}</td><td class=\"l\">{}</td></tr>",
        Esc(s.spec.Label()), Esc(owner), Esc(s.period_label), QuotaModeName(s.spec.mode), hours,
        Optional(s.gpu_hours_burn), money, Optional(s.budget_burn), over || s.projected_to_exceed ? "missed" : "met",
        status, Esc(s.basis_text));
  }
  return out;
}

std::string ActionsSection(const std::vector<ledger::RecordedAction>& actions, const std::string& currency) {
  ledger::ActionTotals totals = ledger::TotalActions(actions);
  std::string out = fmt::format(
      "<h3>Actions taken</h3><p data-actions-taken=\"{}\">The intervention rules' decisions this month "
      "(<code>gpuledger actions</code>): {} taken, {} proposed in dry-run, {} warned, {} skipped. The stops "
      "taken freed GPUs costing <span data-freed-per-hour=\"{}\">{}</span> per hour; the stops proposed would "
      "have freed {} per hour.</p>",
      totals.taken, totals.taken, totals.proposed, totals.warned, totals.skipped, totals.freed_per_hour.ToString(),
      Esc(totals.freed_per_hour.ToDisplay()), Esc(totals.proposed_per_hour.ToDisplay()));
  std::vector<const ledger::RecordedAction*> taken;
  for (const auto& a : actions) {
    if (a.outcome == "taken") taken.push_back(&a);
  }
  std::stable_sort(taken.begin(), taken.end(),
                   [](const auto* a, const auto* b) { return a->per_hour_freed > b->per_hour_freed; });
  if (taken.empty()) return out;
  out += "<table><thead><tr><th class=\"l\">when</th><th class=\"l\">rule</th><th class=\"l\">job</th>"
         "<th class=\"l\">team</th><th class=\"l\">action</th><th>freed per hour (" + currency + ")</th></tr></thead>";
  for (size_t i = 0; i < taken.size() && i < 10; ++i) {
    const ledger::RecordedAction& a = *taken[i];
    out += fmt::format(
        "<tr data-action=\"{}\"><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"id\">{}</td><td class=\"l\">{}</td>"
        "<td class=\"l\">{}</td><td>{}</td></tr>",
        Esc(a.decision_id), FormatTime(a.at_ms), Esc(a.rule), Esc(a.job), Esc(a.team), Esc(a.action),
        Esc(a.per_hour_freed.ToDisplay()));
  }
  if (taken.size() > 10) out += fmt::format("<p class=\"note\">and {} more taken.</p>", taken.size() - 10);
  return out + "</table>";
}

std::string ExperimentsSection(const ledger::ExperimentReport& r, const std::string& currency) {
  std::string out =
      "<h2>Cost per experiment</h2><p>Each team's labelled experiments as a distribution, not one average: "
      "the median and p90 are nearest-rank (of n costs sorted, the one at rank ⌈p·n/100⌉), the costliest "
      "by name. Jobs without an experiment label are the team's \"(none)\"; a team's experiments and its "
      "\"(none)\" add up to its chargeback.</p>";
  out += "<table><thead><tr><th class=\"l\">team</th><th>experiments</th><th>median</th><th>p90</th>"
         "<th class=\"l\">costliest</th><th>experiments' cost</th><th>(none)</th><th>waste</th>"
         "<th>team cost (" + currency + ")</th></tr></thead>";
  for (const ledger::TeamExperiments& t : r.teams) {
    const ledger::CostDistribution& d = t.distribution;
    Money unlabelled;  // the team's "(none)" row, when it has one
    for (const ledger::ExperimentCost& e : t.experiments) {
      if (!e.labeled) unlabelled = e.cost;
    }
    out += fmt::format(
        "<tr data-experiments=\"{}\" data-team-cost=\"{}\" data-count=\"{}\" data-median=\"{}\" data-p90=\"{}\">"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>",
        Esc(t.team), t.cost.ToString(), d.count, d.median.ToString(), d.p90.ToString(), Esc(t.team), d.count,
        d.count ? Esc(d.median.ToDisplay()) : "—", d.count ? Esc(d.p90.ToDisplay()) : "—",
        d.count ? Esc(d.costliest) + " · " + Esc(d.costliest_cost.ToDisplay()) : "—", Esc(d.total.ToDisplay()),
        Esc(unlabelled.ToDisplay()), Esc(t.waste.ToDisplay()), Esc(t.cost.ToDisplay()));
  }
  return out + "</table>";
}

// A money figure of the what-if's document ("123.450000"), for people.
std::string WhatIfMoney(const nlohmann::json& v) {
  if (!v.is_string()) return "—";
  auto m = Money::Parse(v.get<std::string>());
  return m.ok() ? Esc(m->ToDisplay()) : Esc(v.get<std::string>());
}

std::string Minutes(const nlohmann::json& seconds) {
  return seconds.is_number() ? fmt::format("{:.1f} min", seconds.get<double>() / 60.0) : "—";
}

std::string Ratio(const nlohmann::json& r) { return r.is_number() ? Pct(r.get<double>()) : "—"; }

std::string List(const nlohmann::json& items, const char* cls) {
  if (!items.is_array() || items.empty()) return "";
  std::string out = fmt::format("<ul class=\"{}\">", cls);
  for (const auto& s : items) out += "<li>" + Esc(s.is_string() ? s.get<std::string>() : s.dump()) + "</li>";
  return out + "</ul>";
}

// The what-if's document as one table per answer, its findings and its assumptions.
Result<std::string> WhatIfBody(const std::string& document, const std::string& currency) {
  nlohmann::json doc = nlohmann::json::parse(document, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return Internal("the what-if replay returned no JSON document");
  std::string out = fmt::format("<p>Replayed from the {} jobs the ledger recorded starting this month ({} left out), "
                                "with their requested GPUs, real durations and activity.</p>",
                                doc.value("jobs", 0), doc.value("left_out", 0));
  out += List(doc.value("assumptions", nlohmann::json::array()), "assumptions");
  for (const auto& a : doc.value("answers", nlohmann::json::array())) {
    out += fmt::format("<h3 data-whatif=\"{}\">{}</h3>", Esc(a.value("question", "")), Esc(a.value("title", "")));
    const nlohmann::json scenarios = a.value("scenarios", nlohmann::json::array());
    out += "<table><thead><tr><th class=\"l\">scenario</th>";
    for (const auto& s : scenarios) out += "<th>" + Esc(s.value("label", "")) + "</th>";
    out += "</tr></thead>";
    struct Row {
      std::string label;
      std::function<std::string(const nlohmann::json&)> cell;
    };
    const std::vector<Row> rows = {
        {"GPUs", [](const auto& s) { return fmt::format("{}", s.value("gpus", 0)); }},
        {"fleet cost (" + currency + ")", [](const auto& s) { return WhatIfMoney(s.value("fleet_cost", nlohmann::json())); }},
        {"allocated cost", [](const auto& s) { return WhatIfMoney(s.value("allocated_cost", nlohmann::json())); }},
        {"allocated utilization", [](const auto& s) { return Ratio(s.value("allocated_ratio", nlohmann::json())); }},
        {"wait, mean", [](const auto& s) { return Minutes(s.value("wait_mean_seconds", nlohmann::json())); }},
        {"wait, p95", [](const auto& s) { return Minutes(s.value("wait_p95_seconds", nlohmann::json())); }},
        {"started within the SLO's wait", [](const auto& s) {
           return Ratio(s.value("slo_granted_ratio", nlohmann::json())) + (s.value("slo_met", false) ? " met" : " missed");
         }},
    };
    for (const Row& row : rows) {
      out += "<tr><td>" + Esc(row.label) + "</td>";
      for (const auto& s : scenarios) out += "<td>" + row.cell(s) + "</td>";
      out += "</tr>";
    }
    out += "</table>";
    out += List(a.value("findings", nlohmann::json::array()), "findings");
    out += List(a.value("assumptions", nlohmann::json::array()), "assumptions");
  }
  return out;
}

std::string WhatIfSection(ledger::Ledger& ledger, const TimeRange& window, const MonthlyOptions& options,
                          const std::string& currency) {
  std::string out = "<h2>What if</h2>";
  if (!options.what_if) {
    return out + "<p class=\"note\" data-note=\"whatif-not-run\">Not run: this report was rendered without the "
                 "simulator (<code>gpuledger report monthly</code> runs it; <code>gpuledger whatif</code> answers "
                 "the same questions).</p>";
  }
  // Errors here are said in the section: the rest of the review stands without it.
  auto failed = [&](const Status& st) {
    return out + fmt::format("<p class=\"note bad\" data-note=\"whatif-failed\">The what-if could not run: {}</p>",
                             Esc(st.message()));
  };
  auto workload = ledger::RecordedWorkload(ledger, window);
  if (!workload.ok()) return failed(workload.status());
  if (workload->jobs.empty()) {
    return out + "<p class=\"note\" data-note=\"whatif-no-jobs\">No recorded job started this month: nothing to "
                 "replay.</p>";
  }
  auto document = options.what_if(*workload);
  if (!document.ok()) return failed(document.status());
  auto body = WhatIfBody(*document, currency);
  if (!body.ok()) return failed(body.status());
  return out + *body;
}

}  // namespace

Result<std::string> RenderMonthlyReport(ledger::Ledger& ledger, const TimeRange& month,
                                        const MonthlyOptions& options) {
  const std::string label = MonthLabel(month);
  const TimeRange quarter = QuotaPeriodContaining(QuotaPeriod::kQuarter, month.begin_ms);
  const std::string quarter_label = QuotaPeriodLabel(QuotaPeriod::kQuarter, quarter);
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<TimeRange> trend_months, TrendMonths(month));
  std::vector<MonthFigures> months;
  std::optional<ledger::UsageRead> read;  // the month's own (the last of the trend's)
  for (const TimeRange& m : trend_months) {
    GPULEDGER_ASSIGN_OR_RETURN(MonthFigures f, FiguresOf(ledger, m, m == month ? &read : nullptr));
    months.push_back(std::move(f));
  }
  if (!read) return Internal("the monthly report's trend misses its own month");
  const MonthFigures& now = months.back();
  const MonthFigures* previous = months.size() > 1 ? &months[months.size() - 2] : nullptr;
  const UsageReport& by_team = now.by_team;
  const TimeRange window = by_team.window.empty() ? month : by_team.window;
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport by_pool, read->By({Dimension::kPool}));
  GPULEDGER_ASSIGN_OR_RETURN(auto waste, ledger.TopWaste(*read, options.waste_items));
  GPULEDGER_ASSIGN_OR_RETURN(auto recs, ledger::Recommend(ledger, *read));
  GPULEDGER_ASSIGN_OR_RETURN(ledger::ExperimentReport experiments,
                             ledger::Experiments(ledger, month, ledger::Scope::All()));
  ledger::ActionQuery action_query;
  action_query.range = month;
  GPULEDGER_ASSIGN_OR_RETURN(auto actions, ledger::Actions(ledger, action_query));
  const int64_t judged_at = window.end_ms;
  GPULEDGER_ASSIGN_OR_RETURN(ledger::QuotaReport monthly_quotas,
                             ledger::JudgeQuotas(ledger, options.quotas, ledger::Scope::All(), judged_at - 1, label));
  GPULEDGER_ASSIGN_OR_RETURN(
      ledger::QuotaReport quarterly_quotas,
      ledger::JudgeQuotas(ledger, options.quotas, ledger::Scope::All(), judged_at - 1, quarter_label));

  const std::string currency = Esc(by_team.currency.Label());
  const UsageRow& t = by_team.total;
  const Money spend = now.chargeback.total;
  const bool has_previous = previous != nullptr && previous->has_data();
  const Money idle_cost = t.cost[1] + t.cost[2];
  size_t experiment_count = 0;
  for (const auto& team : experiments.teams) experiment_count += team.distribution.count;

  std::string out = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">";
  out += fmt::format("<title>{} — {}</title><style>{}</style></head><body>", Esc(options.title), label, html::kStyle);
  out += fmt::format(
      "<h1>{} — {}</h1><div class=\"sub\">{} to {} (UTC) · {:.0f} GPU-hours of capacity · "
      "<span data-currency=\"{}\">{}</span></div>",
      Esc(options.title), label, FormatTime(month.begin_ms).substr(0, 10), FormatTime(month.end_ms - 1).substr(0, 10),
      t.total_gpu_hours(), currency, Esc(CurrencyNote(by_team.currency)));
  if (by_team.window.end_ms < month.end_ms) {
    out += fmt::format(
        "<p class=\"note\" data-note=\"data-end\">The data ends at {}: the figures cover the month up to then.</p>",
        by_team.window.empty() ? std::string("its start") : FormatTime(by_team.window.end_ms));
  }
  if (now.chargeback.closed) {
    out += fmt::format("<p class=\"note\" data-note=\"closed\">{} was closed on {} by {}: its spend is as frozen then.</p>",
                       label, FormatTime(now.chargeback.closed->closed_at_ms), Esc(now.chargeback.closed->closed_by));
  }
  if (!by_team.unpriced.empty()) {
    out += "<p class=\"note bad\" data-note=\"unpriced\">" + Esc(UnpricedNote(by_team.unpriced)) + "</p>";
  }

  const std::vector<ledger::TargetStatus> targets = ledger::JudgeTargets(options.goals, by_pool);
  const ledger::TargetStatus& fleet_target = targets.front();
  out += "<div class=\"kpis\">";
  out += Kpi("Spend (" + by_team.currency.Label() + ")", fmt::format("<span data-spend=\"{}\">{}</span>", spend.ToString(),
                                                                     Esc(spend.ToDisplay())),
             has_previous ? DeltaMoney(spend, previous->chargeback.total) + " m/m" : "no previous month");
  out += Kpi("Effective utilization", Pct(t.effective_utilization()),
             fmt::format("target {}{}", Pct(fleet_target.target),
                         has_previous ? " · " + DeltaPoints(t.effective_utilization(),
                                                            previous->by_team.total.effective_utilization()) + " m/m"
                                      : ""),
             fleet_target.met ? "good" : "bad");
  out += Kpi("Idle spend (" + by_team.currency.Label() + ")", Esc(idle_cost.ToDisplay()),
             "held idle or unallocated");
  out += Kpi("Experiments", fmt::format("{}", experiment_count),
             fmt::format("labelled, over {} teams", experiments.teams.size()));
  Money quarter_spend;
  for (const MonthFigures& m : months) {
    if (m.range.begin_ms >= quarter.begin_ms) quarter_spend += m.chargeback.total;
  }
  out += Kpi(quarter_label + " to date", Esc(quarter_spend.ToDisplay()), "spend, " + currency);
  out += "</div>";

  out += html::AdviceSection(recs, options.recommendations, "month");
  out += TrendSection(months, quarter_label, quarter, currency);

  out += "<h2>Budgets and quotas</h2>";
  if (monthly_quotas.quotas.empty() && quarterly_quotas.quotas.empty()) {
    out += "<p class=\"note\">No quotas or budgets: set [[quota]] or [budgets] in the config (docs/quotas.md).</p>";
  } else {
    out += fmt::format(
        "<p>Each quota and budget against actual, judged by <code>gpuledger quota status</code>'s rule up to {}: "
        "the month's monthly ones and {}'s quarterly ones.</p>",
        monthly_quotas.anchor_ms > 0 ? FormatTime(monthly_quotas.anchor_ms) : std::string("the data's end"),
        Esc(quarter_label));
    out += "<table><thead><tr><th class=\"l\">quota</th><th class=\"l\">period</th><th>GPU-hours</th><th>burn</th>"
           "<th>money (" + currency + ")</th><th>burn</th><th class=\"l\">status</th><th class=\"l\">projection basis</th>"
           "</tr></thead>" + QuotaRows(monthly_quotas) + QuotaRows(quarterly_quotas) + "</table>";
  }

  out += "<h2>SLO attainment</h2><table><thead><tr><th class=\"l\">objective</th><th>target</th>"
         "<th>this month</th><th class=\"l\">status</th></tr></thead>";
  out += html::TargetRows(targets);
  GPULEDGER_ASSIGN_OR_RETURN(std::string objective_rows, html::ObjectiveRows(ledger, options.objectives, judged_at));
  out += objective_rows + "</table>";
  out += ActionsSection(actions, currency);

  out += html::WasteSection(waste, currency);
  out += ExperimentsSection(experiments, currency);
  out += WhatIfSection(ledger, window, options, currency);

  out += html::Footer(currency, t.activity_source(), month);
  return out;
}

}  // namespace gpuledger::report
