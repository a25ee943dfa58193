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

Result<std::vector<ActionRecord>> ReadActions(sqlite3* db, const TimeRange& range) {
  Stmt q;
  GPULEDGER_RETURN_IF_ERROR(q.Prepare(
      db,
      "SELECT decision_id, at_ms, rule, job_key, team, action, outcome, enforce, evidence, reason, result,"
      " per_hour_freed_micros FROM actions WHERE at_ms >= ?1 AND at_ms < ?2 ORDER BY at_ms, decision_id"));
  q.Bind(1, range.begin_ms).Bind(2, range.end_ms);
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

}  // namespace sqlite
}  // namespace gpuledger::store
