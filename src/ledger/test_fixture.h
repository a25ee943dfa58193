// A ledger on a fresh store, for the ledger's tests: SQLite in a temporary folder, or a
// fresh database on the test binary's PostgreSQL (store/testing/pg_server.h), so that the
// golden files and the property tests hold on both backends.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "ledger/ledger.h"
#include "store/pg_store.h"
#include "store/testing/pg_server.h"

namespace gpuledger::ledger::testing {

// 2026-11-23T00:00:00Z, a Monday: scenario times are relative to it.
inline constexpr int64_t kBaseMs = 1'795'392'000'000;

enum class Backend { kSqlite, kPostgres };

inline std::string BackendName(Backend b) { return b == Backend::kSqlite ? "sqlite" : "postgresql"; }

// Why `b` cannot run here (empty when it can): the caller skips with
// GPULEDGER_SKIP_OR_FAIL_IN_CI().
inline std::string BackendMissing(Backend b) {
  if (b == Backend::kSqlite) return "";
  auto server = store::pgtest::PgTestServer::Shared();
  return server.ok() ? "" : server.status().ToString();
}

class TempLedger {
 public:
  explicit TempLedger(LedgerOptions options = {}, Backend backend = Backend::kSqlite)
      : clock_(kBaseMs + 30 * kMsPerDay) {
    static std::atomic<int> counter{0};
    const int n = counter++;
    dir_ = std::filesystem::temp_directory_path() /
           ("gpuledger-ledger-" + std::to_string(::getpid()) + "-" + std::to_string(n));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Result<std::unique_ptr<store::Store>> s = Internal("no store");
    if (backend == Backend::kSqlite) {
      s = store::OpenSqliteStore((dir_ / "ledger.db").string());
    } else if (auto server = store::pgtest::PgTestServer::Shared(); server.ok()) {
      auto db = (*server)->CreateDatabase("ledger" + std::to_string(n));
      s = db.ok() ? store::OpenPgStore((*server)->Url(*db)) : Result<std::unique_ptr<store::Store>>(db.status());
    } else {
      s = server.status();
    }
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) ledger_ = std::make_unique<Ledger>(std::move(*s), clock_, options);
  }
  explicit TempLedger(Backend backend) : TempLedger(LedgerOptions{}, backend) {}
  ~TempLedger() {
    ledger_.reset();
    std::filesystem::remove_all(dir_);
  }
  Ledger& ledger() { return *ledger_; }
  ManualClock& clock() { return clock_; }

 private:
  std::filesystem::path dir_;
  ManualClock clock_;
  std::unique_ptr<Ledger> ledger_;
};

}  // namespace gpuledger::ledger::testing
