#include "report/quota_format.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "report/usage_format.h"

namespace gpuledger::report {
namespace {

std::string Percent(std::optional<double> ratio) { return ratio ? fmt::format("{:.1f}%", *ratio * 100) : "-"; }

std::string Thresholds(const std::vector<double>& shares) {
  std::string out;
  for (double t : shares) out += fmt::format("{}{:g}%", out.empty() ? "" : ",", t * 100);
  return out;
}

std::string Alerts(const ledger::QuotaStatus& s) {
  std::string out = Thresholds(s.crossed);
  if (s.projected_to_exceed) out += out.empty() ? "projected to exceed" : ",projected to exceed";
  return out.empty() ? "-" : out;
}

template <typename T, typename F>
nlohmann::json OrNull(const std::optional<T>& v, F f) {
  return v ? nlohmann::json(f(*v)) : nlohmann::json(nullptr);
}

}  // namespace

std::string RenderQuotasTable(const ledger::QuotaReport& r) {
  std::string out = fmt::format("quotas up to {} ({}; figures move with each whole hour of data)\n\n",
                                r.anchor_ms > 0 ? FormatTime(r.anchor_ms) : std::string("no data yet"),
                                CurrencyNote(r.currency));
  out += fmt::format("{:<22} {:<8} {:<5} {:>21} {:>7} {:>12} {:>27} {:>7} {:>14}  {}\n", "QUOTA", "PERIOD", "MODE",
                     "GPU-HOURS USED/QUOTA", "BURN", "PROJECTED H", "SPENT/BUDGET", "BURN", "PROJECTED", "ALERTS");
  for (const ledger::QuotaStatus& s : r.quotas) {
    std::string owner = s.spec.OwnerLabel();
    if (!s.spec.pool.empty()) owner += " pool:" + s.spec.pool;
    if (!s.spec.model.empty()) owner += " model:" + s.spec.model;
    std::string hours = s.spec.gpu_hours ? fmt::format("{:.1f}/{}", s.used.gpu_hours(), *s.spec.gpu_hours) : "-";
    std::string money = s.spec.budget ? fmt::format("{}/{}", s.used.cost.ToDisplay(), s.spec.budget->ToDisplay()) : "-";
    std::string projected_h =
        s.spec.gpu_hours && s.projected_gpu_hours ? fmt::format("{:.1f}", *s.projected_gpu_hours) : "-";
    std::string projected = s.spec.budget && s.projected_cost ? s.projected_cost->ToDisplay() : "-";
    out += fmt::format("{:<22} {:<8} {:<5} {:>21} {:>7} {:>12} {:>27} {:>7} {:>14}  {}\n", owner, s.period_label,
                       QuotaModeName(s.spec.mode), hours, Percent(s.gpu_hours_burn), projected_h, money,
                       Percent(s.budget_burn), projected, Alerts(s));
    out += fmt::format("  {} {}: {:.1f}% of the period elapsed; projection: {}\n", s.spec.OwnerLabel(),
                       s.period_label, s.elapsed * 100, s.basis_text);
  }
  if (r.quotas.empty()) out += "(no quotas: set [[quota]] or [budgets] in the config; docs/quotas.md)\n";
  return out;
}

nlohmann::json QuotasJson(const ledger::QuotaReport& r) {
  nlohmann::json j;
  j["anchor"] = r.anchor_ms > 0 ? nlohmann::json(FormatTime(r.anchor_ms)) : nlohmann::json(nullptr);
  AddCurrencyJson(j, r.currency);
  j["quotas"] = nlohmann::json::array();
  auto money = [](Money m) { return m.ToString(); };
  for (const ledger::QuotaStatus& s : r.quotas) {
    nlohmann::json q;
    q["owner"] = s.spec.owner == QuotaSpec::Owner::kTeam ? "team" : "project";
    q["name"] = s.spec.name;
    q["period"] = s.period_label;
    q["period_start"] = FormatTime(s.period.begin_ms);
    q["period_end"] = FormatTime(s.period.end_ms);
    q["to_date_end"] = FormatTime(s.to_date.end_ms);
    q["elapsed_ratio"] = s.elapsed;
    q["mode"] = QuotaModeName(s.spec.mode);
    q["source"] = s.spec.source;
    q["pool"] = s.spec.pool.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.spec.pool);
    q["model"] = s.spec.model.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.spec.model);
    q["gpu_hours_quota"] = OrNull(s.spec.gpu_hours, [](int64_t h) { return h; });
    q["gpu_hours_used"] = s.used.gpu_hours();
    q["gpu_hours_burn_ratio"] = OrNull(s.gpu_hours_burn, [](double v) { return v; });
    q["gpu_hours_projected"] = OrNull(s.projected_gpu_hours, [](double v) { return v; });
    q["budget"] = OrNull(s.spec.budget, money);
    q["spent"] = s.used.cost.ToString();
    q["budget_burn_ratio"] = OrNull(s.budget_burn, [](double v) { return v; });
    q["projected_cost"] = OrNull(s.projected_cost, money);
    nlohmann::json basis;
    basis["text"] = s.basis_text;
    basis["from"] = s.basis.empty() ? nlohmann::json(nullptr) : nlohmann::json(FormatTime(s.basis.begin_ms));
    basis["to"] = s.basis.empty() ? nlohmann::json(nullptr) : nlohmann::json(FormatTime(s.basis.end_ms));
    q["basis"] = basis;
    q["alert_at"] = s.spec.alert_at;
    q["crossed"] = s.crossed;
    q["projected_to_exceed"] = s.projected_to_exceed;
    j["quotas"].push_back(std::move(q));
  }
  return j;
}

nlohmann::json KueueClusterQueue(const ledger::KueueQueue& q) {
  nlohmann::json resource = {{"name", "nvidia.com/gpu"},
                             {"nominalQuota", q.nominal_gpus},
                             {"borrowingLimit", q.borrowing_limit_gpus}};
  nlohmann::json flavor = {{"name", q.flavor}, {"resources", nlohmann::json::array({resource})}};
  nlohmann::json group = {{"coveredResources", nlohmann::json::array({"nvidia.com/gpu"})},
                          {"flavors", nlohmann::json::array({flavor})}};
  return {{"apiVersion", "kueue.x-k8s.io/v1beta1"},
          {"kind", "ClusterQueue"},
          {"metadata", {{"name", q.name}, {"labels", {{"gpuledger.io/team", q.team}}}}},
          {"spec",
           {{"cohort", q.cohort},
            {"namespaceSelector", nlohmann::json::object()},
            {"resourceGroups", nlohmann::json::array({group})}}}};
}

namespace {

// Block-style YAML of a JSON value of objects, arrays, strings and integers. Strings are
// double-quoted (JSON's escaping is YAML's), so none is read as another type.
void WriteYaml(const nlohmann::json& v, int indent, std::string& out) {
  std::string pad(static_cast<size_t>(indent), ' ');
  auto scalar = [](const nlohmann::json& x) { return x.dump(); };
  auto nested = [](const nlohmann::json& x) { return (x.is_object() || x.is_array()) && !x.empty(); };
  if (v.is_object()) {
    for (const auto& [k, x] : v.items()) {
      if (nested(x)) {
        out += pad + k + ":\n";
        WriteYaml(x, indent + 2, out);
      } else {
        out += pad + k + ": " + (x.is_object() ? "{}" : x.is_array() ? "[]" : scalar(x)) + "\n";
      }
    }
  } else if (v.is_array()) {
    for (const auto& x : v) {
      if (!nested(x)) {
        out += pad + "- " + scalar(x) + "\n";
        continue;
      }
      // "- " then the first line of the item, the rest indented under it.
      std::string item;
      WriteYaml(x, indent + 2, item);
      out += pad + "- " + item.substr(static_cast<size_t>(indent) + 2);
    }
  }
}

}  // namespace

std::string KueueYaml(const std::vector<ledger::KueueQueue>& queues) {
  std::string out;
  for (const ledger::KueueQueue& q : queues) {
    out += fmt::format("---\n# team {}: from the quota at {} (docs/quotas.md)\n", q.team, q.source);
    WriteYaml(KueueClusterQueue(q), 0, out);
  }
  return out;
}

}  // namespace gpuledger::report
