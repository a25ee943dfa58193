// A ledger on a fresh SQLite store in a temporary folder, for the ledger's tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>

#include "ledger/ledger.h"

namespace gpuledger::ledger::testing {

// 2026-11-23T00:00:00Z, a Monday: scenario times are relative to it.
inline constexpr int64_t kBaseMs = 1'795'392'000'000;

class TempLedger {
 public:
  explicit TempLedger(LedgerOptions options = {}) : clock_(kBaseMs + 30 * kMsPerDay) {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("gpuledger-ledger-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto s = store::OpenSqliteStore((dir_ / "ledger.db").string());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    ledger_ = std::make_unique<Ledger>(std::move(*s), clock_, options);
  }
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
