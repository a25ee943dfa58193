#include "server/objectives_loop.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "alerting/alerts.h"
#include "alerting/delivery.h"
#include "alerting/sinks.h"
#include "ledger/quotas.h"
#include "objectives/evaluate.h"
#include "objectives/interventions.h"

namespace gpuledger::server {

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

  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;  // GUARDED_BY(mu)
  std::thread thread;

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
                                                               MetricsRegistry& metrics, const config::Config& config) {
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
  for (const InterventionRule& r : impl->rules) {
    if (r.enforce) {
      spdlog::warn("event=intervention_dry_run rule={:?} source={:?} reason=\"serve has no actuator yet: its "
                   "decisions are logged as proposals\"",
                   r.name, r.source);
    }
  }
  for (InterventionRule& r : impl->rules) r.enforce = false;
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
      spdlog::info("event=intervention rule={:?} job={:?} team={:?} action={} outcome={} per_hour={} evidence={:?} "
                   "reason={:?}",
                   d.rule, d.job.id, d.job.team, InterventionActionName(d.action), objectives::OutcomeName(d.outcome),
                   d.per_hour_freed.ToString(), d.evidence, d.reason);
    }
  }
  m.PublishDeliveries();
  return Status::Ok();
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
