// SqliteStore's audit log (store/actions.h): the `actions` table of schema version 8.
#include <fmt/format.h>

#include "store/actions_internal.h"
#include "store/sqlite_util.h"

namespace gpuledger::store {

const char* const kSqliteActionsMigration =
    "CREATE TABLE actions(decision_id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL, rule TEXT NOT NULL,"
    "  job_key TEXT NOT NULL, team TEXT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL,"
    "  enforce INTEGER NOT NULL, evidence TEXT NOT NULL, reason TEXT NOT NULL, result TEXT NOT NULL,"
    "  per_hour_freed_micros INTEGER NOT NULL);"
    "CREATE INDEX actions_by_time ON actions(at_ms);";

const char* const kSqliteLeasesMigration =
    "CREATE TABLE leases(name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms INTEGER NOT NULL);";

ActionSelectionSql SelectionSql(const ActionSelection& s, char placeholder) {
  ActionSelectionSql out;
  auto arg = [&](std::variant<int64_t, std::string> v) {
    out.args.push_back(std::move(v));
    return fmt::format("{}{}", placeholder, out.args.size());
  };
  out.clause = fmt::format(" WHERE at_ms >= {} AND at_ms < {}", arg(s.range.begin_ms), arg(s.range.end_ms));
  if (s.after) {
    std::string at = arg(s.after->first);
    out.clause += fmt::format(" AND (at_ms > {} OR (at_ms = {} AND decision_id > {}))", at, at, arg(s.after->second));
  }
  if (!s.rule.empty()) out.clause += " AND rule = " + arg(s.rule);
  if (!s.outcome.empty()) out.clause += " AND outcome = " + arg(s.outcome);
  if (s.teams) {
    std::string list;
    for (const std::string& t : *s.teams) list += (list.empty() ? "" : ", ") + arg(t);
    out.clause += " AND team IN (" + list + ")";
  }
  out.clause += " ORDER BY at_ms, decision_id LIMIT " + arg(s.limit);
  return out;
}

namespace sqlite {

Result<size_t> InsertActions(sqlite3* db, std::span<const ActionRecord> actions) {
  Stmt ins;
  GPULEDGER_RETURN_IF_ERROR(ins.Prepare(
      db,
      "INSERT INTO actions(decision_id, at_ms, rule, job_key, team, action, outcome, enforce, evidence, reason,"
      " result, per_hour_freed_micros) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12)"
      " ON CONFLICT(decision_id) DO NOTHING"));
  size_t added = 0;
  for (const ActionRecord& a : actions) {
    ins.Reset().Bind(1, a.decision_id).Bind(2, a.at_ms).Bind(3, a.rule).Bind(4, a.job_key).Bind(5, a.team);
    ins.Bind(6, a.action).Bind(7, a.outcome).Bind(8, int64_t{a.enforce ? 1 : 0}).Bind(9, a.evidence);
    ins.Bind(10, a.reason).Bind(11, a.result).Bind(12, a.per_hour_freed_micros);
    if (int rc = ins.Step(); rc != SQLITE_DONE) {
      return Error(db, rc, fmt::format("recording decision {}", a.decision_id));
    }
    added += static_cast<size_t>(sqlite3_changes(db));
  }
  return added;
}

namespace {

constexpr const char* kColumns =
    "SELECT decision_id, at_ms, rule, job_key, team, action, outcome, enforce, evidence, reason, result,"
    " per_hour_freed_micros FROM actions";

Result<std::vector<ActionRecord>> Rows(sqlite3* db, Stmt& q) {
  std::vector<ActionRecord> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db, q, "the audit log", [&] {
    out.push_back(ActionRecord{.decision_id = q.Text(0), .at_ms = q.Int(1), .rule = q.Text(2), .job_key = q.Text(3),
                               .team = q.Text(4), .action = q.Text(5), .outcome = q.Text(6), .enforce = q.Int(7) != 0,
                               .evidence = q.Text(8), .reason = q.Text(9), .result = q.Text(10),
                               .per_hour_freed_micros = q.Int(11)});
    return Status::Ok();
  }));
  return out;
}

}  // namespace

Result<std::vector<ActionRecord>> ReadActions(sqlite3* db, const TimeRange& range) {
  Stmt q;
  GPULEDGER_RETURN_IF_ERROR(
      q.Prepare(db, std::string(kColumns) + " WHERE at_ms >= ?1 AND at_ms < ?2 ORDER BY at_ms, decision_id"));
  q.Bind(1, range.begin_ms).Bind(2, range.end_ms);
  return Rows(db, q);
}

Result<std::vector<ActionRecord>> SelectActions(sqlite3* db, const ActionSelection& selection) {
  if (selection.teams && selection.teams->empty()) return std::vector<ActionRecord>{};
  ActionSelectionSql sql = SelectionSql(selection, '?');
  Stmt q;
  GPULEDGER_RETURN_IF_ERROR(q.Prepare(db, kColumns + sql.clause));
  for (size_t i = 0; i < sql.args.size(); ++i) {
    int n = static_cast<int>(i + 1);
    std::visit([&](const auto& v) { q.Bind(n, v); }, sql.args[i]);
  }
  return Rows(db, q);
}

Result<Lease> HoldLease(sqlite3* db, const std::string& name, const std::string& holder, int64_t now_ms,
                        int64_t ttl_ms) {
  Stmt q;
  GPULEDGER_RETURN_IF_ERROR(q.Prepare(
      db,
      "INSERT INTO leases(name, holder, expires_ms) VALUES(?1, ?2, ?3 + ?4)"
      " ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms"
      " WHERE leases.holder = excluded.holder OR leases.expires_ms <= ?3"
      " RETURNING holder, expires_ms"));
  q.Bind(1, name).Bind(2, holder).Bind(3, now_ms).Bind(4, ttl_ms);
  std::optional<Lease> taken;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db, q, "the leases", [&] {
    taken = Lease{q.Text(0), q.Int(1)};
    return Status::Ok();
  }));
  if (taken) return *taken;
  Stmt held;  // someone else's, still running
  GPULEDGER_RETURN_IF_ERROR(held.Prepare(db, "SELECT holder, expires_ms FROM leases WHERE name = ?1"));
  held.Bind(1, name);
  Lease out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db, held, "the leases", [&] {
    out = Lease{held.Text(0), held.Int(1)};
    return Status::Ok();
  }));
  if (out.holder == holder) return Lease{};  // as PostgreSQL's: the upsert said it is not this one's
  return out;
}

Status ReleaseLease(sqlite3* db, const std::string& name, const std::string& holder) {
  Stmt q;
  GPULEDGER_RETURN_IF_ERROR(q.Prepare(db, "DELETE FROM leases WHERE name = ?1 AND holder = ?2"));
  q.Bind(1, name).Bind(2, holder);
  if (int rc = q.Step(); rc != SQLITE_DONE) return Error(db, rc, fmt::format("releasing the lease {}", name));
  return Status::Ok();
}

}  // namespace sqlite
}  // namespace gpuledger::store
