// The audit log's reads and writes on each store's connection (internal to the store
// library: SqliteStore and PgStore call these under their writer's lock).
#pragma once

#include <sqlite3.h>

#include <span>
#include <string>
#include <variant>
#include <vector>

#include "store/actions.h"
#include "store/pg_util.h"

namespace gpuledger::store {

// The audit log's table, as each store's migration list appends it.
extern const char* const kSqliteActionsMigration;
extern const char* const kPgActionsMigration;
// The leases' table (ActionLog::HoldLease), likewise.
extern const char* const kSqliteLeasesMigration;
extern const char* const kPgLeasesMigration;

// The WHERE ... ORDER BY ... LIMIT of a page's SELECT, with placeholders numbered from 1
// in each store's style ('?' for SQLite's ?N, '$' for PostgreSQL's $N), and the values
// they take, in order. REQUIRES: selection.teams, when set, is not empty.
struct ActionSelectionSql {
  std::string clause;
  std::vector<std::variant<int64_t, std::string>> args;
};
ActionSelectionSql SelectionSql(const ActionSelection& selection, char placeholder);

namespace sqlite {
// REQUIRES: inside a write transaction on `db`.
Result<size_t> InsertActions(sqlite3* db, std::span<const ActionRecord> actions);
Result<std::vector<ActionRecord>> ReadActions(sqlite3* db, const TimeRange& range);
Result<std::vector<ActionRecord>> SelectActions(sqlite3* db, const ActionSelection& selection);
Result<Lease> HoldLease(sqlite3* db, const std::string& name, const std::string& holder, int64_t now_ms,
                        int64_t ttl_ms);
Status ReleaseLease(sqlite3* db, const std::string& name, const std::string& holder);
}  // namespace sqlite

namespace pg {
// REQUIRES: inside a transaction on `c`.
Result<size_t> InsertActions(Conn& c, std::span<const ActionRecord> actions);
Result<std::vector<ActionRecord>> ReadActions(Conn& c, const TimeRange& range);
Result<std::vector<ActionRecord>> SelectActions(Conn& c, const ActionSelection& selection);
// Each one statement, outside any transaction (pgbouncer's transaction mode keeps no state).
Result<Lease> HoldLease(Conn& c, const std::string& name, const std::string& holder, int64_t now_ms, int64_t ttl_ms);
Status ReleaseLease(Conn& c, const std::string& name, const std::string& holder);
}  // namespace pg

}  // namespace gpuledger::store
