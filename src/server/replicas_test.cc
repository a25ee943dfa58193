// Several replicas on one PostgreSQL: three `serve` servers (each in a child process, as
// crash_test runs them) on one database, the same batches sent to two of them at once
// with retries, one killed with SIGKILL while batches are in flight and started again, then
// the whole stream sent once more (a rolling restart's resends). The totals afterwards
// equal one clean import of the same batches into SQLite, to the micro-unit. Twice: the
// servers connected straight to PostgreSQL, and through one pgbouncer in transaction mode
// (as operators deploy it: every transaction of every replica may land on another server
// connection).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/price_book.h"
#include "core/testing/missing_component.h"
#include "server/child_server.h"
#include "server/client.h"
#include "server/test_support.h"
#include "store/pg_store.h"
#include "store/testing/pg_server.h"
#include "wire/batch.h"

namespace gpuledger::server {
namespace {

using testing::TempDir;

const int64_t kNow = 1795435200000;  // 2026-11-23T12:00:00Z
const int64_t kStart = kNow - 6 * kMsPerHour;

using testing::FlatPrices;
using testing::KillChild;
using testing::NodeStream;
using testing::StartServerChild;

ledger::UsageReport Totals(const std::string& url_or_path) {
  return testing::TeamAndDeviceTotals(url_or_path, kNow, {kStart, kNow});
}

bool Post(const std::string& url, const std::string& body) {
  auto r = HttpPost(url, "/api/v1/batches", body, "application/json");
  return r.ok() && r->status == 200;
}

// The parameter: whether the replicas reach the database through pgbouncer.
class ReplicasTest : public ::testing::TestWithParam<bool> {};

TEST_P(ReplicasTest, ThreeReplicasDuplicatesAndAKillNineEqualOneCleanImport) {
  auto server = store::pgtest::PgTestServer::Shared();
  if (!server.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << server.status().ToString();
  auto db = (*server)->CreateDatabase("replicas");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  // The price book, the totals and the count of batches read the database directly.
  const std::string pg_url = (*server)->Url(*db);
  std::string replica_url = pg_url;
  if (GetParam()) {
    auto bouncer = (*server)->BouncerUrl(*db);
    if (!bouncer.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << bouncer.status().ToString();
    replica_url = *bouncer;
  }
  TempDir dir;
  const std::string ref = dir.File("ref.db");
  std::vector<std::string> stream = NodeStream(kStart);
  for (const std::string& where : {pg_url, ref}) {
    auto s = store::Open(where);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ASSERT_TRUE((*s)->SavePriceBook(FlatPrices()).ok());
  }
  {  // The clean import, into SQLite.
    ManualClock clock(kNow);
    auto store = store::Open(ref);
    ASSERT_TRUE(store.ok());
    ledger::Ledger l(std::move(*store), clock);
    for (const std::string& body : stream) ASSERT_TRUE(l.Ingest(*wire::ParseBatch(body)).ok());
  }

  std::array<pid_t, 3> pid{};
  std::array<std::string, 3> url;
  for (size_t i = 0; i < 3; ++i) {
    int port = 0;
    pid[i] = StartServerChild(replica_url, kNow, &port);
    ASSERT_GT(port, 0) << "replica " << i << " did not start";
    url[i] = fmt::format("http://127.0.0.1:{}", port);
  }
  // Two senders each send every batch, one to replica 0 and one to replica 1, at once;
  // a batch refused or unanswered is retried on replica 2 (the load balancer's next).
  std::atomic<size_t> sent_to_1{0};
  std::atomic<bool> lost{false};
  auto sender = [&](size_t first_choice, std::atomic<size_t>* progress) {
    for (size_t i = 0; i < stream.size(); ++i) {
      bool ok = false;
      for (int attempt = 0; attempt < 50 && !ok; ++attempt) {
        ok = Post(url[attempt == 0 ? first_choice : 2], stream[i]);
        if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (!ok) lost = true;
      if (progress) *progress = i + 1;
    }
  };
  std::thread a(sender, 0, nullptr);
  std::thread b(sender, 1, &sent_to_1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (sent_to_1.load() < stream.size() / 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  KillChild(pid[1]);  // while its sender has a batch in flight: the rest goes to replica 2
  const size_t at_kill = sent_to_1.load();
  a.join();
  b.join();
  ASSERT_FALSE(lost) << "a batch was acknowledged by no replica";
  ASSERT_LT(at_kill, stream.size()) << "the kill came too late to interrupt the stream";

  // Replica 1 restarts; the stream is sent to it once more (every batch a duplicate), and
  // replicas 0 and 2 restart one after the other (a rolling restart), answering the same.
  int port = 0;
  pid[1] = StartServerChild(replica_url, kNow, &port);
  ASSERT_GT(port, 0);
  url[1] = fmt::format("http://127.0.0.1:{}", port);
  for (const std::string& body : stream) ASSERT_TRUE(Post(url[1], body));
  for (size_t i : {size_t{0}, size_t{2}}) {
    KillChild(pid[i]);
    pid[i] = StartServerChild(replica_url, kNow, &port);
    ASSERT_GT(port, 0);
    url[i] = fmt::format("http://127.0.0.1:{}", port);
    ASSERT_TRUE(Post(url[i], stream.back()));
  }
  for (pid_t p : pid) KillChild(p);

  ledger::UsageReport shared = Totals(pg_url);
  ledger::UsageReport clean = Totals(ref);
  ASSERT_EQ(shared.rows.size(), clean.rows.size());
  for (size_t i = 0; i < clean.rows.size(); ++i) {
    EXPECT_EQ(shared.rows[i].key, clean.rows[i].key);
    EXPECT_EQ(shared.rows[i].gpu_ticks_ms, clean.rows[i].gpu_ticks_ms);
    EXPECT_EQ(shared.rows[i].cost, clean.rows[i].cost);
  }
  EXPECT_EQ(shared.total.gpu_ticks_ms, clean.total.gpu_ticks_ms);
  EXPECT_EQ(shared.total.cost, clean.total.cost);
  EXPECT_GT(shared.total.total_cost().micros(), 0);
  auto store = store::Open(pg_url);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->Stats()->batches, static_cast<int64_t>(stream.size())) << "each batch applied once";
}

INSTANTIATE_TEST_SUITE_P(Connections, ReplicasTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "pgbouncer" : "postgresql"; });

}  // namespace
}  // namespace gpuledger::server
