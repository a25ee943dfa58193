// SQLite helpers of the store library (internal: not part of the store's public face).
// Statements, and reading them to the end with every error returned, never dropped.
#pragma once

#include <fmt/format.h>
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "store/store.h"

namespace gpuledger::store::sqlite {

// The Status for SQLite's result code `rc` while doing `what` on `db`: kUnavailable for
// what may pass (busy, locked, I/O, the disk full), kInternal otherwise.
inline Status Error(sqlite3* db, int rc, std::string_view what) {
  std::string msg = fmt::format("sqlite: {}: {}", what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  // The disk full (or the store at its size cap) is the operator's to fix: say so first.
  if ((rc & 0xff) == SQLITE_FULL) msg = "the store is out of space (its disk is full, or it reached [ledger] store_max_size): " + msg;
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
      return Unavailable(std::move(msg));
    default:
      return Internal(std::move(msg));
  }
}

class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(s_); }

  Status Prepare(sqlite3* db, const std::string& sql) {
    if (sqlite3_prepare_v3(db, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s_, nullptr) !=
        SQLITE_OK) {
      return Internal(fmt::format("sqlite: preparing \"{}\": {}", sql, sqlite3_errmsg(db)));
    }
    return Status::Ok();
  }
  sqlite3_stmt* get() { return s_; }
  Stmt& Reset() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
    return *this;
  }
  // Resets without clearing the bindings: for hot statements whose every parameter is
  // bound again before each step.
  Stmt& Rewind() {
    sqlite3_reset(s_);
    return *this;
  }
  Stmt& BindDouble(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
    return *this;
  }
  Stmt& Bind(int i, const std::optional<double>& v) {
    if (v) {
      sqlite3_bind_double(s_, i, *v);
    } else {
      sqlite3_bind_null(s_, i);
    }
    return *this;
  }
  Stmt& Bind(int i, const std::optional<int64_t>& v) {
    if (v) {
      sqlite3_bind_int64(s_, i, *v);
    } else {
      sqlite3_bind_null(s_, i);
    }
    return *this;
  }
  Stmt& Bind(int i, const std::optional<std::string>& v) {
    if (v) return Bind(i, *v);
    sqlite3_bind_null(s_, i);
    return *this;
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(s_, i);
    return *this;
  }
  // Steps once: SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return sqlite3_step(s_); }
  int64_t Int(int col) { return sqlite3_column_int64(s_, col); }
  double Double(int col) { return sqlite3_column_double(s_, col); }
  std::optional<int64_t> OptInt(int col) {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_int64(s_, col);
  }
  std::optional<double> OptDouble(int col) {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_double(s_, col);
  }
  std::optional<std::string> OptText(int col) {
    if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
    return Text(col);
  }
  // Valid until the next step or reset.
  std::string_view Blob(int col) {
    const void* b = sqlite3_column_blob(s_, col);
    return b ? std::string_view(static_cast<const char*>(b), static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string_view();
  }
  std::string Text(int col) {
    const unsigned char* t = sqlite3_column_text(s_, col);
    return t ? std::string(reinterpret_cast<const char*>(t),
                           static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string();
  }

 private:
  sqlite3_stmt* s_ = nullptr;
};


// Steps `q` to its end, calling `row()` (returning Status) for each row. Returns the first
// error of SQLite (naming `what`) or of `row`; Ok only when every row was read.
template <class RowFn>
Status ForEach(sqlite3* db, Stmt& q, std::string_view what, RowFn&& row) {
  for (;;) {
    int rc = q.Step();
    if (rc == SQLITE_DONE) return Status::Ok();
    if (rc != SQLITE_ROW) return Error(db, rc, fmt::format("reading {}", what));
    GPULEDGER_RETURN_IF_ERROR(row());
  }
}

// An hour rollup row as SELECTed: HourRowAt reads these columns from column 0 on.
inline constexpr const char* kHourRowColumns =
    "hour_ms, device_id, job_id, active_ms, idle_ms, unallocated_ms, unavailable_ms, unmonitored_ms,"
    " coarse_ms, input_stall_ms, checkpoint_stall_ms, held_idle_ms";
// The row of kHourRowColumns at `q`'s current step; the last idle cause is the rest of
// allocated_idle.
inline void HourRowAt(Stmt& q, RollupRow& r) {
  r.period_ms = q.Int(0);
  r.device_id = q.Int(1);
  r.job_id = q.Int(2);
  for (size_t b = 0; b < kBucketCount; ++b) r.ms[b] = q.Int(static_cast<int>(3 + b));
  r.coarse_ms = q.Int(8);
  int64_t named = 0;
  for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) {
    r.idle_causes[c] = q.Int(static_cast<int>(9 + c));
    named += r.idle_causes[c];
  }
  r.idle_causes[kIdleCauseCount - 1] = r.ms[static_cast<size_t>(Bucket::kAllocatedIdle)] - named;
}

// Runs `sql` (no rows expected).
inline Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    Status st = Error(nullptr, rc, fmt::format("{:.60}", sql));
    return Status(st.code(), fmt::format("sqlite: {} (in \"{:.60}\")", msg, sql));
  }
  return Status::Ok();
}

}  // namespace gpuledger::store::sqlite
