// A small stand-in for the gpuledger server, for the agent's tests: POST
// /api/v1/batches with a bearer token, each batch parsed with wire::ParseBatch and
// applied to a real ledger::Ledger on a temp SQLite store (idempotent by batch id,
// as the real server is). It can be told to fail, and stopped and restarted on the
// same port to play an unreachable server.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/push.h"
#include "core/time.h"
#include "nvml/nvml_api.h"
#include "nvml/test_support.h"
#include "ledger/ledger.h"

namespace gpuledger::agent::testing {

class TestLedgerServer {
 public:
  // Opens the store at `db_path`; the ledger reads `clock` to refuse future samples.
  TestLedgerServer(const std::string& db_path, const Clock& clock, std::string token = "agent-token");
  ~TestLedgerServer();

  // Listens on 127.0.0.1: `port` 0 picks one; otherwise that port (a restart).
  bool Start(int port = 0);
  void Stop();
  int port() const { return port_; }
  std::string url() const;

  // While set, every POST is answered with this HTTP status (0: behave).
  void set_fail_status(int status);
  // The next `n` batches are applied but answered 503, as when an acknowledgement is
  // lost on the way back: the agent resends them.
  void set_drop_acks(int n);

  int64_t posts() const;       // POSTs that reached the handler
  int64_t applied() const;     // batches the ledger applied
  int64_t duplicates() const;  // batches the ledger had already
  std::vector<std::string> errors() const;  // messages of refused batches
  std::vector<std::string> applied_ids() const;

  // REQUIRES: the server is stopped or idle (tests read it after the agent is done).
  ledger::Ledger& ledger() { return *ledger_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<ledger::Ledger> ledger_;
  std::string token_;
  int port_ = 0;
  mutable std::mutex mu_;
  int fail_status_ = 0;
  int drop_acks_ = 0;
  int64_t posts_ = 0, applied_ = 0, duplicates_ = 0;
  std::vector<std::string> errors_;
  std::vector<std::string> applied_ids_;
};

// What a node's end-to-end tests run on: the fake NVML replaying a scenario, a started
// TestLedgerServer on `<dir>/ledger.db`, and the agent's HTTP sink to it (the default
// token). Sets `clock` to 0 first.
struct ScenarioNode {
  std::unique_ptr<nvml::NvmlLibrary> lib;
  std::unique_ptr<TestLedgerServer> server;
  std::unique_ptr<BatchSink> sink;
};
Result<ScenarioNode> StartScenarioNode(const std::string& dir, const std::string& scenario_path,
                                       nvml::testing::ScenarioClock& clock);

}  // namespace gpuledger::agent::testing
