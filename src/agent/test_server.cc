#include "agent/test_server.h"

#include <httplib.h>

#include <thread>

#include <fmt/format.h>

#include "store/store.h"
#include "wire/batch.h"

namespace gpuledger::agent::testing {

struct TestLedgerServer::Impl {
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
};

TestLedgerServer::TestLedgerServer(const std::string& db_path, const Clock& clock, std::string token)
    : impl_(std::make_unique<Impl>()), token_(std::move(token)) {
  auto store = store::OpenSqliteStore(db_path);
  if (store.ok()) ledger_ = std::make_unique<ledger::Ledger>(std::move(store).value(), clock);
}

TestLedgerServer::~TestLedgerServer() { Stop(); }

std::string TestLedgerServer::url() const { return fmt::format("http://127.0.0.1:{}", port_); }

bool TestLedgerServer::Start(int port) {
  if (!ledger_) return false;
  impl_->server = std::make_unique<httplib::Server>();
  impl_->server->set_tcp_nodelay(true);
  impl_->server->Post("/api/v1/batches", [this](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard lock(mu_);
    ++posts_;
    if (fail_status_ != 0) {
      res.status = fail_status_;
      res.set_content("told to fail\n", "text/plain");
      return;
    }
    if (req.get_header_value("Authorization") != "Bearer " + token_) {
      res.status = 401;
      res.set_content("bad token\n", "text/plain");
      return;
    }
    auto batch = wire::ParseBatch(req.body);
    Result<store::ApplyOutcome> r = batch.ok() ? ledger_->Ingest(*batch) : Result<store::ApplyOutcome>(batch.status());
    if (!r.ok()) {
      errors_.push_back(r.status().message());
      res.status = 400;
      res.set_content(r.status().message(), "text/plain");
      return;
    }
    if (*r == store::ApplyOutcome::kDuplicate) {
      ++duplicates_;
    } else {
      ++applied_;
      applied_ids_.push_back(batch->batch_id);
    }
    if (drop_acks_ > 0) {
      --drop_acks_;
      res.status = 503;
      return;
    }
    res.status = 200;
    res.set_content("{}", "application/json");
  });
  if (port == 0) {
    port_ = impl_->server->bind_to_any_port("127.0.0.1");
    if (port_ <= 0) return false;
  } else {
    // A restart on the port of the last run: retry briefly while the old socket closes.
    bool bound = false;
    for (int i = 0; i < 50 && !bound; ++i) {
      bound = impl_->server->bind_to_port("127.0.0.1", port);
      if (!bound) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!bound) return false;
    port_ = port;
  }
  httplib::Server* s = impl_->server.get();
  impl_->thread = std::thread([s] { s->listen_after_bind(); });
  // stop() before the loop runs would be lost (the loop would then never end).
  for (int i = 0; i < 2'000 && !s->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

void TestLedgerServer::Stop() {
  if (!impl_->server) return;
  impl_->server->stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->server.reset();
}

void TestLedgerServer::set_fail_status(int status) {
  std::lock_guard lock(mu_);
  fail_status_ = status;
}
void TestLedgerServer::set_drop_acks(int n) {
  std::lock_guard lock(mu_);
  drop_acks_ = n;
}
int64_t TestLedgerServer::posts() const {
  std::lock_guard lock(mu_);
  return posts_;
}
int64_t TestLedgerServer::applied() const {
  std::lock_guard lock(mu_);
  return applied_;
}
int64_t TestLedgerServer::duplicates() const {
  std::lock_guard lock(mu_);
  return duplicates_;
}
std::vector<std::string> TestLedgerServer::errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}
std::vector<std::string> TestLedgerServer::applied_ids() const {
  std::lock_guard lock(mu_);
  return applied_ids_;
}

Result<ScenarioNode> StartScenarioNode(const std::string& dir, const std::string& scenario_path,
                                       nvml::testing::ScenarioClock& clock) {
  ScenarioNode s;
  clock.Set(0);
  GPULEDGER_ASSIGN_OR_RETURN(s.lib, nvml::testing::LoadFakeFromPath(scenario_path, clock));
  s.server = std::make_unique<TestLedgerServer>(dir + "/ledger.db", clock);
  if (!s.server->Start()) return Unavailable("test server did not start");
  GPULEDGER_ASSIGN_OR_RETURN(s.sink, MakeHttpBatchSink(s.server->url(), "agent-token", 2'000));
  return s;
}

}  // namespace gpuledger::agent::testing
