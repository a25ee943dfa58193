#include "report/weekly.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <map>
#include <utility>

#include "ledger/rightsizing.h"
#include "ledger/targets.h"
#include "report/html_internal.h"
#include "report/usage_format.h"

namespace gpuledger::report {
namespace {

using html::BucketWords;
using html::DeltaMoney;
using html::DeltaPoints;
using html::Esc;
using html::GpuHours;
using html::Kpi;
using html::Pct;
using html::kStyle;
using ledger::Dimension;
using ledger::UsageReport;
using ledger::UsageRow;

const char* kBucketColors[kBucketCount] = {"#2e7d32", "#f9a825", "#90a4ae", "#c62828", "#6d4c41"};

// A stacked area chart of the buckets over time, in GPUs (capacity-weighted).
std::string StackedAreaSvg(const std::vector<ledger::TimelinePoint>& points, int64_t step_ms) {
  const double w = 900, h = 240, left = 50, bottom = 20, top = 10;
  double max_gpus = 0;
  std::vector<std::array<double, kBucketCount>> gpus(points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    double total = 0;
    for (size_t b = 0; b < kBucketCount; ++b) {
      gpus[i][b] = static_cast<double>(points[i].gpu_ticks_ms[b]) /
                   static_cast<double>(kShareScale * step_ms);
      total += gpus[i][b];
    }
    max_gpus = std::max(max_gpus, total);
  }
  if (max_gpus <= 0) max_gpus = 1;
  auto x = [&](size_t i) {
    return left + (w - left) * static_cast<double>(i) / static_cast<double>(std::max<size_t>(1, points.size() - 1));
  };
  auto y = [&](double v) { return top + (h - bottom - top) * (1.0 - v / max_gpus); };
  std::string svg = fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"GPUs by bucket over the week\">",
      w, h);
  std::vector<double> base(points.size(), 0.0);
  for (size_t b = 0; b < kBucketCount; ++b) {
    std::string path;
    for (size_t i = 0; i < points.size(); ++i) {
      path += fmt::format("{}{:.1f},{:.1f} ", i ? "L" : "M", x(i), y(base[i] + gpus[i][b]));
    }
    for (size_t i = points.size(); i-- > 0;) path += fmt::format("L{:.1f},{:.1f} ", x(i), y(base[i]));
    svg += fmt::format("<path d=\"{}Z\" fill=\"{}\"><title>{}</title></path>", path,
                       kBucketColors[b], BucketWords(kAllBuckets[b]));
    for (size_t i = 0; i < points.size(); ++i) base[i] += gpus[i][b];
  }
  for (int k = 0; k <= 4; ++k) {
    double v = max_gpus * k / 4.0;
    svg += fmt::format(
        "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"grid\"/><text x=\"{}\" "
        "y=\"{:.1f}\" class=\"axis\" text-anchor=\"end\">{:.0f}</text>",
        left, w, y(v), y(v), left - 4, y(v) + 4, v);
  }
  for (size_t i = 0; i < points.size(); i += static_cast<size_t>(kMsPerDay / step_ms)) {
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"axis\">{}</text>", x(i) + 2, h - 4,
                       FormatTime(points[i].begin_ms).substr(5, 5));
  }
  return svg + "</svg>";
}

// Daily effective utilization as bars against the target line.
std::string DailyUtilizationSvg(const std::vector<ledger::TimelinePoint>& days, double target) {
  const double w = 900, h = 160, left = 50, bottom = 20;
  double bar = (w - left) / static_cast<double>(std::max<size_t>(1, days.size()));
  std::string svg = fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"daily effective utilization\">",
      w, h);
  auto y = [&](double r) { return (h - bottom) * (1.0 - r); };
  for (size_t i = 0; i < days.size(); ++i) {
    int64_t total = 0;
    for (int64_t v : days[i].gpu_ticks_ms) total += v;
    double util = total ? static_cast<double>(days[i].gpu_ticks_ms[0]) / static_cast<double>(total) : 0;
    double x0 = left + bar * static_cast<double>(i) + 4;
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} "
        "{}</title></rect><text x=\"{:.1f}\" y=\"{:.1f}\" class=\"axis\" "
        "text-anchor=\"middle\">{}</text><text x=\"{:.1f}\" y=\"{}\" class=\"axis\" "
        "text-anchor=\"middle\">{}</text>",
        x0, y(util), bar - 8, (h - bottom) - y(util), util >= target ? "#2e7d32" : "#ef6c00",
        FormatTime(days[i].begin_ms).substr(0, 10), Pct(util), x0 + (bar - 8) / 2, y(util) - 3,
        Pct(util), x0 + (bar - 8) / 2, h - 4, FormatTime(days[i].begin_ms).substr(5, 5));
  }
  svg += fmt::format(
      "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" class=\"target\"/><text x=\"{}\" "
      "y=\"{:.1f}\" class=\"axis\" text-anchor=\"end\">target {}</text>",
      left, w, y(target), y(target), w, y(target) - 4, Pct(target));
  return svg + "</svg>";
}

// The week's buckets per step of `step_ms` (a whole number of hours that divides the
// week), from a report grouped by hour over the week: the charts show the figures the
// tables add up, and one read of the hour rollups serves both steps.
std::vector<ledger::TimelinePoint> StepsOf(const UsageReport& hourly, const TimeRange& week, int64_t step_ms) {
  std::vector<ledger::TimelinePoint> points(static_cast<size_t>((week.length_ms() + step_ms - 1) / step_ms));
  for (size_t i = 0; i < points.size(); ++i) points[i].begin_ms = week.begin_ms + static_cast<int64_t>(i) * step_ms;
  for (const UsageRow& row : hourly.rows) {
    auto hour = ParseTime(row.key[0]);
    if (!hour.ok() || *hour < week.begin_ms || *hour >= week.end_ms) continue;
    auto& point = points[static_cast<size_t>((*hour - week.begin_ms) / step_ms)];
    for (size_t b = 0; b < kBucketCount; ++b) point.gpu_ticks_ms[b] += row.gpu_ticks_ms[b];
  }
  return points;
}

// The row of `r` for the same first key as `like` (time held by no job matches only itself).
const UsageRow* FindRow(const UsageReport& r, const UsageRow& like) {
  for (const auto& row : r.rows) {
    if (row.no_job == like.no_job && row.key[0] == like.key[0]) return &row;
  }
  return nullptr;
}

}  // namespace

Result<std::string> RenderWeeklyReport(ledger::Ledger& ledger, const TimeRange& week,
                                       const WeeklyOptions& options) {
  TimeRange previous{week.begin_ms - 7 * kMsPerDay, week.begin_ms};
  // The week is read once for every table but the hourly charts (and the week before):
  // each table is a grouping of the same rounded figures, from the same moment. The
  // hourly charts and the week before, queries of their own, are read on a second thread
  // meanwhile (or here, after the rest, where no thread can be had): the advice waits on
  // the database for much of its time.
  auto separately = std::async(std::launch::async | std::launch::deferred,
                               [&ledger, &week, &previous]() -> Result<std::pair<UsageReport, UsageReport>> {
                                 GPULEDGER_ASSIGN_OR_RETURN(UsageReport prev, ledger.Usage(previous, {Dimension::kTeam}));
                                 GPULEDGER_ASSIGN_OR_RETURN(UsageReport hours, ledger.Usage(week, {Dimension::kHour}));
                                 return std::pair{std::move(prev), std::move(hours)};
                               });
  GPULEDGER_ASSIGN_OR_RETURN(ledger::UsageRead read, ledger.ReadUsage(week));
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport by_team, read.By({Dimension::kTeam}));
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport by_pool, read.By({Dimension::kPool}));
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport by_kind, read.By({Dimension::kKind}));
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport by_experiment, read.By({Dimension::kTeam, Dimension::kExperiment}));
  GPULEDGER_ASSIGN_OR_RETURN(ledger::ChargebackReport chargeback, ledger.Chargeback(read, false));
  GPULEDGER_ASSIGN_OR_RETURN(auto waste, ledger.TopWaste(read, 5));
  GPULEDGER_ASSIGN_OR_RETURN(auto recs, ledger::Recommend(ledger, read));
  GPULEDGER_ASSIGN_OR_RETURN(auto prev_and_hours, separately.get());
  const UsageReport& prev_team = prev_and_hours.first;
  const UsageReport& by_hour = prev_and_hours.second;
  const std::vector<ledger::TimelinePoint> hourly = StepsOf(by_hour, week, kMsPerHour);
  const std::vector<ledger::TimelinePoint> daily = StepsOf(by_hour, week, kMsPerDay);

  const UsageRow& t = by_team.total;
  const UsageRow& p = prev_team.total;
  bool has_previous = p.total_ticks_ms() > 0;
  Money idle_cost = t.cost[1] + t.cost[2];
  int experiments = 0;
  Money experiment_cost;
  for (const auto& row : by_experiment.rows) {
    if (row.no_job || row.key[1] == "(unset)") continue;
    ++experiments;
    experiment_cost += row.total_cost();
  }

  std::string html = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">";
  html += fmt::format("<title>{} — {}</title><style>{}</style></head><body>", Esc(options.title),
                      IsoWeekOf(week.begin_ms), kStyle);
  // Every amount below is in the price book's one currency, named here and on each
  // money heading ("unnamed unit" when none was set).
  const std::string currency_label = by_team.currency.Label();
  const std::string currency = Esc(currency_label);
  html += fmt::format("<h1>{} — week {}</h1><div class=\"sub\">{} to {} (UTC) · {:.0f} GPU-hours of capacity · "
                      "<span data-currency=\"{}\">{}</span></div>",
                      Esc(options.title), IsoWeekOf(week.begin_ms), FormatTime(week.begin_ms).substr(0, 10),
                      FormatTime(week.end_ms - 1).substr(0, 10), t.total_gpu_hours(), currency,
                      Esc(CurrencyNote(by_team.currency)));

  if (by_team.window.end_ms < week.end_ms) {
    html += fmt::format("<p class=\"note\" data-note=\"data-end\">The data ends at {}: the figures cover the "
                        "week up to then.</p>",
                        FormatTime(by_team.window.end_ms));
  }
  if (!by_team.unpriced.empty()) {
    std::string what;
    double hours = 0;
    for (const auto& u : by_team.unpriced) {
      hours += u.gpu_hours();
      what += fmt::format("{}{} in pool {} ({:.1f} h)", what.empty() ? "" : "; ", u.model, u.pool, u.gpu_hours());
    }
    html += fmt::format("<p class=\"note bad\" data-note=\"unpriced\">{:.1f} GPU-hours had no price and cost 0 "
                        "here: {}.</p>",
                        hours, Esc(what));
  }
  html += "<div class=\"kpis\">";
  const Goals& goals = options.goals;
  const std::vector<ledger::TargetStatus> targets = ledger::JudgeTargets(goals, by_pool);
  const ledger::TargetStatus& fleet_target = targets.front();
  bool on_target = fleet_target.met;
  html += Kpi("Effective utilization", Pct(t.effective_utilization()),
              fmt::format("target {}{}", Pct(fleet_target.target),
                          has_previous ? " · " + DeltaPoints(t.effective_utilization(), p.effective_utilization()) + " w/w" : ""),
              on_target ? "good" : "bad");
  html += Kpi("Spend (" + currency_label + ")", Esc(t.total_cost().ToDisplay()),
              has_previous ? DeltaMoney(t.total_cost(), p.total_cost()) + " w/w" : "no previous week");
  html += Kpi("Allocated efficiency", Pct(t.allocated_efficiency()), "active / held by jobs");
  html += Kpi("Idle spend (" + currency_label + ")", Esc(idle_cost.ToDisplay()),
              fmt::format("{} of spend: held idle or unallocated",
                          Pct(t.total_cost().micros() ? static_cast<double>(idle_cost.micros()) /
                                                            static_cast<double>(t.total_cost().micros())
                                                      : 0.0)));
  html += Kpi("Cost per experiment",
              experiments ? Esc(Money::FromMicros(experiment_cost.micros() / experiments).ToDisplay()) : "—",
              fmt::format("{} experiments", experiments));
  html += "</div>";

  // The report leads with where the money is: the top advice, as `gpuledger recommend`
  // lists it (group by group, kind and team, the largest money first).
  html += html::AdviceSection(recs, options.recommendations, "week");

  html += "<h2>Where the capacity went</h2><div class=\"legend\">";
  for (size_t b = 0; b < kBucketCount; ++b) {
    html += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", kBucketColors[b],
                        BucketWords(kAllBuckets[b]));
  }
  html += "</div>" + StackedAreaSvg(hourly, kMsPerHour);
  html += "<h2>Effective utilization by day</h2>" + DailyUtilizationSvg(daily, fleet_target.target);

  // SLOs: the fleet and each pool against its utilization target, each budgeted team's
  // week against its budget's share of the week.
  html += "<h2>SLO status</h2><table><thead><tr><th class=\"l\">objective</th><th>target</th>"
          "<th>this week</th><th class=\"l\">status</th></tr></thead>";
  html += html::TargetRows(targets);
  for (const ledger::BudgetStatus& b : ledger::JudgeWeeklyBudgets(goals, by_team, week)) {
    html += html::SloRow("budget/" + b.team, "team " + b.team + " spend within budget", Esc(b.budget.ToDisplay()),
                         Esc(b.spent.ToDisplay()), b.within);
  }
  // The config's objectives at the week's end, judged as `gpuledger slo status` judges them.
  GPULEDGER_ASSIGN_OR_RETURN(std::string objective_rows, html::ObjectiveRows(ledger, options.objectives, week.end_ms));
  html += objective_rows;
  html += "</table>";

  html += "<h2>Teams</h2><table><thead><tr><th class=\"l\">team</th><th>GPU-hours</th><th>effective util.</th>"
          "<th>allocated eff.</th><th>idle cost</th><th>cost (" + currency + ")</th><th>w/w</th></tr></thead>";
  std::string causes_table =
      "<h2>Why held GPUs idled</h2><p>An estimate from the agents' evidence "
      "(docs/idle-causes.md).</p><table><thead><tr><th class=\"l\">team</th><th>input stall</th>"
      "<th>checkpoint stall</th><th>held idle</th><th>other</th></tr></thead>";
  for (const auto& row : by_team.rows) {
    if (!row.no_job) {
      causes_table += fmt::format("<tr><td>{}</td>", Esc(row.key[0]));
      for (IdleCause c : kAllIdleCauses) {
        causes_table += fmt::format("<td>{} h · {}</td>", GpuHours(row.idle_cause_gpu_hours(c)),
                                    Esc(row.idle_cause_cost[static_cast<size_t>(c)].ToDisplay()));
      }
      causes_table += "</tr>";
    }
    const UsageRow* before = FindRow(prev_team, row);
    html += fmt::format(
        "<tr data-team=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td data-cost=\"{}\">{}</td><td>{}</td></tr>",
        Esc(row.key[0]), Esc(row.key[0]), GpuHours(row.total_gpu_hours()), Pct(row.effective_utilization()),
        Pct(row.allocated_efficiency()), Esc((row.cost[1] + row.cost[2]).ToDisplay()),
        row.total_cost().ToString(), Esc(row.total_cost().ToDisplay()),
        before ? DeltaMoney(row.total_cost(), before->total_cost()) : "new");
  }
  html += fmt::format(
      "<tr class=\"total\" data-team=\"(total)\"><td>fleet</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
      "<td data-cost=\"{}\">{}</td><td>{}</td></tr></table>",
      GpuHours(t.total_gpu_hours()), Pct(t.effective_utilization()), Pct(t.allocated_efficiency()),
      Esc(idle_cost.ToDisplay()), t.total_cost().ToString(), Esc(t.total_cost().ToDisplay()),
      has_previous ? DeltaMoney(t.total_cost(), p.total_cost()) : "—");

  html += causes_table + "</table>";
  html += "<h2>Chargeback</h2><table><thead><tr><th class=\"l\">team</th><th class=\"l\">project</th>"
          "<th>GPU-hours</th><th>active</th><th>idle</th><th>cost (" + currency + ")</th></tr></thead>";
  for (const auto& l : chargeback.lines) {
    html += fmt::format(
        "<tr data-chargeback=\"{}/{}\"><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td data-cost=\"{}\">{}</td></tr>",
        Esc(l.team), Esc(l.project), Esc(l.team), Esc(l.project), GpuHours(l.gpu_hours), GpuHours(l.active_gpu_hours),
        GpuHours(l.idle_gpu_hours), l.total_cost().ToString(), Esc(l.total_cost().ToDisplay()));
  }
  html += fmt::format("<tr class=\"total\"><td>total</td><td></td><td></td><td></td><td></td><td data-cost=\"{}\">{}</td></tr></table>",
                      chargeback.total.ToString(), Esc(chargeback.total.ToDisplay()));

  html += fmt::format(
      "<h2>Pools and kinds of work</h2><p>Idle serving headroom is expected; idle training "
      "capacity is waste. Each pool is held to its own target ({} where none is set).</p>",
      Pct(goals.fleet_target));
  html += "<table><thead><tr><th class=\"l\">pool</th><th>GPU-hours</th><th>effective util.</th>"
          "<th>allocated eff.</th><th>unallocated</th><th>cost (" + currency + ")</th><th>target</th></tr></thead>";
  for (size_t i = 0; i < by_pool.rows.size(); ++i) {
    const UsageRow& row = by_pool.rows[i];
    double target = targets[i + 1].target;  // JudgeTargets keeps by_pool's order
    bool met = targets[i + 1].met;
    html += fmt::format(
        "<tr data-pool=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} h</td><td>{}</td>"
        "<td class=\"{}\">{} {}</td></tr>",
        Esc(row.key[0]), Esc(row.key[0]), GpuHours(row.total_gpu_hours()), Pct(row.effective_utilization()),
        Pct(row.allocated_efficiency()), GpuHours(row.gpu_hours(Bucket::kUnallocated)),
        Esc(row.total_cost().ToDisplay()), met ? "met" : "missed", Pct(target), met ? "met" : "missed");
  }
  html += fmt::format("</table><p>{}</p><table>", Esc(options.goals.Describe()));
  html += "</table><table><thead><tr><th class=\"l\">kind</th><th>GPU-hours held</th><th>allocated eff.</th><th>idle cost</th><th>cost (" + currency + ")</th></tr></thead>";
  for (const auto& row : by_kind.rows) {
    if (row.no_job) continue;
    html += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                        Esc(row.key[0]), GpuHours(row.total_gpu_hours()), Pct(row.allocated_efficiency()),
                        Esc(row.cost[1].ToDisplay()), Esc(row.total_cost().ToDisplay()));
  }
  html += "</table>";

  html += html::WasteSection(waste, currency);

  html += html::Footer(currency, t.activity_source(), week);
  return html;
}

}  // namespace gpuledger::report
