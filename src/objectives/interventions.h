// Intervention rules decided (docs/objectives.md): which jobs a rule acts on now, with
// what evidence, and which it leaves alone and why. The decisions are data: an actuator
// (src/actuators) carries out those taken in enforce mode, the audit log records every
// one, and the backtest replays them over history.
//
// Safety, in the order it is checked for each job a rule selects:
//  1. staleness: the job's newest sample older than the rule's limit: no action;
//  2. evidence: held at least `idle_for`, every sample in it under `idle_below` (a sample
//     with no process counts as idle); a job that is not idle clears its warning (pending
//     jobs: a hold's evidence is its objective firing; a re-prioritization's, that the job
//     fits the GPUs idle in its pool now, smallest jobs first);
//  3. exemptions (a rule's `exempt` entries): reported as skips, for jobs the rule would
//     have acted on;
//  4. cooldown: at most one action per job per rule per `cooldown`;
//  5. grace: a stop (hold, stop, requeue) is first a warning to the owner; the action
//     follows once `grace` has passed, the evidence still holds and the warning's delivery
//     was at least attempted (InterventionHistory::warning_unconfirmed);
//  6. the rule's max actions per hour (dry-run proposals count too, so that a backtest
//     shows what the limit would have let through).
// A rule with an objective acts only while that objective has an alert firing.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model.h"
#include "core/money.h"
#include "core/objective.h"
#include "ledger/objective_inputs.h"

namespace gpuledger::objectives {

enum class Outcome : uint8_t {
  kProposed,  // dry-run: what enforce would have done
  kTaken,     // enforce: to be carried out (the actuator's result is recorded with it)
  kWarned,    // the owner warned; the stop follows after the grace period
  kSkipped,   // selected, but a safety rule held it back (`reason` says which)
};
std::string_view OutcomeName(Outcome o);  // "proposed", "taken", "warned", "skipped"

struct Decision {
  std::string rule;
  int64_t at_ms = 0;
  InterventionAction action = InterventionAction::kNotify;
  Outcome outcome = Outcome::kProposed;
  Job job;
  std::vector<std::string> devices;
  std::string evidence;  // what the rule saw ("idle 2h 10m, max activity 1.0%, 4 GPUs")
  std::string reason;    // for a skip or a warning: why
  int32_t new_priority = 0;  // reprioritize
  double gpus = 0;
  Money per_hour_freed;  // what the job's GPUs cost per hour (stops); zero otherwise
  Money per_hour_held;   // what the job's GPUs cost per hour now (jobs holding GPUs), for its owner's notice
  int64_t deadline_ms = 0;  // a warning: when the action follows unless the evidence changes
};

// What a rule has done so far: the state its cooldown, grace and rate limits read.
struct InterventionHistory {
  std::map<std::pair<std::string, std::string>, int64_t> last_action_ms;  // (rule, job)
  std::map<std::pair<std::string, std::string>, int64_t> warned_ms;       // (rule, job)
  std::map<std::string, std::deque<int64_t>> actions;                     // rule -> times within the last hour
  // (rule, job) -> why its warning cannot count yet: the delivery to the owner has not been
  // attempted (the server's loop sets and clears it; the backtest never does). While a key
  // is here, the action waits past its grace, as a skip saying so.
  std::map<std::pair<std::string, std::string>, std::string> warning_unconfirmed;
};

struct DecisionInputs {
  int64_t at_ms = 0;
  std::vector<ledger::HeldJob> held;  // jobs holding GPUs now (ledger::HeldJobs)
  std::vector<Job> pending;           // jobs submitted and not started by now
  std::map<std::string, double> idle_gpus_by_pool;  // unallocated GPUs now
  std::set<std::string> firing_objectives;          // objectives with an alert firing now
};

// Jobs submitted by `at_ms` and not yet started (or ended) then.
std::vector<Job> PendingAt(const std::vector<Job>& jobs, int64_t at_ms);

// What `rules` weigh at `at_ms`, from the ledger: the jobs holding GPUs (with samples over
// the rules' longest look-back), the pending jobs, and the GPUs in service then that no job
// holds, per pool (a MIG parent counts through its slices).
Result<DecisionInputs> GatherDecisionInputs(ledger::Ledger& ledger, int64_t at_ms,
                                            const std::vector<InterventionRule>& rules,
                                            std::set<std::string> firing_objectives);

// The decisions of `rules` at `in.at_ms`, updating `history` with what they did (taken,
// proposed, warned). Skips are returned but change nothing.
std::vector<Decision> Decide(const std::vector<InterventionRule>& rules, const DecisionInputs& in,
                             InterventionHistory& history);

}  // namespace gpuledger::objectives
