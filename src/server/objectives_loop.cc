#include "server/objectives_loop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

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
  std::vector<std::unique_ptr<alerting::DeliveryQueue>> queues;
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
        history.warned_ms[key] = a.at_ms;
      } else if (a.outcome == "taken" || a.outcome == "proposed") {
        history.last_action_ms[key] = a.at_ms;
        history.warned_ms.erase(key);
        if (a.at_ms > now - kMsPerHour) history.actions[a.rule].push_back(a.at_ms);
      }
    }
    return Status::Ok();
  }

  // Carries out a taken decision on the job's scheduler: what the actuator reported, or
  // its error.
  std::string Carry(const objectives::Decision& d) {
    bool pod = d.job.id.find('/') != std::string::npos;
    actuators::Actuator* a = pod ? actuators.kubernetes.get() : actuators.slurm.get();
    std::string result;
    if (a == nullptr) {
      result = fmt::format("failed: no {} actuator configured", pod ? "Kubernetes" : "Slurm");
    } else if (auto r = a->Apply(d); r.ok()) {
      result = *r;
    } else {
      result = "failed: " + r.status().message();
    }
    bool ok = !result.starts_with("failed: ");
    metrics.Add(MetricId::kInterventionActions,
                {d.rule, std::string(InterventionActionName(d.action)), ok ? "ok" : "failed"});
    return result;
  }

  // Queues `d` for the audit log, unless it is a skip repeating the one last recorded.
  void Note(const objectives::Decision& d, std::string result) {
    auto key = std::make_pair(d.rule, d.job.id);
    if (d.outcome == objectives::Outcome::kSkipped) {
      // The kind of reason ("cooldown", "stale data", ...), not its figures, which move.
      std::string kind = d.reason.substr(0, d.reason.find(':'));
      auto [it, fresh] = last_skip.try_emplace(key, kind);
      if (!fresh && it->second == kind) return;
      it->second = kind;
    } else {
      last_skip.erase(key);
    }
    unrecorded.push_back(ledger::RecordedAction{
        .decision_id = DecisionId(d), .at_ms = d.at_ms, .rule = d.rule, .job = d.job.id, .team = d.job.team,
        .action = std::string(InterventionActionName(d.action)), .outcome = std::string(objectives::OutcomeName(d.outcome)),
        .enforce = enforce[d.rule], .evidence = d.evidence, .reason = d.reason, .result = std::move(result),
        .per_hour_freed = d.per_hour_freed});
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
  for (const Kind& k : {Kind{&config.alerting.alertmanagers, alerting::AlertmanagerSink, "url"},
                        Kind{&config.alerting.slack, alerting::SlackSink, "webhook_url"},
                        Kind{&config.alerting.webhooks, alerting::WebhookSink, "url"}}) {
    for (const config::AlertSinkTable& t : *k.tables) {
      auto sink = k.make(t.url, t.name.value_or(""));
      if (!sink.ok()) return sink.status().WithContext(t.where.Of(k.key));
      impl->queues.push_back(std::make_unique<alerting::DeliveryQueue>(std::move(*sink)));
    }
  }
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
  for (const auto& q : m.queues) q->Enqueue(to_send);
  if (!m.rules.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(objectives::DecisionInputs in,
                               objectives::GatherDecisionInputs(m.ledger, at, m.rules, firing));
    for (const objectives::Decision& d : objectives::Decide(m.rules, in, m.history)) {
      m.metrics.Add(MetricId::kInterventionDecisions, {d.rule, std::string(objectives::OutcomeName(d.outcome))});
      std::string result = d.outcome == objectives::Outcome::kTaken ? m.Carry(d) : "";
      spdlog::info("event=intervention rule={:?} job={:?} team={:?} action={} outcome={} per_hour={} evidence={:?} "
                   "reason={:?} result={:?}",
                   d.rule, d.job.id, d.job.team, InterventionActionName(d.action), objectives::OutcomeName(d.outcome),
                   d.per_hour_freed.ToString(), d.evidence, d.reason, result);
      m.Note(d, std::move(result));
    }
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
}

bool ObjectivesLoop::WaitDelivered(int64_t timeout_ms) {
  bool all = true;
  for (const auto& q : impl_->queues) all = q->WaitIdle(timeout_ms) && all;
  impl_->PublishDeliveries();
  return all;
}

}  // namespace gpuledger::server
