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
}  // namespace sqlite

namespace pg {
// REQUIRES: inside a transaction on `c`.
Result<size_t> InsertActions(Conn& c, std::span<const ActionRecord> actions);
Result<std::vector<ActionRecord>> ReadActions(Conn& c, const TimeRange& range);
Result<std::vector<ActionRecord>> SelectActions(Conn& c, const ActionSelection& selection);
}  // namespace pg

}  // namespace gpuledger::store
