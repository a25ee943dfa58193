// The audit log of the intervention rules (docs/objectives.md): every decision, taken or
// not, as the store keeps it. Both stores (SQLite, PostgreSQL) keep it; the ledger is its
// only reader and writer (ledger/actions.h), the server, the CLI and the dashboard render
// what the ledger returns.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gpuledger::store {

class Store;

// One decision. Money in micro-units of the price book's currency.
struct ActionRecord {
  std::string decision_id;  // unique: the same decision recorded again is not stored twice
  int64_t at_ms = 0;        // when it was decided
  std::string rule;
  std::string job_key;  // the ledger's job id (a Slurm id, "NAMESPACE/POD")
  std::string team;
  std::string action;   // "notify", "hold", "reprioritize", "stop", "requeue"
  std::string outcome;  // "proposed", "taken", "warned", "skipped"
  bool enforce = false;  // the rule's mode when it decided
  std::string evidence;
  std::string reason;  // a skip's or a warning's why
  std::string result;  // what the actuator reported (or its error); empty when nothing ran
  int64_t per_hour_freed_micros = 0;
  bool operator==(const ActionRecord&) const = default;
};

// One page of the audit log: the rows in `range` that the filters keep, in (at_ms,
// decision_id) order, after the key `after` (a keyset: the previous page's last row), at
// most `limit` of them. Each page reads through the time index from its key: no OFFSET,
// so a page costs the same wherever it starts.
struct ActionSelection {
  TimeRange range;
  std::optional<std::vector<std::string>> teams;  // only these teams' rows (none: no rows)
  std::string rule;     // empty: every rule
  std::string outcome;  // empty: every outcome
  std::optional<std::pair<int64_t, std::string>> after;  // (at_ms, decision_id), exclusive
  int64_t limit = 1000;  // REQUIRES: > 0
};

// Who holds a lease (ActionLog::HoldLease), and until when.
struct Lease {
  std::string holder;
  int64_t expires_ms = 0;
  bool operator==(const Lease&) const = default;
};

// The audit log's table in a store, and the leases that let one of several servers on a
// shared store do what only one should (the objectives loop: alerts and interventions).
class ActionLog {
 public:
  virtual ~ActionLog() = default;
  // Appends `actions` in one transaction; a decision id already stored is left as it was
  // (a retried or replayed decision). Returns how many were new. Thread-safe.
  virtual Result<size_t> RecordActions(std::span<const ActionRecord> actions) = 0;
  // The decisions made in `range` (at_ms), oldest first (then by decision id). Thread-safe.
  virtual Result<std::vector<ActionRecord>> ActionsIn(const TimeRange& range) = 0;
  // The page `selection` names (above), oldest first. Thread-safe.
  virtual Result<std::vector<ActionRecord>> SelectActions(const ActionSelection& selection) = 0;

  // Takes or renews the lease `name` for `holder` until `now_ms + ttl_ms`, when no one
  // holds it, its holder's time is up (expires_ms <= now_ms) or `holder` holds it already;
  // otherwise leaves it. Returns the lease as it is afterwards: `holder` holds it when the
  // holder named is `holder`. One statement, so that servers racing for it on one database
  // get one answer. Times are the callers' clocks, which must agree to well within ttl_ms.
  // Thread-safe.
  virtual Result<Lease> HoldLease(const std::string& name, const std::string& holder, int64_t now_ms,
                                  int64_t ttl_ms) = 0;
  // Gives up the lease `name` when `holder` holds it (a server stopping), so that another
  // takes it at once; otherwise does nothing. Thread-safe.
  virtual Status ReleaseLease(const std::string& name, const std::string& holder) = 0;
};

// The audit log of `store`: both of the project's stores keep one; kUnimplemented for a
// store that does not.
Result<ActionLog*> ActionLogOf(Store& store);

}  // namespace gpuledger::store
