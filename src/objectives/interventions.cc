#include "objectives/interventions.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpuledger::objectives {

namespace {

std::string Span(int64_t ms) {
  int64_t minutes = ms / kMsPerMinute;
  if (minutes >= 60) return fmt::format("{}h {}m", minutes / 60, minutes % 60);
  return fmt::format("{}m", minutes);
}

bool Selects(const InterventionRule& rule, const Job& job) {
  return (!rule.kind || job.kind == *rule.kind) && (rule.pool.empty() || job.pool == rule.pool) &&
         (rule.team.empty() || job.team == rule.team);
}

bool StopsWork(InterventionAction a) {
  return a == InterventionAction::kHold || a == InterventionAction::kStop || a == InterventionAction::kRequeue;
}

// The checks every selected job goes through after its evidence: cooldown, grace, rate.
// Returns false when the job gets no decision now (waiting out its grace period).
bool Conclude(const InterventionRule& rule, int64_t at_ms, Decision& d, InterventionHistory& h) {
  auto key = std::make_pair(rule.name, d.job.id);
  if (auto last = h.last_action_ms.find(key); last != h.last_action_ms.end() && at_ms - last->second < rule.cooldown_ms) {
    d.outcome = Outcome::kSkipped;
    d.reason = fmt::format("cooldown: acted on {} ago (cooldown {})", Span(at_ms - last->second), Span(rule.cooldown_ms));
    return true;
  }
  if (StopsWork(rule.action) && rule.grace_ms > 0) {
    auto warned = h.warned_ms.find(key);
    if (warned == h.warned_ms.end()) {
      h.warned_ms[key] = at_ms;
      d.outcome = Outcome::kWarned;
      d.deadline_ms = at_ms + rule.grace_ms;
      d.reason = fmt::format("owner warned: {} follows at {} unless the evidence changes", InterventionActionName(rule.action),
                             FormatTime(at_ms + rule.grace_ms));
      return true;
    }
    if (at_ms - warned->second < rule.grace_ms) return false;
    if (auto why = h.warning_unconfirmed.find(key); why != h.warning_unconfirmed.end()) {
      d.outcome = Outcome::kSkipped;
      d.reason = "owner not warned yet: " + why->second;
      return true;
    }
  }
  std::deque<int64_t>& recent = h.actions[rule.name];
  if (static_cast<int64_t>(recent.size()) >= rule.max_actions_per_hour) {
    d.outcome = Outcome::kSkipped;
    d.reason = fmt::format("the rule's limit of {} actions per hour is reached", rule.max_actions_per_hour);
    return true;
  }
  d.outcome = rule.enforce ? Outcome::kTaken : Outcome::kProposed;
  recent.push_back(at_ms);
  h.last_action_ms[key] = at_ms;
  h.warned_ms.erase(key);
  h.warning_unconfirmed.erase(key);
  return true;
}

Decision Base(const InterventionRule& rule, int64_t at_ms, const Job& job) {
  Decision d;
  d.rule = rule.name;
  d.at_ms = at_ms;
  d.action = rule.action;
  d.job = job;
  return d;
}

void DecideHeld(const InterventionRule& rule, const DecisionInputs& in, InterventionHistory& h,
                std::vector<Decision>& out) {
  for (const ledger::HeldJob& held : in.held) {
    if (!Selects(rule, held.job)) continue;
    Decision d = Base(rule, in.at_ms, held.job);
    d.devices = held.devices;
    d.gpus = held.gpus;
    d.per_hour_held = held.price_per_hour;
    if (held.evidence_until_ms == 0 || in.at_ms - held.evidence_until_ms > rule.staleness_limit_ms) {
      d.outcome = Outcome::kSkipped;
      d.reason = held.evidence_until_ms == 0
                     ? "stale data: no sample of its GPUs in the look-back"
                     : fmt::format("stale data: its newest sample is {} old (limit {})",
                                   Span(in.at_ms - held.evidence_until_ms), Span(rule.staleness_limit_ms));
      out.push_back(std::move(d));
      continue;
    }
    bool idle = held.held_since_ms <= in.at_ms - rule.idle_for_ms && held.samples > 0 &&
                held.max_activity < rule.idle_below;
    if (!idle) {
      h.warned_ms.erase({rule.name, held.job.id});  // the evidence changed: a new warning next time
      h.warning_unconfirmed.erase({rule.name, held.job.id});
      continue;
    }
    d.evidence = fmt::format("{} idle for {}: every sample of its {:.3g} GPUs under {:g}% activity (highest {:.1f}%, {} samples)",
                             JobKindName(held.job.kind), Span(rule.idle_for_ms), held.gpus, rule.idle_below * 100,
                             held.max_activity * 100, held.samples);
    if (std::string e = ExemptionOf(rule.exempt, held.job); !e.empty()) {
      d.outcome = Outcome::kSkipped;
      d.reason = fmt::format("exempt ({})", e);
      out.push_back(std::move(d));
      continue;
    }
    if (!Conclude(rule, in.at_ms, d, h)) continue;
    // Only a stop that goes ahead frees anything: a warning or a skip leaves the GPUs held.
    bool stops = rule.action == InterventionAction::kStop || rule.action == InterventionAction::kRequeue;
    if (stops && (d.outcome == Outcome::kTaken || d.outcome == Outcome::kProposed)) {
      d.per_hour_freed = held.price_per_hour;
    }
    out.push_back(std::move(d));
  }
}

void DecidePending(const InterventionRule& rule, const DecisionInputs& in, InterventionHistory& h,
                   std::vector<Decision>& out) {
  std::vector<const Job*> selected;
  for (const Job& job : in.pending) {
    if (Selects(rule, job)) selected.push_back(&job);
  }
  std::map<std::string, double> idle = in.idle_gpus_by_pool;
  if (rule.action == InterventionAction::kReprioritize) {
    // The small jobs first: they fill the fragments the idle GPUs leave.
    std::stable_sort(selected.begin(), selected.end(), [](const Job* a, const Job* b) {
      return std::tie(a->requested_gpus, a->submit_ms) < std::tie(b->requested_gpus, b->submit_ms);
    });
  }
  for (const Job* job : selected) {
    Decision d = Base(rule, in.at_ms, *job);
    d.gpus = std::max(1, job->requested_gpus);
    double* free = nullptr;
    if (rule.action == InterventionAction::kReprioritize) {
      free = &idle[job->pool];
      if (job->priority >= rule.raise_to || d.gpus > *free) continue;
      d.new_priority = rule.raise_to;
      d.evidence = fmt::format("pending {}, wants {:g} GPUs; {:g} idle in pool {} now",
                               Span(in.at_ms - job->submit_ms.value_or(in.at_ms)), d.gpus, *free, job->pool);
    } else {
      d.evidence = rule.objective.empty() ? std::string("selected by the rule")
                                          : fmt::format("objective {} is firing", rule.objective);
    }
    if (std::string e = ExemptionOf(rule.exempt, *job); !e.empty()) {
      d.outcome = Outcome::kSkipped;
      d.new_priority = 0;
      d.reason = fmt::format("exempt ({})", e);
      out.push_back(std::move(d));
      continue;
    }
    if (free != nullptr) *free -= d.gpus;  // these GPUs are spoken for
    if (Conclude(rule, in.at_ms, d, h)) out.push_back(std::move(d));
  }
}

}  // namespace

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kProposed: return "proposed";
    case Outcome::kTaken: return "taken";
    case Outcome::kWarned: return "warned";
    case Outcome::kSkipped: return "skipped";
  }
  return "?";
}

std::vector<Job> PendingAt(const std::vector<Job>& jobs, int64_t at_ms) {
  std::vector<Job> out;
  for (const Job& j : jobs) {
    bool submitted = j.submit_ms && *j.submit_ms <= at_ms;
    bool started = j.start_ms && *j.start_ms <= at_ms;
    bool ended = j.end_ms && *j.end_ms <= at_ms;
    if (submitted && !started && !ended) out.push_back(j);
  }
  return out;
}

Result<DecisionInputs> GatherDecisionInputs(ledger::Ledger& ledger, int64_t at_ms,
                                            const std::vector<InterventionRule>& rules,
                                            std::set<std::string> firing_objectives) {
  DecisionInputs in{.at_ms = at_ms, .firing_objectives = std::move(firing_objectives)};
  int64_t look_back = 0;
  for (const InterventionRule& r : rules) look_back = std::max({look_back, r.idle_for_ms, r.staleness_limit_ms});
  GPULEDGER_ASSIGN_OR_RETURN(in.held, ledger::HeldJobs(ledger, at_ms, look_back));
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<Job> jobs, ledger.Jobs());
  in.pending = PendingAt(jobs, at_ms);
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<store::DeviceRecord> devices, ledger.Devices());
  std::set<std::string> busy, parents;
  for (const ledger::HeldJob& h : in.held) busy.insert(h.devices.begin(), h.devices.end());
  for (const store::DeviceRecord& d : devices) {
    if (d.device.is_mig()) parents.insert(d.device.parent_uuid);
  }
  for (const store::DeviceRecord& d : devices) {
    if (parents.count(d.device.uuid) > 0) continue;  // its slices count instead
    if (d.in_service_ms > at_ms || d.last_sample_ms < at_ms || busy.count(d.device.uuid) > 0) continue;
    in.idle_gpus_by_pool[d.device.pool] += static_cast<double>(d.device.share.ticks()) / static_cast<double>(kShareScale);
  }
  return in;
}

std::vector<Decision> Decide(const std::vector<InterventionRule>& rules, const DecisionInputs& in,
                             InterventionHistory& history) {
  std::vector<Decision> out;
  for (const InterventionRule& rule : rules) {
    if (!rule.objective.empty() && in.firing_objectives.count(rule.objective) == 0) continue;
    std::deque<int64_t>& recent = history.actions[rule.name];
    while (!recent.empty() && recent.front() <= in.at_ms - kMsPerHour) recent.pop_front();
    bool on_pending = rule.action == InterventionAction::kHold || rule.action == InterventionAction::kReprioritize;
    if (on_pending) {
      DecidePending(rule, in, history, out);
    } else {
      DecideHeld(rule, in, history, out);
    }
  }
  return out;
}

}  // namespace gpuledger::objectives
