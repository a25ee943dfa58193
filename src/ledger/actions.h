// The audit log of the intervention rules (docs/objectives.md): every decision, taken or
// not, recorded through the ledger (the only door to the store) and read back for the
// API, `gpuledger actions` and the dashboard, which render what this returns.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/money.h"
#include "core/price_book.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

// One decision as the audit log keeps it.
struct RecordedAction {
  // Unique per decision: the same decision recorded again (a retried evaluation, a
  // replayed one) is not stored twice. objectives' DecisionId makes it.
  std::string decision_id;
  int64_t at_ms = 0;
  std::string rule;
  std::string job;  // the ledger's job id
  std::string team;
  std::string action;   // "notify", "hold", "reprioritize", "stop", "requeue"
  std::string outcome;  // "proposed", "taken", "warned", "skipped"
  bool enforce = false;  // the rule's mode: false is dry-run
  std::string evidence;
  std::string reason;  // a skip's or a warning's why
  std::string result;  // what the actuator reported, or its error; empty when nothing ran
  Money per_hour_freed;  // what the job's GPUs cost per hour (stops); zero otherwise
  bool operator==(const RecordedAction&) const = default;
};

// Records `actions` in one transaction; returns how many were new. Refuses (recording
// none) an action with no decision id, rule or job, an unknown action or outcome, or a
// negative money figure, naming the action's index and field.
Result<size_t> RecordActions(Ledger& ledger, const std::vector<RecordedAction>& actions);

struct ActionQuery {
  TimeRange range{0, kForever};
  std::optional<std::set<std::string>> teams;  // only these teams' jobs (a viewer's)
  std::string rule;     // empty: every rule
  std::string outcome;  // empty: every outcome
};

// The decisions `query` selects, oldest first.
Result<std::vector<RecordedAction>> Actions(Ledger& ledger, const ActionQuery& query);

// Paging the audit log (GET /api/v1/actions, `gpuledger actions`): every read is bounded.
inline constexpr int64_t kDefaultActionsPage = 1'000;
inline constexpr int64_t kMaxActionsPage = 5'000;

struct ActionPage {
  std::vector<RecordedAction> actions;  // oldest first (then by decision id)
  // Where the next page begins (pass it as `after`), or "" on the last page.
  std::string next;
};

// At most `limit` of the decisions `query` selects, oldest first, after the cursor `after`
// (a previous page's `next`; "" for the first page). Paging through every page reads each
// decision exactly once, whatever is recorded meanwhile behind the cursor. Fails naming
// `limit` outside 1..kMaxActionsPage and `after` that is not a cursor a page gave.
Result<ActionPage> ActionsPage(Ledger& ledger, const ActionQuery& query, const std::string& after, int64_t limit);

struct ActionTotals {
  int64_t taken = 0, proposed = 0, warned = 0, skipped = 0;
  Money freed_per_hour;    // the money per hour of the stops taken
  Money proposed_per_hour;  // of the stops proposed in dry-run
};
ActionTotals TotalActions(const std::vector<RecordedAction>& actions);

// One server's turn at what only one of several servers on a shared store may do: the
// objectives loop, whose alerts and interventions would otherwise go out once per server
// (docs/objectives.md, "Several servers"). A lease is held until `expires_ms` and renewed
// by its holder before then; when its holder stops renewing (stopped, killed, cut off
// from the database), another takes it once it has run out.
struct Lease {
  std::string holder;  // "" when nobody holds it, or the holder lost a race just now
  int64_t expires_ms = 0;
  bool HeldBy(const std::string& who) const { return !who.empty() && holder == who; }
};

// Takes or renews the lease `name` for `holder` until `now_ms + ttl_ms`, unless someone
// else holds it and their time is not up; returns the lease as it stands then. Fails naming
// an empty name or holder or a ttl_ms that is not positive.
Result<Lease> HoldLease(Ledger& ledger, const std::string& name, const std::string& holder, int64_t now_ms,
                        int64_t ttl_ms);
// Gives up `name` if `holder` holds it.
Status ReleaseLease(Ledger& ledger, const std::string& name, const std::string& holder);

}  // namespace gpuledger::ledger
