#include "server/objectives_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "objectives/evaluate.h"

namespace gpuledger::server {
namespace {

using nlohmann::json;

bool Visible(const Principal& who, const ObjectiveSpec& spec) {
  if (who.role == Role::kAdmin) return true;
  return spec.scope.of == ObjectiveScope::Of::kTeam && who.MaySeeTeam(spec.scope.name);
}

json StatusJson(const objectives::ObjectiveStatus& st) {
  json alerts = json::array();
  for (const objectives::AlertStatus& a : st.alerts) {
    alerts.push_back({{"window", objectives::BurnWindowName(a.window)},
                      {"severity", objectives::SeverityName(a.window.severity)},
                      {"factor", a.window.factor},
                      {"long_burn", a.long_burn},
                      {"short_burn", a.short_burn},
                      {"firing", a.firing},
                      {"attainable", a.attainable}});
  }
  return {{"name", st.spec.name},
          {"kind", ObjectiveKindName(st.spec.kind)},
          {"scope", st.spec.scope.ToString()},
          {"target", st.spec.target},
          {"window", {{"from", FormatTime(st.window.begin_ms)}, {"to", FormatTime(st.window.end_ms)}}},
          {"at", FormatTime(st.at_ms)},
          {"value", st.tally.has_data ? json(st.tally.sli) : json(nullptr)},
          {"met", st.met},
          {"budget_left", st.budget_left},
          {"at_stake", st.at_stake.ToString()},
          {"firing", st.firing()},
          {"alerts", std::move(alerts)},
          {"source", st.spec.source}};
}

}  // namespace

HttpReply ObjectivesReply(const QueryContext& q, const QueryParams& params, const std::vector<ObjectiveSpec>& specs) {
  auto history = ParseDuration(Param(params, "history", "24h"));
  if (!history.ok()) return ErrorReply(history.status().WithContext("history"));
  if (*history < kMsPerHour || *history > 7 * kMsPerDay || *history % kMsPerHour != 0) {
    return ErrorReply(InvalidArgument("history: want whole hours from 1h to 7d"));
  }
  int64_t at = q.data_end_ms > 0 ? std::min(q.now_ms, q.data_end_ms) : q.now_ms;
  int64_t last_hour = FloorTo(at, kMsPerHour);
  json out;
  out["at"] = FormatTime(at);
  out["objectives"] = json::array();
  auto now_source = objectives::LedgerSource(q.ledger);
  // The history's hours read once, from the longest look-back the objectives need before it.
  int64_t look_back = objectives::kLongestBurnWindowMs;
  for (const ObjectiveSpec& s : specs) look_back = std::max(look_back, s.window_ms);
  TimeRange hours{last_hour - *history - look_back, last_hour};
  std::unique_ptr<objectives::ObjectiveSource> hourly;
  for (const ObjectiveSpec& spec : specs) {
    if (!Visible(q.who, spec)) continue;
    auto st = objectives::Evaluate(spec, *now_source, at);
    if (!st.ok()) return ErrorReply(st.status().WithContext(fmt::format("objective {} ({})", spec.name, spec.source)));
    json j = StatusJson(*st);
    if (!hourly) hourly = objectives::HourlySource(q.ledger, hours);
    json times = json::array(), budget = json::array(), burns = json::object();
    for (int64_t t = last_hour - *history + kMsPerHour; t <= last_hour; t += kMsPerHour) {
      auto past = objectives::Evaluate(spec, *hourly, t);
      if (!past.ok()) return ErrorReply(past.status().WithContext(fmt::format("objective {} at {}", spec.name, FormatTime(t))));
      times.push_back(FormatTime(t));
      budget.push_back(past->budget_left);
      for (const objectives::AlertStatus& a : past->alerts) {
        burns[std::string(objectives::BurnWindowName(a.window))].push_back(a.long_burn);
      }
    }
    j["history"] = {{"times", std::move(times)}, {"budget_left", std::move(budget)}, {"long_burn", std::move(burns)}};
    out["objectives"].push_back(std::move(j));
  }
  return {200, "application/json", out.dump(2) + "\n"};
}

}  // namespace gpuledger::server
