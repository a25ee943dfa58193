#include "store/pg_util.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <poll.h>

#include <bit>
#include <cmath>
#include <iterator>
#include <cerrno>
#include <cstring>
#include <regex>

namespace gpuledger::store::pg {
namespace {

uint64_t BigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

Params& Params::Add(int64_t v) {
  values_.push_back(std::to_string(v));
  null_.push_back(false);
  binary_.push_back(false);
  return *this;
}
Params& Params::Add(std::optional<int64_t> v) { return v ? Add(*v) : AddNull(); }
Params& Params::Add(std::string_view text) {
  values_.emplace_back(text);
  null_.push_back(false);
  binary_.push_back(false);
  return *this;
}
Params& Params::Add(std::optional<double> v) {
  if (!v) return AddNull();
  // The shortest text that reads back as the same double: stored exactly.
  values_.push_back(fmt::format("{}", *v));
  null_.push_back(false);
  binary_.push_back(false);
  return *this;
}
Params& Params::AddBytes(std::string_view bytes) {
  values_.emplace_back(bytes);
  null_.push_back(false);
  binary_.push_back(true);
  return *this;
}
Params& Params::AddArray(const std::vector<int64_t>& v) {
  std::string text = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(v[i]);
  }
  text += '}';
  return Add(std::string_view(text));
}
Params& Params::AddArray(const std::vector<std::optional<int64_t>>& v) {
  std::string text = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) text += ',';
    text += v[i] ? std::to_string(*v[i]) : "NULL";
  }
  text += '}';
  return Add(std::string_view(text));
}
Params& Params::AddArray(const std::vector<std::optional<double>>& v) {
  std::string text = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) text += ',';
    if (!v[i]) {
      text += "NULL";
    } else if (std::isnan(*v[i])) {
      text += "NaN";
    } else if (std::isinf(*v[i])) {
      text += *v[i] > 0 ? "Infinity" : "-Infinity";
    } else {
      fmt::format_to(std::back_inserter(text), "{}", *v[i]);  // the shortest text that reads back exactly
    }
  }
  text += '}';
  return Add(std::string_view(text));
}
Params& Params::AddHexArray(const std::vector<std::string>& v) {
  std::string text = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) text += ',';
    if (v[i].empty()) text += "\"\"";
    AppendHex(text, v[i]);
  }
  text += '}';
  return Add(std::string_view(text));
}
Params& Params::AddArray(const std::vector<std::string>& v) {
  std::string text = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) text += ',';
    text += '"';
    for (char ch : v[i]) {
      if (ch == '"' || ch == '\\') text += '\\';
      text += ch;
    }
    text += '"';
  }
  text += '}';
  return Add(std::string_view(text));
}
Params& Params::AddNull() {
  values_.emplace_back();
  null_.push_back(true);
  binary_.push_back(false);
  return *this;
}

int64_t Rows::Int(int row, int col) const {
  const char* p = PQgetvalue(r_.get(), row, col);
  switch (PQgetlength(r_.get(), row, col)) {
    case 8:
      return static_cast<int64_t>(BigEndian64(p));
    case 4: {
      uint32_t v = 0;
      std::memcpy(&v, p, 4);
      return static_cast<int32_t>(ntohl(v));
    }
    case 2: {
      uint16_t v = 0;
      std::memcpy(&v, p, 2);
      return static_cast<int16_t>(ntohs(v));
    }
    default:
      return 0;
  }
}
std::optional<int64_t> Rows::OptInt(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return Int(row, col);
}
double Rows::Double(int row, int col) const {
  if (PQgetlength(r_.get(), row, col) != 8) return 0;
  return std::bit_cast<double>(BigEndian64(PQgetvalue(r_.get(), row, col)));
}
std::optional<double> Rows::OptDouble(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return Double(row, col);
}
std::string_view Rows::Bytes(int row, int col) const {
  return {PQgetvalue(r_.get(), row, col), static_cast<size_t>(PQgetlength(r_.get(), row, col))};
}

Status ErrorOf(PGconn* conn, const PGresult* r, std::string_view what) {
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  std::string words = r && *PQresultErrorMessage(r) ? PQresultErrorMessage(r) : PQerrorMessage(conn);
  while (!words.empty() && (words.back() == '\n' || words.back() == ' ')) words.pop_back();
  std::string msg = fmt::format("postgresql: {}: {}", what, words);
  if (sqlstate == "42501") return Status(StatusCode::kPermissionDenied, msg);
  if (sqlstate == "57014") return Unavailable(msg + " (the statement was cancelled or timed out; nothing of it was applied)");
  // A unique key or a partition another replica wrote or dropped meanwhile: a retry
  // finds what is stored.
  if (sqlstate == "23505" || sqlstate == "23514") return Unavailable(msg + " (a concurrent writer; retry)");
  // lock_timeout ran out: another session holds what the statement needed.
  if (sqlstate == "55P03") return Unavailable(msg + " (held by another session; retry)");
  if (sqlstate.empty() || sqlstate.starts_with("08") || sqlstate.starts_with("53") || sqlstate.starts_with("57") ||
      sqlstate == "40001" || sqlstate == "40P01" || PQstatus(conn) != CONNECTION_OK) {
    return Unavailable(msg);
  }
  return Internal(msg);
}

std::string Redacted(std::string_view url) {
  static const std::regex password(R"(://([^:/@]*):[^@/]*@)");
  static const std::regex keyword(R"(password\s*=\s*\S+)");
  std::string out = std::regex_replace(std::string(url), password, "://$1:***@");
  return std::regex_replace(out, keyword, "password=***");
}

Result<std::unique_ptr<Conn>> Conn::Open(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  if (c == nullptr) return Unavailable("postgresql: out of memory connecting");
  if (PQstatus(c) != CONNECTION_OK) {
    std::string why = PQerrorMessage(c);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    PQfinish(c);
    return Unavailable(fmt::format("postgresql: cannot connect to {}: {}", Redacted(url), why));
  }
  return std::unique_ptr<Conn>(new Conn(c, url));
}

Conn::~Conn() { PQfinish(c_); }

Status Conn::Reset() {
  PQreset(c_);
  if (PQstatus(c_) != CONNECTION_OK) {
    std::string why = PQerrorMessage(c_);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return Unavailable(fmt::format("postgresql: cannot connect to {}: {}", Redacted(url_), why));
  }
  return Status::Ok();
}

bool Conn::InTransaction() const {
  PGTransactionStatusType t = PQtransactionStatus(c_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

// Params as the arrays libpq's calls take; they point into `p`, which must outlive them.
struct Conn::Bound {
  explicit Bound(const Params& p) : n(static_cast<int>(p.size())), values(p.size()), lengths(p.size()), formats(p.size()) {
    for (size_t i = 0; i < p.size(); ++i) {
      values[i] = p.null_[i] ? nullptr : p.values_[i].data();
      lengths[i] = static_cast<int>(p.values_[i].size());
      formats[i] = p.binary_[i] ? 1 : 0;
    }
  }
  int n;
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
};

Result<Rows> Conn::Query(std::string_view sql, const Params& params, std::string_view what) {
  const Bound b(params);
  std::string text(sql);
  PGresult* r = PQexecParams(c_, text.c_str(), b.n, nullptr, b.values.data(), b.lengths.data(), b.formats.data(), 1);
  ExecStatusType st = PQresultStatus(r);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    Status err = ErrorOf(c_, r, what);
    PQclear(r);
    return err;
  }
  return Rows(r);
}

Status Conn::Exec(std::string_view sql, std::string_view what) {
  std::string text(sql);
  PGresult* r = PQexec(c_, text.c_str());
  ExecStatusType st = PQresultStatus(r);
  Status out = (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) ? Status::Ok() : ErrorOf(c_, r, what);
  PQclear(r);
  return out;
}

Status Conn::ExecWithin(std::string_view sql, std::string_view what, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  const std::string text(sql);
  if (PQsendQuery(c_, text.c_str()) != 1) return Unavailable(fmt::format("postgresql: {}: {}", what, PQerrorMessage(c_)));
  Status out = Status::Ok();
  for (;;) {
    for (int unsent = PQflush(c_); unsent == 1 || PQisBusy(c_); unsent = PQflush(c_)) {
      if (unsent < 0) return Unavailable(fmt::format("postgresql: {}: {}", what, PQerrorMessage(c_)));
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return Unavailable(fmt::format("postgresql: {}: no answer within {} ms", what, wait.count()));
      }
      pollfd fd{PQsocket(c_), static_cast<short>(unsent == 1 ? POLLIN | POLLOUT : POLLIN), 0};
      if (::poll(&fd, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
        return Unavailable(fmt::format("postgresql: {}: {}", what, std::strerror(errno)));
      }
      if (PQconsumeInput(c_) != 1) return Unavailable(fmt::format("postgresql: {}: {}", what, PQerrorMessage(c_)));
    }
    PGresult* r = PQgetResult(c_);
    if (r == nullptr) return out;
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && out.ok()) out = ErrorOf(c_, r, what);
    PQclear(r);
  }
}

Status Conn::Pipeline(std::string_view sql, const std::vector<Params>& rows, std::string_view what) {
  if (rows.empty()) return Status::Ok();
  if (PQenterPipelineMode(c_) != 1) return Unavailable(fmt::format("postgresql: {}: {}", what, PQerrorMessage(c_)));
  const std::string text(sql);
  Status out = Status::Ok();
  for (const Params& p : rows) {
    const Bound b(p);
    if (PQsendQueryParams(c_, text.c_str(), b.n, nullptr, b.values.data(), b.lengths.data(), b.formats.data(), 1) != 1) {
      out = Unavailable(fmt::format("postgresql: {}: {}", what, PQerrorMessage(c_)));
      break;
    }
  }
  if (PQpipelineSync(c_) != 1 && out.ok()) out = Unavailable(fmt::format("postgresql: {}: {}", what, PQerrorMessage(c_)));
  // Every statement's result (and the NULL after it), then the sync's.
  for (;;) {
    PGresult* r = PQgetResult(c_);
    if (r == nullptr) {
      if (PQstatus(c_) != CONNECTION_OK) {
        if (out.ok()) out = Unavailable(fmt::format("postgresql: {}: {}", what, PQerrorMessage(c_)));
        break;
      }
      continue;
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      break;
    }
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_PIPELINE_ABORTED && out.ok()) {
      out = ErrorOf(c_, r, what);
    }
    PQclear(r);
  }
  PQexitPipelineMode(c_);
  return out;
}

void AppendHex(std::string& out, std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
}

}  // namespace gpuledger::store::pg
