// Crash safety: a server killed with SIGKILL in the middle of a stream of batches,
// restarted, and sent again what it had not acknowledged, ends with the same ledger as
// an uninterrupted run, to the micro-unit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "core/price_book.h"
#include "server/child_server.h"
#include "server/client.h"
#include "server/test_support.h"
#include "wire/batch.h"

namespace gpuledger::server {
namespace {

using testing::TempDir;

const int64_t kNow = 1795435200000;  // 2026-11-23T12:00:00Z
const int64_t kStart = kNow - 6 * kMsPerHour;

using testing::KillChild;

PriceBook Prices() { return testing::FlatPrices(); }
pid_t StartChild(const std::string& db, int* port) { return testing::StartServerChild(db, kNow, port); }
void Kill(pid_t pid) { KillChild(pid); }
std::vector<std::string> Stream() { return testing::NodeStream(kStart); }

ledger::UsageReport Totals(const std::string& db) {
  PriceBook prices = Prices();
  return testing::TeamAndDeviceTotals(db, kNow, {kStart, kNow}, &prices);
}

TEST(CrashTest, KillNineMidStreamThenResendEqualsAnUninterruptedRun) {
  TempDir dir;
  std::vector<std::string> stream = Stream();
  for (const std::string& db : {dir.File("crash.db"), dir.File("ref.db")}) {
    auto s = store::OpenSqliteStore(db);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->SavePriceBook(Prices()).ok());
  }
  {  // The uninterrupted run.
    ManualClock clock(kNow);
    auto store = store::OpenSqliteStore(dir.File("ref.db"));
    ASSERT_TRUE(store.ok());
    ledger::Ledger l(std::move(*store), clock);
    for (const std::string& body : stream) {
      auto b = wire::ParseBatch(body);
      ASSERT_TRUE(b.ok());
      ASSERT_TRUE(l.Ingest(*b).ok());
    }
  }

  int port = 0;
  pid_t pid = StartChild(dir.File("crash.db"), &port);
  ASSERT_GT(pid, 0);
  ASSERT_GT(port, 0);
  std::string url = fmt::format("http://127.0.0.1:{}", port);
  std::atomic<size_t> acked{0};
  std::thread sender([&] {
    for (size_t i = 0; i < stream.size(); ++i) {
      auto r = HttpPost(url, "/api/v1/batches", stream[i], "application/json");
      if (!r.ok() || r->status != 200) return;
      acked = i + 1;
    }
  });
  while (acked.load() < stream.size() / 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  Kill(pid);  // while the sender has a batch in flight
  sender.join();
  size_t first_unacked = acked.load();
  ASSERT_LT(first_unacked, stream.size()) << "the kill came too late to interrupt the stream";

  pid = StartChild(dir.File("crash.db"), &port);
  ASSERT_GT(port, 0);
  url = fmt::format("http://127.0.0.1:{}", port);
  for (size_t i = first_unacked; i < stream.size(); ++i) {
    auto r = HttpPost(url, "/api/v1/batches", stream[i], "application/json");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->status, 200) << r->body;
  }
  Kill(pid);

  ledger::UsageReport crash = Totals(dir.File("crash.db"));
  ledger::UsageReport ref = Totals(dir.File("ref.db"));
  ASSERT_EQ(crash.rows.size(), ref.rows.size());
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    EXPECT_EQ(crash.rows[i].key, ref.rows[i].key);
    EXPECT_EQ(crash.rows[i].gpu_ticks_ms, ref.rows[i].gpu_ticks_ms);
    EXPECT_EQ(crash.rows[i].cost, ref.rows[i].cost);
  }
  EXPECT_EQ(crash.total.gpu_ticks_ms, ref.total.gpu_ticks_ms);
  EXPECT_EQ(crash.total.cost, ref.total.cost);
  EXPECT_GT(crash.total.total_cost().micros(), 0);
}

}  // namespace
}  // namespace gpuledger::server
