#include "report/usage_format.h"
#include "report/format_internal.h"
#include "report/table.h"

#include "core/csv.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

namespace gpuledger::report {
using ledger::UsageRow;

std::string Percent(double ratio) { return fmt::format("{:.1f}%", ratio * 100.0); }
std::string Hours(double h) { return fmt::format("{:.1f}", h); }

std::string Table(const std::vector<std::vector<std::string>>& rows, size_t left, bool total_row) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::string out;
  for (size_t n = 0; n < rows.size(); ++n) {
    std::string line;
    for (size_t i = 0; i < rows[n].size(); ++i) {
      if (i) line += "  ";
      line += i < left ? fmt::format("{:<{}}", rows[n][i], width[i])
                       : fmt::format("{:>{}}", rows[n][i], width[i]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
    if (n == 0 || (total_row && n + 2 == rows.size())) {
      size_t total = 0;
      for (size_t w : width) total += w + 2;
      out += std::string(total - 2, '-') + "\n";
    }
  }
  return out;
}

namespace {

nlohmann::json RowJson(const UsageRow& r, const std::vector<ledger::Dimension>& by) {
  nlohmann::json j;
  nlohmann::json key = nlohmann::json::object();
  for (size_t i = 0; i < by.size() && i < r.key.size(); ++i) {
    key[std::string(ledger::DimensionName(by[i]))] = r.key[i];
  }
  j["group"] = key;
  if (r.no_job) j["no_job"] = true;
  nlohmann::json buckets = nlohmann::json::object();
  for (Bucket b : kAllBuckets) {
    buckets[std::string(BucketName(b))] = {{"gpu_hours", r.gpu_hours(b)},
                                           {"cost", r.cost[static_cast<size_t>(b)].ToString()}};
  }
  nlohmann::json causes = nlohmann::json::object();
  for (IdleCause c : kAllIdleCauses) {
    causes[std::string(IdleCauseName(c))] = {{"gpu_hours", r.idle_cause_gpu_hours(c)},
                                             {"cost", r.idle_cause_cost[static_cast<size_t>(c)].ToString()}};
  }
  buckets["allocated_idle"]["causes"] = causes;
  j["buckets"] = buckets;
  j["gpu_hours"] = r.total_gpu_hours();
  j["cost"] = r.total_cost().ToString();
  j["effective_utilization"] = r.effective_utilization();
  j["allocated_efficiency"] = r.allocated_efficiency();
  j["activity_source"] = r.activity_source();
  if (r.unpriced_ticks_ms) {
    j["unpriced_gpu_hours"] =
        static_cast<double>(r.unpriced_ticks_ms) / static_cast<double>(kShareScale * kMsPerHour);
  }
  return j;
}

std::vector<std::string> UsageCells(const UsageRow& r) {
  std::vector<std::string> cells = r.key;
  cells.push_back(Hours(r.total_gpu_hours()));
  for (Bucket b : kAllBuckets) cells.push_back(Hours(r.gpu_hours(b)));
  cells.push_back(Percent(r.effective_utilization()));
  cells.push_back(Percent(r.allocated_efficiency()));
  cells.push_back(r.total_cost().ToDisplay());
  cells.push_back(std::string(r.activity_source()));
  return cells;
}

}  // namespace

std::string CostHeading(std::string_view what, const Currency& c) {
  return c.is_set() ? fmt::format("{} {}", what, c.name()) : fmt::format("{} ({})", what, c.Label());
}

void AddCurrencyJson(nlohmann::json& j, const Currency& c) {
  j["currency_unit"] = "1e-6";
  j["currency"] = c.is_set() ? nlohmann::json(c.name()) : nlohmann::json(nullptr);
  j["currency_kind"] = CurrencyKindName(c.kind());
}

std::string CurrencyNote(const Currency& c) {
  if (c.is_set()) return fmt::format("amounts in {}", c.name());
  return "amounts in an unnamed unit (no currency set: [prices] currency or unit in gpuledger.toml)";
}

std::string UnpricedNote(const std::vector<ledger::UnpricedCapacity>& unpriced) {
  if (unpriced.empty()) return "";
  double hours = 0;
  std::string what;
  for (const auto& u : unpriced) {
    hours += u.gpu_hours();
    what += fmt::format("{}{} in pool {} ({}) {:.1f} h", what.empty() ? "" : "; ",
                        u.model.empty() ? "(no model)" : u.model, u.pool.empty() ? "(none)" : u.pool,
                        CapacityTypeName(u.capacity_type), u.gpu_hours());
  }
  return fmt::format(
      "UNPRICED: {:.1f} GPU-hours had no price and cost 0 in these figures: {}. Set prices with "
      "`gpuledger prices --set FILE`.\n",
      hours, what);
}

nlohmann::json UnpricedJson(const std::vector<ledger::UnpricedCapacity>& unpriced) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& u : unpriced) {
    list.push_back({{"model", u.model},
                    {"pool", u.pool},
                    {"capacity_type", CapacityTypeName(u.capacity_type)},
                    {"gpu_hours", u.gpu_hours()}});
  }
  return list;
}

std::string WindowNote(const TimeRange& window, const TimeRange& requested) {
  if (requested.empty() || requested.end_ms == window.end_ms) return "";
  return fmt::format(" (asked until {}; the data ends there)", FormatTime(requested.end_ms));
}

Result<Format> ParseFormat(std::string_view text) {
  if (text == "table") return Format::kTable;
  if (text == "json") return Format::kJson;
  if (text == "csv") return Format::kCsv;
  return InvalidArgument(fmt::format("format \"{}\": want table, json or csv", text));
}

namespace {

// The pool of `row` when `r` is grouped by pool and `row` is not its total; else none
// (the fleet's target applies).
std::optional<std::string_view> PoolOf(const ledger::UsageReport& r, const UsageRow& row) {
  auto at = std::find(r.by.begin(), r.by.end(), ledger::Dimension::kPool);
  if (at == r.by.end() || &row == &r.total) return std::nullopt;
  return row.key[static_cast<size_t>(at - r.by.begin())];
}
// The target `row` is held to, and where it was set (the config's FILE:LINE, a flag, or
// the default).
double TargetOf(const ledger::UsageReport& r, const Goals& goals, const UsageRow& row) {
  auto pool = PoolOf(r, row);
  return pool ? goals.TargetFor(*pool) : goals.fleet_target;
}
std::string TargetSourceOf(const ledger::UsageReport& r, const Goals& goals, const UsageRow& row) {
  auto pool = PoolOf(r, row);
  return pool ? goals.TargetSourceFor(*pool) : goals.fleet_target_source;
}

}  // namespace

nlohmann::json UsageJson(const ledger::UsageReport& r, const Goals* goals) {
  nlohmann::json j;
  j["window"] = {{"from", FormatTime(r.window.begin_ms)}, {"to", FormatTime(r.window.end_ms)}};
  nlohmann::json by = nlohmann::json::array();
  for (auto d : r.by) by.push_back(ledger::DimensionName(d));
  j["by"] = by;
  AddCurrencyJson(j, r.currency);
  j["rows"] = nlohmann::json::array();
  for (const auto& row : r.rows) {
    j["rows"].push_back(RowJson(row, r.by));
    if (goals) j["rows"].back()["target"] = TargetOf(r, *goals, row);
    if (goals) j["rows"].back()["target_source"] = TargetSourceOf(r, *goals, row);
  }
  j["total"] = RowJson(r.total, r.by);
  if (goals) j["total"]["target"] = TargetOf(r, *goals, r.total);
  j["requested"] = {{"from", FormatTime(r.requested.begin_ms)}, {"to", FormatTime(r.requested.end_ms)}};
  j["unpriced"] = UnpricedJson(r.unpriced);
  if (goals) j["total"]["target_source"] = TargetSourceOf(r, *goals, r.total);
  return j;
}

std::string RenderUsage(const ledger::UsageReport& r, Format f, const Goals* goals) {
  if (f == Format::kJson) return UsageJson(r, goals).dump(2) + "\n";
  if (f == Format::kCsv) {
    std::string out;
    for (auto d : r.by) out += std::string(ledger::DimensionName(d)) + ",";
    out += "gpu_hours";
    for (Bucket b : kAllBuckets) out += fmt::format(",{}_gpu_hours", BucketName(b));
    for (Bucket b : kAllBuckets) out += fmt::format(",{}_cost", BucketName(b));
    for (IdleCause c : kAllIdleCauses) out += fmt::format(",{}_gpu_hours,{}_cost", IdleCauseName(c), IdleCauseName(c));
    out += ",cost,effective_utilization,allocated_efficiency,activity_source,unpriced_gpu_hours,currency\n";
    auto line = [&](const UsageRow& row) {
      for (const auto& k : row.key) out += CsvField(k) + ",";
      out += fmt::format("{:.6f}", row.total_gpu_hours());
      for (Bucket b : kAllBuckets) out += fmt::format(",{:.6f}", row.gpu_hours(b));
      for (Bucket b : kAllBuckets) out += "," + row.cost[static_cast<size_t>(b)].ToString();
      for (IdleCause c : kAllIdleCauses) {
        out += fmt::format(",{:.6f},{}", row.idle_cause_gpu_hours(c),
                           row.idle_cause_cost[static_cast<size_t>(c)].ToString());
      }
      out += fmt::format(",{},{:.6f},{:.6f},{},{:.6f},{}\n", row.total_cost().ToString(),
                         row.effective_utilization(), row.allocated_efficiency(),
                         row.activity_source(),
                         static_cast<double>(row.unpriced_ticks_ms) /
                             static_cast<double>(kShareScale * kMsPerHour),
                         CsvField(r.currency.name()));
    };
    for (const auto& row : r.rows) line(row);
    line(r.total);
    return out;
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header;
  for (auto d : r.by) header.emplace_back(ledger::DimensionName(d));
  for (const char* h : {"GPU-h", "active", "alloc-idle", "unalloc", "unavail", "unmon",
                        "eff.util", "alloc.eff"}) {
    header.emplace_back(h);
  }
  header.push_back(CostHeading("cost", r.currency));
  header.emplace_back("activity");
  if (goals) header.emplace_back("target");
  rows.push_back(header);
  auto cells = [&](const UsageRow& row) {
    std::vector<std::string> c = UsageCells(row);
    if (goals) c.push_back(Percent(TargetOf(r, *goals, row)));
    return c;
  };
  for (const auto& row : r.rows) rows.push_back(cells(row));
  rows.push_back(cells(r.total));
  return fmt::format("Usage {} .. {}{} (GPU-hours; {})\n", FormatTime(r.window.begin_ms),
                     FormatTime(r.window.end_ms), WindowNote(r.window, r.requested), CurrencyNote(r.currency)) +
         Table(rows, r.by.size()) + UnpricedNote(r.unpriced) + (goals ? goals->Describe() + "\n" : "");
}

std::string RenderChargeback(const ledger::ChargebackReport& r, Format f) {
  std::string from = FormatTime(r.period.begin_ms), to = FormatTime(r.period.end_ms);
  if (f == Format::kJson) {
    nlohmann::json j;
    j["period"] = {{"from", from}, {"to", to}};
    j["share_idle"] = r.share_idle;
    AddCurrencyJson(j, r.currency);
    j["lines"] = nlohmann::json::array();
    for (const auto& l : r.lines) {
      j["lines"].push_back({{"team", l.team},
                            {"project", l.project},
                            {"gpu_hours", l.gpu_hours},
                            {"active_gpu_hours", l.active_gpu_hours},
                            {"idle_gpu_hours", l.idle_gpu_hours},
                            {"direct_cost", l.direct_cost.ToString()},
                            {"shared_idle_cost", l.shared_idle_cost.ToString()},
                            {"idle_cost_by_cause",
                             {{"input_stall", l.idle_cost_by_cause[0].ToString()},
                              {"checkpoint_stall", l.idle_cost_by_cause[1].ToString()},
                              {"held_idle", l.idle_cost_by_cause[2].ToString()},
                              {"other", l.idle_cost_by_cause[3].ToString()}}},
                            {"total_cost", l.total_cost().ToString()}});
      if (l.capacity) j["lines"].back()["capacity"] = BucketName(*l.capacity);
      if (!l.correction_for.empty()) j["lines"].back()["correction_for"] = l.correction_for;
    }
    j["total"] = r.total.ToString();
    if (r.closed) {
      j["closed"] = {{"month", r.closed->month}, {"closed_at", FormatTime(r.closed->closed_at_ms)},
                     {"closed_by", r.closed->closed_by}};
    }
    if (!r.overlaps_closed.empty()) j["overlaps_closed"] = r.overlaps_closed;
    j["unpriced"] = UnpricedJson(r.unpriced);
    return j.dump(2) + "\n";
  }
  if (f == Format::kCsv) {
    std::string out =
        "period_start,period_end,team,project,gpu_hours,active_gpu_hours,idle_gpu_hours,"
        "direct_cost,shared_idle_cost,total_cost,input_stall_cost,checkpoint_stall_cost,"
        "held_idle_cost,other_idle_cost,unpriced_gpu_hours,correction_for,currency\n";
    for (const auto& l : r.lines) {
      out += fmt::format("{},{},{},{},{:.6f},{:.6f},{:.6f},{},{},{},{},{},{},{},{:.6f},{},{}\n", from, to,
                         CsvField(l.team), CsvField(l.project), l.gpu_hours, l.active_gpu_hours,
                         l.idle_gpu_hours, l.direct_cost.ToString(), l.shared_idle_cost.ToString(),
                         l.total_cost().ToString(), l.idle_cost_by_cause[0].ToString(),
                         l.idle_cost_by_cause[1].ToString(), l.idle_cost_by_cause[2].ToString(),
                         l.idle_cost_by_cause[3].ToString(), l.unpriced_gpu_hours, l.correction_for,
                         CsvField(r.currency.name()));
    }
    return out;
  }
  std::vector<std::vector<std::string>> rows = {
      {"team", "project", "GPU-h", "active", "idle", "direct", "shared idle", CostHeading("total", r.currency)}};
  for (const auto& l : r.lines) {
    std::string project = l.correction_for.empty() ? l.project
                          : l.project.empty()      ? fmt::format("(correction for {})", l.correction_for)
                                                   : fmt::format("{} (correction for {})", l.project, l.correction_for);
    rows.push_back({l.team, project, Hours(l.gpu_hours), Hours(l.active_gpu_hours),
                    Hours(l.idle_gpu_hours), l.direct_cost.ToDisplay(),
                    l.shared_idle_cost.ToDisplay(), l.total_cost().ToDisplay()});
  }
  rows.push_back({"(total)", "", "", "", "", "", "", r.total.ToDisplay()});
  std::string note;
  if (r.closed) {
    note = fmt::format("Closed {} by {}: as frozen then; what changed since is corrected in the first open month.\n",
                       FormatTime(r.closed->closed_at_ms), r.closed->closed_by);
  } else if (!r.overlaps_closed.empty()) {
    std::string months;
    for (const auto& m : r.overlaps_closed) months += (months.empty() ? "" : ", ") + m;
    note = fmt::format("Live figures over closed months ({}): their own chargebacks are as frozen.\n", months);
  }
  return fmt::format("Chargeback {} .. {}{} ({})\n", from, to,
                     r.share_idle ? " (unused capacity shared in proportion to use)" : "", CurrencyNote(r.currency)) +
         Table(rows, 2) + note + UnpricedNote(r.unpriced);
}

std::string RenderFleetSummary(const ledger::UsageReport& by_pool,
                               const ledger::UsageReport& by_team,
                               const std::vector<ledger::WasteItem>& waste) {
  const UsageRow& t = by_pool.total;
  std::string out = fmt::format("Fleet {} .. {} ({})\n\n", FormatTime(by_pool.window.begin_ms),
                                FormatTime(by_pool.window.end_ms), CurrencyNote(by_pool.currency));
  out += fmt::format("  effective utilization  {}   (active / all capacity)\n",
                     Percent(t.effective_utilization()));
  out += fmt::format("  allocated efficiency   {}   (active / held by jobs)\n",
                     Percent(t.allocated_efficiency()));
  out += fmt::format("  capacity               {} GPU-hours, {}{}\n\n", Hours(t.total_gpu_hours()),
                     t.total_cost().ToDisplay(), by_pool.currency.Suffix());
  out += UnpricedNote(by_pool.unpriced);
  std::vector<std::vector<std::string>> buckets = {{"bucket", "GPU-h", "share", CostHeading("cost", by_pool.currency)}};
  for (Bucket b : kAllBuckets) {
    double share = t.total_ticks_ms() ? static_cast<double>(t.gpu_ticks_ms[static_cast<size_t>(b)]) /
                                            static_cast<double>(t.total_ticks_ms())
                                      : 0.0;
    buckets.push_back({std::string(BucketName(b)), Hours(t.gpu_hours(b)), Percent(share),
                       t.cost[static_cast<size_t>(b)].ToDisplay()});
  }
  buckets.push_back({"(total)", Hours(t.total_gpu_hours()), "100.0%", t.total_cost().ToDisplay()});
  out += Table(buckets, 1) + "\n";
  out += RenderUsage(by_pool, Format::kTable) + "\n";
  out += RenderUsage(by_team, Format::kTable) + "\n";
  out += "Largest sources of waste\n";
  std::vector<std::vector<std::string>> w = {{"#", "what", "bucket", "GPU-h", CostHeading("cost", by_pool.currency)}};
  for (size_t i = 0; i < waste.size(); ++i) {
    w.push_back({std::to_string(i + 1), waste[i].what, std::string(BucketName(waste[i].bucket)),
                 Hours(waste[i].gpu_hours), waste[i].cost.ToDisplay()});
  }
  out += Table(w, 3, /*total_row=*/false);
  return out;
}

std::string RecommendationsJson(const std::vector<ledger::Recommendation>& recs,
                                const TimeRange& window) {
  nlohmann::json list = nlohmann::json::array();
  // In the order every surface lists them: group by group, the largest money first.
  for (const auto& r : ledger::TopAdvice(recs)) {
    list.push_back({{"kind", ledger::RecommendationKindName(r.kind)},
                    {"job", r.job_id},
                    {"team", r.team},
                    {"project", r.project},
                    {"experiment", r.experiment},
                    {"pool", r.pool},
                    {"job_kind", JobKindName(r.job_kind)},
                    {"action", r.action},
                    {"evidence", r.evidence},
                    {"remedies", r.remedies},
                    {"confidence", r.confidence},
                    {"gpu_hours", r.gpu_hours},
                    {"cost", r.cost.ToString()},
                    {"lost", r.lost.ToString()},
                    {"lost_per_week", r.lost_per_week.ToString()},
                    {"saving", r.saving.ToString()},
                    {"net_saving", r.net_saving.ToString()}});
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : ledger::GroupAdvice(recs)) {
    groups.push_back({{"kind", ledger::RecommendationKindName(g.kind)},
                      {"team", g.team},
                      {"count", g.items.size()},
                      {"net_saving", g.net_saving.ToString()}});
  }
  ledger::AdviceTotals totals = ledger::TotalAdvice(recs);
  auto totals_json = [](const std::vector<ledger::AdviceTotal>& v, const char* key) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : v) out.push_back({{key, t.key}, {"count", t.count}, {"net_saving", t.net_saving.ToString()}});
    return out;
  };
  nlohmann::json out = {{"window", {{"from", FormatTime(window.begin_ms)}, {"to", FormatTime(window.end_ms)}}},
                        {"recommendations", list},
                        {"groups", groups},
                        {"totals",
                         {{"by_kind", totals_json(totals.by_kind, "kind")},
                          {"by_team", totals_json(totals.by_team, "team")},
                          {"by_pool", totals_json(totals.by_pool, "pool")}}},
                        {"total_net_saving", ledger::TotalNetSaving(recs).ToString()},
                        {"combined", "each job's advice compounds, largest saving first; the total adds net savings, at most each job's cost"}};
  return out.dump(2) + "\n";
}

std::string RecommendationsText(const std::vector<ledger::Recommendation>& recs, const TimeRange& window) {
  std::string out = fmt::format("Advice {} .. {}: {} piece{}, saving {} net\n\n", FormatTime(window.begin_ms),
                                FormatTime(window.end_ms), recs.size(), recs.size() == 1 ? "" : "s",
                                ledger::TotalNetSaving(recs).ToDisplay());
  ledger::AdviceTotals totals = ledger::TotalAdvice(recs);
  for (const auto& [title, v] : {std::pair{"kind", &totals.by_kind}, {"team", &totals.by_team}, {"pool", &totals.by_pool}}) {
    std::vector<std::vector<std::string>> rows = {{title, "advice", "net saving"}};
    for (const auto& t : *v) rows.push_back({t.key.empty() ? "(none)" : t.key, std::to_string(t.count), t.net_saving.ToDisplay()});
    out += Table(rows, 1, /*total_row=*/false) + "\n";
  }
  for (const auto& g : ledger::GroupAdvice(recs)) {
    out += fmt::format("== {} / {}: {} piece{}, {} net\n", ledger::RecommendationKindName(g.kind), g.team,
                       g.items.size(), g.items.size() == 1 ? "" : "s", g.net_saving.ToDisplay());
    for (const ledger::Recommendation* r : g.items) {
      out += fmt::format("  job {} ({} / {}{}, {}, pool {})\n    {}\n    evidence: {}\n", r->job_id, r->team,
                         r->project, r->experiment.empty() ? "" : " / " + r->experiment, JobKindName(r->job_kind),
                         r->pool, r->action, r->evidence);
      if (!r->remedies.empty()) out += fmt::format("    usual remedies: {}\n", r->remedies);
      out += fmt::format("    saving {} alone, {} net, of {}; {} confidence\n", r->saving.ToDisplay(),
                         r->net_saving.ToDisplay(), r->cost.ToDisplay(), r->confidence);
    }
    out += "\n";
  }
  out += "A job's advice compounds (each piece applies to what the larger ones leave), so no job saves more than it cost.\n";
  return out;
}

std::string ServingJson(const std::string& job_id,
                        const std::vector<ledger::JobServingReport>& reports) {
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  auto dist = [](const ledger::Distribution& d) {
    return nlohmann::json{{"samples", d.n}, {"mean", d.mean}, {"p50", d.p50}, {"p95", d.p95}, {"max", d.max}};
  };
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : reports) {
    const ledger::ServingReport& x = r.report;
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& [le, n] : x.tokens_per_step_histogram) {
      steps.push_back({{"le", std::isinf(le) ? nlohmann::json("+Inf") : nlohmann::json(le)}, {"steps", n}});
    }
    list.push_back({{"engine", r.engine},
                    {"model", r.model},
                    {"seconds", x.seconds},
                    {"queue_depth", dist(x.queue_depth)},
                    {"running", dist(x.running)},
                    {"kv_cache_usage", dist(x.kv_cache_usage)},
                    {"kv_cache_full_share", x.kv_cache_full_share},
                    {"prefill_share", opt(x.prefill_share)},
                    {"tokens_per_second", opt(x.tokens_per_second)},
                    {"generation_tokens_per_second", opt(x.generation_tokens_per_second)},
                    {"mean_batch_size", opt(x.mean_batch_size)},
                    {"mean_tokens_per_step", opt(x.mean_tokens_per_step)},
                    {"tokens_per_step", steps},
                    {"preemptions_per_hour", opt(x.preemptions_per_hour)},
                    {"queue_seconds_per_request", opt(x.queue_seconds_per_request)},
                    {"cost_per_million_tokens", x.cost_per_million_tokens
                                                     ? nlohmann::json(x.cost_per_million_tokens->ToString())
                                                     : nlohmann::json(nullptr)}});
  }
  return nlohmann::json{{"job", job_id}, {"engines", list}}.dump(2) + "\n";
}

}  // namespace gpuledger::report
