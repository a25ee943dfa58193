// libpq helpers of the store library (internal: not part of the store's public face).
// Statements are sent with PQexecParams, unnamed and unprepared: nothing lives in the
// session between transactions, so a connection through pgbouncer in transaction mode
// works (docs/store-postgresql.md). Parameters go as text (bytea as binary); results come
// in binary, read by the column accessors below.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuledger::store::pg {

// One statement's parameters, $1.. in order.
class Params {
 public:
  Params& Add(int64_t v);
  Params& Add(std::optional<int64_t> v);
  Params& Add(std::string_view text);
  Params& Add(const std::string& text) { return Add(std::string_view(text)); }
  Params& Add(const char* text) { return Add(std::string_view(text)); }
  Params& Add(std::optional<double> v);
  Params& Add(const std::optional<std::string>& text) { return text ? Add(*text) : AddNull(); }
  Params& AddBytes(std::string_view bytes);
  // A PostgreSQL array literal of integers: '{1,2,3}'.
  Params& AddArray(const std::vector<int64_t>& v);
  // Array literals of optional integers and doubles (NULL for none), and of texts (each
  // quoted): one statement then writes a row per element, with unnest().
  Params& AddArray(const std::vector<std::optional<int64_t>>& v);
  Params& AddArray(const std::vector<std::optional<double>>& v);
  Params& AddArray(const std::vector<std::string>& v);
  // An array literal of byte strings in hex, each read back by decode(x, 'hex') of the
  // unnested text (an empty one quoted, so that it is an element and not no array).
  Params& AddHexArray(const std::vector<std::string>& v);
  Params& AddNull();
  size_t size() const { return values_.size(); }

 private:
  friend class Conn;
  std::vector<std::string> values_;
  std::vector<bool> null_, binary_;
};

// A result in binary format. REQUIRES for the accessors: row < rows(), and the column of
// the type the accessor reads (bigint/integer, double precision, text/bytea).
class Rows {
 public:
  explicit Rows(PGresult* r) : r_(r, &PQclear) {}
  int rows() const { return PQntuples(r_.get()); }
  bool IsNull(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  int64_t Int(int row, int col) const;
  std::optional<int64_t> OptInt(int row, int col) const;
  double Double(int row, int col) const;
  std::optional<double> OptDouble(int row, int col) const;
  std::string_view Bytes(int row, int col) const;
  std::string Text(int row, int col) const { return std::string(Bytes(row, col)); }
  std::optional<std::string> OptText(int row, int col) const {
    if (IsNull(row, col)) return std::nullopt;
    return Text(row, col);
  }

 private:
  std::unique_ptr<PGresult, void (*)(PGresult*)> r_;
};

// An error of the database as a Status: the SQLSTATE decides the code (42501 permission
// denied; 57014 a statement timeout, 08xxx and a lost connection, 40001/40P01 a
// conflict with another writer, 53xxx resources: kUnavailable, what may pass when
// retried), the message names `what` and carries the server's words.
Status ErrorOf(PGconn* conn, const PGresult* r, std::string_view what);

// A connection. Not thread-safe: its owner serializes its use.
class Conn {
 public:
  // Connects to `url` (a libpq URL or key=value string); kUnavailable when the database
  // cannot be reached, naming the URL without its password.
  static Result<std::unique_ptr<Conn>> Open(const std::string& url);
  ~Conn();

  // Runs `sql` with `params`, returning its rows (none for a command).
  Result<Rows> Query(std::string_view sql, const Params& params, std::string_view what);
  Result<Rows> Query(std::string_view sql, std::string_view what) { return Query(sql, Params{}, what); }
  // Runs statements without parameters (several, separated by ';').
  Status Exec(std::string_view sql, std::string_view what);
  // Exec, waiting at most `wait` for the answer: kUnavailable after it, and the
  // connection is then mid-statement, to be closed rather than used again (closing it is
  // what withdraws the statement from a pgbouncer queue, where it waits for a server).
  Status ExecWithin(std::string_view sql, std::string_view what, std::chrono::milliseconds wait);
  // Runs `sql` once for each of `rows` in libpq's pipeline mode: all sent, then all
  // answered, one round trip. The first error is returned (the statements after it are
  // skipped by the server); REQUIRES: inside a transaction (an error aborts it).
  Status Pipeline(std::string_view sql, const std::vector<Params>& rows, std::string_view what);

  // True when the connection is gone (the server restarted, the network broke).
  bool Broken() const { return PQstatus(c_) != CONNECTION_OK; }
  // Connects again after Broken(); kUnavailable while the database cannot be reached.
  Status Reset();
  // Whether a transaction is open (PQTRANS_INTRANS or PQTRANS_INERROR).
  bool InTransaction() const;
  PGconn* get() { return c_; }

 private:
  struct Bound;
  explicit Conn(PGconn* c, std::string url) : c_(c), url_(std::move(url)) {}
  PGconn* c_;
  std::string url_;
};

// `url` with any password replaced by "***", for messages.
std::string Redacted(std::string_view url);

// Appends `bytes` as lowercase hex (decode(x, 'hex') reads it back).
void AppendHex(std::string& out, std::string_view bytes);

}  // namespace gpuledger::store::pg
