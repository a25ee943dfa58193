// The PostgreSQL store: several `gpuledger serve` replicas on one database
// (docs/store-postgresql.md). The same Store contract as SqliteStore (store.h), with what a
// shared database adds:
//
// - Exactly-once by the database: a batch's id is claimed first, with INSERT ... ON
//   CONFLICT DO NOTHING, in the batch's own transaction. Two replicas applying the same
//   batch at once serialize on that key: one applies it, the other (once the first
//   commits) finds it and acknowledges a duplicate, or refuses other content under the
//   same id (kAlreadyExists), as SqliteStore does.
// - Nothing is cached that another replica can change: ids of devices and jobs (which
//   never change once committed) are cached; a device's record and times are compared and
//   moved by SQL (a device's times only grow: least/greatest), dirty-hour generations come
//   from a sequence.
// - Rollups are claimed per device-hour: WriteRollups locks the dirty marks it clears
//   (FOR UPDATE, in device and hour order) and writes nothing for a device-hour that is no
//   longer dirty (another replica refreshed it, from data at least as new).
// - No session state: every statement is unnamed and unprepared, every lock is
//   transaction-scoped, so it works through pgbouncer in transaction mode.
// - Time partitions: raw samples (sample_chunks, process_samples) by UTC day, rollups by
//   UTC month, created by the store itself ahead of time (at open, today to two days
//   ahead and this month and the next; then whenever a batch or a refresh needs one) on a
//   connection of their own. Retention (PruneSamples) detaches and drops whole days.
//
// Errors: an unreachable database is kUnavailable (at open, and for any call while it is
// away; the next call connects again); a schema newer than this build kFailedPrecondition
// naming both versions; a role without the rights it needs kPermissionDenied; a statement
// timeout kUnavailable. None of them applies part of a batch.
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

namespace gpuledger::store {

struct PgOptions {
  // Connections kept open for snapshots beyond the writer's (more are opened when needed).
  int idle_readers = 4;
  // The memory for whole days' day rows, which long windows read again from memory
  // (0: none, every read goes to the database).
  size_t day_cache_bytes = kDefaultDayCacheBytes;
};

// Opens (creating the schema if the database is empty, migrating it if older) the store at
// the libpq URL `url` (postgresql://user:password@host:port/dbname?options).
Result<std::unique_ptr<Store>> OpenPgStore(const std::string& url, const PgOptions& options = {});

// Whether `url_or_path` names a PostgreSQL database (postgresql:// or postgres://).
bool IsPostgresUrl(std::string_view url_or_path);

// The store's name as shown to people: a URL with any password as "***", a path as it is.
std::string StoreDisplayName(std::string_view url_or_path);

// How Open opens either backend.
struct OpenOptions {
  SqliteOptions sqlite;  // a SQLite file's
  PgOptions pg;          // a PostgreSQL database's
};

// The one way a program opens its store: a PostgreSQL URL opens a PgStore with
// options.pg, anything else is the path of a SQLite file opened with options.sqlite.
Result<std::unique_ptr<Store>> Open(const std::string& url_or_path, const OpenOptions& options = {});

}  // namespace gpuledger::store
