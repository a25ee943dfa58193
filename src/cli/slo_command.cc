// `gpuledger slo status|backtest`: the config's objectives judged now, and the objectives
// and intervention rules replayed over history (docs/objectives.md). Rendering only: the
// figures come from src/objectives.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/commands.h"
#include "objectives/backtest.h"
#include "objectives/evaluate.h"

namespace gpuledger::cli {

namespace {

using objectives::AlertStatus;
using objectives::ObjectiveStatus;

std::string Percent(double ratio) { return fmt::format("{:.1f}%", ratio * 100); }

// "65%" of a target, as the config writes it.
std::string Target(double ratio) { return fmt::format("{:g}%", ratio * 100); }

std::string Measured(const ObjectiveStatus& st) {
  if (!st.tally.has_data) return "no data";
  if (st.spec.kind == ObjectiveKind::kBudget) return fmt::format("{:.2f}x pace", st.tally.sli);
  return Percent(st.tally.sli);
}

// "7d", "36h", "90m": a window as a config would write it.
std::string Window(int64_t ms) {
  if (ms % kMsPerDay == 0) return fmt::format("{}d", ms / kMsPerDay);
  if (ms % kMsPerHour == 0) return fmt::format("{}h", ms / kMsPerHour);
  return fmt::format("{}m", ms / kMsPerMinute);
}

std::string What(const ObjectiveSpec& o) {
  switch (o.kind) {
    case ObjectiveKind::kUtilization:
      return o.measure == UtilizationMeasure::kEffective ? "effective utilization" : "allocated efficiency";
    case ObjectiveKind::kAvailability: return fmt::format("GPUs started within {}", Window(o.start_within_ms));
    case ObjectiveKind::kBudget:
      return fmt::format("spend of {} a month", o.monthly_budget.value_or(Money()).ToDisplay());
  }
  return "";
}

std::string Firing(const ObjectiveStatus& st) {
  std::string out;
  for (const AlertStatus& a : st.alerts) {
    if (!a.firing) continue;
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", objectives::BurnWindowName(a.window),
                       objectives::SeverityName(a.window.severity));
  }
  return out.empty() ? "-" : out;
}

std::string Burns(const AlertStatus& a) {
  if (!a.attainable) return "n/a";
  return fmt::format("{:.2f} / {:.2f}{}", a.long_burn, a.short_burn, a.firing ? " FIRING" : "");
}

std::string Wait(const std::optional<int64_t>& ms) { return ms ? FormatDuration(*ms) : "-"; }

void PrintAvailability(const objectives::AvailabilityReport& r) {
  std::printf("    %-22s %9s %9s %8s %8s %8s %8s %8s\n", "", "requests", "in time", "waiting", "p50", "p90", "p99",
              "mean");
  auto row = [](const std::string& name, const objectives::WaitSummary& s) {
    std::string in_time = s.attainment() ? Percent(*s.attainment()) : "-";
    std::printf("    %-22s %9lld %9s %8lld %8s %8s %8s %8s\n", name.c_str(), static_cast<long long>(s.requests),
                in_time.c_str(), static_cast<long long>(s.waiting), Wait(s.p50_ms).c_str(), Wait(s.p90_ms).c_str(),
                Wait(s.p99_ms).c_str(), Wait(s.mean_ms).c_str());
  };
  row("all", r.all);
  for (const char* dimension : {"pool", "priority", "size"}) {
    auto it = r.by.find(dimension);
    if (it == r.by.end()) continue;
    for (const auto& [value, s] : it->second) row(fmt::format("{} {}", dimension, value), s);
  }
  if (r.without_submit > 0) {
    std::printf("    (%lld jobs in scope have no submit time and are not counted)\n",
                static_cast<long long>(r.without_submit));
  }
}

// The instant objectives are judged at: --at, else now, but never after the data's end
// (a store filled once, like the demo's, is judged where its data ends).
Result<int64_t> JudgedAt(ledger::Ledger& ledger, const std::string& at, const Clock& clock) {
  if (!at.empty()) {
    auto t = ParseTime(at);
    if (!t.ok()) return t.status().WithContext("--at");
    return *t;
  }
  GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan data, ledger.Data());
  if (data.end_ms == 0) return FailedPrecondition("the store holds no samples yet: nothing to judge");
  return std::min(clock.NowMs(), data.end_ms);
}

Result<Config> ObjectivesConfig(const CommonOptions& common, ledger::Ledger*& ledger_out,
                                std::unique_ptr<ledger::Ledger>& ledger, const Clock& clock) {
  Config config;
  GPULEDGER_ASSIGN_OR_RETURN(ledger, OpenLedger(common, clock, &config));
  if (config.objectives.empty()) {
    return FailedPrecondition(fmt::format(
        "{} has no [[objective]] tables: nothing to judge (docs/objectives.md)",
        config.file.empty() ? std::string("the configuration (no --config given)") : config.file));
  }
  ledger_out = ledger.get();
  return config;
}

int SloStatus(const CommonOptions& common, const std::string& at) {
  SystemClock clock;
  std::unique_ptr<ledger::Ledger> owned;
  ledger::Ledger* ledger = nullptr;
  auto config = ObjectivesConfig(common, ledger, owned, clock);
  if (!config.ok()) return Fail(config.status());
  auto when = JudgedAt(*ledger, at, clock);
  if (!when.ok()) return Fail(when.status());
  auto source = objectives::LedgerSource(*ledger);
  std::vector<ObjectiveStatus> statuses;
  for (const ObjectiveSpec& spec : config->objectives) {
    auto st = objectives::Evaluate(spec, *source, *when);
    if (!st.ok()) return Fail(st.status().WithContext(fmt::format("objective {} ({})", spec.name, spec.source)));
    statuses.push_back(std::move(*st));
  }
  std::printf("objectives judged at %s%s\n\n", FormatTime(*when).c_str(),
              *when < clock.NowMs() - 10 * kMsPerMinute && at.empty() ? " (where the data ends)" : "");
  std::printf("%-26s %-16s %-30s %7s %6s %10s %4s %12s %14s  %s\n", "OBJECTIVE", "SCOPE", "MEASURE", "TARGET",
              "WINDOW", "MEASURED", "MET", "BUDGET LEFT", "AT STAKE", "FIRING");
  for (const ObjectiveStatus& st : statuses) {
    std::printf("%-26s %-16s %-30s %7s %6s %10s %4s %12s %14s  %s\n", st.spec.name.c_str(),
                st.spec.scope.ToString().c_str(), What(st.spec).c_str(), Target(st.spec.target).c_str(),
                Window(st.spec.window_ms).c_str(), Measured(st).c_str(), st.met ? "yes" : "NO",
                Percent(st.budget_left).c_str(),
                st.spec.kind == ObjectiveKind::kAvailability ? "-" : st.at_stake.ToDisplay().c_str(),
                Firing(st).c_str());
  }
  std::printf("\nburn rates, long / short window (an alert fires when both reach its factor; n/a: the target "
              "cannot burn that fast)\n");
  std::printf("%-26s", "OBJECTIVE");
  for (const auto& w : objectives::kBurnWindows) {
    std::printf(" %-22s", fmt::format("{} >= {:g}x", objectives::BurnWindowName(w), w.factor).c_str());
  }
  std::printf("\n");
  for (const ObjectiveStatus& st : statuses) {
    std::printf("%-26s", st.spec.name.c_str());
    for (const AlertStatus& a : st.alerts) std::printf(" %-22s", Burns(a).c_str());
    std::printf("\n");
  }
  for (const ObjectiveStatus& st : statuses) {
    if (!st.availability) continue;
    std::printf("\n%s: requests judged in the last %s (waits: nearest-rank percentiles; a request still waiting "
                "counts with its wait so far)\n",
                st.spec.name.c_str(), Window(st.spec.window_ms).c_str());
    PrintAvailability(*st.availability);
  }
  return 0;
}

int SloBacktest(const CommonOptions& common, const WindowOptions& w, const std::string& step, bool details) {
  SystemClock clock;
  std::unique_ptr<ledger::Ledger> owned;
  ledger::Ledger* ledger = nullptr;
  auto config = ObjectivesConfig(common, ledger, owned, clock);
  if (!config.ok()) return Fail(config.status());
  auto window = ResolveWindow(w, ledger, clock);
  if (!window.ok()) return Fail(window.status());
  auto data = ledger->Data();
  if (!data.ok()) return Fail(data.status());
  // Replay only what the data covers.
  TimeRange replay = window->Intersect({FloorTo(data->first_ms, kMsPerHour), data->end_ms});
  auto step_ms = ParseDuration(step);
  if (!step_ms.ok()) return Fail(step_ms.status().WithContext("--step"));
  auto r = objectives::Backtest(*ledger, config->objectives, config->interventions, replay, *step_ms);
  if (!r.ok()) return Fail(r.status());
  std::printf("backtest %s .. %s, every %s: %zu objectives, %zu rules (replayed as if enforced)\n\n",
              FormatTime(replay.begin_ms).c_str(), FormatTime(replay.end_ms).c_str(), Window(*step_ms).c_str(),
              config->objectives.size(), config->interventions.size());
  std::printf("%-26s %7s %8s %12s\n", "OBJECTIVE", "STEPS", "MET", "FIRING");
  for (const objectives::ObjectiveSummary& s : r->objectives) {
    double met = s.steps > 0 ? static_cast<double>(s.steps_met) / static_cast<double>(s.steps) : 0;
    std::printf("%-26s %7lld %8s %12s\n", s.name.c_str(), static_cast<long long>(s.steps), Percent(met).c_str(),
                FormatDuration(s.steps_firing * *step_ms).c_str());
  }
  std::printf("\nalerts that would have fired: %zu episodes\n", r->alerts.size());
  if (!r->alert_summary.empty()) {
    std::printf("%-26s %-7s %-8s %9s %12s %8s\n", "OBJECTIVE", "WINDOW", "SEVERITY", "EPISODES", "FIRING", "PEAK");
  }
  for (const objectives::AlertSummary& a : r->alert_summary) {
    std::printf("%-26s %-7s %-8s %9lld %12s %7.2fx\n", a.objective.c_str(),
                std::string(objectives::BurnWindowName(a.window)).c_str(),
                std::string(objectives::SeverityName(a.window.severity)).c_str(), static_cast<long long>(a.episodes),
                FormatDuration(a.firing_ms).c_str(), a.peak_burn);
  }
  if (details && !r->alerts.empty()) {
    std::printf("\n%-26s %-7s %-21s %-21s %8s %6s\n", "OBJECTIVE", "WINDOW", "FIRED", "RESOLVED", "LASTED", "PEAK");
    for (const objectives::AlertEpisode& e : r->alerts) {
      int64_t end = e.resolved_ms.value_or(replay.end_ms);
      std::printf("%-26s %-7s %-21s %-21s %8s %5.2fx\n", e.objective.c_str(),
                  std::string(objectives::BurnWindowName(e.window)).c_str(), FormatTime(e.fired_ms).c_str(),
                  e.resolved_ms ? FormatTime(*e.resolved_ms).c_str() : "(still firing)",
                  FormatDuration(end - e.fired_ms).c_str(), e.peak_burn);
    }
  }
  std::printf("\nwhat the rules would have done\n");
  if (!r->rules.empty()) {
    std::printf("%-26s %9s %7s %8s %6s %12s %14s\n", "RULE", "ACTIONS", "WARNED", "SKIPPED", "JOBS", "GPU-HOURS",
                "FREED");
  }
  for (const objectives::RuleSummary& rs : r->rules) {
    std::printf("%-26s %9lld %7lld %8lld %6lld %12.1f %14s\n", rs.name.c_str(), static_cast<long long>(rs.proposed),
                static_cast<long long>(rs.warned), static_cast<long long>(rs.skipped), static_cast<long long>(rs.jobs),
                rs.gpu_hours_freed, rs.money_freed.ToDisplay().c_str());
  }
  // The stops that freed the most, or with --details every decision.
  std::vector<const objectives::Decision*> shown;
  if (details) {
    for (const objectives::Decision& d : r->decisions) shown.push_back(&d);
  } else {
    std::vector<const objectives::FreedCapacity*> freed;
    for (const objectives::FreedCapacity& f : r->freed) freed.push_back(&f);
    std::stable_sort(freed.begin(), freed.end(), [](auto* a, auto* b) { return a->money > b->money; });
    for (size_t i = 0; i < freed.size() && i < 10; ++i) shown.push_back(&freed[i]->decision);
    if (!shown.empty()) std::printf("\nthe %zu stops that would have freed the most (--details: every decision)\n", shown.size());
  }
  if (!shown.empty()) {
    std::printf("%-21s %-24s %-24s %-9s %-13s %-9s %5s %10s  %s\n", "WHEN", "RULE", "JOB", "TEAM", "ACTION", "OUTCOME",
                "GPUS", "PER HOUR", "EVIDENCE");
  }
  for (const objectives::Decision* d : shown) {
    std::printf("%-21s %-24s %-24s %-9s %-13s %-9s %5.2g %10s  %s\n", FormatTime(d->at_ms).c_str(), d->rule.c_str(),
                d->job.id.c_str(), d->job.team.c_str(), std::string(InterventionActionName(d->action)).c_str(),
                std::string(objectives::OutcomeName(d->outcome)).c_str(), d->gpus,
                d->per_hour_freed.micros() > 0 ? d->per_hour_freed.ToDisplay().c_str() : "-",
                (d->outcome == objectives::Outcome::kWarned ? d->reason : d->evidence).c_str());
  }
  std::printf("\nfreed: %.1f GPU-hours, %s (the stopped jobs' GPUs from the action to the end of their allocation "
              "as recorded)\n",
              r->gpu_hours_freed, r->money_freed.ToDisplay().c_str());
  return 0;
}

}  // namespace

void AddSloCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  CLI::App* slo = app.add_subcommand("slo", "Objectives (utilization, availability, budget) and their alerts")
                      ->require_subcommand(1);
  auto at = std::make_shared<std::string>();
  CLI::App* status = slo->add_subcommand(
      "status", "Each [[objective]] of the config judged now: value, error budget left, burn rates, money at stake");
  AddCommonOptions(*status, common);
  status->add_option("--at", *at, "judge at this instant (RFC 3339) instead of now or where the data ends");
  out.push_back({status, [at, &common]() -> int { return SloStatus(common, *at); }});

  struct BacktestOpts {
    WindowOptions window;
    std::string step = "1h";
    bool details = false;
  };
  auto o = std::make_shared<BacktestOpts>();
  CLI::App* backtest = slo->add_subcommand(
      "backtest", "Replay history through the objectives and [[intervention]] rules: when alerts would have fired "
                  "and resolved, which jobs acted on, GPU-hours and money freed");
  AddCommonOptions(*backtest, common);
  AddWindowOptions(*backtest, o->window, "30d");
  backtest->add_option("--step", o->step, "how often to judge, in whole hours")->capture_default_str();
  backtest->add_flag("--details", o->details, "every alert episode and every decision, not only the summaries");
  out.push_back({backtest, [o, &common]() -> int { return SloBacktest(common, o->window, o->step, o->details); }});
}

}  // namespace gpuledger::cli
