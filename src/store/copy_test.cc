// Copying a SQLite store into PostgreSQL (store/copy.h), against the test binary's real
// PostgreSQL: every table row for row, doubles to the bit, read back by a second road (a
// SELECT in binary, not the COPY that wrote them); exactly-once, keys and dirty-hour
// generations going on after the copied ones; and all or nothing.
#include "store/copy.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <bit>
#include <compare>
#include <cstring>
#include <filesystem>
#include <variant>

#include "core/price_book.h"
#include "core/testing/missing_component.h"
#include "ledger/ingest_plan.h"
#include "ledger/ledger.h"
#include "store/actions.h"
#include "store/pg_store.h"
#include "store/testing/pg_server.h"
#include "store/testing/test_batches.h"

namespace gpuledger::store {
namespace {

using ::testing::HasSubstr;
using testing_batches::OfStream;
using testing_batches::OnNode;

constexpr int64_t kT0 = 1'795'420'800'000;  // 2026-11-23T08:00:00Z
constexpr int64_t kDay = 24 * kMsPerHour;

// A stored value: NULL, an integer, a double's bits, or bytes.
struct Bits {
  uint64_t v;
  auto operator<=>(const Bits&) const = default;
};
using Value = std::variant<std::monostate, int64_t, Bits, std::string>;
using Row = std::vector<Value>;

// Rows as text, for a failure's message: doubles as their bits.
std::string Show(const std::vector<Row>& rows) {
  std::string out;
  for (const Row& r : rows) {
    for (const Value& v : r) {
      if (std::holds_alternative<std::monostate>(v)) out += "NULL";
      if (const auto* i = std::get_if<int64_t>(&v)) out += std::to_string(*i);
      if (const auto* b = std::get_if<Bits>(&v)) out += fmt::format("f{:016x}", b->v);
      if (const auto* t = std::get_if<std::string>(&v)) out += fmt::format("'{}'", t->size() > 40 ? fmt::format("{} bytes", t->size()) : *t);
      out += ' ';
    }
    out += '\n';
  }
  return out;
}

// The tables the copy does not carry (copy.h).
const std::vector<std::string> kNotCopied = {"meta", "catalog_versions", "rollup_day_versions", "leases"};

class StoreCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = pgtest::PgTestServer::Shared();
    if (!server.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << server.status().ToString();
    server_ = *server;
    auto db = server_->CreateDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    url_ = server_->Url(*db);
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("gpuledger-copy-{}-{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "ledger.db").string();
    pg_ = PQconnectdb(url_.c_str());
    ASSERT_EQ(PQstatus(pg_), CONNECTION_OK) << PQerrorMessage(pg_);
  }
  void TearDown() override {
    if (pg_) PQfinish(pg_);
    std::filesystem::remove_all(dir_);
  }

  // A SQLite store with something in every table the copy carries: two nodes over two
  // months, a job whose team changed, a serving job, progress, processes, a stream of
  // batch ids folded into runs, prices, a closed month, an audit log, a lease, rollups
  // refreshed and then a batch whose hours are still dirty.
  void FillSqlite() {
    auto s = OpenSqliteStore(path_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto log = ActionLogOf(**s);
    ASSERT_TRUE(log.ok());
    ActionRecord a{.decision_id = "d1", .at_ms = kT0, .rule = "idle", .job_key = "j-na", .team = "t",
                   .action = "notify", .outcome = "proposed", .evidence = "idle 2h"};
    ASSERT_TRUE((*log)->RecordActions({&a, 1}).ok());
    ASSERT_TRUE((*log)->HoldLease("objectives", "server-1", kT0, 60'000).ok());
    ManualClock clock(kT0 + 12 * kDay);
    ledger::Ledger ledger(std::move(*s), clock);
    auto book = PriceBook::Create({{"*", "*", CapacityType::kOnDemand, *Money::Parse("2.50"), {0, kForever}}});
    ASSERT_TRUE(book.ok());
    ASSERT_TRUE(ledger.SetPrices(*book).ok());
    auto ingest = [&](const Batch& b) {
      auto r = ledger.Ingest(b);
      ASSERT_TRUE(r.ok()) << b.batch_id << ": " << r.status().ToString();
    };
    Batch first = OnNode("a-1", "na", kT0, 90);
    first.samples[0].processes.push_back(ProcessSample{.pid = 4242, .job_id = "j-na", .fb_used_mib = 1536.25,
                                                       .sm_share = 0.125});
    first.samples[1].processes.push_back(ProcessSample{.pid = 4243, .job_id = "", .fb_used_mib = 0.1});
    first.progress.push_back(Progress{"j-na", kT0 + 60'000, 60'000, 1.0 / 3, 6.02e23});
    first.progress.push_back(Progress{"j-na", kT0 + 120'000, 60'000, std::nullopt, -0.0});
    ingest(first);
    ingest(OnNode("b-1", "nb", kT0 + kDay, 30));
    ingest(testing_batches::ServingEverySixHours("serve-1", kT0));
    for (int64_t seq = 1; seq <= 400; ++seq) ingest(OfStream("s", seq, kT0));
    ingest(OnNode("b-2", "nb", kT0 + 9 * kDay, 30));  // December
    ASSERT_TRUE(ledger.RefreshRollups().ok());
    ASSERT_TRUE(ledger.ClosePeriod("2026-11", "finance").ok());
    Batch moved = OnNode("a-2", "na", kT0 + 9 * kDay, 5);  // December, its team changed
    moved.jobs[0].team = "t2";
    ingest(moved);  // left dirty
    // Snapshots half an hour after the first ones: hours of two serving chunks, unmerged.
    ingest(testing_batches::ServingEverySixHours("serve-2", kT0 + 30 * kMsPerMinute));
  }

  Status Copy() { return CopySqliteIntoPostgres(path_, url_).status(); }

  std::vector<std::string> CopiedTables() {
    std::vector<std::string> out;
    for (const Row& r : Pg("SELECT relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                           " WHERE n.nspname = 'public' AND relkind IN ('r', 'p') AND NOT relispartition ORDER BY 1")) {
      const std::string& t = std::get<std::string>(r[0]);
      if (std::find(kNotCopied.begin(), kNotCopied.end(), t) == kNotCopied.end()) out.push_back(t);
    }
    return out;
  }

  // PostgreSQL's column names and whether each is a double.
  std::vector<std::pair<std::string, bool>> ColumnsOf(const std::string& table) {
    std::vector<std::pair<std::string, bool>> out;
    for (const Row& r : Pg(fmt::format("SELECT attname::text, (atttypid = 'float8'::regtype)::int::bigint FROM pg_attribute"
                                       " WHERE attrelid = '{}'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                                       table))) {
      // PostgreSQL's own: which of a device-day's minute rows (-1, a day's value, for all a
      // copy brings; checked apart).
      if (table == "rollup_day_minutes" && std::get<std::string>(r[0]) == "hour") continue;
      out.emplace_back(std::get<std::string>(r[0]), std::get<int64_t>(r[1]) != 0);
    }
    return out;
  }

  // `sql`'s rows from PostgreSQL, in binary, in its order.
  std::vector<Row> Pg(const std::string& sql) {
    PGresult* r = PQexecParams(pg_, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 1);
    EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << sql << ": " << PQresultErrorMessage(r);
    std::vector<Row> out;
    for (int i = 0; i < PQntuples(r); ++i) {
      Row row;
      for (int j = 0; j < PQnfields(r); ++j) {
        if (PQgetisnull(r, i, j)) {
          row.emplace_back();
          continue;
        }
        const char* v = PQgetvalue(r, i, j);
        uint64_t be = 0;
        switch (PQftype(r, j)) {
          case 20:   // int8
          case 701:  // float8
            for (int k = 0; k < 8; ++k) be = (be << 8) | static_cast<unsigned char>(v[k]);
            if (PQftype(r, j) == 20) {
              row.emplace_back(static_cast<int64_t>(be));
            } else {
              row.emplace_back(Bits{be});
            }
            break;
          default:  // text, bytea
            row.emplace_back(std::string(v, static_cast<size_t>(PQgetlength(r, i, j))));
        }
      }
      out.push_back(std::move(row));
    }
    PQclear(r);
    return out;
  }

  // Table `table`'s rows in the SQLite store, read as PostgreSQL's columns (`rowid` for an
  // `id` SQLite lacks; a double column's integers as doubles).
  std::vector<Row> Sqlite(const std::string& table) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    auto cols = ColumnsOf(table);
    std::vector<std::string> select;
    for (const auto& [name, is_double] : cols) {
      sqlite3_stmt* probe = nullptr;
      bool has = sqlite3_prepare_v2(db, fmt::format("SELECT {} FROM {}", name, table).c_str(), -1, &probe, nullptr) ==
                 SQLITE_OK;
      sqlite3_finalize(probe);
      select.push_back(has ? name : "rowid");
    }
    sqlite3_stmt* q = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, fmt::format("SELECT {} FROM {}", fmt::join(select, ", "), table).c_str(), -1, &q,
                                 nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    std::vector<Row> out;
    while (sqlite3_step(q) == SQLITE_ROW) {
      Row row;
      for (size_t j = 0; j < cols.size(); ++j) {
        const int c = static_cast<int>(j);
        switch (sqlite3_column_type(q, c)) {
          case SQLITE_NULL:
            row.emplace_back();
            break;
          case SQLITE_INTEGER:
            if (cols[j].second) {
              row.emplace_back(Bits{std::bit_cast<uint64_t>(static_cast<double>(sqlite3_column_int64(q, c)))});
            } else {
              row.emplace_back(static_cast<int64_t>(sqlite3_column_int64(q, c)));
            }
            break;
          case SQLITE_FLOAT:
            row.emplace_back(Bits{std::bit_cast<uint64_t>(sqlite3_column_double(q, c))});
            break;
          default:
            row.emplace_back(std::string(static_cast<const char*>(sqlite3_column_blob(q, c)),
                                         static_cast<size_t>(sqlite3_column_bytes(q, c))));
        }
      }
      out.push_back(std::move(row));
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    std::sort(out.begin(), out.end());
    return out;
  }

  void ExecSqlite(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
  }

  int64_t PgCount(const std::string& table) {
    return std::get<int64_t>(Pg("SELECT count(*) FROM " + table).at(0).at(0));
  }

  pgtest::PgTestServer* server_ = nullptr;
  std::string url_, path_;
  std::filesystem::path dir_;
  PGconn* pg_ = nullptr;
};

TEST_F(StoreCopyTest, EveryTableArrivesRowForRowAndTheStoreGoesOnFromIt) {
  ASSERT_NO_FATAL_FAILURE(FillSqlite());
  std::vector<CopiedTable> reported;
  auto copied = CopySqliteIntoPostgres(path_, url_, [&](const CopiedTable& t) { reported.push_back(t); });
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(reported.size(), copied->size());
  const std::vector<std::string> tables = CopiedTables();
  ASSERT_EQ(copied->size(), tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    SCOPED_TRACE(tables[i]);
    std::vector<Row> theirs = Sqlite(tables[i]);
    EXPECT_EQ((*copied)[i].name, tables[i]);
    EXPECT_EQ((*copied)[i].rows, static_cast<int64_t>(theirs.size()));
    EXPECT_FALSE(theirs.empty()) << "the fill leaves no table empty";
    std::vector<std::string> columns;
    for (const auto& [name, is_double] : ColumnsOf(tables[i])) columns.push_back(name);
    std::vector<Row> ours = Pg(fmt::format("SELECT {} FROM {}", fmt::join(columns, ", "), tables[i]));
    std::sort(ours.begin(), ours.end());
    EXPECT_TRUE(ours == theirs) << "row for row, doubles to the bit:\n" << Show(ours) << "against\n" << Show(theirs);
  }
  EXPECT_EQ(PgCount("leases"), 0) << "a running server's, not copied";
  EXPECT_EQ(PgCount("rollup_day_minutes WHERE hour <> -1"), 0) << "each device-day's minutes one value, folded";
  // Raw samples across days, each in its partition.
  EXPECT_EQ(PgCount("sample_chunks_d20261124"), 1) << "node b's first day";

  // The copy is a store: the batches it holds are duplicates, the next of a stream is new,
  // and what comes next gets keys and dirty-hour generations after the copied ones.
  auto pg = OpenPgStore(url_);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  auto plan = [](const Batch& b) { return *ledger::PlanIngest(b); };
  EXPECT_EQ(*(*pg)->ApplyBatch(plan(OnNode("b-1", "nb", kT0 + kDay, 30))), ApplyOutcome::kDuplicate);
  EXPECT_EQ(*(*pg)->ApplyBatch(plan(OfStream("s", 3, kT0))), ApplyOutcome::kDuplicate) << "folded into a run";
  EXPECT_EQ(*(*pg)->ApplyBatch(plan(OfStream("s", 401, kT0))), ApplyOutcome::kApplied);
  const int64_t devices = PgCount("devices"), old_generation = std::get<int64_t>(Pg("SELECT max(generation) FROM dirty_hours").at(0).at(0));
  auto fresh = (*pg)->ApplyBatch(plan(OnNode("c-1", "nc", kT0 + 10 * kDay)));
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(PgCount("devices"), devices + 1);
  EXPECT_EQ(PgCount("devices WHERE uuid = 'GPU-nc' AND id > (SELECT max(id) FROM devices WHERE uuid <> 'GPU-nc')"), 1);
  EXPECT_GT(std::get<int64_t>(Pg("SELECT max(generation) FROM dirty_hours").at(0).at(0)), old_generation);
  EXPECT_EQ(*(*pg)->ApplyBatch(plan(OnNode("c-2", "nc", kT0 + 11 * kDay))), ApplyOutcome::kApplied);
}

// A database that holds a store, a SQLite store a server holds, one that is not there, or
// a destination that is no database: refused, and nothing changes.
TEST_F(StoreCopyTest, ADatabaseThatHoldsAStoreIsRefusedAndKeptAsItWas) {
  ASSERT_NO_FATAL_FAILURE(FillSqlite());
  ASSERT_TRUE(Copy().ok());
  const int64_t chunks = PgCount("sample_chunks");
  Status again = Copy();
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("already holds a store (its table actions has rows); copy into an empty database"));
  EXPECT_EQ(PgCount("sample_chunks"), chunks);
  EXPECT_EQ(CopySqliteIntoPostgres((dir_ / "none.db").string(), url_).status().code(), StatusCode::kNotFound);
  {
    auto served = OpenSqliteStore(path_, SqliteOptions{.exclusive_writer = true});  // as `serve` holds it
    ASSERT_TRUE(served.ok());
    Status held = Copy();
    EXPECT_EQ(held.code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(held.message(), HasSubstr("is held by another gpuledger server or import"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "none.db")) << "a missing store is not made";
  EXPECT_EQ(CopySqliteIntoPostgres(path_, path_).status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(CopySqliteIntoPostgres(url_, url_).status().message(), HasSubstr("must be a SQLite file"));
}

// A value PostgreSQL refuses, in a table copied late, or one of the wrong kind: the copy
// fails naming the table, and no table holds anything of it.
TEST_F(StoreCopyTest, AValueThatCannotGoFailsTheCopyNamingItsTableAndLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(FillSqlite());
  ExecSqlite("UPDATE serving_chunks SET engine = CAST(X'766C6C6DFF' AS TEXT) WHERE engine = 'vllm'");
  Status bad_text = Copy();
  EXPECT_FALSE(bad_text.ok());
  EXPECT_THAT(bad_text.message(), HasSubstr("copying table serving_chunks"));
  EXPECT_THAT(bad_text.message(), HasSubstr("UTF8"));
  for (const std::string& t : CopiedTables()) EXPECT_EQ(PgCount(t), 0) << t;

  ExecSqlite("UPDATE serving_chunks SET engine = 'vllm' WHERE engine <> 'triton';"
             "UPDATE devices SET memory_mib = 1.5 WHERE uuid = 'GPU-nb'");
  Status bad_kind = Copy();
  EXPECT_EQ(bad_kind.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(bad_kind.message(), HasSubstr("table devices, row "));
  EXPECT_THAT(bad_kind.message(), HasSubstr("column memory_mib holds a real in the SQLite store"));
  for (const std::string& t : CopiedTables()) EXPECT_EQ(PgCount(t), 0) << t;

  ExecSqlite("UPDATE devices SET memory_mib = 0 WHERE uuid = 'GPU-nb'");
  EXPECT_TRUE(Copy().ok()) << "mended, it goes";
}

}  // namespace
}  // namespace gpuledger::store
