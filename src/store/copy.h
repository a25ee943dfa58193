// Moving a store from one server's SQLite file into PostgreSQL, for several replicas
// (`gpuledger store copy`; docs/deploy.md, "From one server to replicas").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuledger::store {

// A table copied: its name and how many rows went.
struct CopiedTable {
  std::string name;
  int64_t rows = 0;
};

// Copies every row of the SQLite store at `sqlite_path` into the PostgreSQL database at
// `pg_url`, in one transaction: all of it, or on any error nothing.
// - Both are opened as stores first, so each is at this build's schema (migrated when
//   older, refused when newer). The SQLite file is held as a server holds it: one running
//   on it fails the copy (kFailedPrecondition, saying so), and none starts meanwhile.
// - The database must hold no store yet: kFailedPrecondition, naming the first table with
//   rows, when it does. Its tables are locked against writers until the copy commits.
// - Tables and columns are matched by name (SQLite's rowid gives PostgreSQL's id where
//   SQLite has none); a table or column on one side only is kFailedPrecondition.
// - Every value goes as it is stored, doubles to the bit (COPY's binary format); a value
//   PostgreSQL refuses (a text that is not UTF-8) fails the copy, naming its table.
// - What PostgreSQL keeps by itself is not copied: the schema version (meta), the
//   versions of the days and of the job list (drawn anew by its triggers as the rows
//   arrive), and leases (a running server's). The identity sequences and the dirty-hour
//   generations go on after the copied ones.
// - Each table's rows as PostgreSQL counts them must equal the rows read, or nothing is
//   committed. Once committed, the copied tables are analyzed (the planner's statistics).
// `on_table` is called after each table is copied (before the commit).
Result<std::vector<CopiedTable>> CopySqliteIntoPostgres(const std::string& sqlite_path, const std::string& pg_url,
                                                        const std::function<void(const CopiedTable&)>& on_table = {});

}  // namespace gpuledger::store
