// What only the PostgreSQL store does: the errors of a networked database (each losing
// nothing and applying no half batch), exactly-once between replicas, time partitions.
// Against the test binary's real PostgreSQL (store/testing/pg_server.h).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "core/testing/missing_component.h"
#include "ledger/ingest_plan.h"
#include "store/batch_ids.h"
#include "store/pg_store.h"
#include "store/testing/pg_server.h"
#include "store/testing/test_batches.h"

namespace gpuledger::store {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kT0 = 1'795'420'800'000;  // 2026-11-23T08:00:00Z

using testing_batches::OnNode;

IngestPlan Plan(const Batch& b) {
  auto plan = ledger::PlanIngest(b);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? std::move(*plan) : IngestPlan{};
}

// A fresh database on the binary's server, and a store on it.
class PgStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = pgtest::PgTestServer::Shared();
    if (!server.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << server.status().ToString();
    server_ = *server;
    auto db = server_->CreateDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = *db;
    auto s = OpenPgStore(server_->Url(db_));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  // A second connection of the test's own, to hold locks and read what is stored.
  PGconn* Connect() {
    PGconn* c = PQconnectdb(server_->Url(db_).c_str());
    EXPECT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    return c;
  }
  static std::string One(PGconn* c, const std::string& sql) {
    PGresult* r = PQexec(c, sql.c_str());
    std::string v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
  }
  static bool Run(PGconn* c, const std::string& sql) {
    PGresult* r = PQexec(c, sql.c_str());
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
    return ok;
  }

  pgtest::PgTestServer* server_ = nullptr;
  std::string db_;
  std::unique_ptr<Store> store_;
};

// A snapshot's sibling is not waited for: through a pgbouncer whose pool for the role is
// full (its one server connection held by the snapshot itself), Sibling gives none at
// once, rather than holding the query in pgbouncer's queue until query_wait_timeout; the
// snapshot reads on, and the connection that waited is withdrawn from the queue.
TEST_F(PgStoreTest, ASiblingIsNotWaitedForWhenThePoolIsFull) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a", "na", kT0))).ok());
  const std::string role(pgtest::kOneServerUser);
  ASSERT_TRUE(server_->Exec(db_, fmt::format("DO $$ BEGIN CREATE ROLE {0} LOGIN SUPERUSER; "
                                             "EXCEPTION WHEN duplicate_object THEN NULL; END $$",
                                             role)).ok());
  auto url = server_->BouncerUrl(db_, role);
  if (!url.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << url.status().ToString();
  auto narrow = OpenPgStore(*url);
  ASSERT_TRUE(narrow.ok()) << narrow.status().ToString();
  auto snap = (*narrow)->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  const auto asked = std::chrono::steady_clock::now();
  std::unique_ptr<StoreSnapshot> sibling = (*snap)->Sibling();
  const auto waited = std::chrono::steady_clock::now() - asked;
  EXPECT_EQ(sibling, nullptr) << "the role's one server connection is the snapshot's";
  EXPECT_LT(waited, std::chrono::seconds(5)) << "Sibling waited in pgbouncer's queue";
  EXPECT_EQ((*snap)->Stats()->batches, 1) << "the snapshot reads on";
  snap->reset();
  // The connection Sibling gave up on left pgbouncer's queue: the next snapshot has the
  // role's one server connection.
  auto next = (*narrow)->Snapshot();
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ((*next)->Stats()->batches, 1);
}

// An unreachable database at start-up is kUnavailable, naming where it looked and never
// the password.
TEST_F(PgStoreTest, AnUnreachableDatabaseAtStartUpIsUnavailableWithoutThePassword) {
  auto missing = OpenPgStore("postgresql://gpl:s3cret@/ledger?host=" + (server_->dir() / "no-such-dir").string() +
                             "&connect_timeout=2");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("postgresql: cannot connect to postgresql://gpl:***@/ledger"));
  EXPECT_THAT(missing.status().message(), ::testing::Not(HasSubstr("s3cret")));
}

// A store migrated by a newer build is refused at start-up with both versions named,
// before anything is written.
TEST_F(PgStoreTest, ASchemaFromANewerBuildIsRefusedNamingBothVersions) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a", "na", kT0))).ok());
  store_.reset();
  ASSERT_TRUE(server_->Exec(db_, "UPDATE meta SET value = '999' WHERE key = 'schema_version'").ok());
  auto s = OpenPgStore(server_->Url(db_));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("has schema version 999, newer than this build (17); upgrade gpuledger"));
}

// A store of schema version 5 had hour rollups and no day rollups: migrating fills them
// from the hour rows, and whole days (read from day rows only) sum as the hours did.
TEST_F(PgStoreTest, MigratesHourRollupsIntoDayRollups) {
  const int64_t day0 = kT0 - 8 * kMsPerHour;  // 2026-11-23T00:00:00Z
  auto row = [](int64_t hour, int64_t job, int64_t active) { return RollupRow{hour, 1, job, {active, 10, 0, 0, 0}, 0}; };
  const std::vector<RollupRow> rows = {row(day0 - kMsPerHour, 1, 1), row(day0, 1, 100), row(day0, 2, 20),
                                       row(day0 + 23 * kMsPerHour, 1, 200), row(day0 + 24 * kMsPerHour, 1, 400)};
  store_.reset();
  ASSERT_TRUE(
      server_
          ->Exec(db_, std::string(testing_batches::kBatchesTableOfOldStores) +
                          testing_batches::ServingTableOfOldStores(/*postgresql=*/true) +
                          testing_batches::RollupTablesOfOldStores(/*postgresql=*/true, rows) +
                          "DROP TABLE rollup_day; DROP TABLE rollup_day_hours; DROP TABLE rollup_day_versions; DROP FUNCTION rollup_day_new_version() CASCADE;"
                      " DROP TABLE catalog_versions; DROP FUNCTION jobs_new_version() CASCADE;"
                      " UPDATE meta SET value = '5' WHERE key = 'schema_version'")
          .ok());
  auto s = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(*s);
  auto active = [&](int64_t from, int64_t to) {
    std::map<int64_t, int64_t> out;  // job -> active ms
    auto sums = store_->SumHourRollups({from, to});  // kept alive: a range-for over *temporary dangles
    EXPECT_TRUE(sums.ok()) << sums.status().ToString();
    for (const RollupSum& r : *sums) out[r.job_id] = r.ms[0];
    return out;
  };
  EXPECT_EQ(active(day0, day0 + kMsPerDay), (std::map<int64_t, int64_t>{{1, 300}, {2, 20}}));
  EXPECT_EQ(active(day0 - kMsPerDay, day0 + 3 * kMsPerDay), (std::map<int64_t, int64_t>{{1, 701}, {2, 20}}));
  EXPECT_EQ(active(day0 + kMsPerHour, day0 + 2 * kMsPerDay), (std::map<int64_t, int64_t>{{1, 600}}));
  // The day hours too: the whole day scans as its hour rows.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> scanned;  // hour, job, active
  ASSERT_TRUE(store_
                  ->ScanHourRollups({day0, day0 + kMsPerDay},
                                    [&](const RollupRow& r) {
                                      scanned.emplace_back(r.period_ms, r.job_id, r.ms[0]);
                                      return Status::Ok();
                                    })
                  .ok());
  EXPECT_EQ(scanned, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                         {day0, 1, 100}, {day0, 2, 20}, {day0 + 23 * kMsPerHour, 1, 200}}));
  // And a version for each day with day rows (schema version 9), which every replica's
  // cache of whole days is keyed by.
  PGconn* c = Connect();
  EXPECT_EQ(One(c, "SELECT count(*) FROM rollup_day_versions"), "3");
  EXPECT_EQ(One(c, "SELECT count(*) FROM rollup_day_versions v"
                   " WHERE v.day_ms IN (SELECT day_ms FROM rollup_day) AND v.version IS NOT NULL"),
            "3");
  EXPECT_EQ(One(c, "SELECT to_regclass('rollup_hour') IS NULL"), "t") << "dropped by schema version 14";
  PQfinish(c);
}

// Schema version 14 keeps hour rows in rollup_day_hours alone. The day rows and day hours
// are derived once more from the hour rows of a database of version 13 (here left wrong
// behind its back: a day row off by one, a device-day's hours gone), which then go. A
// replica that cached the day reads it anew.
TEST_F(PgStoreTest, DroppingTheHourRowsDerivesTheDaysFromThemFirst) {
  const int64_t day0 = kT0 - 8 * kMsPerHour;  // 2026-11-23T00:00:00Z
  auto row = [](int64_t hour, int64_t job, int64_t active) { return RollupRow{hour, 1, job, {active, 10, 0, 0, 0}, 0}; };
  const std::vector<RollupRow> rows = {row(day0, 1, 100), row(day0, 2, 20), row(day0 + 23 * kMsPerHour, 1, 200),
                                       row(day0 + 24 * kMsPerHour, 1, 400)};
  std::vector<RollupUpdate> updates;
  for (const RollupRow& r : rows) {
    if (updates.empty() || updates.back().dirty.hour_ms != r.period_ms) updates.push_back({{1, r.period_ms, 0}, {}, {}});
    updates.back().hour_rows.push_back(r);
  }
  ASSERT_TRUE(store_->WriteRollups(updates).ok());
  ASSERT_TRUE(server_
                  ->Exec(db_, testing_batches::RollupTablesOfOldStores(/*postgresql=*/true, rows) +
                                  "UPDATE rollup_day SET active_ms = active_ms + 1 WHERE job_id = 1;"
                                  " DELETE FROM rollup_day_hours WHERE day_ms = " + std::to_string(day0 + kMsPerDay) +
                                  "; UPDATE meta SET value = '13' WHERE key = 'schema_version'")
                  .ok());
  auto s = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto active = [&](Store& store, int64_t from, int64_t to) {
    std::map<int64_t, int64_t> out;  // job -> active ms
    auto snap = store.Snapshot();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    auto sums = (*snap)->SumSettledHourRollups({from, to});
    EXPECT_TRUE(sums.ok()) << sums.status().ToString();
    for (const RollupSum& r : *sums) out[r.job_id] = r.ms[0];
    return out;
  };
  const std::map<int64_t, int64_t> day = {{1, 300}, {2, 20}};
  EXPECT_EQ(active(**s, day0, day0 + kMsPerDay), day);
  EXPECT_EQ(active(*store_, day0, day0 + kMsPerDay), day) << "the replica that had cached the day";
  EXPECT_EQ(active(**s, day0 + kMsPerHour, day0 + 2 * kMsPerDay), (std::map<int64_t, int64_t>{{1, 600}}));
  std::vector<std::tuple<int64_t, int64_t, int64_t>> scanned;  // hour, job, active
  ASSERT_TRUE((*s)->ScanHourRollups({day0 + kMsPerDay, day0 + 2 * kMsPerDay}, [&](const RollupRow& r) {
                    scanned.emplace_back(r.period_ms, r.job_id, r.ms[0]);
                    return Status::Ok();
                  }).ok());
  EXPECT_EQ(scanned, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{{day0 + 24 * kMsPerHour, 1, 400}}));
  PGconn* c = Connect();
  EXPECT_EQ(One(c, "SELECT to_regclass('rollup_hour') IS NULL"), "t");
  PQfinish(c);
}

// Schema version 15 keeps minute rollups a row per device-day: the rows of rollup_minute
// (one per device-hour) are moved a day at a time, and the table goes.
TEST_F(PgStoreTest, MigratesMinuteRollupsIntoDays) {
  const int64_t day0 = kT0 - 8 * kMsPerHour;  // 2026-11-23T00:00:00Z
  std::map<std::pair<int64_t, int64_t>, int64_t> want;  // (device, minute) -> active ms
  const auto old = testing_batches::OldMinuteRowsAround(day0, want);
  store_.reset();
  ASSERT_TRUE(server_
                  ->Exec(db_, testing_batches::MinuteRowsTableOfOldStores(/*postgresql=*/true, old) +
                                  "UPDATE meta SET value = '14' WHERE key = 'schema_version'")
                  .ok());
  auto s = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(*s);
  std::map<std::pair<int64_t, int64_t>, int64_t> have;
  ASSERT_TRUE(store_->ScanMinuteRollups({day0 - 3 * kMsPerHour, day0 + 2 * kMsPerDay}, [&](const RollupRow& r) {
                    have[{r.device_id, r.period_ms}] = r.ms[0];
                  }).ok());
  EXPECT_EQ(have, want);
  PGconn* c = Connect();
  EXPECT_EQ(One(c, "SELECT to_regclass('rollup_minute') IS NULL"), "t");
  EXPECT_EQ(One(c, "SELECT count(*) FROM rollup_day_minutes"), "6") << "two devices on three days";
  EXPECT_EQ(One(c, "SELECT count(*) FROM rollup_day_minutes WHERE hour = -1"), "6") << "each a folded day (schema 16)";
  // Schema 17: room left on the pages of the tables a refresh updates in place.
  EXPECT_EQ(One(c, "SELECT string_agg(relname || ' ' || array_to_string(reloptions, ','), '; ' ORDER BY relname)"
                   " FROM pg_class WHERE relname IN ('dirty_hours', 'rollup_day', 'rollup_day_hours',"
                   " 'rollup_day_minutes')"),
            "dirty_hours fillfactor=50; rollup_day fillfactor=75; rollup_day_hours fillfactor=75;"
            " rollup_day_minutes fillfactor=75");
  PQfinish(c);
}

// A refresh of a device-hour's minute rollups for the minutes it refreshes, as a test
// writes it: `active` ms in each minute of `minutes` (none: the hour has no minute rows).
RollupUpdate MinuteUpdate(int64_t device, int64_t hour, const std::vector<int64_t>& minutes, int64_t active) {
  RollupUpdate u{{device, hour, 0}, {}, {}};
  int64_t total = 0;
  for (int64_t m : minutes) {
    u.minute_rows.push_back(RollupRow{hour + m * kMsPerMinute, device, 0, {active, 0, 0, 0, 0}, 0});
    total += active;
  }
  if (total > 0) u.hour_rows.push_back(RollupRow{hour, device, 7, {total, 0, 0, 0, 0}, 0});
  return u;
}

// Schema version 17: a refresh makes the marks of the hours it wrote clean in place rather
// than deleting them, so that the hour's next batch marks the same row again (an update,
// no index entry). A clean mark is no mark to any reader, nor to settling; a device's
// clean marks go once a refresh writes an hour of it further on than a batch reaches.
TEST_F(PgStoreTest, ARefreshedHoursMarkIsMadeCleanInPlaceAndMarkedAgain) {
  PGconn* c = Connect();
  // The marks, by hour from kT0, as "<hour> dirty|clean".
  auto marks = [&] {
    return One(c, "SELECT coalesce(string_agg((hour_ms - " + std::to_string(kT0) +
                      ") / 3600000 || CASE WHEN generation < 0 THEN ' clean' ELSE ' dirty' END, ', '"
                      " ORDER BY hour_ms), '') FROM dirty_hours");
  };
  // A refresh of every dirty hour, as the ledger's: each written with the generation read.
  auto refresh = [&] {
    auto dirty = store_->DirtyHours(100);
    ASSERT_TRUE(dirty.ok()) << dirty.status().ToString();
    ASSERT_FALSE(dirty->empty());
    std::vector<RollupUpdate> updates;
    for (const DirtyHour& d : *dirty) {
      updates.push_back(MinuteUpdate(d.device_id, d.hour_ms, {0}, 1000));
      updates.back().dirty = d;
    }
    ASSERT_TRUE(store_->WriteRollups(updates).ok());
  };
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a-1", "na", kT0))).ok());
  const std::string first = marks();
  ASSERT_NE(first, "");
  EXPECT_THAT(first, Not(HasSubstr("clean")));
  ASSERT_NO_FATAL_FAILURE(refresh());
  EXPECT_EQ(store_->DirtyHours(100)->size(), 0u) << "a clean mark is none";
  EXPECT_TRUE(store_->DirtyHoursIn({kT0 - kMsPerDay, kT0 + kMsPerDay})->empty());
  EXPECT_EQ(store_->Stats()->dirty_hours, 0);
  // Kept, clean: a batch marks the hours its samples reach either side (ingest_plan.h), and
  // the next batch marks them again.
  std::string kept = first;
  for (size_t at; (at = kept.find("dirty")) != std::string::npos;) kept.replace(at, 5, "clean");
  EXPECT_EQ(marks(), kept);

  // The hours' next batch: their rows again, dirty, with a newer generation.
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a-2", "na", kT0 + 10 * kMsPerMinute))).ok());
  EXPECT_EQ(marks(), first);
  // Another replica's refresh that read the marks as dirty before this one made them clean
  // comes second: the hours are no longer marked, so its older figures are not written.
  auto read_before = store_->DirtyHours(100);
  ASSERT_TRUE(read_before.ok());
  ASSERT_NO_FATAL_FAILURE(refresh());
  EXPECT_EQ(marks(), kept);
  std::vector<RollupUpdate> late;
  for (const DirtyHour& d : *read_before) {
    late.push_back(MinuteUpdate(d.device_id, d.hour_ms, {0}, 999));
    late.back().dirty = d;
  }
  ASSERT_TRUE(store_->WriteRollups(late).ok());
  std::set<int64_t> figures;
  ASSERT_TRUE(store_->ScanMinuteRollups({kT0 - kMsPerDay, kT0 + kMsPerDay}, [&](const RollupRow& r) {
                    figures.insert(r.ms[0]);
                  }).ok());
  EXPECT_EQ(figures, std::set<int64_t>{1000}) << "the first refresh's figures kept";

  // Three hours on, a sample at kT0 + 3 h marks hours 1 to 4. The device's clean marks go
  // once they are more than that reach before the newest hour written, 4 h 10 min: here
  // those of hours -2 and -1.
  ASSERT_EQ(first, "-2 dirty, -1 dirty, 0 dirty, 1 dirty");
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a-3", "na", kT0 + 3 * kMsPerHour, 1))).ok());
  EXPECT_EQ(marks(), "-2 clean, -1 clean, 0 clean, 1 dirty, 2 dirty, 3 dirty, 4 dirty");
  ASSERT_NO_FATAL_FAILURE(refresh());
  EXPECT_EQ(marks(), "0 clean, 1 clean, 2 clean, 3 clean, 4 clean");

  // A clean mark holds no day back from settling (kT0's day is over at its end + 2 h).
  auto settled = store_->SettleDays(kT0 - 8 * kMsPerHour + kMsPerDay + 2 * kMsPerHour, 1);
  ASSERT_TRUE(settled.ok()) << settled.status().ToString();
  EXPECT_EQ(settled->size(), 1u);
  PQfinish(c);
}

// Schema version 16: a refresh writes its device-hour's minutes as a row of their own (not
// the whole day's value again), and settling folds a day that is over into one row. What
// a read sees is the same before and after the fold, and after a late refresh of a folded
// day, which a later fold folds in turn: checked against what was written, kept apart.
TEST_F(PgStoreTest, AnHoursMinuteRowsAreFoldedIntoTheirDayOnceItIsOver) {
  const int64_t day0 = kT0 - 8 * kMsPerHour;  // 2026-11-23T00:00:00Z
  std::map<std::pair<int64_t, int64_t>, int64_t> want;  // (device, minute) -> active ms
  PGconn* c = Connect();
  auto write = [&](int64_t device, int64_t hour, const std::vector<int64_t>& minutes, int64_t active) {
    // Marked dirty, as a batch marks its hours: a refresh rewrites a stored hour only then.
    One(c, fmt::format("INSERT INTO dirty_hours VALUES({}, {}, 0) ON CONFLICT (device_id, hour_ms) DO UPDATE"
                       " SET generation = 0 RETURNING 1",
                       device, hour));
    std::erase_if(want, [&](const auto& e) {
      const auto [dev, minute] = e.first;
      return dev == device && minute >= hour && minute < hour + kMsPerHour;
    });
    for (int64_t m : minutes) want[{device, hour + m * kMsPerMinute}] = active;
    ASSERT_TRUE(store_->WriteRollups({MinuteUpdate(device, hour, minutes, active)}).ok());
  };
  auto read = [&] {
    std::map<std::pair<int64_t, int64_t>, int64_t> have;
    EXPECT_TRUE(store_->ScanMinuteRollups({day0, day0 + 2 * kMsPerDay}, [&](const RollupRow& r) {
                      have[{r.device_id, r.period_ms}] = r.ms[0];
                    }).ok());
    return have;
  };
  auto rows = [&](const std::string& where) {
    return One(c, "SELECT count(*) FROM rollup_day_minutes WHERE " + where);
  };
  for (int h = 0; h < 4; ++h) ASSERT_NO_FATAL_FAILURE(write(1, day0 + h * kMsPerHour, {0, 7, 59}, 1000 + h));
  ASSERT_NO_FATAL_FAILURE(write(2, day0 + kMsPerHour, {30}, 60'000));
  ASSERT_NO_FATAL_FAILURE(write(1, day0 + kMsPerDay, {1}, 500));  // the next day, not over
  ASSERT_NO_FATAL_FAILURE(write(1, day0 + 2 * kMsPerHour, {3, 4}, 2000));  // refreshed again
  EXPECT_EQ(read(), want);
  EXPECT_EQ(rows("hour >= 0"), "6") << "a row per device-hour, the one refreshed twice once";
  EXPECT_EQ(rows("hour = -1"), "0");

  // Two updates of one hour in one write: the last wins, as on SQLite.
  want[{2, day0 + kMsPerHour + 30 * kMsPerMinute}] = 5;
  One(c, fmt::format("UPDATE dirty_hours SET generation = 0 WHERE device_id = 2 AND hour_ms = {} RETURNING 1",
                     day0 + kMsPerHour));
  ASSERT_TRUE(store_->WriteRollups({MinuteUpdate(2, day0 + kMsPerHour, {30}, 4), MinuteUpdate(2, day0 + kMsPerHour, {30}, 5)})
                  .ok());
  EXPECT_EQ(read(), want);

  // The first day is over two hours after its end; the next is not.
  ASSERT_TRUE(store_->SettleDays(day0 + kMsPerDay + 2 * kMsPerHour, 1).ok());
  EXPECT_EQ(read(), want);
  EXPECT_EQ(rows(fmt::format("day_ms = {} AND hour = -1", day0)), "2") << "a row per device-day";
  EXPECT_EQ(rows(fmt::format("day_ms = {} AND hour >= 0", day0)), "0");
  EXPECT_EQ(rows(fmt::format("day_ms = {} AND hour = 0", day0 + kMsPerDay)), "1") << "not over: not folded";

  // A late batch: hour 1 refreshed with no minutes left, hour 5 with some. Its rows hide
  // and add to the folded value until the next fold takes them in.
  ASSERT_NO_FATAL_FAILURE(write(1, day0 + kMsPerHour, {}, 0));
  ASSERT_NO_FATAL_FAILURE(write(1, day0 + 5 * kMsPerHour, {10}, 42));
  EXPECT_EQ(read(), want);
  EXPECT_EQ(rows(fmt::format("day_ms = {} AND device_id = 1", day0)), "3");
  ASSERT_TRUE(store_->SettleDays(day0 + 2 * kMsPerDay + 2 * kMsPerHour, 1).ok());
  EXPECT_EQ(read(), want);
  EXPECT_EQ(rows("hour >= 0"), "0") << "both days folded";
  EXPECT_EQ(rows("true"), "3");

  // A device-day whose every hour was emptied after the fold has no row left at all.
  for (int h : {0, 2, 3, 5}) ASSERT_NO_FATAL_FAILURE(write(1, day0 + h * kMsPerHour, {}, 0));
  ASSERT_TRUE(store_->SettleDays(day0 + 2 * kMsPerDay + 2 * kMsPerHour, 1).ok());
  EXPECT_EQ(read(), want);
  EXPECT_EQ(rows(fmt::format("day_ms = {} AND device_id = 1", day0)), "0");
  PQfinish(c);
}

// A replica folding a device-day while another refreshes one of its hours loses neither:
// both take the device-day's lock.
TEST_F(PgStoreTest, AnHourRefreshedWhileItsDayIsFoldedIsKept) {
  auto other = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const int64_t day0 = kT0 - 8 * kMsPerHour - 60 * kMsPerDay;
  constexpr int kRounds = 20, kDevices = 200;
  auto updates = [](int64_t hour, int64_t minute, int64_t active) {
    std::vector<RollupUpdate> out;
    for (int64_t d = 1; d <= kDevices; ++d) out.push_back(MinuteUpdate(d, hour, {minute}, active + d));
    return out;
  };
  for (int round = 0; round < kRounds; ++round) {
    const int64_t day = day0 + round * kMsPerDay;
    ASSERT_TRUE(store_->WriteRollups(updates(day + 3 * kMsPerHour, 5, 1000 * round)).ok());
    std::atomic<int> ready{0};
    Status a, b;
    auto go = [&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
    };
    std::thread ta([&] {
      go();
      a = store_->WriteRollups(updates(day + 4 * kMsPerHour, 6, 1000 * round + 500));
    });
    std::thread tb([&] {
      go();
      // Started a little later each round, so that some round's fold reads the day's rows
      // just before the refresh commits (which the lock then holds back).
      std::this_thread::sleep_for(std::chrono::microseconds(500 * (round % 20)));
      b = (*other)->SettleDays(day + kMsPerDay + 2 * kMsPerHour, 1).status();
    });
    ta.join();
    tb.join();
    ASSERT_TRUE(a.ok()) << a.ToString();
    ASSERT_TRUE(b.ok()) << b.ToString();
  }
  std::map<std::pair<int64_t, int64_t>, int64_t> have, want;  // (device, minute) -> active ms
  ASSERT_TRUE(store_->ScanMinuteRollups({day0, day0 + kRounds * kMsPerDay}, [&](const RollupRow& r) {
                    have[{r.device_id, r.period_ms}] = r.ms[0];
                  }).ok());
  for (int round = 0; round < kRounds; ++round) {
    const int64_t day = day0 + round * kMsPerDay;
    for (int64_t d = 1; d <= kDevices; ++d) {
      want[{d, day + 3 * kMsPerHour + 5 * kMsPerMinute}] = 1000 * round + d;
      want[{d, day + 4 * kMsPerHour + 6 * kMsPerMinute}] = 1000 * round + 500 + d;
    }
  }
  EXPECT_EQ(have.size(), want.size());
  EXPECT_TRUE(have == want) << "an hour refreshed while its day was folded was lost";
}

// Two replicas refreshing different hours of one device-day at the same moment both land:
// each reads, changes and writes back the device-day's hours under its lock.
TEST_F(PgStoreTest, ReplicasRefreshingHoursOfOneDeviceDayAtOnceKeepBoth) {
  auto other = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  const int64_t day0 = kT0 - 8 * kMsPerHour;  // 2026-11-23T00:00:00Z
  constexpr int kRounds = 40;
  for (int round = 0; round < kRounds; ++round) {
    const int64_t day = day0 + round * kMsPerDay;
    std::atomic<int> ready{0};
    auto refresh = [&](Store& store, int64_t hour, Status& out) {
      RollupUpdate u{{1, hour, 0}, {RollupRow{hour, 1, 1, {1000 + round, 0, 0, 0, 0}, 0}}, {}};
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      out = store.WriteRollups({u});
    };
    Status a, b;
    std::thread ta([&] { refresh(*store_, day + 3 * kMsPerHour, a); });
    std::thread tb([&] { refresh(**other, day + 4 * kMsPerHour, b); });
    ta.join();
    tb.join();
    ASSERT_TRUE(a.ok()) << a.ToString();
    ASSERT_TRUE(b.ok()) << b.ToString();
  }
  std::map<int64_t, int64_t> hours;  // hour -> active ms
  ASSERT_TRUE(store_->ScanHourRollups({day0, day0 + kRounds * kMsPerDay}, [&](const RollupRow& r) {
                    hours[r.period_ms] += r.ms[0];
                    return Status::Ok();
                  }).ok());
  for (int round = 0; round < kRounds; ++round) {
    const int64_t day = day0 + round * kMsPerDay;
    EXPECT_EQ(hours[day + 3 * kMsPerHour], 1000 + round) << "day " << round;
    EXPECT_EQ(hours[day + 4 * kMsPerHour], 1000 + round) << "day " << round;
    auto sums = store_->SumHourRollups({day, day + kMsPerDay});
    ASSERT_TRUE(sums.ok());
    ASSERT_EQ(sums->size(), 1u);
    EXPECT_EQ(sums->at(0).ms[0], 2 * (1000 + round)) << "the day row of day " << round;
  }
}

// A database of schema version 10 kept a row per batch: migrating keys each id by stream
// and sequence as the store now does (the same SQL as SQLite's version 16), folds each
// stream's ids kBatchIdsKept below its newest, and every id stays a duplicate.
TEST_F(PgStoreTest, MigratesBatchIdsIntoStreamsAndRuns) {
  using testing_batches::OfStream;
  const std::string stream = "node-s-18c5a3b2f00";
  const auto& odd = testing_batches::kIdsOfNoStream;
  std::vector<Batch> batches;
  for (int64_t seq = 1; seq <= 400; ++seq) batches.push_back(OfStream(stream, seq, kT0));
  for (int i = 0; i < static_cast<int>(odd.size()); ++i) batches.push_back(testing_batches::OfNoStream(odd[i], i, kT0));
  std::vector<IngestPlan> plans;
  for (const Batch& b : batches) plans.push_back(Plan(b));
  for (const auto& out : store_->ApplyBatches(plans)) ASSERT_TRUE(out.ok()) << out.status().ToString();
  store_.reset();
  ASSERT_TRUE(server_
                  ->Exec(db_, std::string(testing_batches::kBatchesTableOfOldStores) +
                                  testing_batches::ServingTableOfOldStores(/*postgresql=*/true) +
                                  testing_batches::RollupTablesOfOldStores(/*postgresql=*/true, {}) +
                                  "UPDATE meta SET value = '10' WHERE key = 'schema_version'")
                  .ok());
  PGconn* c = Connect();
  EXPECT_EQ(One(c, "SELECT count(*) FROM batches"), std::to_string(batches.size()));
  auto s = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(*s);
  EXPECT_EQ(One(c, "SELECT string_agg(stream || ':' || first_seq || '-' || last_seq, ';') FROM batch_ranges"),
            stream + ":1-" + std::to_string(400 - kBatchIdsKept));
  EXPECT_EQ(One(c, "SELECT count(*) || ' from ' || min(seq) FROM batch_ids WHERE stream = 'node-s-18c5a3b2f00'"),
            fmt::format("{} from {}", kBatchIdsKept, 401 - kBatchIdsKept));
  EXPECT_EQ(One(c, "SELECT string_agg(stream || '/' || seq, ';' ORDER BY stream COLLATE \"C\", seq) FROM batch_ids"
                   " WHERE stream <> 'node-s-18c5a3b2f00'"),
            "-5/-1;19/-1;a-1234567890123456789/-1;node-b/0;node-b-00/-1;trn-07-2026-11-23T08:00:00Z/-1;x/7;x-007/-1");
  EXPECT_EQ(One(c, "SELECT to_regclass('batches') IS NULL"), "t");
  PQfinish(c);
  EXPECT_EQ(store_->Stats()->batches, static_cast<int64_t>(batches.size()));
  testing_batches::ExpectMigratedBatchIdsStayDuplicates(stream, kT0,
                                                        [&](const Batch& b) { return store_->ApplyBatch(Plan(b)); });
  EXPECT_EQ(store_->Stats()->batches, static_cast<int64_t>(batches.size()) + 1);
}

// Day versions are drawn by rollup_day's triggers: day rows rewritten behind the store,
// as a replica of an older build refreshing beside newer ones would, are read anew by a
// store that has cached the day.
TEST_F(PgStoreTest, DayRowsRewrittenBehindTheStoreAreReadAnew) {
  const int64_t day0 = kT0 - 8 * kMsPerHour;  // 2026-11-23T00:00:00Z
  const TimeRange day{day0, day0 + kMsPerDay};
  ASSERT_TRUE(store_->WriteRollups({{{1, day0, 0}, {RollupRow{day0, 1, 1, {100, 0, 0, 0, 0}, 0}}, {}}}).ok());
  auto active = [&]() -> int64_t {
    auto snap = store_->Snapshot();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    if (!snap.ok()) return -1;
    auto sums = (*snap)->SumSettledHourRollups(day);
    EXPECT_TRUE(sums.ok()) << sums.status().ToString();
    int64_t total = 0;
    if (sums.ok()) {
      for (const RollupSum& r : *sums) total += r.ms[0];
    }
    return total;
  };
  EXPECT_EQ(active(), 100);  // now cached
  ASSERT_TRUE(server_->Exec(db_, "UPDATE rollup_day SET active_ms = active_ms + 5").ok());
  EXPECT_EQ(active(), 105);
  ASSERT_TRUE(server_
                  ->Exec(db_, "CREATE TEMP TABLE t AS SELECT * FROM rollup_day; DELETE FROM rollup_day;"
                              " INSERT INTO rollup_day SELECT day_ms, device_id, job_id, active_ms + 1, idle_ms,"
                              " unallocated_ms, unavailable_ms, unmonitored_ms, coarse_ms, input_stall_ms,"
                              " checkpoint_stall_ms, held_idle_ms, hour_rows FROM t")
                  .ok());
  EXPECT_EQ(active(), 106);
  // Rows of another device inserted into the day, nothing of it deleted first.
  ASSERT_TRUE(server_->Exec(db_, "INSERT INTO rollup_day VALUES(" + std::to_string(day0) + ", 2, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1)")
                  .ok());
  EXPECT_EQ(active(), 113);
}

// PgOptions::day_cache_bytes sizes each replica's cache of whole days: a store opened
// with none reads a day's rows from the database each time, where one with the default
// keeps them by the day's version. Rows updated with the triggers off (so the version
// stays) tell the two apart.
TEST_F(PgStoreTest, AStoreWithoutADayCacheReadsEveryDayFromTheDatabase) {
  const int64_t day0 = kT0 - 8 * kMsPerHour;  // 2026-11-23T00:00:00Z
  const TimeRange day{day0, day0 + kMsPerDay};
  ASSERT_TRUE(store_->WriteRollups({{{1, day0, 0}, {RollupRow{day0, 1, 1, {100, 0, 0, 0, 0}, 0}}, {}}}).ok());
  auto uncached = OpenPgStore(server_->Url(db_), {.day_cache_bytes = 0});
  ASSERT_TRUE(uncached.ok()) << uncached.status().ToString();
  auto active_ms = [&](Store& s) -> int64_t {
    auto sums = s.SumSettledHourRollups(day);
    EXPECT_TRUE(sums.ok()) << sums.status().ToString();
    return sums.ok() && !sums->empty() ? sums->at(0).ms[0] : -1;
  };
  EXPECT_EQ(active_ms(*store_), 100);
  EXPECT_EQ(active_ms(**uncached), 100);
  ASSERT_TRUE(server_
                  ->Exec(db_, "ALTER TABLE rollup_day DISABLE TRIGGER USER; UPDATE rollup_day SET active_ms = 7;"
                              " ALTER TABLE rollup_day ENABLE TRIGGER USER")
                  .ok());
  EXPECT_EQ(active_ms(*store_), 100) << "the day at the same version, from the cache";
  EXPECT_EQ(active_ms(**uncached), 7) << "the day read from the database again";
}

// A store of schema version 7 kept serving snapshots by (job, engine, model, time), so a
// window of a job's snapshots read every one it ever reported: migrating keyed them by
// (job, time, engine, model) (version 8, the advice's two gauges in the key from version
// 12), then packed them in chunks per job, engine, model and hour (version 13), and a
// window reads as before.
TEST_F(PgStoreTest, MigratesServingSnapshotsIntoChunks) {
  const Batch b = testing_batches::WithinTheFirstHour(testing_batches::ServingEverySixHours("serving", kT0));
  ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok());
  const int64_t job = store_->ListJobs()->at(0).id;
  store_.reset();
  ASSERT_TRUE(server_
                  ->Exec(db_, std::string(testing_batches::kBatchesTableOfOldStores) +
                                  testing_batches::ServingTableOfOldStores(/*postgresql=*/true, b, job) +
                                  testing_batches::RollupTablesOfOldStores(/*postgresql=*/true, {}) +
                                  "ALTER TABLE serving DROP CONSTRAINT serving_pkey,"
                              " ADD PRIMARY KEY(job_id, engine, model, t_ms); DROP TABLE rollup_day_versions; DROP FUNCTION rollup_day_new_version() CASCADE;"
                              " DROP TABLE catalog_versions; DROP FUNCTION jobs_new_version() CASCADE;"
                              " UPDATE meta SET value = '7' WHERE key = 'schema_version'")
                  .ok());
  auto s = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  store_ = std::move(*s);
  testing_batches::ExpectServingReadsAsSent(*store_, job, b, kT0);
  PGconn* c = Connect();
  // A chunk per engine, model and hour: 24 hours with snapshots, one of them three.
  EXPECT_EQ(One(c, "SELECT count(*) || ' ' || sum(n) FROM serving_chunks"), "24 26");
  EXPECT_EQ(One(c, "SELECT to_regclass('serving') IS NULL"), "t");
  PQfinish(c);
}

// A role that may read but not write: the store opens (a report's role), a batch is
// refused with kPermissionDenied, and nothing of it is stored.
TEST_F(PgStoreTest, PermissionDeniedAppliesNothing) {
  ASSERT_TRUE(server_->Exec(db_, "CREATE ROLE reader LOGIN; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader").ok());
  auto reader = OpenPgStore(server_->Url(db_, "reader"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto r = (*reader)->ApplyBatch(Plan(OnNode("a", "na", kT0)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("permission denied"));
  EXPECT_EQ((*reader)->Stats()->batches, 0) << "its reads work";
  auto stats = *store_->Stats();
  EXPECT_EQ(stats.batches, 0);
  EXPECT_EQ(stats.devices, 0);
  EXPECT_EQ(*store_->ApplyBatch(Plan(OnNode("a", "na", kT0))), ApplyOutcome::kApplied) << "the id is free";
}

// A statement that times out (here: waiting on a lock another session holds on jobs, after
// the batch's id and device were written) fails the batch with kUnavailable and leaves
// none of it; sent again once the lock is gone, it is applied.
TEST_F(PgStoreTest, AStatementTimeoutAppliesNoHalfBatch) {
  auto timed = OpenPgStore(server_->Url(db_) + "&options=-c%20statement_timeout%3D300");
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  PGconn* locker = Connect();
  ASSERT_TRUE(Run(locker, "BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"));
  auto r = (*timed)->ApplyBatch(Plan(OnNode("a", "na", kT0)));
  ASSERT_TRUE(Run(locker, "ROLLBACK"));
  PQfinish(locker);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("statement timeout"));
  auto stats = *store_->Stats();
  EXPECT_EQ(stats.batches, 0);
  EXPECT_EQ(stats.devices, 0);
  EXPECT_EQ(stats.samples, 0);
  EXPECT_EQ(*(*timed)->ApplyBatch(Plan(OnNode("a", "na", kT0))), ApplyOutcome::kApplied);
  EXPECT_EQ(store_->Stats()->samples, 3);
}

// The database goes away mid-stream (a restart): the call in flight fails with
// kUnavailable, a group open at that moment commits nothing, and once it is back the
// same store connects again and the resent batches are applied exactly once.
TEST_F(PgStoreTest, AConnectionLostMidStreamLosesNothing) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a", "na", kT0))).ok());
  auto group = store_->BeginBatchGroup();
  ASSERT_TRUE(group.ok());
  ASSERT_EQ(*(*group)->Apply(Plan(OnNode("b", "nb", kT0))), ApplyOutcome::kApplied);
  ASSERT_TRUE(server_->Stop().ok());
  Status commit = (*group)->Commit();
  EXPECT_EQ(commit.code(), StatusCode::kUnavailable) << commit.ToString();
  group->reset();
  auto during = store_->ApplyBatch(Plan(OnNode("c", "nc", kT0)));
  EXPECT_EQ(during.status().code(), StatusCode::kUnavailable) << during.status().ToString();
  ASSERT_TRUE(server_->Start().ok());
  // The agents' spools resend what was not acknowledged, and a retry of what was.
  EXPECT_EQ(*store_->ApplyBatch(Plan(OnNode("b", "nb", kT0))), ApplyOutcome::kApplied);
  EXPECT_EQ(*store_->ApplyBatch(Plan(OnNode("c", "nc", kT0))), ApplyOutcome::kApplied);
  EXPECT_EQ(*store_->ApplyBatch(Plan(OnNode("a", "na", kT0))), ApplyOutcome::kDuplicate);
  auto stats = *store_->Stats();
  EXPECT_EQ(stats.batches, 3);
  EXPECT_EQ(stats.samples, 9);
  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ((*snap)->ListDevices()->size(), 3u);
}

// Two replicas given the same batch at the same moment: the database applies it once and
// both acknowledge it; the same id with other content is refused on either.
TEST_F(PgStoreTest, TwoReplicasApplyingTheSameBatchAtOnceApplyItOnce) {
  auto other = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(other.ok());
  Batch b = OnNode("same", "na", kT0);
  b.content_digest = 42;
  auto group = store_->BeginBatchGroup();
  ASSERT_TRUE(group.ok());
  ASSERT_EQ(*(*group)->Apply(Plan(b)), ApplyOutcome::kApplied);
  // The other replica's copy waits on the first's claim of the id, uncommitted yet.
  auto second = std::async(std::launch::async, [&] { return (*other)->ApplyBatch(Plan(b)); });
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  ASSERT_TRUE((*group)->Commit().ok());
  group->reset();  // hands the writer back
  auto r = second.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, ApplyOutcome::kDuplicate);
  auto stats = *store_->Stats();
  EXPECT_EQ(stats.batches, 1);
  EXPECT_EQ(stats.samples, 3);
  Batch changed = b;
  changed.content_digest = 43;
  EXPECT_EQ((*other)->ApplyBatch(Plan(changed)).status().code(), StatusCode::kAlreadyExists);
}

// Four replicas race one stream across its folds (docs/store-postgresql.md, "A fold and
// a claim of one id"): two send every sequence in order, in group commits; a third fills
// the gaps those two skip, each as the fold that passes over it runs; a fourth resends,
// over and over, the ids the next fold will take, so that its claims meet the fold's
// delete. Every id is applied exactly once, by whichever replica claimed it first, and
// every other copy is a duplicate.
TEST_F(PgStoreTest, ReplicasRacingOneStreamAcrossItsFoldsApplyEachIdOnce) {
  using testing_batches::OfStream;
  const std::string stream = "node-race-18c5a3b2f00";
  constexpr int64_t kLast = 10 * kFoldEvery + kBatchIdsKept;  // ten folds
  auto is_gap = [](int64_t seq) { return seq % 23 == 5 || (seq % kFoldEvery == 0 && seq % 3 == 0); };
  std::array<std::unique_ptr<Store>, 4> stores;
  stores[0] = std::move(store_);
  for (size_t i = 1; i < stores.size(); ++i) {
    auto s = OpenPgStore(server_->Url(db_));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    stores[i] = std::move(*s);
  }
  std::vector<std::atomic<int>> applied(kLast + 1);
  std::atomic<int64_t> frontier{0};  // the first sender's newest sequence
  std::atomic<bool> failed{false}, done{false};
  std::mutex failure_mu;
  std::string failure;
  std::atomic<int64_t> resent{0};
  // Applies `seqs` as one group on replica `r`, each id again alone while the database
  // answers kUnavailable (a concurrent writer: the store's word for "retry").
  auto apply = [&](size_t r, const std::vector<int64_t>& seqs) {
    std::vector<Batch> batches;  // what the plans point into
    for (int64_t seq : seqs) batches.push_back(OfStream(stream, seq, kT0));
    std::vector<IngestPlan> plans;
    for (const Batch& b : batches) plans.push_back(Plan(b));
    std::vector<Result<ApplyOutcome>> out = stores[r]->ApplyBatches(plans);
    for (size_t i = 0; i < seqs.size(); ++i) {
      for (int attempt = 0; !out[i].ok() && out[i].status().code() == StatusCode::kUnavailable && attempt < 50;
           ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        out[i] = stores[r]->ApplyBatch(plans[i]);
      }
      if (!out[i].ok()) {
        std::lock_guard lock(failure_mu);
        failure = fmt::format("replica {}, sequence {}: {}", r, seqs[i], out[i].status().ToString());
        failed = true;
        return;
      }
      if (*out[i] == ApplyOutcome::kApplied) ++applied[static_cast<size_t>(seqs[i])];
    }
  };
  auto in_order = [&](size_t r) {
    for (int64_t first = 1; first <= kLast && !failed; first += 4) {
      std::vector<int64_t> group;
      for (int64_t seq = first; seq < first + 4 && seq <= kLast; ++seq) {
        if (!is_gap(seq)) group.push_back(seq);
      }
      apply(r, group);
      if (r == 0) frontier = first + 3;
    }
  };
  auto gaps = [&] {
    for (int64_t seq = 1; seq <= kLast && !failed; ++seq) {
      if (!is_gap(seq)) continue;
      // Claimed as the first sender applies the sequence whose fold cuts at it, or one
      // of the few around it.
      const int64_t when = std::min(kLast, seq + kBatchIdsKept + seq % 7 - 3);
      while (frontier.load() < when && !failed) std::this_thread::sleep_for(std::chrono::microseconds(200));
      apply(2, {seq});
    }
  };
  auto resends = [&] {
    while (!done && !failed) {
      // The next fold, at the first multiple of kFoldEvery past the frontier, takes the ids
      // up to its cut: resend the last few of them.
      const int64_t next_fold = (frontier.load() / kFoldEvery + 1) * kFoldEvery;
      const int64_t cut = next_fold - kBatchIdsKept;
      if (cut < 3) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      apply(3, {cut - 2, cut - 1, cut});
      ++resent;
    }
  };
  std::thread t3(resends), t2(gaps), t1(in_order, 1), t0(in_order, 0);
  t0.join();
  t1.join();
  t2.join();
  done = true;
  t3.join();
  ASSERT_EQ(failure, "");
  EXPECT_GT(resent.load(), 10 * 3) << "the resends should have run while the ten folds did";
  for (int64_t seq = 1; seq <= kLast; ++seq) {
    ASSERT_EQ(applied[static_cast<size_t>(seq)].load(), 1) << "sequence " << seq << " applied that many times";
  }
  auto stats = stores[0]->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->batches, kLast);
  EXPECT_EQ(stats->samples, kLast);
  for (int64_t seq : {int64_t{1}, int64_t{5}, int64_t{192}, kLast - kBatchIdsKept, kLast}) {
    const Batch again = OfStream(stream, seq, kT0);
    EXPECT_EQ(*stores[2]->ApplyBatch(Plan(again)), ApplyOutcome::kDuplicate) << seq;
  }
}

// The read-after-acknowledgement lag between replicas is zero: a batch is acknowledged
// after its COMMIT returned, and every snapshot (a query's) is a transaction begun later,
// which sees every commit before it. Dirty hours are attributed by the query itself, so no
// rollup refresh stands between them either. Checked many times over, each read right after
// the other replica's acknowledgement.
TEST_F(PgStoreTest, WhatOneReplicaAcknowledgedAnotherReadsAtOnce) {
  auto other = OpenPgStore(server_->Url(db_));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("first", "na", kT0, 1))).ok());
  for (int i = 1; i <= 50; ++i) {
    Batch b;
    b.batch_id = "b" + std::to_string(i);
    Sample s;
    s.device_uuid = "GPU-na";
    s.t_ms = kT0 + i * 10'000;
    s.sm_active = 0.5;
    b.samples.push_back(s);
    ASSERT_EQ(*store_->ApplyBatch(Plan(b)), ApplyOutcome::kApplied);
    auto snap = (*other)->Snapshot();
    ASSERT_TRUE(snap.ok());
    auto stats = (*snap)->Stats();
    ASSERT_TRUE(stats.ok());
    ASSERT_EQ(stats->samples, 1 + i) << "the other replica's snapshot missed batch " << i;
    ASSERT_EQ((*snap)->ListDevices()->at(0).last_sample_ms, s.t_ms);
  }
}

// Raw samples live in day partitions, created by the store: ahead of the database's today
// when it opens, and for any other day a batch brings. Retention drops whole day
// partitions; the rollups (not partitioned) stay.
TEST_F(PgStoreTest, PartitionsAreCreatedAheadAndRetentionDropsWholeDays) {
  PGconn* c = Connect();
  auto partitions = [&](const std::string& parent) {
    return std::stoi(One(c, "SELECT count(*) FROM pg_inherits WHERE inhparent = '" + parent + "'::regclass"));
  };
  EXPECT_EQ(partitions("sample_chunks"), 3) << "today and the two days after";
  const std::string today = One(c, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')");
  EXPECT_EQ(One(c, "SELECT to_regclass('sample_chunks_d" + today + "') IS NOT NULL"), "t");

  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a", "na", kT0))).ok());               // 2026-11-23
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("b", "na", kT0 + 24 * kMsPerHour))).ok());  // 2026-11-24
  EXPECT_EQ(One(c, "SELECT count(*) FROM sample_chunks_d20261123"), "1");
  EXPECT_EQ(One(c, "SELECT count(*) FROM sample_chunks_d20261124"), "1");
  RollupRow row{kT0, 1, 1, {1000, 0, 0, 0, 0}, 0};
  RollupRow minute{kT0, 1, 1, {1000, 0, 0, 0, 0}, 0};
  ASSERT_TRUE(store_->WriteRollups({{{1, kT0, 0}, {row}, {minute}}}).ok());
  EXPECT_EQ(One(c, "SELECT count(*) FROM rollup_day_minutes"), "1") << "not partitioned";

  EXPECT_EQ(*store_->PruneSamples(kT0 + 24 * kMsPerHour + 1), 3);
  EXPECT_EQ(One(c, "SELECT to_regclass('sample_chunks_d20261123') IS NULL"), "t") << "dropped, not emptied";
  EXPECT_EQ(One(c, "SELECT to_regclass('process_samples_d20261123') IS NULL"), "t");
  EXPECT_EQ(One(c, "SELECT count(*) FROM sample_chunks_d20261124"), "1");
  EXPECT_EQ(store_->SumHourRollups({kT0, kT0 + kMsPerHour})->size(), 1u);
  // A day dropped by retention comes back if a late batch brings it again.
  EXPECT_EQ(*store_->ApplyBatch(Plan(OnNode("late", "nz", kT0))), ApplyOutcome::kApplied);
  PQfinish(c);
}

// A settled day's chunks lie in device and time order (they came hour by hour, every
// device each hour), and the day is marked settled in the database for every replica (its
// index clustered).
TEST_F(PgStoreTest, ASettledDayLiesInDeviceOrder) {
  const int64_t day = FloorTo(kT0, kMsPerDay);
  for (int h = 0; h < 4; ++h) {
    for (const char* node : {"na", "nb", "nc"}) {
      for (int half = 0; half < 2; ++half) {  // two chunks an hour, merged by the refresh
        ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode(fmt::format("{}-{}-{}", node, h, half), node,
                                                   kT0 + h * kMsPerHour + half * 30 * kMsPerMinute)))
                        .ok());
      }
    }
  }
  std::vector<RollupUpdate> clean;
  auto dirty = store_->DirtyHours(100);  // kept: a range-for over *temporary dangles
  for (const DirtyHour& d : *dirty) clean.push_back({d, {}, {}});
  ASSERT_TRUE(store_->WriteRollups(clean).ok());
  PGconn* c = Connect();
  const std::string part = "sample_chunks_d20261123";
  auto order = [&](const char* by) {
    return One(c, std::string("SELECT string_agg(device_id || ':' || first_ms, ' ' ORDER BY ") + by + ") FROM " + part);
  };
  const std::string sorted = order("device_id, first_ms");
  ASSERT_NE(order("ctid"), sorted) << "as they came: hour by hour";
  PGconn* reader = Connect();  // a long query holding the day: the day waits, no error
  ASSERT_TRUE(Run(reader, "BEGIN; SELECT count(*) FROM " + part));
  auto held = store_->SettleDays(day + kMsPerDay, 5);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_TRUE(held->empty());
  ASSERT_TRUE(Run(reader, "COMMIT"));
  PQfinish(reader);
  auto settled = store_->SettleDays(day + kMsPerDay, 5);
  ASSERT_TRUE(settled.ok()) << settled.status().ToString();
  EXPECT_EQ(*settled, std::vector<int64_t>{day});
  EXPECT_EQ(order("ctid"), sorted);
  EXPECT_EQ(One(c, "SELECT indisclustered FROM pg_index WHERE indrelid = '" + part + "'::regclass"), "t");
  auto other = OpenPgStore(server_->Url(db_));  // another replica
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE((*other)->SettleDays(day + kMsPerDay, 5)->empty()) << "settled for every replica";
  PQfinish(c);
}

// The quick check (serve's start-up check) finds a missing table by name.
TEST_F(PgStoreTest, TheQuickCheckNamesAMissingTable) {
  auto sound = store_->Check(false);
  ASSERT_TRUE(sound.ok()) << sound.status().ToString();
  EXPECT_TRUE(sound->ok());
  ASSERT_TRUE(server_->Exec(db_, "DROP TABLE progress").ok());
  auto damaged = store_->Check(false);
  ASSERT_TRUE(damaged.ok());
  EXPECT_THAT(damaged->tables, ::testing::ElementsAre("progress"));
}

}  // namespace
}  // namespace gpuledger::store
