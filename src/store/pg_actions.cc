// PgStore's audit log (store/actions.h): the `actions` table of schema version 3.
#include <fmt/format.h>

#include "store/actions_internal.h"

namespace gpuledger::store {

const char* const kPgActionsMigration =
    "CREATE TABLE actions(decision_id TEXT PRIMARY KEY, at_ms BIGINT NOT NULL, rule TEXT NOT NULL,"
    "  job_key TEXT NOT NULL, team TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL,"
    "  enforce BIGINT NOT NULL, evidence TEXT NOT NULL, reason TEXT NOT NULL, result TEXT NOT NULL,"
    "  per_hour_freed_micros BIGINT NOT NULL);"
    "CREATE INDEX actions_by_time ON actions(at_ms);";

const char* const kPgLeasesMigration =
    "CREATE TABLE leases(name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms BIGINT NOT NULL);";

namespace pg {

Result<size_t> InsertActions(Conn& c, std::span<const ActionRecord> actions) {
  size_t added = 0;
  for (const ActionRecord& a : actions) {
    Params p;
    p.Add(a.decision_id).Add(a.at_ms).Add(a.rule).Add(a.job_key).Add(a.team).Add(a.action).Add(a.outcome);
    p.Add(int64_t{a.enforce ? 1 : 0}).Add(a.evidence).Add(a.reason).Add(a.result).Add(a.per_hour_freed_micros);
    GPULEDGER_ASSIGN_OR_RETURN(
        Rows r, c.Query("INSERT INTO actions(decision_id, at_ms, rule, job_key, team, action, outcome, enforce,"
                        " evidence, reason, result, per_hour_freed_micros)"
                        " VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)"
                        " ON CONFLICT (decision_id) DO NOTHING RETURNING decision_id",
                        p, fmt::format("recording decision {}", a.decision_id)));
    added += static_cast<size_t>(r.rows());
  }
  return added;
}

namespace {

constexpr const char* kColumns =
    "SELECT decision_id, at_ms, rule, job_key, team, action, outcome, enforce, evidence, reason,"
    " result, per_hour_freed_micros FROM actions";

std::vector<ActionRecord> Records(const Rows& r) {
  std::vector<ActionRecord> out;
  out.reserve(static_cast<size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) {
    out.push_back(ActionRecord{.decision_id = r.Text(i, 0), .at_ms = r.Int(i, 1), .rule = r.Text(i, 2),
                               .job_key = r.Text(i, 3), .team = r.Text(i, 4), .action = r.Text(i, 5),
                               .outcome = r.Text(i, 6), .enforce = r.Int(i, 7) != 0, .evidence = r.Text(i, 8),
                               .reason = r.Text(i, 9), .result = r.Text(i, 10),
                               .per_hour_freed_micros = r.Int(i, 11)});
  }
  return out;
}

}  // namespace

Result<std::vector<ActionRecord>> ReadActions(Conn& c, const TimeRange& range) {
  GPULEDGER_ASSIGN_OR_RETURN(Rows r, c.Query(std::string(kColumns) +
                                                 " WHERE at_ms >= $1 AND at_ms < $2 ORDER BY at_ms, decision_id",
                                             Params().Add(range.begin_ms).Add(range.end_ms), "reading the audit log"));
  return Records(r);
}

Result<std::vector<ActionRecord>> SelectActions(Conn& c, const ActionSelection& selection) {
  if (selection.teams && selection.teams->empty()) return std::vector<ActionRecord>{};
  ActionSelectionSql sql = SelectionSql(selection, '$');
  Params p;
  for (const auto& arg : sql.args) std::visit([&](const auto& v) { p.Add(v); }, arg);
  GPULEDGER_ASSIGN_OR_RETURN(Rows r, c.Query(kColumns + sql.clause, p, "reading a page of the audit log"));
  return Records(r);
}

Result<Lease> HoldLease(Conn& c, const std::string& name, const std::string& holder, int64_t now_ms, int64_t ttl_ms) {
  // Racing servers serialize on the row; the loser's WHERE is judged on the winner's row,
  // committed, and its upsert returns nothing.
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows taken, c.Query("INSERT INTO leases(name, holder, expires_ms) VALUES($1, $2, $3::bigint + $4)"
                          " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms"
                          " WHERE leases.holder = excluded.holder OR leases.expires_ms <= $3"
                          " RETURNING holder, expires_ms",
                          Params().Add(name).Add(holder).Add(now_ms).Add(ttl_ms), fmt::format("taking the lease {}", name)));
  if (taken.rows() == 1) return Lease{taken.Text(0, 0), taken.Int(0, 1)};
  // Someone else's, still running: read in a statement of its own, whose snapshot has the
  // winner's commit (the statement above waited for it). The same statement's snapshot
  // would not, and could show this holder's own lease of before.
  GPULEDGER_ASSIGN_OR_RETURN(Rows held, c.Query("SELECT holder, expires_ms FROM leases WHERE name = $1",
                                                Params().Add(name), fmt::format("reading the lease {}", name)));
  if (held.rows() == 0 || held.Text(0, 0) == holder) return Lease{};  // released meanwhile
  return Lease{held.Text(0, 0), held.Int(0, 1)};
}

Status ReleaseLease(Conn& c, const std::string& name, const std::string& holder) {
  return c.Query("DELETE FROM leases WHERE name = $1 AND holder = $2", Params().Add(name).Add(holder),
                 fmt::format("releasing the lease {}", name))
      .status();
}

}  // namespace pg
}  // namespace gpuledger::store
