// How fast PgStore ingests (docs/store-postgresql.md gives the figures), against the test
// harness's PostgreSQL (store/testing/pg_server.h: a local server on a Unix socket,
// fsync=off). Not a test: speed is measured on purpose, never asserted.
//
//   build/release/src/store/pg_store_bench
//
// BM_PgIngest: groups of 16 node batches (8 GPUs x 60 samples at 10 s each, one chunk a
// GPU) applied through the store, as the server's group commit does.
// BM_WriteChunks/{copy,pipeline}: the two ways of writing the same chunk rows, alone: COPY
// with its text format's hex bytea, and one INSERT a row in libpq's pipeline mode with the
// data as a binary parameter (what PgStore uses: the faster).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <libpq-fe.h>

#include <string>

#include "ledger/ingest_plan.h"
#include "store/pg_store.h"
#include "store/pg_util.h"
#include "store/testing/pg_server.h"

namespace gpuledger::store {
namespace {

constexpr int64_t kT0 = 1'795'420'800'000;  // 2026-11-23T08:00:00Z
constexpr int kGpus = 8, kSamples = 60, kBatchesPerGroup = 16;

Batch NodeBatch(int node, int round) {
  Batch b;
  b.batch_id = "n" + std::to_string(node) + "-" + std::to_string(round);
  b.source = "node" + std::to_string(node);
  const int64_t t0 = kT0 + int64_t{round} * kSamples * 10'000;
  for (int g = 0; g < kGpus; ++g) {
    const std::string uuid = "GPU-" + std::to_string(node) + "-" + std::to_string(g);
    if (round == 0) b.devices.push_back(Device{.uuid = uuid, .node = b.source, .model = "NVIDIA H200", .pool = "p"});
    for (int i = 0; i < kSamples; ++i) {
      Sample s;
      s.device_uuid = uuid;
      s.t_ms = t0 + int64_t{i} * 10'000;
      s.sm_active = 0.25 + 0.5 * ((i + g) % 2);
      s.fb_used_mib = 40'000;
      s.power_watts = 500;
      b.samples.push_back(s);
    }
  }
  return b;
}

pgtest::PgTestServer* Server(benchmark::State& state) {
  auto server = pgtest::PgTestServer::Shared();
  if (!server.ok()) state.SkipWithError(server.status().ToString().c_str());
  return server.ok() ? *server : nullptr;
}

void BM_PgIngest(benchmark::State& state) {
  pgtest::PgTestServer* server = Server(state);
  if (server == nullptr) return;
  static int run = 0;
  auto db = server->CreateDatabase("bench" + std::to_string(run++));
  auto store = OpenPgStore(server->Url(*db));
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return;
  }
  int round = 0;
  int64_t samples = 0;
  for (auto _ : state) {
    std::vector<Batch> batches;
    for (int n = 0; n < kBatchesPerGroup; ++n) batches.push_back(NodeBatch(n, round));
    std::vector<IngestPlan> plans;
    for (const Batch& b : batches) plans.push_back(std::move(*ledger::PlanIngest(b)));
    for (auto& r : (*store)->ApplyBatches(plans)) {
      if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    }
    samples += kBatchesPerGroup * kGpus * kSamples;
    ++round;
  }
  state.counters["samples/s"] = benchmark::Counter(static_cast<double>(samples), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PgIngest)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3);

// Writes `rows` chunk rows of ~1.2 kB (a device-hour at 10 s) into a fresh table, in one
// transaction, by COPY (arg 0) or by pipelined INSERTs (arg 1).
void BM_WriteChunks(benchmark::State& state) {
  pgtest::PgTestServer* server = Server(state);
  if (server == nullptr) return;
  static int run = 0;
  auto db = server->CreateDatabase("chunks" + std::to_string(run++));
  PGconn* c = PQconnectdb(server->Url(*db).c_str());
  PQclear(PQexec(c, "CREATE TABLE t(device_id BIGINT, first_ms BIGINT, last_ms BIGINT, n BIGINT, data BYTEA,"
                    " PRIMARY KEY(device_id, first_ms))"));
  const bool pipeline = state.range(0) == 1;
  const int rows = 128;
  const std::string data(1200, 'x');
  int64_t base = 0;
  for (auto _ : state) {
    PQclear(PQexec(c, "BEGIN"));
    if (!pipeline) {
      std::string text;
      for (int i = 0; i < rows; ++i) {
        text += std::to_string(i) + "\t" + std::to_string(base) + "\t" + std::to_string(base + 1) + "\t360\t\\\\x";
        pg::AppendHex(text, data);
        text += '\n';
      }
      PQclear(PQexec(c, "COPY t FROM STDIN"));
      PQputCopyData(c, text.data(), static_cast<int>(text.size()));
      PQputCopyEnd(c, nullptr);
      while (PGresult* r = PQgetResult(c)) PQclear(r);
    } else {
      PQenterPipelineMode(c);
      for (int i = 0; i < rows; ++i) {
        std::string dev = std::to_string(i), first = std::to_string(base), last = std::to_string(base + 1);
        const char* values[] = {dev.c_str(), first.c_str(), last.c_str(), "360", data.data()};
        int lengths[] = {0, 0, 0, 0, static_cast<int>(data.size())};
        int formats[] = {0, 0, 0, 0, 1};
        PQsendQueryParams(c, "INSERT INTO t VALUES($1, $2, $3, $4, $5)", 5, nullptr, values, lengths, formats, 1);
      }
      PQpipelineSync(c);
      for (int done = 0; done <= rows;) {
        PGresult* r = PQgetResult(c);
        if (r == nullptr) continue;
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) done = rows + 1;
        else if (PQresultStatus(r) != PGRES_COMMAND_OK) state.SkipWithError(PQresultErrorMessage(r));
        PQclear(r);
      }
      PQexitPipelineMode(c);
    }
    PQclear(PQexec(c, "COMMIT"));
    base += 2;
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(state.iterations() * rows), benchmark::Counter::kIsRate);
  PQfinish(c);
}
BENCHMARK(BM_WriteChunks)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2);

}  // namespace
}  // namespace gpuledger::store

BENCHMARK_MAIN();
