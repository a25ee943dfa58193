// The server's evaluation of the config's objectives (docs/objectives.md): on its own
// thread, every `interval` (the shortest of the objectives'), it judges each objective
// over the ledger (objectives::Evaluate), hands the alerts to send to each sink's
// delivery queue (alerting::AlertTracker, alerting::DeliveryQueue: a failing sink never
// blocks it, nor ingest), decides the intervention rules (objectives::Decide), sends an
// enforce rule's warnings and notices to the job's owner (its team's or user's
// [[alerting.route]], or the shared sinks, and every Alertmanager; recorded once the sinks
// have reported, and no stop follows a warning that was never tried), carries out the
// decisions an enforce rule takes through the actuator of the job's scheduler (a refusal for
// now, kUnavailable, is retried at the next evaluation), records every decision in the
// ledger's audit log (ledger/actions.h), and keeps its counters in the server's /metrics. The config's quotas are judged at each evaluation too
// (ledger::JudgeQuotas) and their threshold alerts (objectives::QuotaAlerts) go through the
// same tracker and sinks.
//
// The safety rules' state (cooldowns, warnings, the hourly limits) starts from the audit
// log, so a restart neither forgets a warning nor acts twice within a cooldown. A skip is
// recorded when it first happens and when its reason changes, not at every evaluation.
//
// Thread-safety: Start, Stop and EvaluateOnce from one thread (serve's main); the loop's
// thread is the only other caller of the tracker and the history.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "actuators/actuators.h"
#include "config/config.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "server/metrics.h"

namespace gpuledger::server {

// Who carries out an enforced decision: a job whose ledger id is "NAMESPACE/POD" is a
// Kubernetes pod, any other a Slurm job. Either may be null: the decision is then
// recorded with a result saying no actuator was configured.
struct LoopActuators {
  std::unique_ptr<actuators::Actuator> slurm;
  std::unique_ptr<actuators::Actuator> kubernetes;
};

class ObjectivesLoop {
 public:
  // Builds the sinks of `config`'s [alerting] (fails naming a bad URL's FILE:LINE). Null
  // when the config has no objectives, no rules and no quotas: nothing to run.
  static Result<std::unique_ptr<ObjectivesLoop>> Create(ledger::Ledger& ledger, const Clock& clock,
                                                        MetricsRegistry& metrics, const config::Config& config,
                                                        LoopActuators actuators = {});
  ~ObjectivesLoop();  // Stop()s

  void Start();
  void Stop();  // idempotent; joins the thread

  // One evaluation at the clock's now (where the data ends, if earlier): the loop's body.
  Status EvaluateOnce();
  // Waits until every sink's queue is empty (tests); true when it was in time.
  bool WaitDelivered(int64_t timeout_ms);

  struct Impl;

 private:
  explicit ObjectivesLoop(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger::server
