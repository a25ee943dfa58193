#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <set>
#include <filesystem>
#include <thread>
#include <tuple>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/testing/missing_component.h"
#include "ledger/ingest_plan.h"
#include "store/actions.h"
#include "store/batch_ids.h"
#include "store/pg_store.h"
#include "store/store.h"
#include "store/testing/pg_server.h"
#include "store/testing/test_batches.h"

namespace gpuledger::store {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'795'420'800'000;  // 2026-11-23T08:00:00Z, a whole hour

// The ledger plans each batch (ledger/ingest_plan.h); a store executes plans. A plan
// made here is used within the same full expression as its batch.
store::IngestPlan Plan(const Batch& b) {
  auto plan = ledger::PlanIngest(b);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? std::move(*plan) : store::IngestPlan{};
}
std::vector<store::IngestPlan> Plans(const std::vector<const Batch*>& batches) {
  std::vector<store::IngestPlan> out;
  for (const Batch* b : batches) out.push_back(Plan(*b));
  return out;
}

// A backend under the store contract: its name, how to open the store of `dir` (fresh
// the first time, the same one again after), why it cannot run here (empty when it can),
// and the unit retention drops raw samples in.
// `scalar` answers a statement of one value on the store's database, behind the store's
// back (for tests of what a backend keeps, beside what it reads back; an UPDATE with
// RETURNING changes it).
struct Backend {
  std::string name;
  std::function<Result<std::unique_ptr<Store>>(const std::filesystem::path& dir)> open;
  std::function<std::string()> missing = [] { return std::string(); };
  int64_t retention_unit_ms = kMsPerHour;
  std::function<std::string(const std::filesystem::path& dir, const std::string& sql)> scalar;
};

Backend Sqlite() {
  Backend b{"sqlite", [](const std::filesystem::path& dir) { return OpenSqliteStore((dir / "ledger.db").string()); }};
  b.scalar = [](const std::filesystem::path& dir, const std::string& sql) {
    sqlite3* db = nullptr;
    std::string out = "(no answer)";
    if (sqlite3_open_v2((dir / "ledger.db").string().c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
      sqlite3_stmt* q = nullptr;
      if (sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr) == SQLITE_OK && sqlite3_step(q) == SQLITE_ROW) {
        out = reinterpret_cast<const char*>(sqlite3_column_text(q, 0));
      }
      sqlite3_finalize(q);
    }
    sqlite3_close(db);
    return out;
  };
  return b;
}

// The test binary's PostgreSQL database of each test folder.
std::map<std::string, std::string>& DatabaseOf() {
  static std::map<std::string, std::string> database_of;  // test folder -> database
  return database_of;
}

// The test binary's PostgreSQL (store/testing/pg_server.h): a database per test folder;
// `bouncer`: reached through pgbouncer in transaction mode, as operators deploy it.
Backend Postgres(bool bouncer = false) {
  Backend b;
  b.name = bouncer ? "pgbouncer" : "postgresql";
  b.open = [bouncer](const std::filesystem::path& dir) -> Result<std::unique_ptr<Store>> {
    GPULEDGER_ASSIGN_OR_RETURN(auto* server, pgtest::PgTestServer::Shared());
    auto [it, fresh] = DatabaseOf().try_emplace(dir.string());
    if (fresh) {
      GPULEDGER_ASSIGN_OR_RETURN(it->second, server->CreateDatabase(dir.filename().string()));
    }
    if (!bouncer) return OpenPgStore(server->Url(it->second));
    GPULEDGER_ASSIGN_OR_RETURN(std::string url, server->BouncerUrl(it->second));
    return OpenPgStore(url);
  };
  b.missing = [bouncer] {
    auto server = pgtest::PgTestServer::Shared();
    if (!server.ok()) return server.status().ToString();
    if (!bouncer) return std::string();
    auto url = (*server)->BouncerUrl("postgres");
    return url.ok() ? std::string() : url.status().ToString();
  };
  b.retention_unit_ms = 24 * kMsPerHour;  // raw samples are partitioned by day
  b.scalar = [](const std::filesystem::path& dir, const std::string& sql) {
    auto server = pgtest::PgTestServer::Shared();
    std::string out = "(no answer)";
    if (!server.ok() || !DatabaseOf().contains(dir.string())) return out;
    PGconn* c = PQconnectdb((*server)->Url(DatabaseOf()[dir.string()]).c_str());
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) out = PQgetvalue(r, 0, 0);
    PQclear(r);
    PQfinish(c);
    return out;
  };
  return b;
}

class StoreFixture : public ::testing::Test {
 protected:
  explicit StoreFixture(Backend backend) : backend_(std::move(backend)) {}
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    dir_ = std::filesystem::temp_directory_path() /
           ("gpuledger-store-" + std::to_string(::getpid()) + "-" + backend_.name + "-" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (std::string why = backend_.missing(); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto s = backend_.open(dir_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  static Batch Basic(std::string id) {
    Batch b;
    b.batch_id = std::move(id);
    b.source = "node-a";
    b.devices.push_back(Device{.uuid = "GPU-a", .node = "node-a", .model = "NVIDIA H200",
                               .memory_mib = 143771, .pool = "training"});
    b.jobs.push_back(Job{.id = "j1", .team = "vision", .kind = JobKind::kTraining});
    b.allocations.push_back(Allocation{"GPU-a", "j1", kT0, std::nullopt});
    for (int i = 1; i <= 3; ++i) {
      Sample s;
      s.device_uuid = "GPU-a";
      s.t_ms = kT0 + i * 10'000;
      s.sm_active = 0.5;
      b.samples.push_back(s);
    }
    return b;
  }

  Backend backend_;
  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

// The contract every backend keeps.
class StoreContractTest : public StoreFixture, public ::testing::WithParamInterface<Backend> {
 protected:
  StoreContractTest() : StoreFixture(GetParam()) {}
};
INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::Values(Sqlite(), Postgres(), Postgres(/*bouncer=*/true)),
                         [](const ::testing::TestParamInfo<Backend>& p) { return p.param.name; });

// What only the SQLite store does (its file, its migrations).
class SqliteStoreTest : public StoreFixture {
 protected:
  SqliteStoreTest() : StoreFixture(Sqlite()) {}
  // Runs `sql` on the store's file behind its back (the store closed), then reopens it.
  void ExecBehindTheStore(const std::string& sql) {
    store_.reset();
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "ledger.db").string().c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
    Reopen();
  }
  // The integers of the one row `sql` selects from the store's file, the store closed.
  std::vector<int64_t> FileRow(const std::string& sql) {
    store_.reset();
    std::vector<int64_t> out;
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open((dir_ / "ledger.db").string().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &q, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    if (q != nullptr && sqlite3_step(q) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(q); ++i) out.push_back(sqlite3_column_int64(q, i));
    }
    sqlite3_finalize(q);
    sqlite3_close(db);
    return out;
  }
};

TEST_P(StoreContractTest, AppliesABatchAndReadsItBack) {
  auto r = store_->ApplyBatch(Plan(Basic("b1")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, ApplyOutcome::kApplied);
  auto devices = *store_->ListDevices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].device.model, "NVIDIA H200");
  EXPECT_EQ(devices[0].in_service_ms, kT0);
  EXPECT_EQ(devices[0].last_sample_ms, kT0 + 30'000);
  auto samples = *store_->Samples(devices[0].id, {kT0, kT0 + kMsPerHour});
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_DOUBLE_EQ(*samples[0].sm_active, 0.5);
  EXPECT_FALSE(samples[0].gpu_util.has_value());
  auto allocs = *store_->Allocations(devices[0].id, {kT0, kT0 + 1});
  ASSERT_EQ(allocs.size(), 1u);
  EXPECT_FALSE(allocs[0].to_ms.has_value());
  // The hours the samples cover, and those within the reach of the staleness limit and
  // the idle-cause context around them, are dirty: 06:00 to 09:00 for samples at 08:00.
  auto dirty = *store_->DirtyHours(100);
  ASSERT_EQ(dirty.size(), 4u);
  EXPECT_EQ(dirty.front().hour_ms, kT0 - 2 * kMsPerHour);
  EXPECT_EQ(dirty.back().hour_ms, kT0 + kMsPerHour);
}

TEST_P(StoreContractTest, ARetriedBatchIsNotAppliedTwice) {
  ASSERT_EQ(*store_->ApplyBatch(Plan(Basic("b1"))), ApplyOutcome::kApplied);
  ASSERT_EQ(*store_->ApplyBatch(Plan(Basic("b1"))), ApplyOutcome::kDuplicate);
  EXPECT_EQ(store_->Stats()->samples, 3);
  EXPECT_EQ(store_->Stats()->batches, 1);
}

TEST_P(StoreContractTest, ABatchIdReusedForOtherContentIsRefused) {
  Batch a = Basic("b1");
  a.content_digest = 1;
  ASSERT_TRUE(store_->ApplyBatch(Plan(a)).ok());
  Batch b = Basic("b1");
  b.content_digest = 2;
  auto r = store_->ApplyBatch(Plan(b));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
}

// An agent numbers its batches (`<node>-<instance>-<n>`, docs/batch-format.md): each
// stream's ids kBatchIdsKept below its newest are folded into runs of sequences, and stay
// duplicates for good; a sequence never applied is applied when it comes, once, whatever
// the runs around it; ids of no stream are kept whole; reopening changes nothing.
TEST_P(StoreContractTest, AStreamsOldBatchIdsAreFoldedAndStayDuplicates) {
  using testing_batches::OfStream;
  const std::string stream = "node-s-18c5a3b2f00";
  auto apply = [&](int64_t from, int64_t to, ApplyOutcome expected, int64_t skip = -1) {
    for (int64_t first = from; first <= to; first += 50) {
      std::vector<Batch> batches;
      for (int64_t seq = first; seq <= std::min(to, first + 49); ++seq) {
        if (seq != skip) batches.push_back(OfStream(stream, seq, kT0));
      }
      std::vector<const Batch*> group;
      for (const Batch& b : batches) group.push_back(&b);
      auto out = store_->ApplyBatches(Plans(group));
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_TRUE(out[i].ok()) << batches[i].batch_id << ": " << out[i].status().ToString();
        ASSERT_EQ(*out[i], expected) << batches[i].batch_id;
      }
    }
  };
  apply(1, 700, ApplyOutcome::kApplied, /*skip=*/100);
  EXPECT_EQ(store_->Stats()->batches, 699);
  apply(1, 700, ApplyOutcome::kDuplicate, /*skip=*/100);
  EXPECT_EQ(store_->Stats()->samples, 699);
  // A folded id is known as applied; its content is no longer compared. One of the
  // newest still is.
  EXPECT_EQ(*store_->ApplyBatch(Plan(OfStream(stream, 5, kT0, /*digest=*/2))), ApplyOutcome::kDuplicate);
  auto reused = store_->ApplyBatch(Plan(OfStream(stream, 690, kT0, /*digest=*/2)));
  EXPECT_EQ(reused.status().code(), StatusCode::kAlreadyExists) << reused.status().ToString();
  // The sequence skipped, amid folded runs: applied once.
  EXPECT_EQ(*store_->ApplyBatch(Plan(OfStream(stream, 100, kT0))), ApplyOutcome::kApplied);
  EXPECT_EQ(*store_->ApplyBatch(Plan(OfStream(stream, 100, kT0))), ApplyOutcome::kDuplicate);
  // Folded in turn (768 folds up to 512), it stays a duplicate.
  apply(701, 768, ApplyOutcome::kApplied);
  EXPECT_EQ(*store_->ApplyBatch(Plan(OfStream(stream, 100, kT0))), ApplyOutcome::kDuplicate);
  Reopen();
  for (int64_t seq : {1, 99, 100, 101, 512, 513, 768}) {
    EXPECT_EQ(*store_->ApplyBatch(Plan(OfStream(stream, seq, kT0))), ApplyOutcome::kDuplicate) << seq;
  }
  EXPECT_EQ(store_->Stats()->batches, 768);
  EXPECT_EQ(store_->Stats()->samples, 768);
  // Ids of no stream, each its own.
  const auto& odd = testing_batches::kIdsOfNoStream;
  for (int i = 0; i < static_cast<int>(odd.size()); ++i) {
    EXPECT_EQ(*store_->ApplyBatch(Plan(testing_batches::OfNoStream(odd[i], i, kT0))), ApplyOutcome::kApplied) << odd[i];
  }
  for (int i = 0; i < static_cast<int>(odd.size()); ++i) {
    EXPECT_EQ(*store_->ApplyBatch(Plan(testing_batches::OfNoStream(odd[i], i, kT0))), ApplyOutcome::kDuplicate) << odd[i];
  }
  EXPECT_EQ(store_->Stats()->batches, 768 + static_cast<int64_t>(odd.size()));
}

TEST_P(StoreContractTest, AFailingBatchLeavesTheStoreUnchanged) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  auto before = *store_->Stats();

  Batch b;
  b.batch_id = "b2";
  b.devices.push_back(Device{.uuid = "GPU-new", .pool = "dev"});
  b.jobs.push_back(Job{.id = "j2", .team = "nlp"});
  Sample ok;
  ok.device_uuid = "GPU-new";
  ok.t_ms = kT0;
  ok.gpu_util = 1;
  b.samples.push_back(ok);
  Sample orphan = ok;
  orphan.device_uuid = "GPU-ghost";
  b.samples.push_back(orphan);
  auto r = store_->ApplyBatch(Plan(b));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("batch b2: samples[1].device: unknown device GPU-ghost"));

  auto after = *store_->Stats();
  EXPECT_EQ(after.samples, before.samples);
  EXPECT_EQ(after.devices, before.devices);
  EXPECT_EQ(after.jobs, before.jobs);
  EXPECT_EQ(after.batches, before.batches);
  // The cache did not learn the rolled-back device either.
  Batch c;
  c.batch_id = "b3";
  c.samples.push_back(ok);
  EXPECT_THAT(store_->ApplyBatch(Plan(c)).status().message(), HasSubstr("unknown device GPU-new"));
}

TEST_P(StoreContractTest, ASampleStoredByAnotherBatchIsADuplicate) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  Batch b = Basic("b2");
  auto r = store_->ApplyBatch(Plan(b));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("batch b2: samples[0]: a sample of device GPU-a"));
}

using testing_batches::OnNode;

// Group commit: one transaction, a savepoint per batch. The bad batch is refused with
// its own error and leaves nothing behind; the batches before and after it commit.
TEST_P(StoreContractTest, AGroupRefusesItsBadBatchAloneAndCommitsTheOthers) {
  Batch a = OnNode("a", "na", kT0);
  Batch bad = OnNode("bad", "nbad", kT0);
  Sample orphan = bad.samples.back();
  orphan.device_uuid = "GPU-ghost";
  orphan.t_ms += kMsPerMinute;
  bad.samples.push_back(orphan);  // after the batch's device, job and samples were written
  Batch c = OnNode("c", "nc", kT0, 5);
  // The last batch uses a device the first declared: what a group's batches learn is
  // visible to the batches after them.
  Batch d;
  d.batch_id = "d";
  Sample later = a.samples.back();
  later.t_ms += kMsPerMinute;
  d.samples.push_back(later);

  std::vector<const Batch*> group = {&a, &bad, &c, &d};
  auto out = store_->ApplyBatches(Plans(group));
  ASSERT_EQ(out.size(), 4u);
  ASSERT_TRUE(out[0].ok()) << out[0].status().ToString();
  EXPECT_EQ(*out[0], ApplyOutcome::kApplied);
  ASSERT_FALSE(out[1].ok());
  EXPECT_EQ(out[1].status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(out[1].status().message(),
              HasSubstr("batch bad: samples[3].device: unknown device GPU-ghost"));
  ASSERT_TRUE(out[2].ok()) << out[2].status().ToString();
  ASSERT_TRUE(out[3].ok()) << out[3].status().ToString();

  auto stats = *store_->Stats();
  EXPECT_EQ(stats.batches, 3);
  EXPECT_EQ(stats.samples, 3 + 5 + 1);
  EXPECT_EQ(stats.devices, 2);
  EXPECT_EQ(stats.jobs, 2);
  auto devices = *store_->ListDevices();
  for (const DeviceRecord& r : devices) {
    EXPECT_NE(r.device.uuid, "GPU-nbad");
    // Device times written once for the group, each device's own.
    EXPECT_EQ(r.in_service_ms, kT0);
    EXPECT_EQ(r.last_sample_ms,
              r.device.uuid == "GPU-na" ? kT0 + 3 * kMsPerMinute : kT0 + 4 * kMsPerMinute);
  }
  // The refused batch's device is unknown to later batches too (the cache did not learn
  // it), and its id is free: sent again, fixed, it is applied.
  Batch uses_bad;
  uses_bad.batch_id = "e";
  uses_bad.samples.push_back(bad.samples.front());
  EXPECT_THAT(store_->ApplyBatch(Plan(uses_bad)).status().message(),
              HasSubstr("unknown device GPU-nbad"));
  bad.samples.pop_back();
  EXPECT_EQ(*store_->ApplyBatch(Plan(bad)), ApplyOutcome::kApplied);
  // Every device-hour the group's batches reach is dirty: one mark each.
  auto dirty = *store_->DirtyHours(1000);
  EXPECT_EQ(dirty.size(), 3u * 4u);
}

// Settling days (Store::SettleDays) changes no read: the days over with no dirty hour are
// settled once each (PostgreSQL; SQLite settles none), a day still dirty or not yet over
// waits, and a late sample for a settled day is stored and read as any other.
TEST_P(StoreContractTest, SettlingDaysChangesNoRead) {
  const int64_t day = FloorTo(kT0, kMsPerDay);
  for (int h = 0; h < 3; ++h) {
    for (const char* node : {"na", "nb", "nc"}) {
      ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode(fmt::format("{}-{}", node, h), node, kT0 + h * kMsPerHour))).ok());
    }
  }
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("na-late", "na", kT0 + kMsPerDay))).ok());  // the next day, left dirty
  std::vector<RollupUpdate> clean;
  auto dirty = store_->DirtyHours(100);  // kept: a range-for over *temporary dangles
  for (const DirtyHour& d : *dirty) {
    if (d.hour_ms < day + kMsPerDay) clean.push_back({d, {}, {}});
  }
  ASSERT_TRUE(store_->WriteRollups(clean).ok());
  std::vector<DeviceRange> ranges;
  auto devices = store_->ListDevices();
  for (const DeviceRecord& d : *devices) ranges.push_back({d.id, {day, day + 3 * kMsPerDay}});
  auto read = [&] {
    std::vector<std::pair<int64_t, double>> out;
    auto all = store_->SamplesOf(ranges);
    for (const auto& samples : *all) {
      for (const Sample& s : samples) out.emplace_back(s.t_ms, s.sm_active.value_or(-1));
    }
    return out;
  };
  const auto before = read();
  ASSERT_EQ(before.size(), 3u * 3u * 3u + 3u);
  const bool settles = GetParam().name != "sqlite";
  auto settled = store_->SettleDays(day + 2 * kMsPerDay, 10);
  ASSERT_TRUE(settled.ok()) << settled.status().ToString();
  EXPECT_EQ(*settled, settles ? std::vector<int64_t>{day} : std::vector<int64_t>{}) << "the next day is dirty still";
  EXPECT_EQ(read(), before);
  EXPECT_TRUE(store_->SettleDays(day + 2 * kMsPerDay, 10)->empty()) << "once";
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("nb-late", "nb", kT0 + 5 * kMsPerHour))).ok());  // late, for the settled day
  clean.clear();
  dirty = store_->DirtyHours(100);
  for (const DirtyHour& d : *dirty) clean.push_back({d, {}, {}});
  ASSERT_TRUE(store_->WriteRollups(clean).ok());
  EXPECT_EQ(read().size(), before.size() + 3);
  EXPECT_TRUE(store_->SettleDays(day + 2 * kMsPerDay - 1, 10)->empty()) << "the next day is not over yet";
  EXPECT_EQ(*store_->SettleDays(day + 2 * kMsPerDay, 10), settles ? std::vector<int64_t>{day + kMsPerDay} : std::vector<int64_t>{});
}

// The same batch id twice in one group: the second is a duplicate of the first (not
// applied again), and the id with other content is refused, as across groups.
TEST_P(StoreContractTest, ABatchIdTwiceInOneGroupIsADuplicate) {
  Batch a = OnNode("a", "na", kT0);
  a.content_digest = 7;
  Batch again = a;
  Batch other = OnNode("a", "nz", kT0 + kMsPerHour);
  other.content_digest = 8;
  std::vector<const Batch*> group = {&a, &again, &other};
  auto out = store_->ApplyBatches(Plans(group));
  ASSERT_TRUE(out[0].ok());
  EXPECT_EQ(*out[0], ApplyOutcome::kApplied);
  ASSERT_TRUE(out[1].ok()) << out[1].status().ToString();
  EXPECT_EQ(*out[1], ApplyOutcome::kDuplicate);
  ASSERT_FALSE(out[2].ok());
  EXPECT_EQ(out[2].status().code(), StatusCode::kAlreadyExists);
  auto stats = *store_->Stats();
  EXPECT_EQ(stats.batches, 1);
  EXPECT_EQ(stats.samples, 3);
  EXPECT_EQ(stats.devices, 1);
  EXPECT_EQ(*store_->ApplyBatch(Plan(a)), ApplyOutcome::kDuplicate);
}

// A group given up before its commit (or whose commit failed) leaves nothing, and the
// store's caches learn nothing from it.
TEST_P(StoreContractTest, AGroupNotCommittedLeavesNothing) {
  {
    auto group = store_->BeginBatchGroup();
    ASSERT_TRUE(group.ok()) << group.status().ToString();
    ASSERT_EQ(*(*group)->Apply(Plan(OnNode("a", "na", kT0))), ApplyOutcome::kApplied);
    ASSERT_EQ(*(*group)->Apply(Plan(OnNode("b", "nb", kT0))), ApplyOutcome::kApplied);
  }  // destroyed without Commit()
  auto stats = *store_->Stats();
  EXPECT_EQ(stats.batches, 0);
  EXPECT_EQ(stats.samples, 0);
  EXPECT_EQ(stats.devices, 0);
  EXPECT_EQ(stats.dirty_hours, 0);
  Batch uses;
  uses.batch_id = "c";
  uses.samples.push_back(OnNode("x", "na", kT0).samples[0]);
  EXPECT_THAT(store_->ApplyBatch(Plan(uses)).status().message(), HasSubstr("unknown device GPU-na"));
  // The ids are free: the same batches apply in a later group, which a reopened store
  // finds.
  auto group = store_->BeginBatchGroup();
  ASSERT_TRUE(group.ok());
  ASSERT_EQ(*(*group)->Apply(Plan(OnNode("a", "na", kT0))), ApplyOutcome::kApplied);
  ASSERT_TRUE((*group)->Commit().ok());
  EXPECT_FALSE((*group)->Apply(Plan(OnNode("b", "nb", kT0))).ok())
      << "a committed group takes no more batches";
  group->reset();
  Reopen();
  EXPECT_EQ(store_->Stats()->batches, 1);
  EXPECT_EQ(*store_->ApplyBatch(Plan(OnNode("a", "na", kT0))), ApplyOutcome::kDuplicate);
}

// A device declared again exactly as stored is not rewritten; a changed one is.
TEST_P(StoreContractTest, ADeviceDeclaredAgainKeepsOrUpdatesItsRecord) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a", "na", kT0))).ok());
  Batch same = OnNode("b", "na", kT0 + kMsPerHour);
  ASSERT_TRUE(store_->ApplyBatch(Plan(same)).ok());
  Batch moved = OnNode("c", "na", kT0 + 2 * kMsPerHour);
  moved.devices[0].pool = "other";
  ASSERT_TRUE(store_->ApplyBatch(Plan(moved)).ok());
  auto devices = *store_->ListDevices();
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].device.pool, "other");
  EXPECT_EQ(devices[0].last_sample_ms, kT0 + 2 * kMsPerHour + 2 * kMsPerMinute);
  Reopen();  // the record cache is loaded from the table
  Batch back = OnNode("d", "na", kT0 + 3 * kMsPerHour);
  ASSERT_TRUE(store_->ApplyBatch(Plan(back)).ok());
  EXPECT_EQ((*store_->ListDevices())[0].device.pool, "p");
}

// A batch's devices are written together and its serving snapshots in one statement on
// PostgreSQL: text that array literals quote (quotes, backslashes, braces, commas, the word
// NULL) reads back as sent, figures to the bit, and a snapshot stored before or twice in
// one batch is refused by its index, leaving nothing of the batch.
TEST_P(StoreContractTest, DevicesAndServingSnapshotsReadBackAsSentWhateverTheirText) {
  const std::vector<std::string> texts = {R"(n"1\{x},NULL)", "{}", "NULL", R"(a\"b)", "p, q", "",
                                          "h\xc3\xa9te \t tab"};
  Batch b;
  b.batch_id = "text";
  for (size_t i = 0; i < texts.size(); ++i) {
    b.devices.push_back(Device{.uuid = fmt::format("GPU-{}", i), .node = texts[i], .model = texts[(i + 1) % texts.size()],
                               .memory_mib = 81'559, .pool = texts[(i + 2) % texts.size()],
                               .mig_profile = texts[(i + 3) % texts.size()], .sample_interval_ms = 10'000});
  }
  b.jobs.push_back(Job{.id = "serve", .team = "t", .kind = JobKind::kServing});
  auto snapshot = [](int64_t t, std::string engine, std::string model) {
    ServingSnapshot v;
    v.job_id = "serve";
    v.t_ms = t;
    v.engine = std::move(engine);
    v.model = std::move(model);
    v.requests_waiting = 0.0;
    v.requests_running = 1.0 / 3.0;
    v.kv_cache_usage_ratio = 5e-324;  // the smallest double
    v.prompt_tokens_total = 1.7976931348623157e308;
    v.generation_tokens_total = 2.5e-7;
    v.requests_total = 123456789012.0;
    v.queue_seconds_total = 0.1;
    v.prefill_seconds = CumulativeHistogram{{0.5, 1, INFINITY}, {2, 3, 4}, 1.25, 4};
    return v;  // the others unreported (NULL)
  };
  b.serving = {snapshot(kT0, "vllm", texts[0]), snapshot(kT0, "vllm", texts[4]), snapshot(kT0, "triton", texts[0]),
               snapshot(kT0 + kMsPerMinute, "vllm", texts[0])};
  ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok());
  // Declared again, each with other text: the update of stored devices.
  Batch again;
  again.batch_id = "again";
  for (size_t i = 0; i < texts.size(); ++i) {
    Device d = b.devices[i];
    d.node = texts[(i + 5) % texts.size()];
    d.pool = texts[(i + 6) % texts.size()];
    again.devices.push_back(d);
  }
  ASSERT_TRUE(store_->ApplyBatch(Plan(again)).ok());
  Reopen();
  auto devices = *store_->ListDevices();
  ASSERT_EQ(devices.size(), texts.size());
  std::sort(devices.begin(), devices.end(), [](auto& x, auto& y) { return x.device.uuid < y.device.uuid; });
  for (size_t i = 0; i < texts.size(); ++i) {
    const Device& d = devices[i].device;
    EXPECT_EQ(d.node, texts[(i + 5) % texts.size()]) << i;
    EXPECT_EQ(d.model, texts[(i + 1) % texts.size()]) << i;
    EXPECT_EQ(d.pool, texts[(i + 6) % texts.size()]) << i;
    EXPECT_EQ(d.mig_profile, texts[(i + 3) % texts.size()]) << i;
    EXPECT_EQ(d.memory_mib, 81'559);
    EXPECT_EQ(d.sample_interval_ms, 10'000);
  }
  auto jobs = store_->ListJobs();  // kept alive: a range-for over *temporary dangles
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  const int64_t job_id = (*jobs)[0].id;
  auto read = store_->ServingOf(job_id, {kT0, kT0 + kMsPerHour});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->size(), b.serving.size());
  std::multiset<std::tuple<int64_t, std::string, std::string>> want, got;
  for (const ServingSnapshot& v : b.serving) want.emplace(v.t_ms, v.engine, v.model);
  for (const ServingSnapshot& v : *read) {
    got.emplace(v.t_ms, v.engine, v.model);
    const ServingSnapshot w = snapshot(0, "", "");
    auto bits = [](std::optional<double> x) { return x ? std::optional<uint64_t>(std::bit_cast<uint64_t>(*x)) : std::nullopt; };
    EXPECT_EQ(bits(v.requests_waiting), bits(w.requests_waiting));
    EXPECT_EQ(bits(v.requests_running), bits(w.requests_running));
    EXPECT_EQ(bits(v.kv_cache_usage_ratio), bits(w.kv_cache_usage_ratio));
    EXPECT_EQ(bits(v.prompt_tokens_total), bits(w.prompt_tokens_total));
    EXPECT_EQ(bits(v.generation_tokens_total), bits(w.generation_tokens_total));
    EXPECT_EQ(bits(v.requests_total), bits(w.requests_total));
    EXPECT_EQ(bits(v.queue_seconds_total), bits(w.queue_seconds_total));
    EXPECT_FALSE(v.preemptions_total || v.executions_total || v.compute_seconds_total);
    EXPECT_EQ(v.prefill_seconds.le, w.prefill_seconds.le);
    EXPECT_EQ(v.prefill_seconds.count, w.prefill_seconds.count);
    EXPECT_TRUE(v.decode_seconds.empty() && v.iteration_tokens.empty());
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(std::is_sorted(read->begin(), read->end(), [](const ServingSnapshot& x, const ServingSnapshot& y) {
    return std::tie(x.engine, x.model, x.t_ms) < std::tie(y.engine, y.model, y.t_ms);
  })) << "by engine, model and time";
  auto before = *store_->Stats();
  Batch stored;  // its second snapshot is stored already
  stored.batch_id = "stored";
  stored.serving = {snapshot(kT0 + 2 * kMsPerMinute, "vllm", texts[0]), snapshot(kT0, "triton", texts[0])};
  auto r = store_->ApplyBatch(Plan(stored));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("batch stored: serving[1]: job serve already has a triton snapshot at"));
  Batch twice;  // the same snapshot twice in one batch
  twice.batch_id = "twice";
  twice.serving = {snapshot(kT0 + 3 * kMsPerMinute, "vllm", texts[3]), snapshot(kT0 + 4 * kMsPerMinute, "vllm", texts[3]),
                   snapshot(kT0 + 3 * kMsPerMinute, "vllm", texts[3])};
  r = store_->ApplyBatch(Plan(twice));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("batch twice: serving[2]: job serve already has a vllm snapshot at"));
  EXPECT_EQ(store_->Stats()->batches, before.batches);
  EXPECT_EQ(store_->ServingOf(job_id, {kT0, kT0 + kMsPerHour})->size(), b.serving.size());
}

// A sender bound to a node is checked against the node the store holds for each device it
// declares, samples or allocates, read once a batch on PostgreSQL: another node's device is
// refused by its place in the batch, its own devices (declared again, sampled, allocated in
// one batch) are taken.
TEST_P(StoreContractTest, ABoundSenderReportsOnlyForDevicesStoredOnItsNode) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("a", "na", kT0))).ok());
  ASSERT_TRUE(store_->ApplyBatch(Plan(OnNode("b", "nb", kT0))).ok());
  const BatchSender agent{.name = "na-agent", .nodes = {"na"}};
  auto apply = [&](const Batch& b) {
    auto plan = ledger::PlanIngest(b, agent);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    return plan.ok() ? store_->ApplyBatch(*plan) : Result<ApplyOutcome>(plan.status());
  };
  auto before = *store_->Stats();
  Batch moved = OnNode("moved", "na", kT0 + kMsPerHour, 1);  // declares GPU-nb on na
  moved.devices.push_back(Device{.uuid = "GPU-nb", .node = "na", .model = "NVIDIA H100", .pool = "p"});
  Batch sampled = OnNode("sampled", "na", kT0 + kMsPerHour, 1);
  sampled.samples.push_back(sampled.samples[0]);
  sampled.samples.back().device_uuid = "GPU-nb";
  Batch allocated = OnNode("allocated", "na", kT0 + kMsPerHour, 1);
  allocated.allocations.push_back(Allocation{"GPU-nb", "j-na", kT0 + kMsPerHour, std::nullopt});
  for (auto [batch, where] : {std::pair{&moved, "devices[1]"}, {&sampled, "samples[1].device"},
                              {&allocated, "allocations[1].device"}}) {
    auto r = apply(*batch);
    ASSERT_FALSE(r.ok()) << where;
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
    EXPECT_THAT(r.status().message(),
                HasSubstr(fmt::format("batch {}: {}: na-agent may not report for device GPU-nb, which is on node "
                                      "\"nb\"",
                                      batch->batch_id, where)));
  }
  auto after = *store_->Stats();
  EXPECT_EQ(after.samples, before.samples);
  EXPECT_EQ(after.batches, before.batches);
  Batch own = OnNode("own", "na", kT0 + kMsPerHour, 2);
  own.devices[0].pool = "moved";
  ASSERT_TRUE(apply(own).ok());
  auto devices = *store_->ListDevices();
  ASSERT_EQ(devices.size(), 2u);
  for (const DeviceRecord& d : devices) {
    EXPECT_EQ(d.device.pool, d.device.uuid == "GPU-na" ? "moved" : "p");
    EXPECT_EQ(d.device.node, d.device.uuid == "GPU-na" ? "na" : "nb");
  }
}

// CountJobs counts what ListJobs lists, by a second road: the jobs that overlap the
// window, and their distinct attributes, counted here from the full list.
TEST_P(StoreContractTest, CountsTheJobsOfAWindowAsTheirListDoes) {
  Batch b;
  b.batch_id = "jobs";
  auto job = [&](std::string id, std::string team, std::string project, JobKind kind, std::optional<int64_t> start,
                 std::optional<int64_t> end) {
    Job j{.id = id, .team = std::move(team), .project = std::move(project), .user = "u-" + id};
    j.kind = kind;
    j.start_ms = start;
    j.end_ms = end;
    b.jobs.push_back(j);
  };
  job("early", "vision", "det", JobKind::kTraining, kT0, kT0 + kMsPerHour);            // ends before
  job("edge", "vision", "seg", JobKind::kTraining, kT0, kT0 + 2 * kMsPerHour);         // ends at the start
  job("open", "nlp", "llm", JobKind::kNotebook, kT0 + kMsPerHour, std::nullopt);        // still running
  job("unknown", "", "", JobKind::kUnknown, std::nullopt, std::nullopt);                // no times at all
  job("late", "speech", "asr", JobKind::kServing, kT0 + 4 * kMsPerHour, std::nullopt);  // starts at the end
  ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok());
  const TimeRange window{kT0 + 2 * kMsPerHour, kT0 + 4 * kMsPerHour};
  auto counts = store_->CountJobs(window);
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  std::set<std::string> teams, projects, experiments, users, kinds;
  int64_t n = 0;
  auto all = store_->ListJobs();  // kept alive: a range-for over *temporary dangles
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  for (const JobRecord& r : *all) {
    const Job& j = r.job;
    if ((j.end_ms && *j.end_ms < window.begin_ms) || (j.start_ms && *j.start_ms >= window.end_ms)) continue;
    ++n;
    teams.insert(j.team);
    projects.insert(j.project);
    experiments.insert(j.experiment);
    users.insert(j.user);
    kinds.insert(std::string(JobKindName(j.kind)));
  }
  EXPECT_EQ(n, 3);  // edge, open, unknown
  EXPECT_EQ(counts->jobs, n);
  EXPECT_EQ(counts->teams, static_cast<int64_t>(teams.size()));
  EXPECT_EQ(counts->projects, static_cast<int64_t>(projects.size()));
  EXPECT_EQ(counts->experiments, static_cast<int64_t>(experiments.size()));
  EXPECT_EQ(counts->users, static_cast<int64_t>(users.size()));
  EXPECT_EQ(counts->kinds, static_cast<int64_t>(kinds.size()));
  EXPECT_EQ(store_->CountJobs({kT0 + 9 * kMsPerHour, kT0 + 10 * kMsPerHour})->jobs, 3);  // open, unknown, late
}

TEST_P(StoreContractTest, AllocationsCloseOnceAndRetriesAreHarmless) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  Batch close;
  close.batch_id = "b2";
  close.allocations.push_back(Allocation{"GPU-a", "j1", kT0, kT0 + kMsPerHour});
  ASSERT_TRUE(store_->ApplyBatch(Plan(close)).ok());
  Batch again = close;
  again.batch_id = "b3";
  ASSERT_TRUE(store_->ApplyBatch(Plan(again)).ok());
  Batch other = close;
  other.batch_id = "b4";
  other.allocations[0].to_ms = kT0 + 2 * kMsPerHour;
  auto r = store_->ApplyBatch(Plan(other));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("allocations[0].to: job j1 on GPU-a was already released"));
  int64_t id = store_->ListDevices()->at(0).id;
  auto allocs = *store_->Allocations(id, {kT0, kT0 + 1});
  EXPECT_EQ(allocs[0].to_ms, kT0 + kMsPerHour);
  // Unknown job in an allocation.
  Batch unknown;
  unknown.batch_id = "b5";
  unknown.allocations.push_back(Allocation{"GPU-a", "nope", kT0, std::nullopt});
  EXPECT_THAT(store_->ApplyBatch(Plan(unknown)).status().message(),
              HasSubstr("allocations[0].job: unknown job nope"));
}

TEST_P(StoreContractTest, MigSlicesNameTheirParent) {
  Batch b;
  b.batch_id = "mig";
  // The slice is listed before its parent: the store orders them.
  b.devices.push_back(Device{.uuid = "MIG-1", .parent_uuid = "GPU-p", .share = {3, 7},
                             .mig_profile = "3g.71gb"});
  b.devices.push_back(Device{.uuid = "GPU-p", .model = "NVIDIA H200"});
  ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok());
  auto devices = *store_->ListDevices();
  auto slice = std::find_if(devices.begin(), devices.end(),
                            [](const DeviceRecord& d) { return d.device.uuid == "MIG-1"; });
  ASSERT_NE(slice, devices.end());
  EXPECT_EQ(slice->device.parent_uuid, "GPU-p");
  EXPECT_EQ(slice->device.share, (Share{3, 7}));
}

// The dirty mark of the samples' own hour (08:00).
DirtyHour HourOfSamples(Store& s) {
  auto dirty = s.DirtyHours(100);  // kept alive: a range-for over *temporary dangles
  for (const DirtyHour& d : *dirty) {
    if (d.hour_ms == kT0) return d;
  }
  ADD_FAILURE() << "08:00 is not dirty";
  return {};
}

TEST_P(StoreContractTest, RollupsReplaceAndSum) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  DirtyHour own = HourOfSamples(*store_);
  RollupRow row{kT0, 1, 1, {100, 200, 0, 0, 50}, 0};
  ASSERT_TRUE(store_->WriteRollups({{own, {row}, {}}}).ok());
  ASSERT_TRUE(store_->WriteRollups({{own, {row}, {}}}).ok());  // replaced, not added
  RollupRow next{kT0 + kMsPerHour, 1, 1, {1, 2, 3, 4, 5}, 1};
  ASSERT_TRUE(store_->WriteRollups({{{1, kT0 + kMsPerHour, 0}, {next}, {}}}).ok());
  auto sums = *store_->SumHourRollups({kT0, kT0 + 2 * kMsPerHour});
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0].ms, (std::array<int64_t, kBucketCount>{101, 202, 3, 4, 55}));
  EXPECT_EQ(store_->DirtyHours(100)->size(), 3u);  // the others are still dirty
}

TEST_P(StoreContractTest, ADirtyMarkNewerThanTheRollupSurvivesIt) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  DirtyHour own = HourOfSamples(*store_);
  Batch more;
  more.batch_id = "b2";
  Sample s;
  s.device_uuid = "GPU-a";
  s.t_ms = kT0 + 40'000;
  s.sm_active = 1;
  more.samples.push_back(s);
  ASSERT_TRUE(store_->ApplyBatch(Plan(more)).ok());
  ASSERT_TRUE(store_->WriteRollups({{own, {}, {}}}).ok());
  auto still = *store_->DirtyHours(100);
  EXPECT_EQ(still.size(), 4u);
}

TEST_P(StoreContractTest, PriceBookAndDataSurviveReopening) {
  auto book = *PriceBook::Create({PriceEntry{"NVIDIA H200", "*", CapacityType::kReserved,
                                             *Money::Parse("2.75"), {0, kForever}}});
  ASSERT_TRUE(store_->SavePriceBook(book).ok());
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  Reopen();
  auto loaded = *store_->LoadPriceBook();
  ASSERT_EQ(loaded.entries().size(), 1u);
  EXPECT_EQ(loaded.entries()[0].per_gpu_hour.micros(), 2'750'000);
  EXPECT_EQ(*store_->ApplyBatch(Plan(Basic("b1"))), ApplyOutcome::kDuplicate);
  EXPECT_EQ(store_->Stats()->samples, 3);
}

// Raw samples are kept in whole units (SQLite: hourly chunks; PostgreSQL: daily
// partitions, dropped whole): retention prunes the whole units before the one that holds
// its limit, and leaves rollups alone.
TEST_P(StoreContractTest, PrunesRawSamplesOnlyInWholeUnits) {
  const int64_t unit = backend_.retention_unit_ms;
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());  // three samples at 08:00:00..08:00:20
  Batch later = Basic("b2");
  later.devices.clear();
  later.jobs.clear();
  later.allocations.clear();
  for (Sample& smp : later.samples) smp.t_ms += unit;  // 09:00:00..09:00:20 (or the next day's 08:00)
  ASSERT_TRUE(store_->ApplyBatch(Plan(later)).ok());
  EXPECT_EQ(*store_->PruneSamples(kT0 + 15'000), 0);  // within the first unit: kept
  EXPECT_EQ(store_->Stats()->samples, 6);
  EXPECT_EQ(*store_->PruneSamples(kT0 + unit + 15'000), 3);  // the first unit goes
  EXPECT_EQ(store_->Stats()->samples, 3);
  auto devices = *store_->ListDevices();
  EXPECT_EQ(store_->Samples(devices[0].id, {kT0, kT0 + unit + kMsPerHour})->size(), 3u);
}

// Two batches may bring samples of one device-hour in interleaved times: both stored,
// read back in time order; an instant stored already is refused by name.
TEST_P(StoreContractTest, InterleavedBatchesOfOneHourReadBackInOrder) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());  // 08:00:00, :10, :20
  Batch between = Basic("b2");
  between.devices.clear();
  between.jobs.clear();
  between.allocations.clear();
  between.samples.resize(2);
  between.samples[0].t_ms = kT0 + 5'000;
  between.samples[1].t_ms = kT0 + 25'000;
  ASSERT_TRUE(store_->ApplyBatch(Plan(between)).ok());
  auto devices = *store_->ListDevices();
  auto read = *store_->Samples(devices[0].id, {kT0, kT0 + kMsPerHour});
  ASSERT_EQ(read.size(), 5u);
  for (size_t i = 1; i < read.size(); ++i) EXPECT_LT(read[i - 1].t_ms, read[i].t_ms);
  // Only the range asked for.
  EXPECT_EQ(store_->Samples(devices[0].id, {kT0 + 5'000, kT0 + 10'000})->size(), 2u);

  Batch again = between;
  again.batch_id = "b3";
  again.samples = {between.samples[1]};
  again.samples[0].t_ms = kT0 + 20'000;  // b1's third sample
  auto r = store_->ApplyBatch(Plan(again));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("batch b3: samples[0]: a sample of device GPU-a at 2026-11-23T08:00:20Z is already stored"));
  EXPECT_EQ(store_->Stats()->samples, 5);

  // The plan does not rely on the batch having been validated: a device's samples out of
  // order within one batch are refused, not packed; a store refuses a plan without its
  // batch and rules.
  Batch unordered = between;
  unordered.batch_id = "b4";
  unordered.samples[0].t_ms = kT0 + 50'000;
  unordered.samples[1].t_ms = kT0 + 45'000;
  auto u = ledger::PlanIngest(unordered);
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.status().message(), HasSubstr("batch b4: samples[1].t: 2026-11-23T08:00:45Z is not after device GPU-a's"));
  auto empty = store_->ApplyBatch(IngestPlan{});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Stats()->samples, 5);
}

// ActivityOf is SamplesOf with only the activity figures: the same samples, in time order
// (chunks of two batches interleaved within an hour), sm_active where a sample has it and
// else gpu_util, on the store and on a snapshot alike.
TEST_P(StoreContractTest, ActivityReadsAreTheActivityFiguresOfTheSamples) {
  Batch first = Basic("b1");  // 08:00:10, :20, :30 at sm_active 0.5
  first.devices.push_back(Device{.uuid = "GPU-b", .node = "node-a", .model = "NVIDIA H200",
                                 .memory_mib = 143771, .pool = "training"});
  first.samples[1].gpu_util = 0.97;  // beside sm_active: not the activity
  first.samples[2].process_count = 0;
  first.samples[2].gaps = IdleGaps{60'000, 12'345, 678};
  Batch second = Basic("b2");
  second.devices.clear();
  second.jobs.clear();
  second.allocations.clear();
  second.samples.resize(3);
  second.samples[0] = Sample{.device_uuid = "GPU-a", .t_ms = kT0 + 15'000, .gpu_util = 0.25, .fb_used_mib = 4096};
  second.samples[1] = Sample{.device_uuid = "GPU-a", .t_ms = kT0 + kMsPerHour + 5'000, .power_watts = 300};
  second.samples[2] = Sample{.device_uuid = "GPU-b", .t_ms = kT0 + 12'000, .sm_active = 0.125, .process_count = 2};
  ASSERT_TRUE(store_->ApplyBatch(Plan(first)).ok());
  ASSERT_TRUE(store_->ApplyBatch(Plan(second)).ok());
  auto devices = store_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  std::map<std::string, int64_t> id;
  for (const auto& d : *devices) id[d.device.uuid] = d.id;

  // What each range must bring, from the batches themselves.
  const std::vector<DeviceRange> ranges = {{id["GPU-a"], {kT0, kT0 + 2 * kMsPerHour}},
                                           {id["GPU-b"], {kT0, kT0 + kMsPerHour}},
                                           {id["GPU-a"], {kT0 + 15'000, kT0 + 20'000}},
                                           {id["GPU-a"], {kT0 + 2 * kMsPerHour, kT0 + 3 * kMsPerHour}}};
  std::vector<std::vector<ActivitySample>> want(ranges.size());
  for (size_t r = 0; r < ranges.size(); ++r) {
    for (const Batch* b : {&first, &second}) {
      for (const Sample& smp : b->samples) {
        if (id[smp.device_uuid] != ranges[r].device_id || smp.t_ms < ranges[r].range.begin_ms ||
            smp.t_ms > ranges[r].range.end_ms) {
          continue;
        }
        want[r].push_back(ActivitySample{.t_ms = smp.t_ms, .activity = smp.sm_active ? smp.sm_active : smp.gpu_util,
                                         .fb_used_mib = smp.fb_used_mib, .process_count = smp.process_count,
                                         .gaps = smp.gaps});
      }
    }
    std::sort(want[r].begin(), want[r].end(), [](const auto& a, const auto& b) { return a.t_ms < b.t_ms; });
  }
  ASSERT_EQ(want[0].size(), 5u);
  EXPECT_EQ(*want[0][1].activity, 0.25);  // gpu_util, where no sm_active
  EXPECT_EQ(*want[0][2].activity, 0.5);   // sm_active, beside gpu_util
  EXPECT_FALSE(want[0][4].activity.has_value());
  ASSERT_EQ(want[1].size(), 1u);
  ASSERT_EQ(want[2].size(), 2u);
  EXPECT_TRUE(want[3].empty());

  auto on_store = store_->ActivityOf(ranges);
  ASSERT_TRUE(on_store.ok()) << on_store.status().ToString();
  EXPECT_EQ(*on_store, want);
  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  auto on_snapshot = (*snap)->ActivityOf(ranges);
  ASSERT_TRUE(on_snapshot.ok()) << on_snapshot.status().ToString();
  EXPECT_EQ(*on_snapshot, want);
  EXPECT_TRUE((*snap)->ActivityOf({})->empty());
  // The same chunks undecoded (a reader may decode them on another thread): each of a
  // range asked for, by range and then by first time, decoding to the same samples.
  auto encoded = (*snap)->EncodedChunksOf(ranges);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  ASSERT_FALSE(encoded->chunks.empty());
  for (size_t c = 0; c < encoded->chunks.size(); ++c) {
    const EncodedChunks::Chunk& chunk = encoded->chunks[c];
    ASSERT_LT(chunk.range, ranges.size());
    ASSERT_LE(chunk.offset + chunk.size, encoded->bytes.size());
    if (c > 0) {
      const EncodedChunks::Chunk& before = encoded->chunks[c - 1];
      EXPECT_LE(std::tie(before.range, before.first_ms), std::tie(chunk.range, chunk.first_ms)) << c;
    }
  }
  auto decoded = DecodeActivityOf(ranges, *encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, want);
  EXPECT_TRUE((*snap)->EncodedChunksOf({})->chunks.empty());
}

// Every figure of a read sample, its processes too, as text: two reads compare equal
// exactly when they hold the same samples.
std::string Figures(const std::vector<Sample>& samples) {
  std::string out;
  auto opt = [&](const auto& v) {
    if (v) {
      out += fmt::format(" {}", *v);
    } else {
      out += " -";
    }
  };
  for (const Sample& smp : samples) {
    out += fmt::format("{} h{}", FormatTime(smp.t_ms), static_cast<int>(smp.health));
    for (const auto& v : {smp.sm_active, smp.sm_occupancy, smp.tensor_active, smp.dram_active, smp.gpu_util,
                          smp.fb_used_mib, smp.power_watts}) {
      opt(v);
    }
    opt(smp.process_count);
    if (smp.gaps) out += fmt::format(" gaps {} {} {}", smp.gaps->interval_ms, smp.gaps->idle_ms, smp.gaps->short_idle_ms);
    for (const ProcessSample& p : smp.processes) {
      out += fmt::format(" [{} {} {}", p.pid, p.job_id, p.fb_used_mib);
      opt(p.sm_share);
      out += "]";
    }
    out += "\n";
  }
  return out;
}

// A device-hour's batches each add a row of samples; once the device's samples are past
// the hour, the rollup refresh of that hour or of the next merges them into one row
// (HoursToMerge): the samples read back as they were, figures and processes, instants
// stored before are still refused, and a late batch into the hour is merged in turn.
TEST_P(StoreContractTest, AnHoursBatchesAreOneRowOnceTheDeviceIsPastIt) {
  Batch first = Basic("b1");  // 08:00:10, :20, :30 at sm_active 0.5
  first.samples[0].processes = {ProcessSample{4242, "j1", 2048, 0.75}};
  first.samples[0].process_count = 1;
  first.samples[1].gaps = IdleGaps{10'000, 2'500, 500};
  first.samples[2].health = Health::kDegraded;
  auto more = [&](std::string id, std::vector<Sample> samples) {
    Batch b = Basic(std::move(id));
    b.devices.clear();
    b.jobs.clear();
    b.allocations.clear();
    b.samples = std::move(samples);
    return b;
  };
  const Batch interleaved = more("b2", {Sample{.device_uuid = "GPU-a", .t_ms = kT0 + 15'000, .gpu_util = 0.25},
                                        Sample{.device_uuid = "GPU-a", .t_ms = kT0 + 30 * kMsPerMinute,
                                               .sm_active = 0.1234, .fb_used_mib = 4096, .power_watts = 312.5}});
  const Batch next_hour = more("b3", {Sample{.device_uuid = "GPU-a", .t_ms = kT0 + kMsPerHour + 5'000, .sm_active = 0.75}});
  const Batch late = more("b4", {Sample{.device_uuid = "GPU-a", .t_ms = kT0 + 40 * kMsPerMinute, .sm_active = 0.5}});
  const Batch again = more("b5", {Sample{.device_uuid = "GPU-a", .t_ms = kT0 + 15'000, .sm_active = 0.5}});
  auto apply = [&](const Batch& b) {
    auto r = store_->ApplyBatch(Plan(b));
    EXPECT_TRUE(r.ok()) << b.batch_id << ": " << r.status().ToString();
  };
  auto refresh = [&](int64_t hour) {
    auto devices = store_->ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status().ToString();
    Status st = store_->WriteRollups({RollupUpdate{DirtyHour{devices->at(0).id, hour, 0}, {}, {}}});
    EXPECT_TRUE(st.ok()) << st.ToString();
  };
  auto rows = [&] { return store_->Stats()->sample_rows; };
  const TimeRange all{kT0, kT0 + 2 * kMsPerHour};
  auto read = [&] { return Figures(*store_->Samples(store_->ListDevices()->at(0).id, all)); };
  apply(first);
  apply(interleaved);
  const std::string before = read();
  ASSERT_EQ(std::count(before.begin(), before.end(), '\n'), 5);
  EXPECT_EQ(rows(), 2);
  refresh(kT0);
  EXPECT_EQ(rows(), 2) << "the device's latest sample is in the hour: it may still grow";
  apply(next_hour);
  EXPECT_EQ(rows(), 3);
  refresh(kT0 + kMsPerHour);
  EXPECT_EQ(rows(), 2) << "the next hour's refresh merges the hour before";
  const std::string merged = read();
  EXPECT_EQ(merged.substr(0, before.size()), before);
  EXPECT_EQ(store_->Stats()->samples, 6);
  auto activity = store_->ActivityOf(std::vector<DeviceRange>{{store_->ListDevices()->at(0).id, {kT0, kT0 + kMsPerHour}}});
  ASSERT_TRUE(activity.ok()) << activity.status().ToString();
  ASSERT_EQ(activity->at(0).size(), 5u);
  EXPECT_EQ(activity->at(0)[1].activity, 0.25);

  auto duplicate = store_->ApplyBatch(Plan(again));
  ASSERT_FALSE(duplicate.ok());
  EXPECT_THAT(duplicate.status().message(), HasSubstr("samples[0]"));
  EXPECT_EQ(rows(), 2);
  apply(late);
  EXPECT_EQ(rows(), 3);
  refresh(kT0);
  EXPECT_EQ(rows(), 2) << "a late batch into an hour the device is past is merged at its refresh";
  const std::string with_late = read();
  EXPECT_NE(with_late.find("2026-11-23T08:40:00Z"), std::string::npos);
  EXPECT_EQ(std::count(with_late.begin(), with_late.end(), '\n'), 7);
  EXPECT_EQ(store_->Stats()->samples, 7);
  Reopen();
  EXPECT_EQ(read(), with_late);
}

// Snapshots that batches bring a minute at a time (an agent's push carries a scrape or
// none) are kept a chunk per batch until the rollup refresh merges each job's engine-hour
// into one chunk: reads answer the same before and after, a snapshot stored in a merged
// chunk is still refused, and the hour takes snapshots after its merge.
TEST_P(StoreContractTest, ServingSnapshotsOfManyBatchesAreMergedPerEngineHour) {
  auto snapshot = [](int64_t minute, const char* engine) {
    ServingSnapshot v;
    v.job_id = "serve";
    v.engine = engine;
    v.model = "m";
    v.t_ms = kT0 + minute * kMsPerMinute + 500;
    v.requests_waiting = static_cast<double>(minute % 7);
    v.kv_cache_usage_ratio = static_cast<double>(minute % 100) / 100;
    v.requests_total = static_cast<double>(minute * 10);
    v.prefill_seconds.le = {0.1, std::numeric_limits<double>::infinity()};
    v.prefill_seconds.count = {static_cast<double>(minute), static_cast<double>(minute * 2)};
    v.prefill_seconds.total = static_cast<double>(minute * 2);
    return v;
  };
  Batch all;  // every snapshot sent, for the oracle
  std::vector<Batch> batches;
  for (int64_t m = 0; m < 90; ++m) {  // 08:00 to 09:29, a batch a minute
    Batch& b = batches.emplace_back();
    b.batch_id = fmt::format("m{}", m);
    b.jobs.push_back(Job{.id = "serve", .team = "t", .kind = JobKind::kServing});
    b.serving.push_back(snapshot(m, "vllm"));
    if (m % 10 == 0) b.serving.push_back(snapshot(m, "triton"));
    all.serving.insert(all.serving.end(), b.serving.begin(), b.serving.end());
  }
  for (const Batch& b : batches) ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok()) << b.batch_id;
  const int64_t job = store_->ListJobs()->at(0).id;
  const std::vector<TimeRange> windows = {{kT0 - kMsPerHour, kT0 + 3 * kMsPerHour},
                                          {kT0 + 30 * kMsPerMinute, kT0 + 75 * kMsPerMinute},
                                          {kT0 + kMsPerHour, kT0 + kMsPerHour + 500}};
  auto expect_reads = [&](const std::string& when) {
    for (const TimeRange& w : windows) {
      const std::string over = when + ", over [" + FormatTime(w.begin_ms) + ", " + FormatTime(w.end_ms) + "]";
      auto snapshots = store_->ServingOf(job, w);
      ASSERT_TRUE(snapshots.ok()) << snapshots.status().ToString();
      EXPECT_EQ(testing_batches::KeysOf(*snapshots), testing_batches::ServingIn(all, w.begin_ms, w.end_ms)) << over;
      for (const ServingSnapshot& v : *snapshots) {
        const ServingSnapshot want = snapshot((v.t_ms - kT0) / kMsPerMinute, "");
        EXPECT_EQ(v.requests_total, want.requests_total) << over;
        EXPECT_EQ(v.prefill_seconds.count, want.prefill_seconds.count) << over;
      }
      auto gauges = store_->ServingGaugesOf(job, w);
      ASSERT_TRUE(gauges.ok()) << gauges.status().ToString();
      EXPECT_EQ(testing_batches::Canonical(*gauges), testing_batches::GaugesIn(all, w.begin_ms, w.end_ms)) << over;
    }
  };
  auto chunks = [&] { return backend_.scalar(dir_, "SELECT count(*) FROM serving_chunks"); };
  expect_reads("before the refresh");
  EXPECT_EQ(chunks(), "99");  // 90 of vLLM, 9 of Triton
  auto refresh = [&] {
    ASSERT_TRUE(store_->WriteRollups({{{1, kT0, 0}, {RollupRow{kT0, 1, 1, {100, 0, 0, 0, 0}, 0}}, {}}}).ok());
  };
  refresh();
  EXPECT_EQ(chunks(), "4");  // each engine's 08:00 and 09:00
  expect_reads("after the refresh");
  Batch again;
  again.batch_id = "again";
  again.serving = {snapshot(95, "vllm"), snapshot(5, "vllm")};
  auto r = store_->ApplyBatch(Plan(again));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("serving[1]: job serve already has a vllm snapshot at " + FormatTime(kT0 + 5 * kMsPerMinute + 500)));
  again.serving.pop_back();
  ASSERT_TRUE(store_->ApplyBatch(Plan(again)).ok());
  all.serving.push_back(snapshot(95, "vllm"));
  EXPECT_EQ(chunks(), "5");
  refresh();
  EXPECT_EQ(chunks(), "4");
  expect_reads("after a later snapshot's refresh");
  Reopen();
  expect_reads("reopened");
}

// A serving chunk that does not decode is an error naming its job, engine, model and
// first time: on the reads that reach it (a window clear of it still reads), and on a
// batch that brings a snapshot to its hour, which is refused whole.
TEST_P(StoreContractTest, ACorruptServingChunkIsAnErrorNamingItsJobEngineAndHour) {
  const Batch b = testing_batches::ServingEverySixHours("serving", kT0);
  ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok());
  const int64_t job = store_->ListJobs()->at(0).id;
  EXPECT_EQ(backend_.scalar(dir_, fmt::format("UPDATE serving_chunks SET data = substr(data, 1, 3)"
                                              " WHERE first_ms = {} AND engine = 'vllm' RETURNING 1",
                                              kT0)),
            "1");
  const std::string named =
      fmt::format("serving_chunks row of job {} (vllm m0) at {} is corrupt: the chunk does not decode", job, FormatTime(kT0));
  const TimeRange all{kT0, kT0 + 3 * kMsPerDay};
  auto snapshots = store_->ServingOf(job, all);
  ASSERT_FALSE(snapshots.ok());
  EXPECT_THAT(snapshots.status().message(), HasSubstr(named));
  auto gauges = store_->ServingGaugesOf(job, all);
  ASSERT_FALSE(gauges.ok());
  EXPECT_THAT(gauges.status().message(), HasSubstr(named));
  const TimeRange later{kT0 + kMsPerHour, kT0 + 3 * kMsPerDay};
  auto clear = store_->ServingOf(job, later);
  ASSERT_TRUE(clear.ok()) << clear.status().ToString();
  EXPECT_EQ(testing_batches::KeysOf(*clear), testing_batches::ServingIn(b, later.begin_ms, later.end_ms));
  Batch more;
  more.batch_id = "more";
  more.devices.push_back(Device{.uuid = "GPU-m", .node = "node-m", .model = "NVIDIA H200", .memory_mib = 143771});
  ServingSnapshot v = b.serving.front();
  v.t_ms += kMsPerMinute;
  more.serving = {v};
  auto r = store_->ApplyBatch(Plan(more));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(named));
  EXPECT_EQ(store_->ListDevices()->size(), 0u) << "nothing of the batch is applied";
}

// ServingGaugesOf is the queue and KV-cache gauges of ServingOf's snapshots, by time:
// snapshots of two engines and two models at each time, sent by two batches; a window's
// bounds are in it; another job's snapshots stay out; on the store and on a snapshot.
TEST_P(StoreContractTest, ServingGaugesAreTheQueueAndCacheOfTheSnapshotsByTime) {
  const Batch all = testing_batches::ServingEverySixHours("all", kT0);
  Batch vllm = all, triton = all, other = all;
  vllm.batch_id = "vllm";
  triton.batch_id = "triton";
  triton.jobs.clear();
  std::erase_if(vllm.serving, [](const ServingSnapshot& v) { return v.engine != "vllm"; });
  std::erase_if(triton.serving, [](const ServingSnapshot& v) { return v.engine != "triton"; });
  other.batch_id = "other";
  other.jobs[0].id = "other";
  for (ServingSnapshot& v : other.serving) {
    v.job_id = "other";
    v.requests_waiting = 99;
  }
  for (const Batch* b : {&vllm, &other, &triton}) {
    auto applied = store_->ApplyBatch(Plan(*b));
    ASSERT_TRUE(applied.ok()) << b->batch_id << ": " << applied.status().ToString();
  }
  auto jobs = store_->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  int64_t job = -1;
  for (const auto& j : *jobs) {
    if (j.job.id == "serve") job = j.id;
  }
  ASSERT_GE(job, 0);
  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  for (const TimeRange& w : {TimeRange{kT0, kT0 + 3 * kMsPerDay}, TimeRange{kT0 + 6 * kMsPerHour, kT0 + 18 * kMsPerHour},
                             TimeRange{kT0 + 6 * kMsPerHour + 1, kT0 + 12 * kMsPerHour - 1}}) {
    const std::string over = "over [" + FormatTime(w.begin_ms) + ", " + FormatTime(w.end_ms) + "]";
    const std::vector<ServingGauges> want = testing_batches::GaugesIn(all, w.begin_ms, w.end_ms);
    for (StoreReads* reads : {static_cast<StoreReads*>(store_.get()), static_cast<StoreReads*>(snap->get())}) {
      auto got = reads->ServingGaugesOf(job, w);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_TRUE(std::is_sorted(got->begin(), got->end(),
                                 [](const ServingGauges& x, const ServingGauges& y) { return x.t_ms < y.t_ms; }))
          << over;
      EXPECT_EQ(testing_batches::Canonical(*got), want) << over;
    }
  }
  ASSERT_EQ(testing_batches::GaugesIn(all, kT0 + 6 * kMsPerHour, kT0 + 18 * kMsPerHour).size(), 6u);
  EXPECT_TRUE(testing_batches::GaugesIn(all, kT0 + 6 * kMsPerHour + 1, kT0 + 12 * kMsPerHour - 1).empty());
}

// A device-hour whose chunks cannot all be decoded is left unmerged, and the rollups
// that would have merged it are written all the same: the reads and `store check` name
// the corrupt row.
TEST_F(SqliteStoreTest, AnHourWithACorruptChunkIsLeftUnmergedAndItsNextHourRollsUp) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());  // 08:00:10, :20, :30
  Batch later = Basic("b2");
  later.devices.clear();
  later.jobs.clear();
  later.allocations.clear();
  later.samples = {Sample{.device_uuid = "GPU-a", .t_ms = kT0 + 40'000, .sm_active = 0.5}};
  ASSERT_TRUE(store_->ApplyBatch(Plan(later)).ok());
  ExecBehindTheStore(fmt::format("UPDATE sample_chunks SET data = x'ff' WHERE first_ms = {}", kT0 + 40'000).c_str());
  later.batch_id = "b3";
  later.samples[0].t_ms = kT0 + kMsPerHour + 10'000;
  ASSERT_TRUE(store_->ApplyBatch(Plan(later)).ok());
  const int64_t device = store_->ListDevices()->at(0).id;
  Status st = store_->WriteRollups({RollupUpdate{DirtyHour{device, kT0 + kMsPerHour, 0}, {}, {}}});
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(store_->Stats()->sample_rows, 3);
  auto read = store_->Samples(device, {kT0, kT0 + kMsPerHour});
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), HasSubstr("corrupt"));
}

// A store of schema version 4 kept one row per sample; opening it moves them into chunks.
TEST_F(SqliteStoreTest, MigratesOneRowPerSampleIntoChunks) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  auto before = *store_->Samples(store_->ListDevices()->at(0).id, {kT0, kT0 + kMsPerHour});
  store_.reset();
  // Turn the store back into version 4: the samples table as it was, holding the same
  // figures (scaled as it kept them), and no chunks.
  std::string sql =
      "CREATE TABLE samples(device_id INTEGER NOT NULL, t_ms INTEGER NOT NULL, sm_active INTEGER,"
      " sm_occupancy INTEGER, tensor_active INTEGER, dram_active INTEGER, gpu_util INTEGER,"
      " fb_used_mib INTEGER, power_dw INTEGER, health INTEGER NOT NULL, process_count INTEGER,"
      " gap_interval_ms INTEGER, gap_idle_ms INTEGER, gap_short_idle_ms INTEGER,"
      " PRIMARY KEY(device_id, t_ms)) WITHOUT ROWID;";
  for (const Sample& smp : before) {
    sql += fmt::format("INSERT INTO samples VALUES(1,{},{},NULL,NULL,NULL,NULL,{},NULL,0,NULL,NULL,NULL,NULL);",
                       smp.t_ms, std::llround(*smp.sm_active * 10'000),
                       smp.fb_used_mib ? std::to_string(std::llround(*smp.fb_used_mib)) : "NULL");
  }
  // And without what the versions after 5 add, which migrating again creates.
  sql += testing_batches::kBatchesTableOfOldStores;
  sql += testing_batches::ServingTableOfOldStores(/*postgresql=*/false);
  sql += testing_batches::RollupTablesOfOldStores(/*postgresql=*/false, {});
  sql += "DROP TRIGGER jobs_inserted; DROP TRIGGER jobs_deleted; DROP TRIGGER jobs_updated; DROP TABLE catalog_versions;"
         " DROP TABLE sample_chunks; DROP TABLE job_changes; DROP TABLE closed_periods; DROP TABLE frozen_lines;"
         " DROP TABLE actions; ALTER TABLE jobs DROP COLUMN labels; ALTER TABLE jobs DROP COLUMN annotations;"
         " DROP TABLE leases; DROP TABLE rollup_day; DROP TABLE rollup_day_hours; DROP TABLE rollup_day_versions;"
         " UPDATE meta SET value='4' WHERE key='schema_version';";
  std::string cmd = "sqlite3 " + (dir_ / "ledger.db").string() + " \"" + sql + "\" 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "sqlite3 shell not installed";
  }
  Reopen();
  auto after = *store_->Samples(store_->ListDevices()->at(0).id, {kT0, kT0 + kMsPerHour});
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].t_ms, before[i].t_ms);
    EXPECT_EQ(after[i].sm_active, before[i].sm_active);
    EXPECT_EQ(after[i].fb_used_mib, before[i].fb_used_mib);
  }
  EXPECT_EQ(store_->Stats()->samples, static_cast<int64_t>(before.size()));
}

// A store of schema version 8 had no labels (nor leases): opening it adds them, and its jobs
// read back with no set until an agent reports one.
// A store of schema version 15 kept a row per batch: migrating keys each id by stream
// and sequence as the store now does, folds each stream's ids kBatchIdsKept below its
// newest, and every id stays a duplicate, the newest compared by content.
TEST_F(SqliteStoreTest, MigratesBatchIdsIntoStreamsAndRuns) {
  using testing_batches::OfStream;
  const std::string stream = "node-s-18c5a3b2f00";
  const auto& odd = testing_batches::kIdsOfNoStream;
  for (int64_t seq = 1; seq <= 400; ++seq) ASSERT_TRUE(store_->ApplyBatch(Plan(OfStream(stream, seq, kT0))).ok());
  for (int i = 0; i < static_cast<int>(odd.size()); ++i) {
    ASSERT_TRUE(store_->ApplyBatch(Plan(testing_batches::OfNoStream(odd[i], i, kT0))).ok());
  }
  ExecBehindTheStore(std::string(testing_batches::kBatchesTableOfOldStores) +
                     testing_batches::ServingTableOfOldStores(/*postgresql=*/false) +
                     testing_batches::RollupTablesOfOldStores(/*postgresql=*/false, {}) +
                     "UPDATE meta SET value='15' WHERE key='schema_version';");
  const int64_t all = 400 + static_cast<int64_t>(odd.size());
  EXPECT_EQ(store_->Stats()->batches, all);
  store_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "ledger.db").string().c_str(), &db), SQLITE_OK);
    auto text = [&](const char* sql) {
      sqlite3_stmt* q = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &q, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
      std::string out;
      while (sqlite3_step(q) == SQLITE_ROW) {
        out += (out.empty() ? "" : ";") + std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 0)));
      }
      sqlite3_finalize(q);
      return out;
    };
    EXPECT_EQ(text("SELECT stream || ':' || first_seq || '-' || last_seq FROM batch_ranges"),
              stream + ":1-" + std::to_string(400 - kBatchIdsKept));
    EXPECT_EQ(text("SELECT count(*) || ' from ' || min(seq) FROM batch_ids WHERE stream = 'node-s-18c5a3b2f00'"),
              fmt::format("{} from {}", kBatchIdsKept, 401 - kBatchIdsKept));
    // The ids of no stream, whole; "node-b-0" is stream node-b's sequence 0.
    EXPECT_EQ(text("SELECT stream || '/' || seq FROM batch_ids WHERE stream <> 'node-s-18c5a3b2f00'"
                   " ORDER BY stream, seq"),
              "-5/-1;19/-1;a-1234567890123456789/-1;node-b/0;node-b-00/-1;trn-07-2026-11-23T08:00:00Z/-1;"
              "x/7;x-007/-1");
    EXPECT_EQ(text("SELECT count(*) FROM sqlite_master WHERE name = 'batches'"), "0");
    sqlite3_close(db);
  }
  Reopen();
  testing_batches::ExpectMigratedBatchIdsStayDuplicates(stream, kT0,
                                                        [&](const Batch& b) { return store_->ApplyBatch(Plan(b)); });
  EXPECT_EQ(store_->Stats()->batches, all + 1);
  EXPECT_EQ(store_->Stats()->samples, all + 1);
}

TEST_F(SqliteStoreTest, MigratesAStoreWithoutLabels) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  ExecBehindTheStore(
      std::string(testing_batches::kBatchesTableOfOldStores) + testing_batches::ServingTableOfOldStores(/*postgresql=*/false) +
      testing_batches::RollupTablesOfOldStores(/*postgresql=*/false, {}) +
      "DROP TRIGGER jobs_inserted; DROP TRIGGER jobs_deleted; DROP TRIGGER jobs_updated; DROP TABLE catalog_versions;"
      " ALTER TABLE jobs DROP COLUMN labels; ALTER TABLE jobs DROP COLUMN annotations; DROP TABLE leases;"
      " DROP TABLE rollup_day; DROP TABLE rollup_day_hours; DROP TABLE rollup_day_versions;"
      " UPDATE meta SET value='8' WHERE key='schema_version';");
  auto jobs = store_->ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job.team, "vision");
  EXPECT_FALSE((*jobs)[0].job.labels.has_value());
  Batch b2;
  b2.batch_id = "b2";
  b2.jobs.push_back(Job{.id = "j1", .labels = JobMetadata{{"gpuledger.io/exempt", "true"}}});
  ASSERT_TRUE(store_->ApplyBatch(Plan(b2)).ok());
  EXPECT_EQ(store_->ListJobs()->at(0).job.labels, (JobMetadata{{"gpuledger.io/exempt", "true"}}));
}

// A store of schema version 12 kept serving snapshots by (job, engine, model, time), so a
// window of a job's snapshots read every one it ever reported: migrating keyed them by
// (job, time, engine, model) (version 13), then packed them in chunks per job, engine,
// model and hour (version 17), and a window reads as before.
TEST_F(SqliteStoreTest, MigratesServingSnapshotsIntoChunks) {
  const Batch b = testing_batches::WithinTheFirstHour(testing_batches::ServingEverySixHours("serving", kT0));
  ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok());
  const int64_t job = store_->ListJobs()->at(0).id;
  ExecBehindTheStore(
      std::string(testing_batches::kBatchesTableOfOldStores) +
      testing_batches::ServingTableOfOldStores(/*postgresql=*/false, b, job) +
      testing_batches::RollupTablesOfOldStores(/*postgresql=*/false, {}) +
      "CREATE TABLE serving_old(job_id INTEGER NOT NULL, engine TEXT NOT NULL, model TEXT NOT NULL,"
      " t_ms INTEGER NOT NULL, requests_waiting REAL, requests_running REAL, kv_cache_usage REAL,"
      " prompt_tokens REAL, generation_tokens REAL, preemptions REAL, requests REAL, executions REAL,"
      " queue_seconds REAL, compute_seconds REAL, prefill TEXT NOT NULL, decode TEXT NOT NULL,"
      " iteration_tokens TEXT NOT NULL, PRIMARY KEY(job_id, engine, model, t_ms)) WITHOUT ROWID;"
      " INSERT INTO serving_old SELECT * FROM serving; DROP TABLE serving;"
      " ALTER TABLE serving_old RENAME TO serving; DROP TABLE rollup_day_versions;"
      " DROP TRIGGER jobs_inserted; DROP TRIGGER jobs_deleted; DROP TRIGGER jobs_updated; DROP TABLE catalog_versions;"
      " UPDATE meta SET value='12' WHERE key='schema_version';");
  testing_batches::ExpectServingReadsAsSent(*store_, job, b, kT0);
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "ledger.db").string().c_str(), &db), SQLITE_OK);
  std::string out;
  auto append = [](void* to, int, char** values, char**) {
    *static_cast<std::string*>(to) += std::string(values[0]) + " ";
    return 0;
  };
  // A chunk per engine, model and hour: 24 hours with snapshots, one of them three.
  EXPECT_EQ(sqlite3_exec(db,
                         "SELECT count(*) FROM serving_chunks UNION ALL SELECT sum(n) FROM serving_chunks"
                         " UNION ALL SELECT count(*) FROM sqlite_master WHERE name = 'serving'",
                         append, &out, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_EQ(out, "24 26 0 ");
}

// A second server (or an import) on the same SQLite file is refused with a clear message
// while the first holds it; the CLI's reports still open it; once the first is closed the
// file is free again.
TEST_F(SqliteStoreTest, ASecondExclusiveWriterIsRefusedWhileTheFirstHoldsTheFile) {
  const std::string path = (dir_ / "ledger.db").string();
  store_.reset();
  auto first = OpenSqliteStore(path, {.exclusive_writer = true});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = OpenSqliteStore(path, {.exclusive_writer = true});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("is held by another gpuledger server or import"));
  auto reader = OpenSqliteStore(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE((*first)->ApplyBatch(Plan(Basic("b1"))).ok());
  EXPECT_EQ((*reader)->Stats()->samples, 3);
  first->reset();
  auto again = OpenSqliteStore(path, {.exclusive_writer = true});
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST_F(SqliteStoreTest, RefusesAStoreFromANewerBuild) {
  store_.reset();
  {
    auto s = OpenSqliteStore((dir_ / "ledger.db").string());
    ASSERT_TRUE(s.ok());
  }
  // Pretend a future build migrated it further.
  std::string cmd = "sqlite3 " + (dir_ / "ledger.db").string() +
                    " \"UPDATE meta SET value='999' WHERE key='schema_version'\" 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "sqlite3 shell not installed";
  }
  auto s = OpenSqliteStore((dir_ / "ledger.db").string());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("newer than this build"));
}

}  // namespace
}  // namespace gpuledger::store

namespace gpuledger::store {
namespace {

TEST_P(StoreContractTest, MinuteRollupsRoundTripPerMinute) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  RollupRow m0{kT0, 1, 0, {60'000, 0, 0, 0, 0}, 0};
  RollupRow m7{kT0 + 7 * kMsPerMinute, 1, 0, {1, 2, 3, 4, 59'990}, 0};
  ASSERT_TRUE(store_->WriteRollups({{{1, kT0, 0}, {}, {m0, m7}}}).ok());
  std::vector<RollupRow> seen;
  ASSERT_TRUE(store_->ScanMinuteRollups({kT0 + kMsPerMinute, kT0 + kMsPerHour},
                                        [&](const RollupRow& r) { seen.push_back(r); })
                  .ok());
  ASSERT_EQ(seen.size(), 1u);  // minute 0 is outside the range; empty minutes are skipped
  EXPECT_EQ(seen[0].period_ms, m7.period_ms);
  EXPECT_EQ(seen[0].ms, m7.ms);
}

}  // namespace
}  // namespace gpuledger::store

namespace gpuledger::store {
namespace {

Batch SamplesAt(std::string id, int64_t from_ms, int n) {
  Batch b;
  b.batch_id = std::move(id);
  for (int i = 0; i < n; ++i) {
    Sample s;
    s.device_uuid = "GPU-a";
    s.t_ms = from_ms + i * 10'000;
    s.sm_active = 0.25;
    b.samples.push_back(s);
  }
  return b;
}

// A snapshot sees the store as it was when taken, whatever is committed later.
TEST_P(StoreContractTest, ASnapshotSeesOneCommittedMoment) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_TRUE(store_->ApplyBatch(Plan(SamplesAt("b2", kT0 + 60'000, 3))).ok());
  int64_t id = store_->ListDevices()->at(0).id;
  EXPECT_EQ((*snap)->Samples(id, {kT0, kT0 + kMsPerHour})->size(), 3u);
  EXPECT_EQ((*snap)->Stats()->batches, 1);
  EXPECT_EQ((*snap)->ListDevices()->at(0).last_sample_ms, kT0 + 30'000);
  auto later = store_->Snapshot();
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)->Samples(id, {kT0, kT0 + kMsPerHour})->size(), 6u);
  EXPECT_EQ((*later)->Stats()->batches, 2);
}

// A snapshot's sibling (StoreSnapshot::Sibling) sees the snapshot's moment, not the one
// it was made at, from another thread while the snapshot reads on. SQLite has none to give.
TEST_P(StoreContractTest, ASnapshotsSiblingSeesItsMomentOnAnotherThread) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  ASSERT_TRUE(store_->ApplyBatch(Plan(SamplesAt("b2", kT0 + 60'000, 3))).ok());
  const int64_t id = store_->ListDevices()->at(0).id;
  std::unique_ptr<StoreSnapshot> sibling = (*snap)->Sibling();
  if (GetParam().name == "sqlite") {
    EXPECT_EQ(sibling, nullptr) << "Debian's SQLite cannot share a read transaction's moment";
    return;
  }
  ASSERT_NE(sibling, nullptr);
  auto read = std::async(std::launch::async, [&]() -> Result<std::pair<size_t, int64_t>> {
    GPULEDGER_ASSIGN_OR_RETURN(auto samples, sibling->Samples(id, {kT0, kT0 + kMsPerHour}));
    GPULEDGER_ASSIGN_OR_RETURN(auto stats, sibling->Stats());
    return std::pair{samples.size(), stats.batches};
  });
  EXPECT_EQ((*snap)->Samples(id, {kT0, kT0 + kMsPerHour})->size(), 3u) << "the snapshot reads on beside it";
  auto seen = read.get();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->first, 3u) << "the sibling saw a later moment than its snapshot's";
  EXPECT_EQ(seen->second, 1);
  sibling.reset();
  EXPECT_EQ((*snap)->Stats()->batches, 1) << "the snapshot outlives its sibling";
}

// A group holds the writer; a snapshot is taken and read meanwhile, on another thread.
TEST_P(StoreContractTest, ASnapshotNeverWaitsForAGroup) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  auto group = store_->BeginBatchGroup();
  ASSERT_TRUE(group.ok());
  ASSERT_TRUE((*group)->Apply(Plan(SamplesAt("b2", kT0 + 60'000, 3))).ok());
  auto read = std::async(std::launch::async, [&]() -> Result<size_t> {
    GPULEDGER_ASSIGN_OR_RETURN(auto snap, store_->Snapshot());
    GPULEDGER_ASSIGN_OR_RETURN(auto devices, snap->ListDevices());
    GPULEDGER_ASSIGN_OR_RETURN(auto samples, snap->Samples(devices.at(0).id, {kT0, kT0 + kMsPerHour}));
    return samples.size();
  });
  ASSERT_EQ(read.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "the snapshot waited for the group";
  auto n = read.get();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3u);  // none of the open group
  ASSERT_TRUE((*group)->Commit().ok());
}

// Dirty device-hours are told apart: a reader sums only the settled rollups and
// attributes the dirty hours itself.
TEST_P(StoreContractTest, SettledRollupsLeaveOutTheDirtyHours) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  int64_t id = store_->ListDevices()->at(0).id;
  // A sample can change the hours around it (staleness, idle-cause context): 08:00's is one.
  auto dirty = *store_->DirtyHoursIn({kT0, kT0 + kMsPerHour});
  ASSERT_EQ(dirty.size(), 1u);
  RollupRow row{kT0, id, 0, {1000, 0, 0, 0, 0}, 0};
  ASSERT_TRUE(store_->WriteRollups({{dirty[0], {row}, {}}}).ok());
  EXPECT_EQ(store_->SumSettledHourRollups({kT0, kT0 + kMsPerHour})->size(), 1u);
  EXPECT_TRUE(store_->DirtyHoursIn({kT0, kT0 + kMsPerHour})->empty());
  ASSERT_TRUE(store_->ApplyBatch(Plan(SamplesAt("b2", kT0 + 60'000, 3))).ok());  // the hour is dirty again
  EXPECT_EQ(store_->SumHourRollups({kT0, kT0 + kMsPerHour})->size(), 1u);
  EXPECT_TRUE(store_->SumSettledHourRollups({kT0, kT0 + kMsPerHour})->empty());
  auto in = *store_->DirtyHoursIn({kT0, kT0 + kMsPerHour});
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].device_id, id);
  EXPECT_EQ(in[0].hour_ms, kT0);
  std::vector<RollupRow> minutes;
  ASSERT_TRUE(store_->ScanMinuteRollups({kT0, kT0 + kMsPerHour}, [&](const RollupRow& r) { minutes.push_back(r); },
                                        /*settled_only=*/true)
                  .ok());
  EXPECT_TRUE(minutes.empty());
}

// Day rollups (store/rollup_days.h) are the store's own: what SumHourRollups and
// SumSettledHourRollups answer is still the sum of the hour rows written, whatever
// window is asked. The oracle below sums the rows the test wrote itself.
using Sums = std::map<std::pair<int64_t, int64_t>, RollupSum>;  // (device, job) -> sums

// What the store must answer: the sums of `rows` (device-hour -> its rows) whose hour
// lies in `hours`, without the `dirty` device-hours when `settled`. "Other" idle is the
// idle time no named cause holds, per row, as the store keeps it.
Sums OracleSums(const std::map<std::pair<int64_t, int64_t>, std::vector<RollupRow>>& rows,
                const std::set<std::pair<int64_t, int64_t>>& dirty, const TimeRange& hours, bool settled) {
  Sums out;
  for (const auto& entry : rows) {
    int64_t device = entry.first.first, hour = entry.first.second;
    if (hour < hours.begin_ms || hour >= hours.end_ms) continue;
    if (settled && dirty.count({device, hour})) continue;
    for (const RollupRow& r : entry.second) {
      RollupSum& s = out[{device, r.job_id}];
      s.device_id = device;
      s.job_id = r.job_id;
      for (size_t b = 0; b < kBucketCount; ++b) s.ms[b] += r.ms[b];
      s.coarse_ms += r.coarse_ms;
      int64_t named = 0;
      for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) {
        s.idle_causes[c] += r.idle_causes[c];
        named += r.idle_causes[c];
      }
      s.idle_causes[kIdleCauseCount - 1] += r.ms[static_cast<size_t>(Bucket::kAllocatedIdle)] - named;
    }
  }
  return out;
}

Sums ByPair(const std::vector<RollupSum>& sums) {
  Sums out;
  for (const RollupSum& s : sums) {
    EXPECT_TRUE(out.emplace(std::make_pair(s.device_id, s.job_id), s).second)
        << "device " << s.device_id << " job " << s.job_id << " answered twice";
  }
  return out;
}

std::string Describe(const Sums& sums) {
  std::string out;
  for (const auto& entry : sums) {
    const RollupSum& s = entry.second;
    out += fmt::format("  device {} job {}: ms {} coarse {} causes {}\n", s.device_id, s.job_id, fmt::join(s.ms, ","),
                       s.coarse_ms, fmt::join(s.idle_causes, ","));
  }
  return out.empty() ? "  (none)\n" : out;
}

bool SameSums(const Sums& a, const Sums& b) {
  if (a.size() != b.size()) return false;
  for (const auto& entry : a) {
    auto it = b.find(entry.first);
    if (it == b.end()) return false;
    const RollupSum &x = entry.second, &y = it->second;
    if (x.ms != y.ms || x.coarse_ms != y.coarse_ms || x.idle_causes != y.idle_causes) return false;
  }
  return true;
}

// A batch of one sample at `t_ms` on device GPU-<node>: marks the device's hours around
// it dirty (a new generation), as the agent's samples do.
Batch OneSampleOn(const std::string& id, const std::string& node, int64_t t_ms) {
  Batch b;
  b.batch_id = id;
  Sample s;
  s.device_uuid = "GPU-" + node;
  s.t_ms = t_ms;
  s.sm_active = 0.5;
  b.samples.push_back(s);
  return b;
}

// Random hour rollups on four devices over three days and the hours either side,
// written, replaced (some emptied, some left dirty) and summed over many windows:
// whole days, partial days, a window inside one day, hours off the hour, empty.
TEST_P(StoreContractTest, HourRollupSumsReadThroughDayRollupsEqualTheHourRowsWritten) {
  const int64_t day0 = FloorTo(kT0, kMsPerDay);  // 2026-11-23T00:00:00Z
  std::vector<int64_t> devices;
  const std::vector<std::string> nodes = {"na", "nb", "nc", "nd"};
  for (const std::string& node : nodes) {
    ASSERT_TRUE(store_->ApplyBatch(Plan(testing_batches::OnNode("dev-" + node, node, day0 - 2 * kMsPerDay, 1))).ok());
  }
  std::map<std::string, int64_t> id_of;
  auto listed = store_->ListDevices();  // kept alive: a range-for over *temporary dangles
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  for (const DeviceRecord& d : *listed) id_of[d.device.uuid] = d.id;
  for (const std::string& node : nodes) devices.push_back(id_of.at("GPU-" + node));

  const uint32_t seed = 20261202;
  std::mt19937 rng(seed);
  SCOPED_TRACE(fmt::format("seed {}", seed));
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  // Hours from 2 before day0 to 2 after its third day: every day edge is in it.
  const int64_t first_hour = day0 - 2 * kMsPerHour, hour_count = 3 * 24 + 4;
  auto random_rows = [&](int64_t device, int64_t hour) {
    std::vector<RollupRow> rows;
    for (int64_t job = 0; job < 4; ++job) {
      if (pick(0, 2) == 0) continue;
      RollupRow r{hour, device, job, {}, 0};
      for (size_t b = 0; b < kBucketCount; ++b) r.ms[b] = pick(0, 900'000);
      r.coarse_ms = pick(0, r.ms[0]);
      int64_t idle = r.ms[static_cast<size_t>(Bucket::kAllocatedIdle)];
      for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) r.idle_causes[c] = pick(0, idle / 3);
      rows.push_back(r);
    }
    return rows;
  };

  // 1. First writes of device-hours nobody marked (a store writes those as asked), in
  // calls of several device-hours, so that one call touches several days of a device.
  std::map<std::pair<int64_t, int64_t>, std::vector<RollupRow>> written;
  std::vector<RollupUpdate> updates;
  for (int64_t device : devices) {
    for (int64_t k = 0; k < hour_count; ++k) {
      if (pick(0, 3) == 0) continue;
      int64_t hour = first_hour + k * kMsPerHour;
      RollupUpdate u{{device, hour, 0}, random_rows(device, hour), {}};
      written[{device, hour}] = u.hour_rows;
      updates.push_back(std::move(u));
      if (updates.size() == 25) {
        ASSERT_TRUE(store_->WriteRollups(updates).ok());
        updates.clear();
      }
    }
  }
  ASSERT_TRUE(store_->WriteRollups(updates).ok());
  updates.clear();

  // 2. Samples mark some device-hours dirty; a refresh replaces the rows of most of the
  // marked ones (new rows, or none: the device-hour becomes empty) and clears their mark,
  // replaces some but reads an older generation (the mark stays), and leaves the rest.
  for (int i = 0; i < 24; ++i) {
    const std::string& node = nodes[static_cast<size_t>(pick(0, 3))];
    int64_t t = first_hour + pick(0, hour_count - 1) * kMsPerHour + pick(0, kMsPerHour - 1);
    ASSERT_TRUE(store_->ApplyBatch(Plan(OneSampleOn(fmt::format("mark-{}", i), node, t))).ok());
  }
  auto marked = store_->DirtyHoursIn({first_hour, first_hour + hour_count * kMsPerHour});
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  ASSERT_GE(marked->size(), 10u);
  for (const DirtyHour& d : *marked) {
    int64_t what = pick(0, 9);
    if (what < 2) continue;  // left as it is
    RollupUpdate u{d, what < 4 ? std::vector<RollupRow>{} : random_rows(d.device_id, d.hour_ms), {}};
    if (what == 9) u.dirty.generation = d.generation - 1;  // an older refresh: the mark stays
    written[{d.device_id, d.hour_ms}] = u.hour_rows;
    updates.push_back(std::move(u));
  }
  ASSERT_TRUE(store_->WriteRollups(updates).ok());
  std::set<std::pair<int64_t, int64_t>> dirty;
  auto left = store_->DirtyHoursIn({first_hour - kMsPerDay, first_hour + 2 * hour_count * kMsPerHour});
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  for (const DirtyHour& d : *left) {
    dirty.insert({d.device_id, d.hour_ms});
  }
  ASSERT_FALSE(dirty.empty());

  std::vector<TimeRange> windows = {
      {day0, day0 + 3 * kMsPerDay},                                    // whole days
      {day0 + kMsPerDay, day0 + 2 * kMsPerDay},                        // one whole day
      {day0 + 5 * kMsPerHour, day0 + 2 * kMsPerDay + 7 * kMsPerHour},  // partial days either side
      {day0 + 3 * kMsPerHour, day0 + 9 * kMsPerHour},                  // inside one day
      {day0 - 2 * kMsPerHour, day0 + kMsPerDay + kMsPerHour},          // across day edges
      {day0 - kMsPerDay, day0 + 5 * kMsPerDay},                        // everything
      {day0 + 4 * kMsPerHour, day0 + 4 * kMsPerHour},                  // empty
      {day0 + 30 * kMsPerHour, day0 + 6 * kMsPerHour},                 // end before begin
      {day0 + 1, day0 + kMsPerDay + 1},                                // off the hour
      {day0 - 1, day0 + 2 * kMsPerDay - 1},
  };
  for (int i = 0; i < 40; ++i) {
    int64_t a = first_hour + pick(0, hour_count) * kMsPerHour, b = first_hour + pick(0, hour_count) * kMsPerHour;
    windows.push_back({std::min(a, b), std::max(a, b)});
  }
  for (const TimeRange& w : windows) {
    // ScanHourRollups: every row written in the window, dirty or not, by hour, device, job.
    std::vector<RollupRow> want_rows, scanned;
    for (const auto& entry : written) {
      int64_t hour = entry.first.second;
      if (hour < w.begin_ms || hour >= w.end_ms) continue;
      for (RollupRow r : entry.second) {
        int64_t named = 0;
        for (size_t c = 0; c + 1 < kIdleCauseCount; ++c) named += r.idle_causes[c];
        r.idle_causes[kIdleCauseCount - 1] = r.ms[static_cast<size_t>(Bucket::kAllocatedIdle)] - named;
        want_rows.push_back(r);
      }
    }
    std::sort(want_rows.begin(), want_rows.end(), [](const RollupRow& a, const RollupRow& b) {
      return std::tie(a.period_ms, a.device_id, a.job_id) < std::tie(b.period_ms, b.device_id, b.job_id);
    });
    Status scan = store_->ScanHourRollups(w, [&](const RollupRow& r) {
      scanned.push_back(r);
      return Status::Ok();
    });
    ASSERT_TRUE(scan.ok()) << scan.ToString();
    ASSERT_EQ(scanned.size(), want_rows.size()) << "rows scanned over [" << FormatTime(w.begin_ms) << ", "
                                                << FormatTime(w.end_ms) << ")";
    for (size_t i = 0; i < scanned.size(); ++i) {
      const RollupRow &x = scanned[i], &y = want_rows[i];
      EXPECT_TRUE(x.period_ms == y.period_ms && x.device_id == y.device_id && x.job_id == y.job_id && x.ms == y.ms &&
                  x.coarse_ms == y.coarse_ms && x.idle_causes == y.idle_causes)
          << "row " << i << " of [" << FormatTime(w.begin_ms) << ", " << FormatTime(w.end_ms) << "): device "
          << x.device_id << " job " << x.job_id << " at " << FormatTime(x.period_ms);
    }
    for (bool settled : {false, true}) {
      auto got = settled ? store_->SumSettledHourRollups(w) : store_->SumHourRollups(w);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      Sums want = OracleSums(written, dirty, w, settled);
      Sums have = ByPair(*got);
      EXPECT_TRUE(SameSums(have, want)) << (settled ? "settled " : "") << "sums over [" << FormatTime(w.begin_ms)
                                        << ", " << FormatTime(w.end_ms) << ")\nstore:\n"
                                        << Describe(have) << "written rows:\n"
                                        << Describe(want);
    }
  }
}

// A scan of the hour rollups stops at its reader's first error, and returns it.
TEST_P(StoreContractTest, AnHourRollupScanStopsAtItsReadersError) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  std::vector<RollupUpdate> updates;
  for (int64_t h = 0; h < 30; ++h) {  // across a day's edge: PostgreSQL reads a day at a time
    updates.push_back({{1, kT0 + h * kMsPerHour, 0}, {RollupRow{kT0 + h * kMsPerHour, 1, 1, {1, 2, 3, 4, 5}, 0}}, {}});
  }
  ASSERT_TRUE(store_->WriteRollups(updates).ok());
  int seen = 0;
  Status st = store_->ScanHourRollups({kT0, kT0 + 30 * kMsPerHour}, [&](const RollupRow& r) -> Status {
    if (++seen == 20) return Internal(fmt::format("stop at {}", FormatTime(r.period_ms)));
    return Status::Ok();
  });
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("stop at"));
  EXPECT_EQ(seen, 20);
  // And within a whole day, read from its day hours.
  const int64_t day = FloorTo(kT0, kMsPerDay) + kMsPerDay;
  seen = 0;
  st = store_->ScanHourRollups({day, day + kMsPerDay}, [&](const RollupRow& r) -> Status {
    if (++seen == 3) return Internal(fmt::format("stop at {}", FormatTime(r.period_ms)));
    return Status::Ok();
  });
  EXPECT_THAT(st.message(), HasSubstr("stop at " + FormatTime(day + 2 * kMsPerHour)));
  EXPECT_EQ(seen, 3);
}

// A store of schema version 10 had hour rollups and no day rollups: migrating fills them
// (and the day hours of version 12) from the hour rows, and every window sums and scans
// as before (a whole day reads day rows only).
// Hour rows of two devices over four days, written through `store`, and each
// device-hour's rows (`written`) and all of them (`all`).
struct WrittenHours {
  std::map<std::pair<int64_t, int64_t>, std::vector<RollupRow>> by_hour;
  std::vector<RollupRow> all;
};
WrittenHours WriteHoursOfTwoDevices(Store& store, int64_t day0) {
  WrittenHours out;
  std::vector<RollupUpdate> updates;
  for (int64_t device : {1, 2}) {
    for (int64_t k = -3; k < 50; k += 2) {
      int64_t hour = day0 + k * kMsPerHour;
      std::vector<RollupRow> rows = {{hour, device, 0, {k + 100, 7, 0, 0, 0}, 1},
                                     {hour, device, 1 + (k + 3) % 3, {device * 1000 + k, 50, 3, 2, 1}, 4, {5, 6, 7, 0}}};
      out.by_hour[{device, hour}] = rows;
      out.all.insert(out.all.end(), rows.begin(), rows.end());
      updates.push_back({{device, hour, 0}, rows, {}});
    }
  }
  EXPECT_TRUE(store.WriteRollups(updates).ok());
  return out;
}

// Over windows whole and cut at every kind of edge, the store's sums and scan of hour
// rollups are those of `written`.
void ExpectHoursAsWritten(Store& store, const WrittenHours& written, int64_t day0) {
  for (const TimeRange& w : {TimeRange{day0, day0 + kMsPerDay}, TimeRange{day0, day0 + 2 * kMsPerDay},
                             TimeRange{day0 - 5 * kMsPerHour, day0 + 2 * kMsPerDay + 5 * kMsPerHour},
                             TimeRange{day0 + 3 * kMsPerHour, day0 + 30 * kMsPerHour}}) {
    Sums want = OracleSums(written.by_hour, {}, w, false);
    Sums have = ByPair(*store.SumHourRollups(w));
    EXPECT_TRUE(SameSums(have, want)) << "over [" << FormatTime(w.begin_ms) << ", " << FormatTime(w.end_ms)
                                      << ")\nstore:\n" << Describe(have) << "written rows:\n" << Describe(want);
    // The scan: each written row once, in (hour, device, job) order.
    std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> want_rows, scanned;  // hour, device, job, active
    for (const auto& [key, rows] : written.by_hour) {
      if (!w.Contains(key.second)) continue;
      for (const RollupRow& r : rows) want_rows.emplace_back(r.period_ms, r.device_id, r.job_id, r.ms[0]);
    }
    std::sort(want_rows.begin(), want_rows.end());
    ASSERT_TRUE(store
                    .ScanHourRollups(w,
                                     [&](const RollupRow& r) {
                                       scanned.emplace_back(r.period_ms, r.device_id, r.job_id, r.ms[0]);
                                       return Status::Ok();
                                     })
                    .ok());
    EXPECT_EQ(scanned, want_rows) << "scanned over [" << FormatTime(w.begin_ms) << ", " << FormatTime(w.end_ms) << ")";
  }
}

// A store of schema version 10 kept hour rows alone: migrating sums them into day rows
// and packs them into day hours (versions 11 and 12), and drops them (version 18).
TEST_F(SqliteStoreTest, MigratesHourRollupsIntoDayRollups) {
  const int64_t day0 = FloorTo(kT0, kMsPerDay);
  const WrittenHours written = WriteHoursOfTwoDevices(*store_, day0);
  ExecBehindTheStore(
      std::string(testing_batches::kBatchesTableOfOldStores) + testing_batches::ServingTableOfOldStores(/*postgresql=*/false) +
      testing_batches::RollupTablesOfOldStores(/*postgresql=*/false, written.all) +
      "DROP TABLE rollup_day; DROP TABLE rollup_day_hours; DROP TABLE rollup_day_versions;"
      " DROP TRIGGER jobs_inserted; DROP TRIGGER jobs_deleted; DROP TRIGGER jobs_updated; DROP TABLE catalog_versions;"
      " UPDATE meta SET value='10' WHERE key='schema_version';");
  ExpectHoursAsWritten(*store_, written, day0);
  // And a version for each day with day rows (schema version 14), which the cache of
  // whole days is keyed by.
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "ledger.db").string().c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT (SELECT count(*) FROM rollup_day_versions),"
                               " (SELECT count(DISTINCT day_ms) FROM rollup_day),"
                               " (SELECT count(*) FROM rollup_day_versions v WHERE v.day_ms IN (SELECT day_ms FROM rollup_day))",
                               -1, &q, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(q, 0), 4);  // the hours written span four days
  EXPECT_EQ(sqlite3_column_int64(q, 1), 4);
  EXPECT_EQ(sqlite3_column_int64(q, 2), 4);
  sqlite3_finalize(q);
  sqlite3_close(db);
}

// Schema version 19 keeps minute rollups a row per device-day: the rows of rollup_minute
// (one per device-hour) are moved, and the table goes.
TEST_F(SqliteStoreTest, MigratesMinuteRollupsIntoDays) {
  const int64_t day0 = FloorTo(kT0, kMsPerDay);
  std::map<std::pair<int64_t, int64_t>, int64_t> want;  // (device, minute) -> active ms
  const auto old = testing_batches::OldMinuteRowsAround(day0, want);
  ExecBehindTheStore(testing_batches::MinuteRowsTableOfOldStores(/*postgresql=*/false, old) +
                     "UPDATE meta SET value='18' WHERE key='schema_version';");
  std::map<std::pair<int64_t, int64_t>, int64_t> have;
  ASSERT_TRUE(store_->ScanMinuteRollups({day0 - 3 * kMsPerHour, day0 + 2 * kMsPerDay}, [&](const RollupRow& r) {
                    have[{r.device_id, r.period_ms}] = r.ms[0];
                  }).ok());
  EXPECT_EQ(have, want);
  EXPECT_EQ(FileRow("SELECT (SELECT count(*) FROM sqlite_master WHERE name = 'rollup_minute'),"
                    " (SELECT count(*) FROM rollup_day_minutes)"),
            (std::vector<int64_t>{0, 6}))
      << "the hourly rows are dropped; two devices on three days";
}

// Schema version 18 keeps hour rows in rollup_day_hours alone. The day rows and day hours
// are derived once more from the hour rows of a store of version 17 (here left wrong
// behind its back: every day row one off, a device's day hours gone), which then go.
TEST_F(SqliteStoreTest, DroppingTheHourRowsDerivesTheDaysFromThemFirst) {
  const int64_t day0 = FloorTo(kT0, kMsPerDay);
  const WrittenHours written = WriteHoursOfTwoDevices(*store_, day0);
  ExecBehindTheStore(testing_batches::RollupTablesOfOldStores(/*postgresql=*/false, written.all) +
                     "UPDATE rollup_day SET active_ms = active_ms + 1; DELETE FROM rollup_day_hours WHERE device_id = 2;"
                     " UPDATE meta SET value='17' WHERE key='schema_version';");
  ExpectHoursAsWritten(*store_, written, day0);
  EXPECT_EQ(FileRow("SELECT count(*) FROM sqlite_master WHERE name = 'rollup_hour'"), (std::vector<int64_t>{0}))
      << "the hour rows are dropped";
}

// The day rows follow their hours: a replaced hour, a job gone from an hour, and a
// device-hour whose rows become empty, read over the whole day (from the day rows).
TEST_P(StoreContractTest, DayRollupsFollowReplacedAndEmptiedHours) {
  const int64_t day0 = FloorTo(kT0, kMsPerDay);
  ASSERT_TRUE(store_->ApplyBatch(Plan(testing_batches::OnNode("dev", "na", day0 - kMsPerDay, 1))).ok());
  const int64_t dev = store_->ListDevices()->at(0).id;
  const TimeRange day{day0, day0 + kMsPerDay};
  const int64_t h1 = day0 + kMsPerHour, h2 = day0 + 23 * kMsPerHour;  // 23:00: the day's last hour
  auto row = [&](int64_t hour, int64_t job, int64_t active) { return RollupRow{hour, dev, job, {active, 0, 0, 0, 0}, 0}; };
  // Replacing a device-hour already written takes its dirty mark (a refresh's claim).
  int batch = 0;
  auto mark = [&](int64_t hour) {
    ++batch;  // each a sample of its own: a sample stored already marks nothing
    EXPECT_TRUE(store_->ApplyBatch(Plan(OneSampleOn(fmt::format("m{}", batch), "na", hour + 1000 * batch))).ok());
    auto d = store_->DirtyHoursIn({hour, hour + kMsPerHour});
    EXPECT_EQ(d->size(), 1u);
    return d->empty() ? DirtyHour{dev, hour, 0} : d->at(0);
  };
  // Job -> active ms over `w`, settled or not: the same here, every rewritten hour's mark
  // being cleared (a mark the samples left on another hour holds no rows).
  auto active_of = [&](const TimeRange& w) {
    std::map<int64_t, int64_t> all, settled;
    auto sums = store_->SumHourRollups(w), settled_sums = store_->SumSettledHourRollups(w);
    EXPECT_TRUE(sums.ok() && settled_sums.ok());
    for (const RollupSum& s : *sums) all[s.job_id] = s.ms[0];
    for (const RollupSum& s : *settled_sums) settled[s.job_id] = s.ms[0];
    EXPECT_EQ(all, settled);
    return all;
  };
  ASSERT_TRUE(store_->WriteRollups({{{dev, h1, 0}, {row(h1, 1, 100), row(h1, 2, 20)}, {}},
                                    {{dev, h2, 0}, {row(h2, 1, 3000)}, {}}})
                  .ok());
  EXPECT_EQ(active_of(day), (std::map<int64_t, int64_t>{{1, 3100}, {2, 20}}));

  ASSERT_TRUE(store_->WriteRollups({{mark(h1), {row(h1, 1, 500)}, {}}}).ok());  // job 2 gone from 01:00
  EXPECT_EQ(active_of(day), (std::map<int64_t, int64_t>{{1, 3500}}));

  ASSERT_TRUE(store_->WriteRollups({{mark(h2), {}, {}}}).ok());  // 23:00 emptied
  EXPECT_EQ(active_of(day), (std::map<int64_t, int64_t>{{1, 500}}));
  ASSERT_TRUE(store_->WriteRollups({{mark(h1), {}, {}}}).ok());
  EXPECT_TRUE(active_of(day).empty());
  EXPECT_TRUE(store_->SumHourRollups({day0 - kMsPerDay, day0 + 2 * kMsPerDay})->empty());
}

// Whole days are summed from each store's cache of day rows (store/day_cache.h), keyed
// by a version per day in the database: a second server on the same database, which has
// cached the day, sees the first mark an hour of it dirty and then rewrite it, and a
// snapshot taken before both still reads the day as it was then.
TEST_P(StoreContractTest, AServerSeesAnotherRewriteADayItHasCached) {
  const int64_t day0 = FloorTo(kT0, kMsPerDay) + kMsPerDay;
  // The device's newest sample after the two days: a sample in them is a late one, which
  // marks its own hour alone.
  ASSERT_TRUE(store_->ApplyBatch(Plan(testing_batches::OnNode("dev", "na", day0 + 3 * kMsPerDay, 1))).ok());
  const int64_t dev = store_->ListDevices()->at(0).id;
  auto opened = backend_.open(dir_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Store> other = std::move(*opened);
  const TimeRange days{day0, day0 + 2 * kMsPerDay};
  const int64_t h1 = day0 + kMsPerHour;
  auto row = [&](int64_t hour, int64_t job, int64_t active) { return RollupRow{hour, dev, job, {active, 0, 0, 0, 0}, 0}; };
  // Job -> active ms over the two days, settled, in a snapshot of `s` (or in `snap`).
  auto settled = [&](StoreReads& r) {
    std::map<int64_t, int64_t> out;
    auto sums = r.SumSettledHourRollups(days);
    EXPECT_TRUE(sums.ok()) << sums.status().ToString();
    if (sums.ok()) {
      for (const RollupSum& x : *sums) out[x.job_id] = x.ms[0];
    }
    return out;
  };
  auto in_snapshot = [&](Store& s) {
    auto snap = s.Snapshot();
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    return snap.ok() ? settled(**snap) : std::map<int64_t, int64_t>{};
  };
  const int64_t h10 = day0 + 10 * kMsPerHour, h20 = day0 + 20 * kMsPerHour;
  ASSERT_TRUE(store_->WriteRollups({{{dev, h1, 0}, {row(h1, 1, 100)}, {}},
                                    {{dev, h10, 0}, {row(h10, 1, 100)}, {}},
                                    {{dev, h20, 0}, {row(h20, 1, 100)}, {}},
                                    {{dev, day0 + kMsPerDay, 0}, {row(day0 + kMsPerDay, 1, 5)}, {}}})
                  .ok());
  EXPECT_EQ(in_snapshot(*other), (std::map<int64_t, int64_t>{{1, 305}}));
  EXPECT_EQ(settled(*other), (std::map<int64_t, int64_t>{{1, 305}}));  // the store's own reads too
  auto before = other->Snapshot();
  ASSERT_TRUE(before.ok()) << before.status().ToString();

  // A late sample of 01:30 marks its hour dirty (and the hours of its context, none of
  // which holds rows): a settled sum leaves 01:00 out, the day cached or not.
  ASSERT_TRUE(store_->ApplyBatch(Plan(OneSampleOn("late", "na", h1 + 30 * kMsPerMinute))).ok());
  auto marked = store_->DirtyHoursIn(days);
  ASSERT_TRUE(marked.ok()) << marked.status().ToString();
  ASSERT_TRUE(std::any_of(marked->begin(), marked->end(), [&](const DirtyHour& d) { return d.hour_ms == h1; }));
  for (const DirtyHour& d : *marked) ASSERT_LT(d.hour_ms, h10) << FormatTime(d.hour_ms);
  EXPECT_EQ(in_snapshot(*other), (std::map<int64_t, int64_t>{{1, 205}}));

  // The first server's refresh rewrites the marked hours, 01:00 for job 2: the second
  // sums the new day.
  std::vector<RollupUpdate> refresh;
  for (const DirtyHour& d : *marked) {
    refresh.push_back({d, d.hour_ms == h1 ? std::vector<RollupRow>{row(h1, 2, 700)} : std::vector<RollupRow>{}, {}});
  }
  ASSERT_TRUE(store_->WriteRollups(refresh).ok());
  ASSERT_TRUE(store_->DirtyHoursIn(days)->empty());
  EXPECT_EQ(in_snapshot(*other), (std::map<int64_t, int64_t>{{1, 205}, {2, 700}}));
  EXPECT_EQ(settled(*other), (std::map<int64_t, int64_t>{{1, 205}, {2, 700}}));
  EXPECT_EQ(in_snapshot(*store_), (std::map<int64_t, int64_t>{{1, 205}, {2, 700}}));
  // The snapshot of before: the day as it was, though a newer one was cached since.
  EXPECT_EQ(settled(**before), (std::map<int64_t, int64_t>{{1, 305}}));
  before->reset();
  EXPECT_EQ(in_snapshot(*other), (std::map<int64_t, int64_t>{{1, 205}, {2, 700}}));
}

// day_cache_bytes sizes the cache of whole days' day rows: a store opened with none reads
// a day's rows from the file each time, where one with the default keeps them by the
// day's version. Rows deleted behind both stores, leaving the version as it was, tell
// the two apart.
TEST_F(SqliteStoreTest, AStoreWithoutADayCacheReadsEveryDayFromTheFile) {
  const int64_t day0 = FloorTo(kT0, kMsPerDay) + kMsPerDay;
  const TimeRange day{day0, day0 + kMsPerDay};
  const int64_t hour = day0 + 5 * kMsPerHour;
  ASSERT_TRUE(store_->WriteRollups({{{1, hour, 0}, {RollupRow{hour, 1, 1, {1000, 0, 0, 0, 0}, 0}}, {}}}).ok());
  auto uncached = OpenSqliteStore((dir_ / "ledger.db").string(), {.day_cache_bytes = 0});
  ASSERT_TRUE(uncached.ok()) << uncached.status().ToString();
  auto active_ms = [&](Store& s) -> int64_t {
    auto sums = s.SumSettledHourRollups(day);
    EXPECT_TRUE(sums.ok()) << sums.status().ToString();
    return sums.ok() && !sums->empty() ? sums->at(0).ms[0] : -1;
  };
  EXPECT_EQ(active_ms(*store_), 1000);
  EXPECT_EQ(active_ms(**uncached), 1000);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "ledger.db").string().c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "DELETE FROM rollup_day", nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  EXPECT_EQ(active_ms(*store_), 1000) << "the day at the same version, from the cache";
  EXPECT_EQ(active_ms(**uncached), -1) << "the day read from the file again";
}

// The job list a store hands out (SharedJobs) is one list while no job changes: a batch
// restating a job as it is stored keeps it. A field changed, by this store or by another
// on the same database (a replica), or a new job, makes a new one; a list handed out
// never changes.
TEST_P(StoreContractTest, TheSharedJobListIsNewOnlyWhenAJobChanges) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  auto replica = backend_.open(dir_);
  ASSERT_TRUE(replica.ok()) << replica.status().ToString();
  auto jobs = [](StoreReads& r) {
    auto list = r.SharedJobs();
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    return list.ok() ? *list : nullptr;
  };
  auto first = jobs(*store_);
  ASSERT_TRUE(first != nullptr);
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ(first->at(0).job.team, "vision");
  EXPECT_EQ(jobs(*store_), first);
  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(jobs(**snap), first) << "a snapshot of the same jobs shares the list";
  snap->reset();

  Batch restated = Basic("b2");
  restated.samples.clear();
  ASSERT_EQ(*store_->ApplyBatch(Plan(restated)), ApplyOutcome::kApplied);
  EXPECT_EQ(jobs(*store_), first) << "a job restated as stored changes no job";

  Batch moved = Basic("b3");
  moved.samples.clear();
  moved.jobs[0].team = "nlp";
  ASSERT_EQ(*(*replica)->ApplyBatch(Plan(moved)), ApplyOutcome::kApplied);
  auto second = jobs(*store_);
  ASSERT_TRUE(second != nullptr);
  EXPECT_NE(second, first) << "the replica's change is seen";
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ(second->at(0).job.team, "nlp");
  EXPECT_EQ(first->at(0).job.team, "vision") << "a list handed out never changes";

  Batch ended = Basic("b4");
  ended.samples.clear();
  ended.jobs[0].end_ms = kT0 + kMsPerHour;
  ASSERT_EQ(*store_->ApplyBatch(Plan(ended)), ApplyOutcome::kApplied);
  auto third = jobs(*(*replica));
  ASSERT_TRUE(third != nullptr);
  EXPECT_EQ(third->at(0).job.end_ms, kT0 + kMsPerHour) << "a time is a field too";
  EXPECT_EQ(jobs(*(*replica)), third);

  Batch added = Basic("b5");
  added.samples.clear();
  added.allocations.clear();
  added.jobs[0] = Job{.id = "j2", .team = "nlp", .kind = JobKind::kServing};
  ASSERT_EQ(*(*replica)->ApplyBatch(Plan(added)), ApplyOutcome::kApplied);
  auto fourth = jobs(*store_);
  ASSERT_TRUE(fourth != nullptr);
  ASSERT_EQ(fourth->size(), 2u);
  EXPECT_EQ(fourth->at(1).job.id, "j2");
  EXPECT_EQ(fourth->at(0).job.end_ms, kT0 + kMsPerHour);
}

// Hour rows outside their update's own device-hour, or an hour off the hour, cannot be
// kept in day rows by device-day: refused, nothing written.
TEST_P(StoreContractTest, RollupsOutsideTheirDeviceHourAreRefused) {
  const int64_t hour = FloorTo(kT0, kMsPerHour);
  RollupRow stray{hour + kMsPerHour, 1, 1, {1000, 0, 0, 0, 0}, 0};
  RollupRow fine{hour, 1, 1, {1000, 0, 0, 0, 0}, 0};
  Status st = store_->WriteRollups({{{1, hour, 0}, {fine}, {}}, {{1, hour, 0}, {stray}, {}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("lies outside the device-hour"));
  Status off = store_->WriteRollups({{{1, hour + 1, 0}, {}, {}}});
  EXPECT_EQ(off.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(off.message(), HasSubstr("not on a whole hour"));
  EXPECT_TRUE(store_->SumHourRollups({hour - kMsPerDay, hour + kMsPerDay})->empty());
}

// The generation that tells a newer dirty mark from an older one lives in the database:
// a reopened store (or another writer) never reuses one.
TEST_P(StoreContractTest, DirtyGenerationsOutliveTheProcess) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  const TimeRange hour{kT0, kT0 + kMsPerHour};
  int64_t first = store_->DirtyHoursIn(hour)->at(0).generation;
  Reopen();
  ASSERT_TRUE(store_->ApplyBatch(Plan(SamplesAt("b2", kT0 + 60'000, 3))).ok());
  int64_t second = store_->DirtyHoursIn(hour)->at(0).generation;
  EXPECT_GT(second, first);
  // A refresh that read the first generation leaves the newer mark alone.
  RollupRow row{kT0, store_->ListDevices()->at(0).id, 0, {1000, 0, 0, 0, 0}, 0};
  ASSERT_TRUE(store_->WriteRollups({{{row.device_id, kT0, first}, {row}, {}}}).ok());
  EXPECT_EQ(store_->DirtyHoursIn(hour)->size(), 1u);
}

// Two writers on one database (two processes on the SQLite file, two servers on one
// PostgreSQL): each sees the devices and jobs the other added, and a device's times are
// the latest of both, never one writer's older memory of them.
TEST_P(StoreContractTest, TwoWritersOnOneDatabaseSeeEachOthersDevicesAndJobs) {
  auto opened = backend_.open(dir_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Store> other = std::move(*opened);  // opened before GPU-a exists
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());

  Batch b2 = SamplesAt("b2", kT0 + 60'000, 3);  // GPU-a, declared only by the first writer
  b2.devices.push_back(Device{.uuid = "GPU-b", .node = "node-b", .model = "NVIDIA H200", .pool = "training"});
  b2.jobs.push_back(Job{.id = "j2", .team = "speech", .kind = JobKind::kTraining});
  b2.allocations.push_back(Allocation{"GPU-b", "j2", kT0, std::nullopt});
  auto r2 = other->ApplyBatch(Plan(b2));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();

  Batch b3;  // GPU-b and j2, declared only by the second writer
  b3.batch_id = "b3";
  b3.allocations.push_back(Allocation{"GPU-a", "j2", kT0 + 120'000, std::nullopt});
  Sample s;
  s.device_uuid = "GPU-b";
  s.t_ms = kT0 + 10'000;
  s.sm_active = 0.5;
  b3.samples.push_back(s);
  auto r3 = store_->ApplyBatch(Plan(b3));
  ASSERT_TRUE(r3.ok()) << r3.status().ToString();
  // And the second writer again, after the first moved GPU-a's and GPU-b's times.
  ASSERT_TRUE(other->ApplyBatch(Plan(SamplesAt("b4", kT0 + 200'000, 1))).ok());

  for (Store* st : {store_.get(), other.get()}) {
    auto devices = *st->ListDevices();
    ASSERT_EQ(devices.size(), 2u);
    std::map<std::string, DeviceRecord> by_uuid;
    for (auto& d : devices) by_uuid[d.device.uuid] = d;
    EXPECT_EQ(by_uuid["GPU-a"].in_service_ms, kT0);
    EXPECT_EQ(by_uuid["GPU-a"].last_sample_ms, kT0 + 200'000);
    EXPECT_EQ(by_uuid["GPU-b"].in_service_ms, kT0);
    EXPECT_EQ(by_uuid["GPU-b"].last_sample_ms, kT0 + 10'000);
    EXPECT_EQ(st->ListJobs()->size(), 2u);
    EXPECT_EQ(st->Stats()->samples, 8);
    EXPECT_EQ(st->AllocationsOverlapping({0, kForever})->size(), 3u);
  }
}

// A job's kept labels and annotations: stored as declared, read back on every job read;
// a later declaration's set replaces the stored one, one that leaves them out says
// nothing, and each key's change goes into the job's history with its batch and sender.
TEST_P(StoreContractTest, JobLabelsAreReplacedByALaterReportAndTheirChangesRecorded) {
  auto job_j1 = [&]() -> Job {
    auto jobs = store_->ListJobs();
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    for (auto& r : *jobs) {
      if (r.job.id == "j1") return r.job;
    }
    ADD_FAILURE() << "no job j1";
    return Job{};
  };
  Batch b1 = Basic("b1");
  b1.jobs[0].labels = JobMetadata{{"gpuledger.io/exempt", "true"}, {"app", "jupyter"}};
  b1.jobs[0].annotations = JobMetadata{{"gpuledger.io/owner", "ana@example.org"}};
  ASSERT_TRUE(store_->ApplyBatch(Plan(b1)).ok());
  Job j = job_j1();
  EXPECT_EQ(j.labels, (JobMetadata{{"app", "jupyter"}, {"gpuledger.io/exempt", "true"}}));
  EXPECT_EQ(j.annotations, (JobMetadata{{"gpuledger.io/owner", "ana@example.org"}}));

  // Says nothing of them: kept.
  Batch b2;
  b2.batch_id = "b2";
  b2.jobs.push_back(Job{.id = "j1"});
  ASSERT_TRUE(store_->ApplyBatch(Plan(b2)).ok());
  EXPECT_EQ(job_j1().labels, j.labels);

  // A new set replaces the old one whole: "app" changed, the exemption taken off, and
  // the annotations now none at all.
  Batch b3;
  b3.batch_id = "b3";
  b3.jobs.push_back(Job{.id = "j1", .labels = JobMetadata{{"app", "vscode"}}, .annotations = JobMetadata{}});
  IngestPlan plan = Plan(b3);
  plan.sender = "agent-node-a";
  ASSERT_TRUE(store_->ApplyBatch(plan).ok());
  Reopen();  // read back from the database, not from anything the writer kept
  j = job_j1();
  EXPECT_EQ(j.labels, (JobMetadata{{"app", "vscode"}}));
  EXPECT_EQ(j.annotations, JobMetadata{});

  auto jobs = *store_->ListJobs();
  ASSERT_EQ(jobs.size(), 1u);
  auto changes = store_->JobChangesOf(jobs[0].id);
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  std::vector<std::string> seen;
  for (const JobChange& c : *changes) {
    seen.push_back(fmt::format("{} {} {}: {} -> {}", c.batch_id, c.sender, c.field, c.old_value, c.new_value));
  }
  EXPECT_THAT(seen, ::testing::UnorderedElementsAre(
                        "b3 agent-node-a label:app: jupyter -> vscode",
                        "b3 agent-node-a label:gpuledger.io/exempt: true -> (absent)",
                        "b3 agent-node-a annotation:gpuledger.io/owner: ana@example.org -> (absent)"));
}

// A job whose set was never reported reads back without one (not as an empty set).
TEST_P(StoreContractTest, AJobNeverGivenLabelsReadsBackWithoutASet) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  auto jobs = *store_->ListJobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_FALSE(jobs[0].job.labels.has_value());
  EXPECT_FALSE(jobs[0].job.annotations.has_value());
}

// The audit log of the intervention rules (store/actions.h).
ActionRecord Decision(std::string id, int64_t at_ms, std::string outcome) {
  return ActionRecord{.decision_id = std::move(id), .at_ms = at_ms, .rule = "idle-notebooks", .job_key = "4242",
                      .team = "vision", .action = "stop", .outcome = std::move(outcome), .enforce = true,
                      .evidence = "idle 2h, max activity 1.0%, 4 GPUs", .reason = "", .result = "stopped",
                      .per_hour_freed_micros = 12'500'000};
}

TEST_P(StoreContractTest, DecisionsAreRecordedOnceAndReadBackInTimeOrder) {
  auto log = ActionLogOf(*store_);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ActionRecord warned = Decision("d-warn", kT0, "warned");
  warned.reason = "grace 30m before the stop";
  warned.result = "";
  ActionRecord taken = Decision("d-stop", kT0 + 30 * kMsPerMinute, "taken");
  std::vector<ActionRecord> first = {taken, warned};
  auto added = (*log)->RecordActions(first);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 2u);

  // The same decisions again (a retry, a replica replaying them): nothing new, the first
  // record kept even where the replay says otherwise.
  ActionRecord replayed = taken;
  replayed.result = "failed: scancel timed out";
  std::vector<ActionRecord> again = {replayed, warned, Decision("d-later", kT0 + kMsPerHour, "proposed")};
  added = (*log)->RecordActions(again);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 1u);

  Reopen();  // durable
  log = ActionLogOf(*store_);
  ASSERT_TRUE(log.ok());
  auto all = (*log)->ActionsIn({0, kForever});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0], warned);
  EXPECT_EQ((*all)[1], taken);
  EXPECT_EQ((*all)[2].decision_id, "d-later");
  EXPECT_EQ((*all)[2].outcome, "proposed");

  // A window: at_ms in [begin, end).
  auto window = (*log)->ActionsIn({kT0 + 30 * kMsPerMinute, kT0 + kMsPerHour});
  ASSERT_TRUE(window.ok());
  ASSERT_EQ(window->size(), 1u);
  EXPECT_EQ((*window)[0].decision_id, "d-stop");
}

TEST_P(StoreContractTest, TwoWritersRecordingOneDecisionStoreItOnce) {
  auto opened = backend_.open(dir_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Store> other = std::move(*opened);
  std::vector<ActionRecord> one = {Decision("d-1", kT0, "proposed")};
  auto a = (*ActionLogOf(*store_))->RecordActions(one);
  auto b = (*ActionLogOf(*other))->RecordActions(one);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*a + *b, 1u);
  for (Store* st : {store_.get(), other.get()}) {
    auto all = (*ActionLogOf(*st))->ActionsIn({0, kForever});
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ(all->size(), 1u);
  }
}

// The objectives loop's lease (ActionLog::HoldLease): one holder at a time, across two
// stores on one database, renewed by its holder, taken by another once it has run out or
// been released.
TEST_P(StoreContractTest, ALeaseHasOneHolderUntilItRunsOutOrIsReleased) {
  auto opened = backend_.open(dir_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Store> other = std::move(*opened);
  ActionLog& a = **ActionLogOf(*store_);
  ActionLog& b = **ActionLogOf(*other);
  auto hold = [](ActionLog& log, const char* who, int64_t now) {
    auto l = log.HoldLease("loop", who, now, 30'000);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : Lease{};
  };
  EXPECT_EQ(hold(a, "srv-a", kT0), (Lease{"srv-a", kT0 + 30'000}));
  EXPECT_EQ(hold(b, "srv-b", kT0 + 1'000), (Lease{"srv-a", kT0 + 30'000}));    // a's, still running
  EXPECT_EQ(hold(a, "srv-a", kT0 + 20'000), (Lease{"srv-a", kT0 + 50'000}));   // renewed
  EXPECT_EQ(hold(b, "srv-b", kT0 + 49'999), (Lease{"srv-a", kT0 + 50'000}));
  EXPECT_EQ(hold(b, "srv-b", kT0 + 50'000), (Lease{"srv-b", kT0 + 80'000}));   // ran out: b's
  EXPECT_EQ(hold(a, "srv-a", kT0 + 51'000), (Lease{"srv-b", kT0 + 80'000}));   // a lost it
  ASSERT_TRUE(a.ReleaseLease("loop", "srv-a").ok());                           // not a's: nothing
  EXPECT_EQ(hold(a, "srv-a", kT0 + 52'000), (Lease{"srv-b", kT0 + 80'000}));
  ASSERT_TRUE(b.ReleaseLease("loop", "srv-b").ok());
  EXPECT_EQ(hold(a, "srv-a", kT0 + 53'000), (Lease{"srv-a", kT0 + 83'000}));   // released: a takes it
  EXPECT_EQ(hold(b, "srv-b", kT0 + 53'000).holder, "srv-a");
  EXPECT_EQ(hold(b, "srv-c", kT0 + 53'000).holder, "srv-a");                   // nor a third
  auto elsewhere = b.HoldLease("another-task", "srv-b", kT0 + 53'000, 30'000);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(elsewhere->holder, "srv-b");
}

TEST_P(StoreContractTest, ServersRacingForALeaseGetOneHolder) {
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < 4; ++i) {
    auto opened = backend_.open(dir_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    stores.push_back(std::move(*opened));
  }
  for (int round = 0; round < 5; ++round) {  // each round at a time the last lease ran out
    const int64_t now = kT0 + round * 60'000;
    std::vector<std::string> got(stores.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < stores.size(); ++i) {
      threads.emplace_back([&, i] {
        auto l = (*ActionLogOf(*stores[i]))->HoldLease("loop", fmt::format("srv-{}", i), now, 60'000);
        got[i] = l.ok() ? l->holder : "error: " + l.status().ToString();
      });
    }
    for (std::thread& t : threads) t.join();
    int holders = 0;
    for (size_t i = 0; i < stores.size(); ++i) {
      EXPECT_FALSE(got[i].starts_with("error")) << got[i];
      if (got[i] == fmt::format("srv-{}", i)) ++holders;
    }
    EXPECT_EQ(holders, 1) << "round " << round;
  }
}

TEST_P(StoreContractTest, LatestSamplesAreOneReadForTheFleet) {
  Batch b = Basic("b1");
  b.devices.push_back(Device{.uuid = "GPU-b", .node = "node-a", .model = "NVIDIA H200", .memory_mib = 143771});
  Sample s;
  s.device_uuid = "GPU-b";
  s.t_ms = kT0 + 2 * kMsPerHour + 5'000;
  s.sm_active = 0.75;
  b.samples.push_back(s);
  ASSERT_TRUE(store_->ApplyBatch(Plan(b)).ok());
  ASSERT_TRUE(store_->ApplyBatch(Plan(SamplesAt("b2", kT0 + 60'000, 2))).ok());  // GPU-a's latest: 08:01:10
  auto latest = store_->LatestSamples();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  ASSERT_EQ(latest->size(), 2u);
  std::map<std::string, int64_t> id;
  auto devices = store_->ListDevices();
  ASSERT_TRUE(devices.ok());
  for (const auto& d : *devices) id[d.device.uuid] = d.id;
  EXPECT_EQ(latest->at(id["GPU-a"]).t_ms, kT0 + 70'000);
  EXPECT_EQ(latest->at(id["GPU-a"]).sm_active, 0.25);
  EXPECT_EQ(latest->at(id["GPU-b"]).t_ms, kT0 + 2 * kMsPerHour + 5'000);
}

// A stored row that does not read back is an error naming its table and key, never an
// assert or a row quietly dropped.
TEST_F(SqliteStoreTest, ACorruptRowIsAnErrorNamingItsTableAndKey) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "ledger.db").string().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE devices SET capacity_type='borrowed'", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE sample_chunks SET data=x'ff'", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  Reopen();
  auto devices = store_->ListDevices();
  ASSERT_FALSE(devices.ok());
  EXPECT_THAT(devices.status().message(), HasSubstr("devices row GPU-a is corrupt"));
  auto snap = store_->Snapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_FALSE((*snap)->ListDevices().ok());
  auto samples = store_->Samples(1, {kT0, kT0 + kMsPerHour});
  ASSERT_FALSE(samples.ok());
  EXPECT_THAT(samples.status().message(), HasSubstr("sample_chunks row of device 1 at 2026-11-23T08:00:10Z is corrupt"));
}

TEST_F(SqliteStoreTest, ACorruptLabelsColumnNamesTheJob) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b1"))).ok());
  ExecBehindTheStore("UPDATE jobs SET labels='no separators'");
  auto jobs = store_->ListJobs();
  ASSERT_FALSE(jobs.ok());
  EXPECT_THAT(jobs.status().message(), HasSubstr("jobs row j1 is corrupt: its labels are not a stored set"));
}

// A damaged page is found by the quick check and the full one, which name its table; a
// sound store passes both.
TEST_F(SqliteStoreTest, TheIntegrityCheckNamesTheDamagedTable) {
  ASSERT_TRUE(store_->ApplyBatch(Plan(Basic("b"))).ok());
  for (int i = 1; i <= 40; ++i) {
    ASSERT_TRUE(store_->ApplyBatch(Plan(SamplesAt("b" + std::to_string(i), kT0 + i * kMsPerHour, 200))).ok());
  }
  for (bool full : {false, true}) {
    auto sound = store_->Check(full);
    ASSERT_TRUE(sound.ok()) << sound.status().ToString();
    EXPECT_TRUE(sound->ok()) << sound->problems.front();
  }
  const std::string path = (dir_ / "ledger.db").string();
  int64_t root = 0, page_size = 0;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name = 'sample_chunks'", -1, &q, nullptr);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    root = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &q, nullptr);
    ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
    page_size = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
  }
  store_.reset();  // checkpoints the WAL into the file
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((root - 1) * page_size);
    std::string garbage(static_cast<size_t>(page_size), '\x5a');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  Reopen();
  for (bool full : {false, true}) {
    auto damaged = store_->Check(full);
    ASSERT_TRUE(damaged.ok()) << (full ? "full: " : "quick: ") << damaged.status().ToString();
    ASSERT_FALSE(damaged->ok());
    EXPECT_THAT(damaged->tables, ::testing::Contains("sample_chunks"));
    EXPECT_THAT(damaged->tables, ::testing::Not(::testing::Contains("devices")));
  }
}

}  // namespace
}  // namespace gpuledger::store
