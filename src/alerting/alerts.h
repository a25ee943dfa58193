// Alerts from judged objectives, in the conventions of Prometheus' Alertmanager
// (docs/objectives.md, "Alerts"): stable identity labels (alertname, slo, severity, window,
// pool, team) and the changing values in annotations; a firing alert is sent when it
// starts and again every resend interval with endsAt a few intervals ahead (so that an
// Alertmanager that stops hearing from us resolves it by itself); a resolved one is sent
// with endsAt = its resolution, and again every interval for a while, so that a sink that
// missed one delivery still learns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/currency.h"
#include "objectives/evaluate.h"
#include "objectives/interventions.h"
#include "objectives/quota_alerts.h"

namespace gpuledger::alerting {

struct Alert {
  std::map<std::string, std::string> labels;       // identity: never changes while it fires
  std::map<std::string, std::string> annotations;  // summary, value, target, budget_left, ...
  int64_t starts_at_ms = 0;
  int64_t ends_at_ms = 0;
  bool resolved = false;
  // The labels joined, as the tracker and the sinks tell alerts apart.
  std::string Identity() const;
};

// The alert of `window` (one of status.alerts) of a judged objective, at `now_ms`.
Alert AlertOf(const objectives::ObjectiveStatus& status, const objectives::AlertStatus& window, int64_t now_ms);

// The alert of a quota's threshold (docs/quotas.md): alertname GpuledgerQuota, identity
// labels quota, team or project, pool, period, threshold and severity; the figures
// (used, projected, the projection's basis, in `currency`) in annotations.
Alert AlertOf(const objectives::QuotaAlert& q, const Currency& currency, int64_t now_ms);

// The alertname of an intervention's notice to a job's owner.
inline constexpr const char* kInterventionAlertName = "GpuledgerIntervention";

// An intervention's notice to the owner of `d.job` (docs/objectives.md, "Owner notices"):
// the warning before a stop (d.outcome kWarned: its deadline is d.deadline_ms) or a notify
// rule's message. Identity labels alertname GpuledgerIntervention, rule, action, job, team
// (and user, when known), severity "warning" for a warning and "info" for a notice; the
// summary and description name the job, the rule, the evidence, the deadline and the
// money per hour its GPUs cost (in `currency`), each also an annotation of its own.
// startsAt is d.at_ms, endsAt `ends_at_ms`; sent once, not tracked.
Alert NoticeOf(const objectives::Decision& d, const Currency& currency, int64_t ends_at_ms);
bool IsNotice(const Alert& a);  // an alert NoticeOf made

struct TrackerOptions {
  int64_t resend_interval_ms = kMsPerMinute;
  int64_t ends_at_intervals = 4;                   // a firing alert's endsAt: now + this many intervals
  int64_t resolved_resend_ms = 15 * kMsPerMinute;  // how long a resolved alert is sent again
};

// Which alerts to send at each evaluation. Not thread-safe: one evaluation loop calls it.
class AlertTracker {
 public:
  explicit AlertTracker(TrackerOptions options = {}) : options_(options) {}

  // The alerts to send now, given every objective's status at `now_ms`: those that start
  // firing, those firing whose last send is a resend interval old, and those resolved
  // (now or within resolved_resend_ms) likewise. An alert keeps its startsAt while it fires.
  std::vector<Alert> Update(const std::vector<objectives::ObjectiveStatus>& statuses, int64_t now_ms);
  // The same, with `also_firing` (quota alerts, AlertOf a QuotaAlert) firing besides.
  std::vector<Alert> Update(const std::vector<objectives::ObjectiveStatus>& statuses,
                            const std::vector<Alert>& also_firing, int64_t now_ms);

  // Alerts firing now.
  size_t firing() const;

 private:
  struct Tracked {
    Alert alert;
    int64_t last_sent_ms = 0;
    int64_t resolved_at_ms = 0;  // 0 while firing
  };
  TrackerOptions options_;
  std::map<std::string, Tracked> tracked_;  // by identity
};

}  // namespace gpuledger::alerting
