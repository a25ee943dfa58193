#include "report/html_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "objectives/evaluate.h"

namespace gpuledger::report::html {

std::string Esc(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Pct(double r) { return fmt::format("{:.1f}%", r * 100.0); }

// "7d", "36h", "90m": an objective's window as a config writes it.
std::string WindowText(int64_t ms) {
  if (ms % kMsPerDay == 0) return fmt::format("{}d", ms / kMsPerDay);
  if (ms % kMsPerHour == 0) return fmt::format("{}h", ms / kMsPerHour);
  return fmt::format("{}m", ms / kMsPerMinute);
}

// GPU-hours as the dashboard shows them: one decimal, thousands grouped ("12,288.0").
std::string GpuHours(double h) {
  std::string text = fmt::format("{:.1f}", h);
  size_t digits_end = text.find('.');
  size_t digits_begin = text[0] == '-' ? 1 : 0;
  for (size_t i = digits_end; i > digits_begin + 3; i -= 3) text.insert(i - 3, ",");
  return text;
}

// A bucket in words, as the dashboard's legends say it: "allocated idle", not
// "allocated_idle".
std::string BucketWords(Bucket b) {
  std::string name(BucketName(b));
  std::replace(name.begin(), name.end(), '_', ' ');
  return name;
}

// Why a source of waste cost what it did: the idle causes by money for held GPUs, what
// the bucket means otherwise.
std::string WasteCauses(const ledger::WasteItem& w) {
  switch (w.bucket) {
    case Bucket::kUnallocated: return "no job held it";
    case Bucket::kUnavailable: return "unhealthy or lost";
    case Bucket::kUnmonitored: return "no telemetry (agent or exporter silent)";
    default: break;
  }
  std::vector<std::pair<Money, IdleCause>> causes;
  for (IdleCause c : kAllIdleCauses) {
    Money m = w.idle_cause_cost[static_cast<size_t>(c)];
    if (m != Money()) causes.push_back({m, c});
  }
  std::stable_sort(causes.begin(), causes.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [m, c] : causes) {
    std::string name(IdleCauseName(c));
    std::replace(name.begin(), name.end(), '_', ' ');
    out += fmt::format("{}{} {}", out.empty() ? "" : " · ", name, m.ToDisplay());
  }
  return out.empty() ? "—" : out;
}

// "+3.2 pts" / "-1.0 pts" for ratios, "+12.5%" for money.
std::string DeltaPoints(double now, double before) {
  return fmt::format("{:+.1f} pts", (now - before) * 100.0);
}
std::string DeltaMoney(Money now, Money before) {
  if (before == Money()) return "new";
  double change = static_cast<double>(now.micros() - before.micros()) /
                  static_cast<double>(before.micros());
  return fmt::format("{:+.1f}%", change * 100.0);
}

std::string Kpi(const std::string& label, const std::string& value, const std::string& detail,
                const std::string& cls) {
  return fmt::format(
      "<div class=\"kpi {}\"><div class=\"label\">{}</div><div class=\"value\">{}</div>"
      "<div class=\"detail\">{}</div></div>",
      cls, Esc(label), value, detail);
}

const char* const kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1f24;margin:32px auto;max-width:960px;padding:0 16px}
h1{font-size:24px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e3e6ea;padding-bottom:4px}
.sub{color:#59636e;margin-bottom:20px}
.kpis{display:grid;grid-template-columns:repeat(5,1fr);gap:10px}
.kpi{border:1px solid #e3e6ea;border-radius:8px;padding:10px 12px}
.kpi .label{color:#59636e;font-size:12px;text-transform:uppercase;letter-spacing:.03em}
.kpi .value{font-size:22px;font-weight:600;margin:2px 0}
.kpi .detail{color:#59636e;font-size:12px}
.kpi.bad .value{color:#c62828} .kpi.good .value{color:#2e7d32}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:5px 8px;border-bottom:1px solid #eef0f2;text-align:right}
th:first-child,td:first-child,td.l,th.l{text-align:left}
th{font-size:12px;color:#59636e;font-weight:600}
tr.total td{font-weight:600;border-top:2px solid #c9ced4}
.chart{width:100%;height:auto} .grid{stroke:#eef0f2} .axis{font-size:11px;fill:#59636e}
.target{stroke:#1b1f24;stroke-dasharray:4 3}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
.met{color:#2e7d32;font-weight:600} .missed{color:#c62828;font-weight:600}
td.id{white-space:nowrap}
table.advice{table-layout:fixed;width:100%} table.advice td{font-size:12px;vertical-align:top;overflow-wrap:anywhere}
table.advice th:nth-child(1){width:9%} table.advice th:nth-child(2){width:10%} table.advice th:nth-child(3){width:7%}
table.advice th:nth-child(4){width:24%} table.advice th:nth-child(5){width:25%} table.advice th:nth-child(6){width:7%}
table.advice th:nth-child(7),table.advice th:nth-child(8){width:9%}
table.advice td:nth-child(n+7){white-space:nowrap;overflow-wrap:normal} table.advice td.id{white-space:normal;text-align:left}
.note{color:#59636e} .note.bad{color:#c62828}
.assumptions{color:#59636e;font-size:12px}
footer{margin-top:32px;color:#59636e;font-size:12px}
@media print{body{margin:0;max-width:none}.kpis{grid-template-columns:repeat(5,1fr)}
h2,h2+p,h2+.legend{break-after:avoid;break-inside:avoid}
svg,tr,.kpis{break-inside:avoid}
table{break-inside:auto}}
)";

std::string Footer(const std::string& currency, std::string_view activity_source, const TimeRange& span) {
  return fmt::format(
      "<footer>gpuledger · costs in {} are exact to the micro-unit and add up across every table · "
      "activity from {} · generated from the ledger for {} .. {}</footer></body></html>\n",
      currency, activity_source, FormatTime(span.begin_ms), FormatTime(span.end_ms));
}

std::string AdviceSection(const std::vector<ledger::Recommendation>& recs, size_t n, std::string_view period_words) {
  std::vector<ledger::Recommendation> top = ledger::TopAdvice(recs, n);
  std::string html = fmt::format(
      "<h2>Where the money is</h2><p>The top {} of {} pieces of advice from the {}'s samples "
      "(<code>gpuledger recommend</code>), saving an estimated {} in all over a {} like this one, net: a "
      "job's pieces of advice compound (each applies to what the larger ones leave), so no job saves more "
      "than it cost.</p>",
      top.size(), recs.size(), period_words, Esc(ledger::TotalNetSaving(recs).ToDisplay()), period_words);
  html += "<table class=\"advice\"><thead><tr><th class=\"l\">advice</th><th class=\"l\">job</th><th class=\"l\">team</th>"
          "<th class=\"l\">action</th><th class=\"l\">evidence</th><th class=\"l\">confidence</th>"
          "<th>saving alone</th><th>net saving</th></tr></thead>";
  for (const auto& r : top) {
    html += fmt::format(
        "<tr data-recommendation=\"{}\"><td class=\"l\">{}</td><td class=\"id\">{}</td>"
        "<td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l ev\">{}</td><td class=\"l\">{}</td><td>{}</td>"
        "<td>{}</td></tr>",
        Esc(r.job_id), Esc(std::string(ledger::RecommendationKindName(r.kind))),
        Esc(r.job_id), Esc(r.team), Esc(r.action), Esc(r.evidence), Esc(r.confidence), Esc(r.saving.ToDisplay()),
        Esc(r.net_saving.ToDisplay()));
  }
  return html + "</table>";
}

std::string SloRow(const std::string& key, const std::string& what, const std::string& target,
                   const std::string& actual, bool met) {
  return fmt::format("<tr data-slo=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"l {}\">{}</td></tr>", Esc(key),
                     Esc(what), target, actual, met ? "met" : "missed", met ? "met" : "missed");
}

std::string TargetRows(const std::vector<ledger::TargetStatus>& targets) {
  std::string html;
  for (const ledger::TargetStatus& st : targets) {
    std::string what = st.scope == "fleet" ? "fleet effective utilization"
                                           : "pool " + st.scope.substr(5) + " effective utilization";
    html += SloRow(st.scope == "fleet" ? "fleet" : "pool/" + st.scope.substr(5), what, Pct(st.target),
                   Pct(st.actual), st.met);
  }
  return html;
}

Result<std::string> ObjectiveRows(ledger::Ledger& ledger, const std::vector<ObjectiveSpec>& objectives,
                                  int64_t at_ms) {
  std::string html;
  auto source = objectives::LedgerSource(ledger);
  for (const ObjectiveSpec& spec : objectives) {
    GPULEDGER_ASSIGN_OR_RETURN(objectives::ObjectiveStatus st, objectives::Evaluate(spec, *source, at_ms));
    std::string value = !st.tally.has_data                     ? "no data"
                        : spec.kind == ObjectiveKind::kBudget ? fmt::format("{:.2f}x pace", st.tally.sli)
                                                               : Pct(st.tally.sli);
    std::string what = fmt::format("{} ({} {} over {}; error budget left {}{})", spec.name,
                                   ObjectiveKindName(spec.kind), spec.scope.ToString(), WindowText(spec.window_ms),
                                   Pct(st.budget_left), st.firing() ? "; alert firing" : "");
    html += SloRow("objective/" + spec.name, what, Pct(spec.target), value, st.met);
  }
  return html;
}

std::string WasteSection(const std::vector<ledger::WasteItem>& waste, const std::string& currency) {
  std::string html = "<h2>Largest sources of waste</h2><table><thead><tr><th class=\"l\">#</th><th class=\"l\">what</th>"
                     "<th class=\"l\">bucket</th><th>GPU-hours</th><th>cost (" + currency +
                     ")</th><th class=\"l\">causes</th></tr></thead>";
  for (size_t i = 0; i < waste.size(); ++i) {
    html += fmt::format(
        "<tr data-waste=\"{}\" data-cost=\"{}\"><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td>"
        "<td>{}</td><td class=\"l\">{}</td></tr>",
        i + 1, waste[i].cost.ToString(), i + 1, Esc(waste[i].what), BucketWords(waste[i].bucket),
        GpuHours(waste[i].gpu_hours), Esc(waste[i].cost.ToDisplay()), Esc(WasteCauses(waste[i])));
  }
  return html + "</table>";
}

}  // namespace gpuledger::report::html
