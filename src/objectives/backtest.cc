#include "objectives/backtest.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "ledger/objective_inputs.h"

namespace gpuledger::objectives {

Result<BacktestReport> Backtest(ledger::Ledger& ledger, const std::vector<ObjectiveSpec>& objectives,
                                const std::vector<InterventionRule>& rules, const TimeRange& window, int64_t step_ms) {
  if (step_ms <= 0 || step_ms % kMsPerHour != 0) {
    return InvalidArgument(fmt::format("backtest step {} ms: want whole hours", step_ms));
  }
  BacktestReport report;
  report.window = window;
  report.step_ms = step_ms;
  int64_t history_ms = kLongestBurnWindowMs;
  for (const ObjectiveSpec& o : objectives) history_ms = std::max(history_ms, o.window_ms);
  std::unique_ptr<ObjectiveSource> source = HourlySource(ledger, {window.begin_ms - history_ms, window.end_ms});
  for (const ObjectiveSpec& o : objectives) report.objectives.push_back({.name = o.name});
  for (const InterventionRule& r : rules) report.rules.push_back({.name = r.name});
  auto rule_summary = [&](const std::string& name) -> RuleSummary& {
    return *std::find_if(report.rules.begin(), report.rules.end(), [&](const RuleSummary& s) { return s.name == name; });
  };
  std::map<std::string, std::set<std::string>> acted_on;  // rule -> jobs

  std::vector<Job> jobs;
  if (!rules.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(jobs, ledger.Jobs());
  }
  std::map<std::string, const Job*> job_by_id;
  for (const Job& j : jobs) job_by_id[j.id] = &j;
  // As if enforced: the replay asks what the rules would have done.
  std::vector<InterventionRule> enforced = rules;
  for (InterventionRule& r : enforced) r.enforce = true;
  InterventionHistory history;
  std::set<std::string> stopped;
  std::map<std::pair<std::string, size_t>, size_t> open;  // (objective, alert) -> episode index

  for (int64_t at = FloorTo(window.begin_ms, step_ms) + step_ms; at <= window.end_ms; at += step_ms) {
    std::set<std::string> firing;
    for (size_t o = 0; o < objectives.size(); ++o) {
      GPULEDGER_ASSIGN_OR_RETURN(ObjectiveStatus st, Evaluate(objectives[o], *source, at));
      ObjectiveSummary& sum = report.objectives[o];
      ++sum.steps;
      if (st.met) ++sum.steps_met;
      if (st.firing()) {
        ++sum.steps_firing;
        firing.insert(objectives[o].name);
      }
      for (size_t a = 0; a < st.alerts.size(); ++a) {
        const AlertStatus& alert = st.alerts[a];
        auto key = std::make_pair(objectives[o].name, a);
        auto it = open.find(key);
        if (alert.firing && it == open.end()) {
          open[key] = report.alerts.size();
          report.alerts.push_back({objectives[o].name, alert.window, at, std::nullopt, alert.long_burn});
        } else if (alert.firing) {
          report.alerts[it->second].peak_burn = std::max(report.alerts[it->second].peak_burn, alert.long_burn);
        } else if (it != open.end()) {
          report.alerts[it->second].resolved_ms = at;
          open.erase(it);
        }
      }
      sum.last = std::move(st);
    }
    if (rules.empty()) continue;
    GPULEDGER_ASSIGN_OR_RETURN(DecisionInputs in, GatherDecisionInputs(ledger, at, rules, std::move(firing)));
    // A job stopped earlier in the replay holds nothing and waits for nothing now.
    std::erase_if(in.held, [&](const ledger::HeldJob& h) { return stopped.count(h.job.id) > 0; });
    std::erase_if(in.pending, [&](const Job& j) { return stopped.count(j.id) > 0; });
    for (Decision& d : Decide(enforced, in, history)) {
      RuleSummary& rs = rule_summary(d.rule);
      if (d.outcome == Outcome::kSkipped) {
        ++report.skipped;
        ++rs.skipped;
        continue;
      }
      d.outcome = d.outcome == Outcome::kTaken ? Outcome::kProposed : d.outcome;
      if (d.outcome == Outcome::kWarned) {
        ++rs.warned;
      } else {
        ++rs.proposed;
        acted_on[d.rule].insert(d.job.id);
      }
      bool frees = d.outcome == Outcome::kProposed &&
                   (d.action == InterventionAction::kStop || d.action == InterventionAction::kRequeue);
      if (frees) {
        stopped.insert(d.job.id);
        auto j = job_by_id.find(d.job.id);
        int64_t until = window.end_ms;
        if (j != job_by_id.end() && j->second->end_ms) until = std::min(until, *j->second->end_ms);
        until = std::max(until, at);
        FreedCapacity f{.decision = d, .until_ms = until};
        f.gpu_hours = d.gpus * static_cast<double>(until - at) / static_cast<double>(kMsPerHour);
        CostNumerator n = static_cast<CostNumerator>(d.per_hour_freed.micros()) * (until - at);
        f.money = Money::FromMicros(static_cast<int64_t>((2 * n + kMsPerHour) / (2 * kMsPerHour)));
        report.gpu_hours_freed += f.gpu_hours;
        report.money_freed += f.money;
        rs.gpu_hours_freed += f.gpu_hours;
        rs.money_freed += f.money;
        report.freed.push_back(std::move(f));
      }
      report.decisions.push_back(std::move(d));
    }
  }
  for (RuleSummary& rs : report.rules) rs.jobs = static_cast<int64_t>(acted_on[rs.name].size());
  for (const ObjectiveSpec& o : objectives) {
    for (const BurnWindow& w : kBurnWindows) {
      AlertSummary sum{.objective = o.name, .window = w};
      for (const AlertEpisode& e : report.alerts) {
        if (e.objective != o.name || e.window.long_ms != w.long_ms) continue;
        ++sum.episodes;
        sum.firing_ms += e.resolved_ms.value_or(window.end_ms) - e.fired_ms;
        sum.peak_burn = std::max(sum.peak_burn, e.peak_burn);
      }
      if (sum.episodes > 0) report.alert_summary.push_back(sum);
    }
  }
  return report;
}

}  // namespace gpuledger::objectives
