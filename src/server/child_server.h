// Servers in child processes, for the tests that kill them (crash_test, replicas_test):
// a server on a store (a SQLite path or a PostgreSQL URL, store::Open), its port, SIGKILL;
// and the stream of batches those tests send.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/price_book.h"
#include "server/test_support.h"
#include "store/pg_store.h"
#include "wire/batch.h"

namespace gpuledger::server::testing {

// Starts a server on the store at `url_or_path` (durable before each acknowledgement) in a
// child process whose clock stands at `now_ms`; returns its pid and writes its port (0
// when it did not start).
inline pid_t StartServerChild(const std::string& url_or_path, int64_t now_ms, int* port) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    ManualClock clock(now_ms);
    auto store = store::Open(url_or_path, {.sqlite = {.synchronous_full = true}});
    if (!store.ok()) _exit(2);
    ledger::Ledger l(std::move(*store), clock);
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.access_log = false;
    auto s = Server::Create(l, clock, o);
    if (!s.ok() || !(*s)->Start().ok()) _exit(3);
    int p = (*s)->Port();
    if (write(fds[1], &p, sizeof p) != sizeof p) _exit(4);
    for (;;) pause();
  }
  close(fds[1]);
  if (read(fds[0], port, sizeof *port) != sizeof *port) *port = 0;
  close(fds[0]);
  return pid;
}

inline void KillChild(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

// 60 batches: three nodes of two GPUs, ten samples every ten minutes from `start_ms`.
inline std::vector<std::string> NodeStream(int64_t start_ms) {
  std::vector<std::string> out;
  for (int i = 0; i < 20; ++i) {
    for (int n = 0; n < 3; ++n) {
      out.push_back(wire::WriteBatch(MakeBatch(fmt::format("n{}-{}", n, i), fmt::format("node{}", n), 2,
                                               start_ms + i * 10 * kMsPerMinute, 10, fmt::format("team{}", n),
                                               i == 0)));
    }
  }
  return out;
}

// One price for every GPU: 2.49 an hour.
inline PriceBook FlatPrices() {
  PriceEntry e;
  e.model = "*";
  e.pool = "*";
  e.per_gpu_hour = *Money::Parse("2.49");
  return *PriceBook::Create({e});
}

// Usage by team and device over `window` of the store at `url_or_path`, with `prices` set
// first when given; an empty report (and a test failure) when it cannot be read.
inline ledger::UsageReport TeamAndDeviceTotals(const std::string& url_or_path, int64_t now_ms, const TimeRange& window,
                                               const PriceBook* prices = nullptr) {
  ManualClock clock(now_ms);
  auto store = store::Open(url_or_path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return {};
  ledger::Ledger l(std::move(*store), clock);
  if (prices) {
    EXPECT_TRUE(l.SetPrices(*prices).ok());
  }
  auto r = l.Usage(window, {ledger::Dimension::kTeam, ledger::Dimension::kDevice});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ledger::UsageReport{};
}

}  // namespace gpuledger::server::testing
