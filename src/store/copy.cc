#include "store/copy.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "core/time.h"
#include "store/pg_partitions.h"
#include "store/pg_store.h"
#include "store/pg_util.h"
#include "store/sqlite_util.h"

namespace gpuledger::store {
namespace {

using pg::Conn;
using pg::Params;
using pg::Rows;
using sqlite::Stmt;

// What PostgreSQL keeps by itself (copy.h).
const std::set<std::string> kNotCopied = {"meta", "catalog_versions", "rollup_day_versions", "leases"};

// The time-partitioned tables (by day) and the column that places a row.
struct PartitionedTable {
  const char* table;
  const char* time_column;
};
constexpr PartitionedTable kPartitioned[] = {{"sample_chunks", "first_ms"}, {"process_samples", "t_ms"}};

enum class Type { kInt8, kFloat8, kText, kBytea };

struct Column {
  std::string name;    // PostgreSQL's
  std::string source;  // what SQLite selects for it
  Type type;
};

class SqliteSource {
 public:
  ~SqliteSource() {
    if (db_) sqlite3_close(db_);
  }
  Status Open(const std::string& path) {
    if (int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr); rc != SQLITE_OK) {
      return sqlite::Error(db_, rc, fmt::format("opening {}", path));
    }
    sqlite3_busy_timeout(db_, 10'000);
    // One snapshot for the whole copy: a read transaction, begun by its first read.
    GPULEDGER_RETURN_IF_ERROR(sqlite::Exec(db_, "BEGIN"));
    return Status::Ok();
  }
  sqlite3* db() { return db_; }

  // The values of `sql`'s single integer column.
  Result<std::vector<int64_t>> Ints(const std::string& sql, std::string_view what) {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, sql));
    std::vector<int64_t> out;
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, what, [&] {
      out.push_back(q.Int(0));
      return Status::Ok();
    }));
    return out;
  }
  Result<std::vector<std::string>> Texts(const std::string& sql, std::string_view what) {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, sql));
    std::vector<std::string> out;
    GPULEDGER_RETURN_IF_ERROR(sqlite::ForEach(db_, q, what, [&] {
      out.push_back(q.Text(0));
      return Status::Ok();
    }));
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// COPY's binary format (PostgreSQL's documentation, "COPY", "Binary Format"): a signature,
// flags and a header extension length, then per row a field count and each field as its
// length (-1 for NULL) and its bytes, integers and floats in network order.
class BinaryCopy {
 public:
  BinaryCopy() {
    static constexpr char kSignature[] = "PGCOPY\n\377\r\n";
    buf_.append(kSignature, sizeof(kSignature));  // with its trailing NUL: 11 bytes
    Int32(0);
    Int32(0);
  }
  void Row(int fields) { Int16(static_cast<int16_t>(fields)); }
  void Null() { Int32(-1); }
  void Int8(int64_t v) {
    Int32(8);
    Int64(v);
  }
  void Float8(double v) {
    Int32(8);
    Int64(std::bit_cast<int64_t>(v));
  }
  void Bytes(std::string_view b) {
    Int32(static_cast<int32_t>(b.size()));
    buf_.append(b);
  }
  void End() { Int16(-1); }
  std::string& buffer() { return buf_; }

 private:
  void Int16(int16_t v) {
    auto u = static_cast<uint16_t>(v);
    buf_.push_back(static_cast<char>(u >> 8));
    buf_.push_back(static_cast<char>(u));
  }
  void Int32(int32_t v) {
    auto u = static_cast<uint32_t>(v);
    for (int shift = 24; shift >= 0; shift -= 8) buf_.push_back(static_cast<char>(u >> shift));
  }
  void Int64(int64_t v) {
    auto u = static_cast<uint64_t>(v);
    for (int shift = 56; shift >= 0; shift -= 8) buf_.push_back(static_cast<char>(u >> shift));
  }
  std::string buf_;
};

const char* SqliteTypeName(int type) {
  switch (type) {
    case SQLITE_INTEGER:
      return "an integer";
    case SQLITE_FLOAT:
      return "a real";
    case SQLITE_TEXT:
      return "a text";
    case SQLITE_BLOB:
      return "a blob";
    default:
      return "a null";
  }
}

class Copier {
 public:
  Copier(SqliteSource& src, Conn& dst, std::string url) : src_(src), dst_(dst), url_(std::move(url)) {}

  Result<std::vector<CopiedTable>> Run(const std::function<void(const CopiedTable&)>& on_table) {
    GPULEDGER_ASSIGN_OR_RETURN(std::vector<std::string> tables, MatchTables());
    std::vector<std::string> copied;
    for (const std::string& t : tables) {
      if (!kNotCopied.count(t)) copied.push_back(t);
    }
    // No replica writes while the copy runs (one that starts waits for its commit), and
    // the emptiness checked below holds to the end.
    GPULEDGER_RETURN_IF_ERROR(
        dst_.Exec(fmt::format("LOCK TABLE {} IN EXCLUSIVE MODE", fmt::join(copied, ", ")), "locking the tables"));
    for (const std::string& t : copied) {
      GPULEDGER_ASSIGN_OR_RETURN(Rows any, dst_.Query(fmt::format("SELECT 1 FROM {} LIMIT 1", t), "reading " + t));
      if (any.rows() > 0) {
        return FailedPrecondition(fmt::format("the database {} already holds a store (its table {} has rows); "
                                              "copy into an empty database",
                                              pg::Redacted(url_), t));
      }
    }
    GPULEDGER_RETURN_IF_ERROR(
        dst_.Query("SELECT pg_advisory_xact_lock($1)", Params().Add(pg::kPartitionLock), "creating partitions").status());
    GPULEDGER_RETURN_IF_ERROR(CreatePartitions());
    std::vector<CopiedTable> out;
    for (const std::string& t : copied) {
      GPULEDGER_ASSIGN_OR_RETURN(int64_t rows, CopyTable(t));
      out.push_back({t, rows});
      if (on_table) on_table(out.back());
    }
    GPULEDGER_RETURN_IF_ERROR(ContinueSequences(copied));
    return out;
  }

 private:
  // The tables both sides have, in PostgreSQL's order; one on a side only is an error.
  Result<std::vector<std::string>> MatchTables() {
    GPULEDGER_ASSIGN_OR_RETURN(Rows pg_tables,
                               dst_.Query("SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                                          " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
                                          " AND NOT c.relispartition ORDER BY 1",
                                          "listing the database's tables"));
    GPULEDGER_ASSIGN_OR_RETURN(std::vector<std::string> sqlite_tables,
                               src_.Texts("SELECT name FROM sqlite_master WHERE type = 'table'"
                                          " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY 1",
                                          "the SQLite store's tables"));
    std::vector<std::string> tables;
    for (int i = 0; i < pg_tables.rows(); ++i) tables.push_back(pg_tables.Text(i, 0));
    for (const std::string& t : tables) {
      if (!std::binary_search(sqlite_tables.begin(), sqlite_tables.end(), t)) {
        return FailedPrecondition(fmt::format("the SQLite store has no table {}, which the database has", t));
      }
    }
    for (const std::string& t : sqlite_tables) {
      if (!std::binary_search(tables.begin(), tables.end(), t)) {
        return FailedPrecondition(fmt::format("the database has no table {}, which the SQLite store has", t));
      }
    }
    return tables;
  }

  // The day partitions of every time the SQLite store holds.
  Status CreatePartitions() {
    std::map<std::string, pg::Partition> parts;
    for (const PartitionedTable& p : kPartitioned) {
      // Whole days, floored (a time before 1970 too); each table's key leads with or
      // holds its time column, so this reads an index, not the rows.
      GPULEDGER_ASSIGN_OR_RETURN(
          std::vector<int64_t> days,
          src_.Ints(fmt::format("SELECT DISTINCT {0} - (({0} % 86400000) + 86400000) % 86400000 FROM {1}",
                                p.time_column, p.table),
                    fmt::format("the days of {}", p.table)));
      for (int64_t day : days) {
        pg::Partition part = pg::DayPartition(p.table, day);
        parts.emplace(part.name, part);
      }
    }
    for (const auto& [name, part] : parts) GPULEDGER_RETURN_IF_ERROR(pg::CreatePartition(dst_, part));
    return Status::Ok();
  }

  Result<std::vector<Column>> Columns(const std::string& table) {
    GPULEDGER_ASSIGN_OR_RETURN(Rows cols, dst_.Query("SELECT attname::text, format_type(atttypid, atttypmod), atthasdef::int"
                                                     " FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0"
                                                     " AND NOT attisdropped ORDER BY attnum",
                                                     Params().Add(table), "reading the columns of " + table));
    GPULEDGER_ASSIGN_OR_RETURN(std::vector<std::string> theirs,
                               src_.Texts(fmt::format("SELECT name FROM pragma_table_info('{}')", table),
                                          "the columns of " + table));
    std::vector<Column> out;
    for (int i = 0; i < cols.rows(); ++i) {
      Column c{cols.Text(i, 0), cols.Text(i, 0), Type::kInt8};
      const std::string type = cols.Text(i, 1);
      const bool in_sqlite = std::find(theirs.begin(), theirs.end(), c.name) != theirs.end();
      // A column of PostgreSQL's own layout with a default that says what SQLite's rows are
      // (rollup_day_minutes.hour: -1, a day's value) is left to its default.
      if (!in_sqlite && c.name != "id" && cols.Int(i, 2) == 1) continue;
      if (type == "bigint") {
        c.type = Type::kInt8;
      } else if (type == "double precision") {
        c.type = Type::kFloat8;
      } else if (type == "text") {
        c.type = Type::kText;
      } else if (type == "bytea") {
        c.type = Type::kBytea;
      } else {
        return FailedPrecondition(fmt::format("column {}.{} is of type {}, which the copy does not know", table,
                                              c.name, type));
      }
      if (!in_sqlite) {
        // PostgreSQL's identity key where SQLite numbers the rows itself.
        if (c.name != "id") {
          return FailedPrecondition(fmt::format("the SQLite store's table {} has no column {}", table, c.name));
        }
        c.source = "rowid";
      }
      out.push_back(std::move(c));
    }
    for (const std::string& t : theirs) {
      if (std::none_of(out.begin(), out.end(), [&](const Column& c) { return c.name == t; })) {
        return FailedPrecondition(fmt::format("the database's table {} has no column {}", table, t));
      }
    }
    return out;
  }

  Result<int64_t> CopyTable(const std::string& table) {
    GPULEDGER_ASSIGN_OR_RETURN(std::vector<Column> cols, Columns(table));
    std::vector<std::string> names, sources;
    for (const Column& c : cols) {
      names.push_back(c.name);
      sources.push_back(c.source);
    }
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(src_.db(), fmt::format("SELECT {} FROM {}", fmt::join(sources, ", "), table)));
    const std::string what = "copying table " + table;
    PGconn* c = dst_.get();
    {
      PGresult* r = PQexec(c, fmt::format("COPY {} ({}) FROM STDIN (FORMAT binary)", table, fmt::join(names, ", ")).c_str());
      const bool in = PQresultStatus(r) == PGRES_COPY_IN;
      Status st = in ? Status::Ok() : pg::ErrorOf(c, r, what);
      PQclear(r);
      GPULEDGER_RETURN_IF_ERROR(st);
    }
    BinaryCopy out;
    int64_t rows = 0;
    auto send = [&]() -> Status {
      std::string& b = out.buffer();
      if (!b.empty() && PQputCopyData(c, b.data(), static_cast<int>(b.size())) != 1) return pg::ErrorOf(c, nullptr, what);
      b.clear();
      return Status::Ok();
    };
    Status read = sqlite::ForEach(src_.db(), q, "table " + table, [&]() -> Status {
      out.Row(static_cast<int>(cols.size()));
      for (size_t i = 0; i < cols.size(); ++i) {
        const int col = static_cast<int>(i);
        const int type = sqlite3_column_type(q.get(), col);
        if (type == SQLITE_NULL) {
          out.Null();
          continue;
        }
        auto wrong = [&] {
          return FailedPrecondition(fmt::format("table {}, row {}: column {} holds {} in the SQLite store, which "
                                                "PostgreSQL's column does not take",
                                                table, rows + 1, cols[i].name, SqliteTypeName(type)));
        };
        switch (cols[i].type) {
          case Type::kInt8:
            if (type != SQLITE_INTEGER) return wrong();
            out.Int8(q.Int(col));
            break;
          case Type::kFloat8:
            if (type != SQLITE_FLOAT && type != SQLITE_INTEGER) return wrong();
            out.Float8(q.Double(col));
            break;
          case Type::kText:
          case Type::kBytea:
            if (type != SQLITE_TEXT && type != SQLITE_BLOB) return wrong();
            out.Bytes(q.Blob(col));
            break;
        }
      }
      ++rows;
      return out.buffer().size() >= (1 << 20) ? send() : Status::Ok();
    });
    if (read.ok()) {
      out.End();
      read = send();
    }
    if (PQputCopyEnd(c, read.ok() ? nullptr : "the copy's source failed") != 1 && read.ok()) {
      read = pg::ErrorOf(c, nullptr, what);
    }
    Status copied = Status::Ok();
    int64_t counted = -1;
    while (PGresult* r = PQgetResult(c)) {
      if (PQresultStatus(r) == PGRES_COMMAND_OK) {
        counted = std::strtoll(PQcmdTuples(r), nullptr, 10);
      } else if (copied.ok()) {
        copied = pg::ErrorOf(c, r, what);
      }
      PQclear(r);
    }
    GPULEDGER_RETURN_IF_ERROR(read);
    GPULEDGER_RETURN_IF_ERROR(copied);
    if (counted != rows) {
      return Internal(fmt::format("{}: {} rows read from the SQLite store, {} stored; nothing is committed", what, rows,
                                  counted));
    }
    return rows;
  }

  // Identity keys and dirty-hour generations go on after the copied ones.
  Status ContinueSequences(const std::vector<std::string>& copied) {
    GPULEDGER_ASSIGN_OR_RETURN(Rows identities,
                               dst_.Query("SELECT c.relname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                                          " JOIN pg_namespace n ON n.oid = c.relnamespace"
                                          " WHERE n.nspname = current_schema() AND a.attname = 'id' AND a.attidentity <> ''",
                                          "listing identity keys"));
    for (int i = 0; i < identities.rows(); ++i) {
      const std::string t = identities.Text(i, 0);
      if (std::find(copied.begin(), copied.end(), t) == copied.end()) continue;
      GPULEDGER_RETURN_IF_ERROR(
          dst_.Query(fmt::format("SELECT setval(pg_get_serial_sequence('{0}', 'id'), max(id)) FROM {0} HAVING max(id) > 0", t),
                     "continuing the keys of " + t)
              .status());
    }
    GPULEDGER_ASSIGN_OR_RETURN(
        std::vector<int64_t> generation,
        src_.Ints("SELECT max(coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'dirty_generation'), 0),"
                  " coalesce((SELECT max(generation) FROM dirty_hours), 0))",
                  "the dirty-hour generation"));
    if (!generation.empty() && generation[0] > 0) {
      GPULEDGER_RETURN_IF_ERROR(dst_.Query("SELECT setval('dirty_generation', greatest($1::bigint,"
                                           " (SELECT last_value FROM dirty_generation)))",
                                           Params().Add(generation[0]), "continuing the dirty-hour generations")
                                    .status());
    }
    return Status::Ok();
  }

  SqliteSource& src_;
  Conn& dst_;
  std::string url_;
};

}  // namespace

Result<std::vector<CopiedTable>> CopySqliteIntoPostgres(const std::string& sqlite_path, const std::string& pg_url,
                                                        const std::function<void(const CopiedTable&)>& on_table) {
  if (IsPostgresUrl(sqlite_path)) return InvalidArgument("the store to copy from must be a SQLite file");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(sqlite_path, ec)) {
    return NotFound(fmt::format("no SQLite store at {}", sqlite_path));
  }
  if (!IsPostgresUrl(pg_url)) {
    return InvalidArgument(fmt::format("the store to copy into must be a postgresql:// URL, not {}", pg_url));
  }
  // Both at this build's schema: opened (and migrated) as stores. The SQLite one is held
  // as a server holds it (exclusive_writer) until the copy ends: a server running on it
  // fails the copy, saying so, and none starts on it meanwhile.
  auto held = OpenSqliteStore(sqlite_path, SqliteOptions{.exclusive_writer = true, .day_cache_bytes = 0});
  if (!held.ok()) return held.status().WithContext("the SQLite store");
  {
    auto d = OpenPgStore(pg_url, PgOptions{.idle_readers = 0, .day_cache_bytes = 0});
    if (!d.ok()) return d.status();
  }
  SqliteSource src;
  GPULEDGER_RETURN_IF_ERROR(src.Open(sqlite_path));
  GPULEDGER_ASSIGN_OR_RETURN(std::unique_ptr<Conn> dst, Conn::Open(pg_url));
  GPULEDGER_RETURN_IF_ERROR(dst->Exec("BEGIN", "beginning the copy"));
  Copier copier(src, *dst, pg_url);
  auto copied = copier.Run(on_table);
  if (!copied.ok()) {
    if (dst->InTransaction()) (void)dst->Exec("ROLLBACK", "giving the copy up");
    return copied.status();
  }
  GPULEDGER_RETURN_IF_ERROR(dst->Exec("COMMIT", "committing the copy"));
  // The planner's statistics of the new rows now, not when autovacuum comes to them: the
  // first queries on the copy would otherwise be planned for empty tables. Committed
  // already, the copy stands whether this succeeds or not (autovacuum analyzes later).
  std::vector<std::string> names;
  for (const CopiedTable& t : *copied) names.push_back(t.name);
  (void)dst->Exec(fmt::format("ANALYZE {}", fmt::join(names, ", ")), "analyzing the copied tables");
  return copied;
}

}  // namespace gpuledger::store
