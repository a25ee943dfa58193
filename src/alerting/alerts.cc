#include "alerting/alerts.h"

#include <fmt/format.h>

#include <set>

namespace gpuledger::alerting {

namespace {

std::string Percent(double ratio) { return fmt::format("{:.1f}%", ratio * 100); }

}  // namespace

std::string Alert::Identity() const {
  std::string out;
  for (const auto& [k, v] : labels) out += fmt::format("{}={};", k, v);
  return out;
}

Alert AlertOf(const objectives::ObjectiveStatus& status, const objectives::AlertStatus& window, int64_t now_ms) {
  const ObjectiveSpec& spec = status.spec;
  Alert a;
  a.labels = {{"alertname", "GpuledgerObjectiveBurn"},
              {"slo", spec.name},
              {"kind", std::string(ObjectiveKindName(spec.kind))},
              {"window", std::string(objectives::BurnWindowName(window.window))},
              {"severity", std::string(objectives::SeverityName(window.window.severity))}};
  if (spec.scope.of == ObjectiveScope::Of::kPool) a.labels["pool"] = spec.scope.name;
  if (spec.scope.of == ObjectiveScope::Of::kTeam) a.labels["team"] = spec.scope.name;
  if (spec.scope.of == ObjectiveScope::Of::kKind) a.labels["job_kind"] = spec.scope.name;
  std::string value = status.tally.has_data ? (spec.kind == ObjectiveKind::kBudget
                                                   ? fmt::format("{:.2f}x the budget's pace", status.tally.sli)
                                                   : Percent(status.tally.sli))
                                            : std::string("no data");
  int64_t window_days = spec.window_ms / kMsPerDay;
  std::string window_text =
      window_days * kMsPerDay == spec.window_ms ? fmt::format("{}d", window_days)
                                                : fmt::format("{}h", spec.window_ms / kMsPerHour);
  a.annotations = {
      {"summary", fmt::format("{} ({}) burns its error budget {:.1f}x over {} (alert at {:g}x)", spec.name,
                              spec.scope.ToString(), window.long_burn, objectives::BurnWindowName(window.window),
                              window.window.factor)},
      {"description",
       fmt::format("{}: {} over {} against a target of {:g}%; error budget left {}; at stake {}", spec.name, value,
                   window_text, spec.target * 100, Percent(status.budget_left), status.at_stake.ToDisplay())},
      {"value", value},
      {"target", fmt::format("{:g}%", spec.target * 100)},
      {"objective_window", window_text},
      {"budget_left", Percent(status.budget_left)},
      {"at_stake", status.at_stake.ToString()},
      {"burn_long", fmt::format("{:.3f}", window.long_burn)},
      {"burn_short", fmt::format("{:.3f}", window.short_burn)},
      {"source", spec.source},
  };
  a.starts_at_ms = now_ms;
  return a;
}

Alert AlertOf(const objectives::QuotaAlert& q, const Currency& currency, int64_t now_ms) {
  const ledger::QuotaStatus& s = *q.quota;
  Alert a;
  a.labels = {{"alertname", "GpuledgerQuota"},
              {"quota", s.spec.Label()},
              {"period", s.period_label},
              {"threshold", q.threshold},
              {"severity", q.page ? "page" : "ticket"}};
  a.labels[s.spec.owner == QuotaSpec::Owner::kTeam ? "team" : "project"] = s.spec.name;
  if (!s.spec.pool.empty()) a.labels["pool"] = s.spec.pool;
  std::string used, projected;
  if (s.spec.gpu_hours) {
    used = fmt::format("{:.1f} of {} GPU-hours ({})", s.used.gpu_hours(), *s.spec.gpu_hours, Percent(*s.gpu_hours_burn));
    if (s.projected_gpu_hours) projected = fmt::format("{:.1f} GPU-hours", *s.projected_gpu_hours);
  }
  if (s.spec.budget) {
    used += fmt::format("{}{} of {}{} ({})", used.empty() ? "" : "; ", s.used.cost.ToDisplay(), s.spec.budget->ToDisplay(),
                        currency.Suffix(), Percent(*s.budget_burn));
    if (s.projected_cost) {
      projected += fmt::format("{}{}{}", projected.empty() ? "" : ", ", s.projected_cost->ToDisplay(), currency.Suffix());
    }
  }
  std::string what = q.threshold == "projected" ? "is projected to exceed its quota"
                                                : fmt::format("has used {} of its quota", q.threshold);
  a.annotations = {
      {"summary", fmt::format("{} {} in {} ({} quota)", s.spec.OwnerLabel(), what, s.period_label,
                              QuotaModeName(s.spec.mode))},
      {"description", fmt::format("{}: {} by {}; projected to the period's end: {} ({})", s.spec.Label(), used,
                                  FormatTime(s.to_date.end_ms), projected.empty() ? "none" : projected, s.basis_text)},
      {"value", used},
      {"projected", projected},
      {"basis", s.basis_text},
      {"source", s.spec.source},
  };
  a.starts_at_ms = now_ms;
  return a;
}

Alert NoticeOf(const objectives::Decision& d, const Currency& currency, int64_t ends_at_ms) {
  bool warning = d.outcome == objectives::Outcome::kWarned;
  std::string action(InterventionActionName(d.action));
  Alert a;
  a.labels = {{"alertname", kInterventionAlertName},
              {"rule", d.rule},
              {"action", action},
              {"job", d.job.id},
              {"team", d.job.team},
              {"severity", warning ? "warning" : "info"}};
  if (!d.job.user.empty()) a.labels["user"] = d.job.user;
  std::string owner = d.job.user.empty() ? fmt::format("team {}", d.job.team)
                                         : fmt::format("team {}, user {}", d.job.team, d.job.user);
  std::string per_hour = d.per_hour_held.ToDisplay() + currency.Suffix();
  std::string cost = fmt::format("Its {:g} GPUs cost {} per hour.", d.gpus, per_hour);
  std::string deadline = warning ? FormatTime(d.deadline_ms) : "";
  a.annotations = {
      {"summary", warning ? fmt::format("job {} ({}): rule {} will {} it at {} unless it starts working", d.job.id, owner,
                                        d.rule, action, deadline)
                          : fmt::format("job {} ({}): rule {} notifies its owner", d.job.id, owner, d.rule)},
      {"description", warning ? fmt::format("Job {} ({}): {}. {} Rule {} will {} it at {} unless the evidence changes.",
                                            d.job.id, owner, d.evidence, cost, d.rule, action, deadline)
                              : fmt::format("Job {} ({}): {}. {} (rule {})", d.job.id, owner, d.evidence, cost, d.rule)},
      {"evidence", d.evidence},
      {"per_hour", per_hour},
  };
  if (warning) a.annotations["deadline"] = deadline;
  a.starts_at_ms = d.at_ms;
  a.ends_at_ms = ends_at_ms;
  return a;
}

bool IsNotice(const Alert& a) {
  auto it = a.labels.find("alertname");
  return it != a.labels.end() && it->second == kInterventionAlertName;
}

std::vector<Alert> AlertTracker::Update(const std::vector<objectives::ObjectiveStatus>& statuses, int64_t now_ms) {
  return Update(statuses, {}, now_ms);
}

std::vector<Alert> AlertTracker::Update(const std::vector<objectives::ObjectiveStatus>& statuses,
                                        const std::vector<Alert>& also_firing, int64_t now_ms) {
  std::vector<Alert> firing = also_firing;
  for (const objectives::ObjectiveStatus& st : statuses) {
    for (const objectives::AlertStatus& w : st.alerts) {
      if (w.firing) firing.push_back(AlertOf(st, w, now_ms));
    }
  }
  std::vector<Alert> out;
  std::set<std::string> firing_now;
  for (Alert& a : firing) {
    std::string id = a.Identity();
    firing_now.insert(id);
    auto it = tracked_.find(id);
    bool fresh = it == tracked_.end() || it->second.resolved_at_ms != 0;
    if (fresh) {
      it = tracked_.insert_or_assign(id, Tracked{.alert = a}).first;
    } else {
      a.starts_at_ms = it->second.alert.starts_at_ms;  // the same alert, its values updated
      it->second.alert = a;
    }
    Tracked& t = it->second;
    if (fresh || now_ms - t.last_sent_ms >= options_.resend_interval_ms) {
      t.alert.ends_at_ms = now_ms + options_.ends_at_intervals * options_.resend_interval_ms;
      t.last_sent_ms = now_ms;
      out.push_back(t.alert);
    }
  }
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    Tracked& t = it->second;
    if (firing_now.count(it->first) > 0) {
      ++it;
      continue;
    }
    bool just_resolved = t.resolved_at_ms == 0;
    if (just_resolved) {
      t.resolved_at_ms = now_ms;
      t.alert.resolved = true;
      t.alert.ends_at_ms = now_ms;
    }
    if (now_ms - t.resolved_at_ms > options_.resolved_resend_ms) {
      it = tracked_.erase(it);
      continue;
    }
    if (just_resolved || now_ms - t.last_sent_ms >= options_.resend_interval_ms) {
      t.last_sent_ms = now_ms;
      out.push_back(t.alert);
    }
    ++it;
  }
  return out;
}

size_t AlertTracker::firing() const {
  size_t n = 0;
  for (const auto& [id, t] : tracked_) n += t.resolved_at_ms == 0 ? 1 : 0;
  return n;
}

}  // namespace gpuledger::alerting
