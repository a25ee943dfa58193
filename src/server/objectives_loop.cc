#include "server/objectives_loop.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <random>
#include <thread>
#include <tuple>

#include <unistd.h>

#include "actuators/actuators.h"
#include "alerting/alerts.h"
#include "alerting/delivery.h"
#include "alerting/sinks.h"
#include "ledger/quotas.h"
#include "objectives/evaluate.h"
#include "ledger/actions.h"
#include "objectives/interventions.h"

namespace gpuledger::server {
namespace {

// The same decision decided again (an evaluation retried at the same moment, a replica
// evaluating it too) has the same id, and is recorded once.
std::string DecisionId(const objectives::Decision& d) {
  return fmt::format("{}|{}|{}|{}|{}", d.rule, d.job.id, InterventionActionName(d.action),
                     objectives::OutcomeName(d.outcome), d.at_ms);
}

// How an owner's notice that no sink tried is recorded (its result's start).
constexpr std::string_view kNotSent = "not sent";
// How a taken decision the scheduler refused for now is recorded (its result's start).
constexpr std::string_view kRetryLater = "retry later";

// The lease that makes one of several servers on a shared store the one that sends alerts
// and acts (ledger::HoldLease); its time, in evaluations, before another may take it.
constexpr std::string_view kLoopLease = "objectives-loop";
constexpr int64_t kLeaseIntervals = 3;
constexpr int64_t kMinLeaseMs = 30'000;

// This server's name for the lease: host, process and a random part (a restarted process
// is another holder, and waits for the old lease to run out only if it was not released).
std::string LeaseHolderName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return fmt::format("{}:{}:{:08x}", host[0] ? host : "unknown", getpid(), std::random_device{}());
}

// The most decisions kept for the audit log while the store refuses them.
constexpr size_t kMaxUnrecorded = 10'000;

// The look-back that rebuilds the safety rules' state from the audit log at start: the
// longest cooldown or grace of the rules, at least the hour the rate limit counts.
int64_t HistoryLookBack(const std::vector<InterventionRule>& rules) {
  int64_t back = kMsPerHour;
  for (const InterventionRule& r : rules) back = std::max({back, r.cooldown_ms, r.grace_ms});
  return back;
}

}  // namespace

struct ObjectivesLoop::Impl {
  ledger::Ledger& ledger;
  const Clock& clock;
  MetricsRegistry& metrics;
  std::vector<ObjectiveSpec> objectives;
  std::vector<InterventionRule> rules;
  std::vector<QuotaSpec> quotas;  // judged at each evaluation; their alerts sent besides
  int64_t interval_ms = kMsPerMinute;
  alerting::AlertTracker tracker{alerting::TrackerOptions{}};
  objectives::InterventionHistory history;
  // The lease (kLoopLease): only its holder evaluates, sends and acts; the others stand by.
  std::string holder = LeaseHolderName();
  bool leading = false;
  int64_t lease_expires_ms = 0;  // this server's lease, as the store last said
  // Owner notices awaiting their sinks' reports (NoticeQueues), by decision id: each is
  // recorded in the audit log once every sink has reported. Declared before the queues,
  // whose workers call back into it, so that it outlives them.
  struct PendingNotice {
    ledger::RecordedAction row;  // its result written when every sink has reported
    bool warning = false;        // the warning before a stop (else a notify rule's notice)
    size_t outstanding = 0;      // sinks yet to report
    int attempts = 0;            // delivery attempts, all sinks together
    std::vector<std::string> delivered, failed;
  };
  std::mutex notices_mu;
  std::map<std::string, PendingNotice> notices;  // GUARDED_BY(notices_mu)

  std::vector<std::unique_ptr<alerting::DeliveryQueue>> queues;  // every sink's, routes' too
  // The objectives' and quotas' alerts go to the shared sinks (Alertmanagers, [[alerting.slack]],
  // [[alerting.webhook]]); an owner's notice to the Alertmanagers and its team's or user's
  // routes, or the shared Slack and webhook sinks when no route is theirs.
  std::vector<alerting::DeliveryQueue*> alertmanager_queues, shared_queues;
  struct Route {
    std::string team, user;
    std::vector<alerting::DeliveryQueue*> queues;
  };
  std::vector<Route> routes;
  Currency currency;  // of the notices' money per hour
  LoopActuators actuators;
  std::map<std::string, bool> enforce;  // rule -> its mode
  // Decisions not yet in the audit log (the store failed): recorded at the next evaluation.
  std::vector<ledger::RecordedAction> unrecorded;
  // (rule, job) -> the kind of the skip last recorded: a skip repeating is not recorded.
  std::map<std::pair<std::string, std::string>, std::string> last_skip;

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // GUARDED_BY(mu)
  std::thread thread;

  int64_t LeaseTtlMs() const { return std::max(kLeaseIntervals * interval_ms, kMinLeaseMs); }

  // Takes or renews the lease; whether this server leads for this evaluation. A store that
  // cannot answer (down, full) leaves a leader leading until its lease would have run out:
  // no one else can have taken it before then. A server that comes to lead (at its first
  // evaluation, or taking over from another) reads the audit log again, so that what the
  // others warned of and did still counts: their warnings, cooldowns and hourly limits.
  Result<bool> Lead() {
    int64_t now = clock.NowMs();
    auto lease = ledger::HoldLease(ledger, std::string(kLoopLease), holder, now, LeaseTtlMs());
    bool was = leading;
    if (lease.ok()) {
      leading = lease->HeldBy(holder);
      if (leading) lease_expires_ms = lease->expires_ms;
      if (leading != was || !leading) {
        spdlog::log(leading == was ? spdlog::level::debug : spdlog::level::info,
                    "event=objectives_lease holder={:?} leads={} lease_holder={:?} expires={}", holder, leading,
                    lease->holder, lease->expires_ms);
      }
    } else {
      leading = leading && now < lease_expires_ms;
      spdlog::warn("event=objectives_lease_failed holder={:?} leads={} error={:?}", holder, leading,
                   lease.status().message());
    }
    metrics.Set(MetricId::kObjectivesLeader, {}, leading ? 1 : 0);
    if (leading && !was && !rules.empty()) {  // what was done while this one did not lead
      history = {};
      if (Status st = RestoreHistory(); !st.ok()) {
        leading = false;  // acting without the history could act twice: try again next time
        return st;
      }
    }
    return leading;
  }

  void ReleaseLease() {
    if (!leading) return;
    if (Status st = ledger::ReleaseLease(ledger, std::string(kLoopLease), holder); !st.ok()) {
      spdlog::warn("event=objectives_lease_release_failed holder={:?} error={:?}", holder, st.message());
    }
    leading = false;
  }

  // The safety rules' state as the audit log left it: the last action per rule and job
  // (taken, or proposed in dry-run), the warnings, and the last hour's actions per rule.
  Status RestoreHistory() {
    // From where the loop evaluates: the clock's now, or where the data ends if earlier.
    GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan data, ledger.Data());
    int64_t now = data.end_ms == 0 ? clock.NowMs() : std::min(clock.NowMs(), data.end_ms);
    GPULEDGER_ASSIGN_OR_RETURN(
        std::vector<ledger::RecordedAction> past,
        ledger::Actions(ledger, {.range = {now - HistoryLookBack(rules), kForever}}));
    for (const ledger::RecordedAction& a : past) {
      auto key = std::make_pair(a.rule, a.job);
      if (a.outcome == "warned") {
        // A warning that never left (no sink took it) warned nobody: warn again.
        if (a.result.starts_with(kNotSent)) continue;
        history.warned_ms[key] = a.at_ms;
      } else if (a.outcome == "taken" && a.result.starts_with(kRetryLater)) {
        // The scheduler refused for now: the warning stands, nothing was done.
        if (int64_t grace = GraceOf(a.rule); grace > 0) history.warned_ms[key] = a.at_ms - grace;
      } else if (a.outcome == "taken" || a.outcome == "proposed") {
        history.last_action_ms[key] = a.at_ms;
        history.warned_ms.erase(key);
        if (a.at_ms > now - kMsPerHour) history.actions[a.rule].push_back(a.at_ms);
      }
    }
    return Status::Ok();
  }

  // Carries out a taken decision on the job's scheduler: what the actuator reported, or
  // its error ("failed: ..."). A refusal for now (kUnavailable: a PodDisruptionBudget
  // answering 429, the scheduler out of reach) is "retry later: ...", and the decision does
  // not count as done: no cooldown, no place in the hourly limit, the warning still
  // standing, so the next evaluation tries again.
  std::string Carry(const objectives::Decision& d) {
    bool pod = d.job.id.find('/') != std::string::npos;
    actuators::Actuator* a = pod ? actuators.kubernetes.get() : actuators.slurm.get();
    std::string result, outcome = "ok";
    if (a == nullptr) {
      result = fmt::format("failed: no {} actuator configured", pod ? "Kubernetes" : "Slurm");
      outcome = "failed";
    } else if (auto r = a->Apply(d); r.ok()) {
      result = *r;
    } else if (r.status().code() == StatusCode::kUnavailable) {
      result = fmt::format("{}: {}", kRetryLater, r.status().message());
      outcome = "retry_later";
      Undo(d);
    } else {
      result = "failed: " + r.status().message();
      outcome = "failed";
    }
    metrics.Add(MetricId::kInterventionActions, {d.rule, std::string(InterventionActionName(d.action)), outcome});
    return result;
  }

  // Takes back what Decide recorded of taken decision `d`, which the scheduler asked to
  // retry later: its warning stands again (as old as its grace), it is no action yet.
  void Undo(const objectives::Decision& d) {
    auto key = std::make_pair(d.rule, d.job.id);
    history.last_action_ms.erase(key);
    std::deque<int64_t>& recent = history.actions[d.rule];
    if (!recent.empty() && recent.back() == d.at_ms) recent.pop_back();
    if (int64_t grace = GraceOf(d.rule); grace > 0) history.warned_ms[key] = d.at_ms - grace;
  }

  int64_t GraceOf(const std::string& rule) const {
    for (const InterventionRule& r : rules) {
      if (r.name == rule) return r.grace_ms;
    }
    return 0;
  }

  // Whether `d` is to be recorded: not a skip repeating the one last recorded.
  bool Fresh(const objectives::Decision& d) {
    auto key = std::make_pair(d.rule, d.job.id);
    if (d.outcome != objectives::Outcome::kSkipped) {
      last_skip.erase(key);
      return true;
    }
    // The kind of reason ("cooldown", "stale data", ...), not its figures, which move.
    std::string kind = d.reason.substr(0, d.reason.find(':'));
    auto [it, fresh] = last_skip.try_emplace(key, kind);
    if (!fresh && it->second == kind) return false;
    it->second = kind;
    return true;
  }

  ledger::RecordedAction Row(const objectives::Decision& d, std::string result) {
    return ledger::RecordedAction{
        .decision_id = DecisionId(d), .at_ms = d.at_ms, .rule = d.rule, .job = d.job.id, .team = d.job.team,
        .action = std::string(InterventionActionName(d.action)), .outcome = std::string(objectives::OutcomeName(d.outcome)),
        .enforce = enforce[d.rule], .evidence = d.evidence, .reason = d.reason, .result = std::move(result),
        .per_hour_freed = d.per_hour_freed};
  }

  // Queues `d` for the audit log, unless it is a skip repeating the one last recorded.
  void Note(const objectives::Decision& d, std::string result) {
    if (Fresh(d)) unrecorded.push_back(Row(d, std::move(result)));
  }

  // The queues an owner's notice about `job` goes to: every Alertmanager (which routes by
  // the team label itself), and the routes of the job's team and user, or the shared Slack
  // and webhook sinks when neither has one.
  std::vector<alerting::DeliveryQueue*> NoticeQueues(const Job& job) const {
    std::vector<alerting::DeliveryQueue*> out = alertmanager_queues;
    bool routed = false;
    for (const Route& r : routes) {
      if ((!r.team.empty() && r.team == job.team) || (!r.user.empty() && r.user == job.user)) {
        out.insert(out.end(), r.queues.begin(), r.queues.end());
        routed = true;
      }
    }
    if (!routed) out.insert(out.end(), shared_queues.begin(), shared_queues.end());
    return out;
  }

  // Sends the owner's notice of an enforced rule's warning or notify decision `d` to its
  // sinks; the decision is recorded when they have all reported (SettleNotices). With no
  // sink for the owner, a warning becomes a skip (no stop follows a warning nobody got)
  // and a notice is recorded as not sent.
  void SendNotice(objectives::Decision& d) {
    bool warning = d.outcome == objectives::Outcome::kWarned;
    auto key = std::make_pair(d.rule, d.job.id);
    std::vector<alerting::DeliveryQueue*> to = NoticeQueues(d.job);
    if (to.empty()) {
      std::string why = fmt::format("no alert sink reaches team {} (no [[alerting.route]] for it or its user, and no "
                                    "shared sink)", d.job.team);
      if (warning) {
        history.warned_ms.erase(key);
        d.outcome = objectives::Outcome::kSkipped;
        d.reason = "owner not warned: " + why;
        Note(d, "");
      } else {
        CountNotice(d.rule, d.action, false);
        Note(d, fmt::format("{}: {}", kNotSent, why));
      }
      return;
    }
    last_skip.erase(key);
    const InterventionRule& rule = *std::find_if(rules.begin(), rules.end(), [&](auto& r) { return r.name == d.rule; });
    alerting::Alert notice = alerting::NoticeOf(d, currency, warning ? d.deadline_ms : d.at_ms + rule.cooldown_ms);
    std::string id = DecisionId(d);
    {
      std::lock_guard lock(notices_mu);
      notices[id] = PendingNotice{.row = Row(d, ""), .warning = warning, .outstanding = to.size()};
    }
    if (warning) history.warning_unconfirmed[key] = "the warning is still being delivered";
    for (alerting::DeliveryQueue* q : to) {
      q->Enqueue({notice}, [this, id](const alerting::DeliveryReport& r) {
        std::lock_guard lock(notices_mu);
        PendingNotice& n = notices.at(id);
        n.attempts += r.attempts;
        if (r.delivered) {
          n.delivered.push_back(r.sink);
        } else {
          n.failed.push_back(fmt::format("{} after {} attempt{}: {}", r.sink, r.attempts, r.attempts == 1 ? "" : "s",
                                         r.error));
        }
        --n.outstanding;
      });
    }
  }

  void CountNotice(const std::string& rule, InterventionAction action, bool ok) {
    metrics.Add(MetricId::kInterventionActions, {rule, std::string(InterventionActionName(action)), ok ? "ok" : "failed"});
  }

  // Records the notices every sink has reported on, with what they reported: "delivered to
  // SINK, ...", "failed: SINK after N attempts: ERROR; ..." (tried, never delivered) or
  // "not sent: ..." (no sink tried). A warning that was tried lets its stop follow after
  // the grace; one never tried is forgotten, so the next evaluation warns again.
  void SettleNotices() {
    std::lock_guard lock(notices_mu);
    for (auto it = notices.begin(); it != notices.end();) {
      PendingNotice& n = it->second;
      if (n.outstanding > 0) {
        ++it;
        continue;
      }
      std::string failed;
      for (const std::string& f : n.failed) failed += (failed.empty() ? "" : "; ") + f;
      if (!n.delivered.empty()) {
        n.row.result = "delivered to " + fmt::format("{}", fmt::join(n.delivered, ", "));
        if (!failed.empty()) n.row.result += "; failed: " + failed;
      } else {
        n.row.result = fmt::format("{}: {}", n.attempts > 0 ? "failed" : kNotSent, failed);
      }
      auto key = std::make_pair(n.row.rule, n.row.job);
      if (n.warning) {
        history.warning_unconfirmed.erase(key);
        if (n.attempts == 0) history.warned_ms.erase(key);
      } else {
        CountNotice(n.row.rule, *ParseInterventionAction(n.row.action), !n.delivered.empty());
      }
      spdlog::info("event=owner_notice rule={:?} job={:?} team={:?} outcome={} result={:?}", n.row.rule, n.row.job,
                   n.row.team, n.row.outcome, n.row.result);
      unrecorded.push_back(std::move(n.row));
      it = notices.erase(it);
    }
  }

  // Writes the queued decisions to the audit log; kept for the next evaluation when the
  // store refuses them now.
  Status Flush() {
    Status st = Status::Ok();
    if (!unrecorded.empty()) {
      auto added = ledger::RecordActions(ledger, unrecorded);
      if (added.ok()) {
        unrecorded.clear();
      } else {
        st = added.status().WithContext("recording the interventions' decisions");
        if (unrecorded.size() > kMaxUnrecorded) {  // the oldest go, and the log says so
          size_t dropped = unrecorded.size() - kMaxUnrecorded;
          unrecorded.erase(unrecorded.begin(), unrecorded.begin() + static_cast<std::ptrdiff_t>(dropped));
          spdlog::error("event=audit_log_dropped decisions={} reason={:?}", dropped, added.status().message());
        }
      }
    }
    metrics.Set(MetricId::kAuditLogPending, {}, static_cast<double>(unrecorded.size()));
    return st;
  }

  // The sinks' counters, copied into the registry (they count on their own threads).
  void PublishDeliveries() {
    for (const auto& q : queues) {
      alerting::DeliveryCounters c = q->counters();
      metrics.Set(MetricId::kAlertDeliveries, {q->name(), "sent"}, static_cast<double>(c.sent_total));
      metrics.Set(MetricId::kAlertDeliveries, {q->name(), "failed_attempt"},
                  static_cast<double>(c.failed_attempts_total));
      metrics.Set(MetricId::kAlertDeliveries, {q->name(), "given_up"}, static_cast<double>(c.given_up_total));
      metrics.Set(MetricId::kAlertDeliveries, {q->name(), "dropped"}, static_cast<double>(c.dropped_total));
      metrics.Set(MetricId::kAlertQueue, {q->name()}, static_cast<double>(c.queued));
    }
  }
};

ObjectivesLoop::ObjectivesLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ObjectivesLoop::~ObjectivesLoop() { Stop(); }

Result<std::unique_ptr<ObjectivesLoop>> ObjectivesLoop::Create(ledger::Ledger& ledger, const Clock& clock,
                                                               MetricsRegistry& metrics, const config::Config& config,
                                                               LoopActuators actuators) {
  if (config.objectives.empty() && config.interventions.empty() && config.quotas.empty()) {
    return std::unique_ptr<ObjectivesLoop>();
  }
  auto impl = std::unique_ptr<Impl>(new Impl{.ledger = ledger, .clock = clock, .metrics = metrics,
                                             .objectives = config.objectives, .rules = config.interventions,
                                             .quotas = config.quotas});
  if (!config.objectives.empty()) {
    impl->interval_ms = std::min_element(config.objectives.begin(), config.objectives.end(), [](auto& a, auto& b) {
                          return a.interval_ms < b.interval_ms;
                        })->interval_ms;
  }
  alerting::TrackerOptions tracker;
  if (config.alerting.resend_interval_ms) tracker.resend_interval_ms = *config.alerting.resend_interval_ms;
  impl->tracker = alerting::AlertTracker(tracker);
  struct Kind {
    const std::vector<config::AlertSinkTable>* tables;
    Result<std::unique_ptr<alerting::Sink>> (*make)(const std::string&, const std::string&);
    const char* key;
  };
  Impl& m = *impl;
  auto add = [&m](std::unique_ptr<alerting::Sink> sink) {
    m.queues.push_back(std::make_unique<alerting::DeliveryQueue>(std::move(sink)));
    return m.queues.back().get();
  };
  for (const Kind& k : {Kind{&config.alerting.alertmanagers, alerting::AlertmanagerSink, "url"},
                        Kind{&config.alerting.slack, alerting::SlackSink, "webhook_url"},
                        Kind{&config.alerting.webhooks, alerting::WebhookSink, "url"}}) {
    for (const config::AlertSinkTable& t : *k.tables) {
      auto sink = k.make(t.url, t.name.value_or(""));
      if (!sink.ok()) return sink.status().WithContext(t.where.Of(k.key));
      (k.tables == &config.alerting.alertmanagers ? m.alertmanager_queues : m.shared_queues).push_back(add(std::move(*sink)));
    }
  }
  for (const config::AlertRouteTable& t : config.alerting.routes) {
    Impl::Route route{.team = t.team, .user = t.user};
    std::string name = t.name.value_or("route-" + (t.team.empty() ? t.user : t.team));
    for (auto [url, make, key] : {std::tuple{&t.slack_url, &alerting::SlackSink, "slack"},
                                  std::tuple{&t.webhook_url, &alerting::WebhookSink, "webhook"}}) {
      if (url->empty()) continue;
      auto sink = make(*url, name);
      if (!sink.ok()) return sink.status().WithContext(t.where.Of(key));
      route.queues.push_back(add(std::move(*sink)));
    }
    m.routes.push_back(std::move(route));
  }
  m.currency = ledger.options().currency;
  impl->actuators = std::move(actuators);
  for (const InterventionRule& r : impl->rules) {
    impl->enforce[r.name] = r.enforce;
    if (r.enforce) spdlog::info("event=intervention_enforced rule={:?} source={:?}", r.name, r.source);
  }
  if (!impl->rules.empty()) GPULEDGER_RETURN_IF_ERROR(impl->RestoreHistory());
  return std::unique_ptr<ObjectivesLoop>(new ObjectivesLoop(std::move(impl)));
}

Status ObjectivesLoop::EvaluateOnce() {
  Impl& m = *impl_;
  GPULEDGER_ASSIGN_OR_RETURN(bool leads, m.Lead());
  if (!leads) return Status::Ok();  // another server sends and acts
  GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan data, m.ledger.Data());
  int64_t now = m.clock.NowMs();
  if (data.end_ms == 0) return Status::Ok();  // nothing stored yet
  int64_t at = std::min(now, data.end_ms);
  auto source = objectives::LedgerSource(m.ledger);
  std::vector<objectives::ObjectiveStatus> statuses;
  std::set<std::string> firing;
  for (const ObjectiveSpec& spec : m.objectives) {
    auto st = objectives::Evaluate(spec, *source, at);
    if (!st.ok()) {
      m.metrics.Add(MetricId::kObjectiveEvaluations, {spec.name, "error"});
      spdlog::warn("event=objective_failed objective={:?} error={:?}", spec.name, st.status().message());
      continue;
    }
    m.metrics.Add(MetricId::kObjectiveEvaluations, {spec.name, "ok"});
    for (const objectives::AlertStatus& a : st->alerts) {
      m.metrics.Set(MetricId::kObjectiveBurnRate, {spec.name, std::string(objectives::BurnWindowName(a.window))},
                    a.long_burn);
    }
    m.metrics.Set(MetricId::kObjectiveBudgetLeft, {spec.name}, st->budget_left);
    if (st->firing()) firing.insert(spec.name);
    statuses.push_back(std::move(*st));
  }
  std::vector<alerting::Alert> quota_alerts;
  if (!m.quotas.empty()) {
    auto judged = ledger::JudgeQuotas(m.ledger, m.quotas, ledger::Scope::All(), now);
    if (judged.ok()) {
      for (const objectives::QuotaAlert& q : objectives::QuotaAlerts(*judged)) {
        quota_alerts.push_back(alerting::AlertOf(q, judged->currency, now));
      }
    } else {
      spdlog::warn("event=quotas_failed error={:?}", judged.status().message());
    }
  }
  std::vector<alerting::Alert> to_send = m.tracker.Update(statuses, quota_alerts, now);
  m.metrics.Set(MetricId::kAlertsFiring, {}, static_cast<double>(m.tracker.firing()));
  for (alerting::DeliveryQueue* q : m.alertmanager_queues) q->Enqueue(to_send);
  for (alerting::DeliveryQueue* q : m.shared_queues) q->Enqueue(to_send);
  if (!m.rules.empty()) {
    m.SettleNotices();  // a warning delivered since the last evaluation lets its stop follow
    GPULEDGER_ASSIGN_OR_RETURN(objectives::DecisionInputs in,
                               objectives::GatherDecisionInputs(m.ledger, at, m.rules, firing));
    for (objectives::Decision& d : objectives::Decide(m.rules, in, m.history)) {
      // An enforced rule's warning, and its notify, go to the owner through the sinks.
      bool notice = m.enforce[d.rule] && (d.outcome == objectives::Outcome::kWarned ||
                                          (d.outcome == objectives::Outcome::kTaken &&
                                           d.action == InterventionAction::kNotify));
      bool carried = d.outcome == objectives::Outcome::kTaken && !notice;
      std::string result = carried ? m.Carry(d) : "";
      if (notice) m.SendNotice(d);  // a warning no sink can carry becomes a skip
      m.metrics.Add(MetricId::kInterventionDecisions, {d.rule, std::string(objectives::OutcomeName(d.outcome))});
      spdlog::info("event=intervention rule={:?} job={:?} team={:?} action={} outcome={} per_hour={} evidence={:?} "
                   "reason={:?} result={:?}",
                   d.rule, d.job.id, d.job.team, InterventionActionName(d.action), objectives::OutcomeName(d.outcome),
                   d.per_hour_freed.ToString(), d.evidence, d.reason, result);
      if (!notice) m.Note(d, std::move(result));
    }
    m.SettleNotices();  // those whose sinks already answered
  }
  m.PublishDeliveries();
  return m.Flush();
}

void ObjectivesLoop::Start() {
  Impl& m = *impl_;
  m.thread = std::thread([&m, this] {
    std::unique_lock lock(m.mu);
    while (!m.stop) {
      lock.unlock();
      Status st = EvaluateOnce();
      if (!st.ok()) spdlog::warn("event=objectives_loop_failed error={:?}", st.message());
      lock.lock();
      m.cv.wait_for(lock, std::chrono::milliseconds(m.interval_ms), [&] { return m.stop; });
    }
  });
}

void ObjectivesLoop::Stop() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->ReleaseLease();  // another server takes over at its next evaluation
}

bool ObjectivesLoop::WaitDelivered(int64_t timeout_ms) {
  bool all = true;
  for (const auto& q : impl_->queues) all = q->WaitIdle(timeout_ms) && all;
  impl_->PublishDeliveries();
  return all;
}

}  // namespace gpuledger::server
