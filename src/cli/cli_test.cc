// End to end through the real binary: import, usage, chargeback, bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/test_support.h"
#include "core/money.h"
#include "core/time.h"
#include "core/testing/missing_component.h"
#include "server/test_support.h"
#include "store/testing/pg_server.h"
#include "wire/batch.h"

namespace gpuledger::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

using testing::Gpuledger;
using testing::Outcome;

class CliTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    db_ = Path("ledger.db");
  }

  // Two hours of one GPU held by one job at 25% activity, in NDJSON, one batch an hour.
  std::string Batches() { return testing::TwoHoursOfOneGpu(); }

  // Starts `gpuledger serve SERVE_ARGS` on a free loopback port, asks it `query` (a command
  // given --server) until it answers (10 s at most), stops it, and returns the answer;
  // `log` gets the server's output.
  Outcome AskAServer(const std::string& serve_args, const std::string& query, std::string* log) {
    int port = server::testing::FreeLoopbackPort();
    if (port <= 0) return {-1, "no free port"};
    testing::BackgroundGpuledger serve(serve_args + " --listen 127.0.0.1:" + std::to_string(port), Path("serve.log"));
    Outcome answer{-1, "the server did not start"};
    for (int i = 0; serve.started() && i < 100; ++i) {
      answer = Gpuledger(query + " --server http://127.0.0.1:" + std::to_string(port));
      if (answer.exit_code == 0) break;
      ::usleep(100'000);
    }
    serve.Stop();
    *log = testing::ReadAll(Path("serve.log"));
    return answer;
  }

  // Sets a price and imports Batches() into the store `db` (a path or a URL).
  void PriceAndImport(const std::string& db) {
    auto prices = File("prices.toml", "[[price]]\nper_gpu_hour = \"3.60\"\n");
    ASSERT_EQ(Gpuledger("prices --db '" + db + "' --set " + prices).exit_code, 0);
    Outcome imported = Gpuledger("import --db '" + db + "' " + File("b.ndjson", Batches()));
    ASSERT_EQ(imported.exit_code, 0) << imported.output;
  }

  std::string db_;
};

TEST_F(CliTest, ImportsAndReportsUsage) {
  auto prices = File("prices.toml", "[[price]]\nper_gpu_hour = \"3.60\"\n");
  ASSERT_EQ(Gpuledger("prices --db " + db_ + " --set " + prices).exit_code, 0);
  auto batches = File("b.ndjson", Batches());
  Outcome imported = Gpuledger("import --db " + db_ + " " + batches);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_THAT(imported.output, HasSubstr("imported 2 batches (121 samples)"));

  Outcome again = Gpuledger("import --db " + db_ + " " + batches);
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_THAT(again.output, HasSubstr("imported 0 batches (0 samples); 2 already present"));

  Outcome usage = Gpuledger("usage --db " + db_ +
                        " --from 2026-11-23T00:00:00Z --to 2026-11-23T02:00:00Z --by team --format json");
  ASSERT_EQ(usage.exit_code, 0) << usage.output;
  auto j = nlohmann::json::parse(usage.output);
  EXPECT_EQ(j["rows"][0]["group"]["team"], "nlp");
  EXPECT_DOUBLE_EQ(j["total"]["buckets"]["active"]["gpu_hours"].get<double>(), 0.5);
  EXPECT_EQ(j["total"]["buckets"]["active"]["cost"], "1.800000");
  EXPECT_EQ(j["total"]["cost"], "7.200000");

  Outcome cb = Gpuledger("chargeback --db " + db_ + " --period 2026-11");
  ASSERT_EQ(cb.exit_code, 0) << cb.output;
  EXPECT_THAT(cb.output, HasSubstr("nlp,llm,2.000000,0.500000,1.500000,7.200000,0.000000,7.200000,0.000000,0.000000,0.000000,5.400000"));

  // The job has no experiment label: the team's one row is its "(none)", and it costs what
  // chargeback bills the team.
  Outcome ex = Gpuledger("experiments --db " + db_ + " --period 2026-11 --format json");
  ASSERT_EQ(ex.exit_code, 0) << ex.output;
  auto e = nlohmann::json::parse(ex.output);
  ASSERT_EQ(e["teams"].size(), 1u);
  EXPECT_EQ(e["teams"][0]["cost"], "7.200000");
  EXPECT_EQ(e["teams"][0]["experiments"][0]["experiment"], "(none)");
  EXPECT_EQ(e["teams"][0]["distribution"]["count"], 0);
  EXPECT_THAT(Gpuledger("experiments --db " + db_ + " --period 2026-11").output, HasSubstr("team nlp: 0 experiments"));
  EXPECT_THAT(Gpuledger("experiments --db " + db_ + " --period 11-2026").output, HasSubstr("--period"));

  // The monthly review's spend is the month's chargeback total.
  Outcome monthly = Gpuledger("report monthly --db " + db_ + " --month 2026-11 --out " + Path("m.html"));
  ASSERT_EQ(monthly.exit_code, 0) << monthly.output;
  std::ifstream page(Path("m.html"));
  std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_THAT(html, HasSubstr("<span data-spend=\"7.200000\">"));
  EXPECT_THAT(html, HasSubstr("<h2>What if</h2>"));

  Outcome table = Gpuledger("usage --db " + db_ + " --window 7d --now 2026-11-23T02:30:00Z --by pool");
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_THAT(table.output, HasSubstr("training"));
  EXPECT_THAT(table.output, HasSubstr("target"));  // each pool's target (the default 60%)
  EXPECT_THAT(table.output, HasSubstr("60.0%"));
}

// Tried as a new user would: a batch imported with no price book costs 0, and every
// table says so, naming what had no price; the currency is the config's [prices].
TEST_F(CliTest, UnpricedCapacityAndTheCurrencyAreSaid) {
  ASSERT_EQ(Gpuledger("import --db " + db_ + " " + File("b.ndjson", Batches())).exit_code, 0);
  const std::string window = " --from 2026-11-23T00:00:00Z --to 2026-11-23T02:00:00Z";
  Outcome usage = Gpuledger("usage --db " + db_ + window);
  ASSERT_EQ(usage.exit_code, 0) << usage.output;
  EXPECT_THAT(usage.output, HasSubstr("UNPRICED: 2.0 GPU-hours had no price and cost 0 in these figures"));
  EXPECT_THAT(usage.output, HasSubstr("amounts in an unnamed unit (no currency set"));
  Outcome cb = Gpuledger("chargeback --db " + db_ + " --period 2026-11");  // CSV on stdout
  ASSERT_EQ(cb.exit_code, 0) << cb.output;
  EXPECT_THAT(cb.output, HasSubstr("UNPRICED: 2.0 GPU-hours had no price"));

  auto config = File("g.toml", "db = \"" + db_ + "\"\n[prices]\ncurrency = \"EUR\"\n[[price]]\nper_gpu_hour = \"3.60\"\n");
  Outcome priced = Gpuledger("chargeback --config " + config + " --period 2026-11 --format table");
  ASSERT_EQ(priced.exit_code, 0) << priced.output;
  EXPECT_THAT(priced.output, HasSubstr("(amounts in EUR)"));
  EXPECT_THAT(priced.output, HasSubstr("total EUR"));
  EXPECT_THAT(priced.output, ::testing::Not(HasSubstr("UNPRICED")));
  Outcome json = Gpuledger("usage --config " + config + window + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_EQ(nlohmann::json::parse(json.output)["currency"], "EUR");
}

TEST_F(CliTest, UsageAndChargebackFromAServerEqualTheLocalStore) {
  auto prices = File("prices.toml", "[[price]]\nper_gpu_hour = \"3.60\"\n");
  ASSERT_EQ(Gpuledger("prices --db " + db_ + " --set " + prices).exit_code, 0);
  ASSERT_EQ(Gpuledger("import --db " + db_ + " " + File("b.ndjson", Batches())).exit_code, 0);
  const std::string window = " --from 2026-11-23T00:00:00Z --to 2026-11-23T02:00:00Z";
  const std::vector<std::string> queries = {
      "usage" + window + " --by team,project --format csv",
      "usage" + window + " --by pool --format json",
      "usage" + window + " --by device",
      // Read a row a page: the pages put together are the local answer.
      "usage" + window + " --by hour,device --format csv --page-rows 1",
      "usage" + window + " --by hour,device --format json --page-rows 2",
      "chargeback --period 2026-11 --format csv",
      "chargeback --period 2026-11 --share-idle --format json",
      "experiments --period 2026-11 --format csv",
      "experiments --period 2026-11 --format json --team nlp",
  };
  std::vector<Outcome> local;
  for (const auto& q : queries) {
    local.push_back(Gpuledger(q + " --db " + db_));
    ASSERT_EQ(local.back().exit_code, 0) << q << ": " << local.back().output;
  }

  int port = server::testing::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  testing::BackgroundGpuledger serve("serve --db " + db_ + " --listen 127.0.0.1:" + std::to_string(port),
                                     Path("serve.log"));
  ASSERT_TRUE(serve.started());
  Outcome first;
  for (int i = 0; i < 100; ++i) {  // until the server answers (10 s at most)
    first = Gpuledger(queries[0] + " --server " + url);
    if (first.exit_code == 0) break;
    ::usleep(100'000);
  }
  EXPECT_EQ(first.output, local[0].output);
  for (size_t i = 1; i < queries.size(); ++i) {
    Outcome remote = Gpuledger(queries[i] + " --server " + url);
    EXPECT_EQ(remote.exit_code, 0) << queries[i] << ": " << remote.output;
    EXPECT_EQ(remote.output, local[i].output) << queries[i];
  }
  // The server's own errors come back as the CLI's.
  Outcome bad = Gpuledger("usage" + window + " --by colour --server " + url);
  EXPECT_EQ(bad.exit_code, 1);
  Outcome gone = Gpuledger("usage" + window + " --server http://127.0.0.1:1");
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.output, HasSubstr("127.0.0.1:1"));
}

// The chart mounts the store's URL from a Secret as a file (deploy/helm): serve reads it
// from there, over the config's `db`, so a password is neither on the command line nor in
// the config.
TEST_F(CliTest, ServeTakesItsStoreFromADbFileOverTheConfigsDb) {
  PriceAndImport(db_);
  const std::string query = "usage --from 2026-11-23T00:00:00Z --to 2026-11-23T02:00:00Z --by team --format csv";
  Outcome local = Gpuledger(query + " --db " + db_);
  ASSERT_EQ(local.exit_code, 0) << local.output;

  auto config = File("server.toml", "db = \"" + Path("other.db") + "\"\n");
  auto db_file = File("store-url", db_ + "\n");  // as `kubectl create secret --from-file` leaves it
  std::string log;
  Outcome remote = AskAServer("serve --config " + config + " --db-file " + db_file, query, &log);
  EXPECT_EQ(remote.output, local.output) << log;
  EXPECT_FALSE(fs::exists(Path("other.db"))) << "the config's db was opened instead of the file's";
}

// What the Helm chart runs with PostgreSQL: the URL, password and all, from a file; the
// server serves that database and never prints the password.
TEST_F(CliTest, ServeTakesAPostgresqlUrlWithItsPasswordFromADbFile) {
  auto pg = store::pgtest::PgTestServer::Shared();
  if (!pg.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << pg.status().ToString();
  auto database = (*pg)->CreateDatabase("cli_db_file");
  ASSERT_TRUE(database.ok()) << database.status().ToString();
  std::string url = (*pg)->Url(*database);  // postgresql://gpuledger@/DB?host=...
  url.insert(url.find('@'), ":s3cret-pw");    // the test server trusts its socket: any password opens it
  PriceAndImport(url);
  PriceAndImport(db_);
  const std::string query = "usage --from 2026-11-23T00:00:00Z --to 2026-11-23T02:00:00Z --by team --format csv";
  Outcome local = Gpuledger(query + " --db " + db_);
  ASSERT_EQ(local.exit_code, 0) << local.output;

  std::string log;
  Outcome remote = AskAServer("serve --db-file " + File("url", url + "\n"), query, &log);
  EXPECT_EQ(remote.exit_code, 0) << remote.output << log;
  EXPECT_EQ(remote.output, local.output) << "PostgreSQL's figures differ from SQLite's";
  EXPECT_THAT(log, HasSubstr("serving on"));
  EXPECT_THAT(log, Not(HasSubstr("s3cret-pw")));
}

TEST_F(CliTest, ServeRefusesADbFileItCannotUseAndNeverPrintsItsPassword) {
  Outcome missing = Gpuledger("serve --db-file " + Path("no-such-file"));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("--db-file: cannot read " + Path("no-such-file")));

  auto empty = File("empty", "\n");
  Outcome blank = Gpuledger("serve --db-file " + empty);
  EXPECT_EQ(blank.exit_code, 1);
  EXPECT_THAT(blank.output, HasSubstr("--db-file: " + empty + " is empty"));

  Outcome both = Gpuledger("serve --db " + db_ + " --db-file " + empty);
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.output, HasSubstr("--db excludes --db-file"));

  // Nothing listens on port 1: the store cannot connect, and says so with the password masked.
  auto pg = File("pg-url", "postgresql://gpuledger:s3cret-pw@127.0.0.1:1/ledger?connect_timeout=5\n");
  Outcome unreachable = Gpuledger("serve --db-file " + pg);
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_THAT(unreachable.output, HasSubstr("cannot connect to postgresql://gpuledger:***@127.0.0.1:1/ledger"));
  EXPECT_THAT(unreachable.output, Not(HasSubstr("s3cret-pw")));
}

// serve's Kubernetes actuator finds a job's pods by the agent's pod rules, from the same
// [agent.kubernetes]: a rule it cannot read stops serve at start, naming its line.
TEST_F(CliTest, ServeRefusesPodRulesItCannotReadNamingTheirLine) {
  auto config = File("server.toml", "db = \"" + db_ + "\"\n\n[agent.kubernetes]\napi_server = \"http://127.0.0.1:1\"\n"
                                    "job = [\"label:gpuledger.io/job\", \"labl:notebook-name\"]\n");
  Outcome bad = Gpuledger("serve --config " + config + " --listen 127.0.0.1:0");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr(config + ":5: agent.kubernetes.job: source \"labl:notebook-name\""));
  EXPECT_THAT(bad.output, Not(HasSubstr("serving on")));

  auto kind = File("kind.toml", "db = \"" + db_ + "\"\n\n[agent.kubernetes]\napi_server = \"http://127.0.0.1:1\"\n\n"
                                "[[agent.kubernetes.kind]]\nkind = \"notebook\"\nwhen = \"owner\"\n");
  Outcome bad_kind = Gpuledger("serve --config " + kind + " --listen 127.0.0.1:0");
  EXPECT_EQ(bad_kind.exit_code, 1) << bad_kind.output;
  EXPECT_THAT(bad_kind.output, HasSubstr(kind + ":8: agent.kubernetes.kind.when: source \"owner\""));
}

TEST_F(CliTest, ABadBatchNamesFileLineAndFieldAndChangesNothing) {
  std::string good = Batches();
  std::string bad = good;
  auto pos = bad.find("\"sm_active\":0.25");
  bad.replace(pos, 16, "\"sm_active\":2.5");
  auto file = File("bad.ndjson", bad);
  Outcome r = Gpuledger("import --db " + db_ + " " + file);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("bad.ndjson:1: batch node-1-h0: samples[0].sm_active: must be within 0..1"));
  EXPECT_THAT(r.output, HasSubstr("imported 0 batches"));
  // --keep-going applies the good second line only; the first stays out.
  Outcome k = Gpuledger("import --keep-going --db " + db_ + " " + file);
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_THAT(k.output, HasSubstr("1 rejected"));
}

// The demo replaces its store on every run: never one it did not make.
TEST_F(CliTest, DemoRefusesAStoreItDidNotMake) {
  Outcome imported = Gpuledger("import --db " + db_ + " " + File("b.ndjson", Batches()));
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_THAT(imported.output, HasSubstr("imported 2 batches"));
  auto size = fs::file_size(db_);
  Outcome demo = Gpuledger("demo --once --days 1 --interval 300s --db " + db_);
  EXPECT_NE(demo.exit_code, 0);
  EXPECT_THAT(demo.output, HasSubstr("a store that gpuledger demo did not make"));
  EXPECT_EQ(fs::file_size(db_), size);
  Outcome still = Gpuledger("usage --db " + db_ + " --from 2026-11-23T00:00:00Z --to 2026-11-23T02:00:00Z --format json");
  EXPECT_THAT(still.output, HasSubstr("\"nlp\""));
}

// The demo runs its objectives and dry-run rules over its last hour: `gpuledger actions`
// shows what they decided, nothing of it enforced, as a table, JSON and CSV.
TEST_F(CliTest, TheDemosDryRunDecisionsAreInTheAuditLog) {
  std::string demo_db = Path("demo.db"), config = Path("demo.toml");
  Outcome demo = Gpuledger("demo --once --days 1 --interval 300s --db " + demo_db);
  ASSERT_EQ(demo.exit_code, 0) << demo.output;
  EXPECT_THAT(demo.output, HasSubstr("gpuledger actions --config " + config));
  Outcome json = Gpuledger("actions --config " + config + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  auto j = nlohmann::json::parse(json.output);
  ASSERT_FALSE(j["actions"].empty()) << json.output;
  for (const auto& a : j["actions"]) {
    EXPECT_EQ(a["mode"], "dry-run") << a.dump();
    EXPECT_NE(a["outcome"], "taken") << a.dump();
    EXPECT_EQ(a["result"], "") << a.dump();
  }
  EXPECT_EQ(j["totals"]["taken"], 0);
  EXPECT_EQ(j["totals"]["freed_per_hour"], "0.000000");
  Outcome csv = Gpuledger("actions --config " + config + " --format csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.output;
  EXPECT_EQ(std::count(csv.output.begin(), csv.output.end(), '\n'), static_cast<long>(j["actions"].size()) + 1);
  Outcome table = Gpuledger("actions --config " + config);
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("freed/h (USD)"));
  EXPECT_THAT(table.output, HasSubstr("taken 0, proposed (dry-run) "));
  // The table is for people: money to the cent, as the JSON's exact figure rounds.
  auto proposed = Money::Parse(j["totals"]["proposed_per_hour"].get<std::string>());
  ASSERT_TRUE(proposed.ok()) << proposed.status().ToString();
  EXPECT_THAT(table.output, HasSubstr(proposed->ToDisplay() + " per hour proposed"));
  EXPECT_THAT(table.output, Not(HasSubstr("0.000000")));
  EXPECT_THAT(Gpuledger("actions --config " + config + " --outcome done").output, HasSubstr("--outcome"));
}

// `demo --once --server` is the same fleet as `demo --once`, sent to a running server as
// its agents would (several batches in flight): the server's store then says what the
// demo's own store says, to the micro-unit.
// The benchmarks' PostgreSQL fleet: `demo --once --db postgresql://...` writes the same
// ledger as the demo's SQLite file, to the micro-unit, with its config where
// --write-config says (naming the database); it fills an empty database only, and never
// prints the URL's password.
TEST_F(CliTest, TheDemoWrittenIntoPostgresqlEqualsTheDemosSqliteStore) {
  auto pg = store::pgtest::PgTestServer::Shared();
  if (!pg.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << pg.status().ToString();
  auto database = (*pg)->CreateDatabase("cli_demo");
  ASSERT_TRUE(database.ok()) << database.status().ToString();
  std::string url = (*pg)->Url(*database);
  url.insert(url.find('@'), ":s3cret-pw");  // the test server trusts its socket: any password opens it
  const std::string span = " --days 1 --interval 300s --start 2026-11-23T00:00:00Z";
  Outcome local = Gpuledger("demo --once" + span + " --db " + Path("demo.db"));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  const std::string config = Path("pg-demo.toml");
  Outcome live = Gpuledger("demo --db '" + url + "' --write-config " + config);
  EXPECT_EQ(live.exit_code, 1);
  EXPECT_THAT(live.output, HasSubstr("with --once only"));
  Outcome written = Gpuledger("demo --once" + span + " --db '" + url + "' --write-config " + config);
  ASSERT_EQ(written.exit_code, 0) << written.output;
  EXPECT_THAT(written.output, HasSubstr("The store is postgresql://gpuledger:***@"));
  EXPECT_THAT(written.output, Not(HasSubstr("s3cret-pw")));
  // The fleet summary the demo prints is computed from the store it wrote.
  auto summary = [](const std::string& out) {
    size_t from = out.find("\nFleet ");
    return from == std::string::npos ? out : out.substr(from, out.find("The store is") - from);
  };
  EXPECT_EQ(summary(written.output), summary(local.output));
  for (const char* by : {"team,pool", "job"}) {
    const std::string query = std::string(" --from 2026-11-23T00:00:00Z --to 2026-11-24T00:00:00Z --format csv --by ") + by;
    Outcome mine = Gpuledger("usage --config " + Path("demo.toml") + query);
    Outcome theirs = Gpuledger("usage --config " + config + query);  // the config names the database
    ASSERT_EQ(mine.exit_code, 0) << mine.output;
    ASSERT_EQ(theirs.exit_code, 0) << theirs.output;
    EXPECT_EQ(theirs.output, mine.output) << by;
  }
  Outcome again = Gpuledger("demo --once" + span + " --db '" + url + "' --write-config " + config);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.output, HasSubstr("the database already holds 376 devices; the demo fills an empty database only"));
  auto theirs = File("theirs.toml", "[prices]\n");
  Outcome overwrite = Gpuledger("demo --once" + span + " --db '" + url + "' --write-config " + theirs);
  EXPECT_EQ(overwrite.exit_code, 1);
  EXPECT_THAT(overwrite.output, HasSubstr("a file that gpuledger demo did not write"));
  EXPECT_EQ(testing::ReadAll(theirs), "[prices]\n");
}

// From one server to replicas: `store copy` puts the demo's SQLite store into an empty
// PostgreSQL database, and every answer from it is the SQLite store's, to the byte (the
// weekly report's page included); a database that holds a store is refused; the URL's
// password, read from a file, is never printed.
TEST_F(CliTest, TheDemosStoreCopiedIntoPostgresqlAnswersAsItDid) {
  auto pg = store::pgtest::PgTestServer::Shared();
  if (!pg.ok()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << pg.status().ToString();
  auto database = (*pg)->CreateDatabase("cli_copy");
  ASSERT_TRUE(database.ok()) << database.status().ToString();
  std::string url = (*pg)->Url(*database);
  url.insert(url.find('@'), ":s3cret-pw");  // the test server trusts its socket: any password opens it
  const std::string demo = Path("demo.db");
  Outcome made = Gpuledger("demo --once --days 2 --interval 300s --start 2026-11-23T00:00:00Z --db " + demo);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  Outcome nowhere = Gpuledger("store copy --db " + demo);
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_THAT(nowhere.output, HasSubstr("say where to, with --to or --to-file"));
  const std::string to_file = " --to-file " + File("store-url", url + "\n");
  Outcome copied = Gpuledger("store copy --db " + demo + to_file);
  ASSERT_EQ(copied.exit_code, 0) << copied.output;
  EXPECT_THAT(copied.output, HasSubstr("copied "));
  EXPECT_THAT(copied.output, HasSubstr(" rows of 19 tables in "));
  EXPECT_THAT(copied.output, HasSubstr("  sample_chunks "));
  EXPECT_THAT(copied.output, Not(HasSubstr("s3cret-pw")));
  const std::string config = " --config " + Path("demo.toml");
  for (const std::string query :
       {"usage --from 2026-11-23T00:00:00Z --to 2026-11-25T00:00:00Z --format csv --by team,pool",
        "usage --from 2026-11-23T06:30:00Z --to 2026-11-24T18:10:00Z --format csv --by job",
        "chargeback --period 2026-11 --format csv", "actions --from 2026-11-23T00:00:00Z --to 2026-11-25T00:00:00Z"}) {
    Outcome mine = Gpuledger(query + config + " --db " + demo);
    Outcome theirs = Gpuledger(query + config + " --db '" + url + "'");
    ASSERT_EQ(mine.exit_code, 0) << query << ": " << mine.output;
    ASSERT_EQ(theirs.exit_code, 0) << query << ": " << theirs.output;
    EXPECT_EQ(theirs.output, mine.output) << query;
  }
  const std::string weekly = "report weekly --week 2026-W48" + config;
  ASSERT_EQ(Gpuledger(weekly + " --db " + demo + " --out " + Path("mine.html")).exit_code, 0);
  ASSERT_EQ(Gpuledger(weekly + " --db '" + url + "' --out " + Path("theirs.html")).exit_code, 0);
  EXPECT_EQ(testing::ReadAll(Path("theirs.html")), testing::ReadAll(Path("mine.html")));
  EXPECT_THAT(testing::ReadAll(Path("mine.html")), HasSubstr("2026-W48"));
  Outcome again = Gpuledger("store copy --db " + demo + to_file);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.output, HasSubstr("store copy: nothing was copied: the database postgresql://gpuledger:***@"));
  EXPECT_THAT(again.output, HasSubstr("already holds a store"));
  EXPECT_THAT(again.output, Not(HasSubstr("s3cret-pw")));
}

TEST_F(CliTest, TheDemoSentToAServerEqualsTheDemosOwnStore) {
  const std::string span = " --days 1 --interval 300s --start 2026-11-23T00:00:00Z";
  Outcome local = Gpuledger("demo --once --gpus 400" + span + " --db " + Path("demo.db"));
  ASSERT_EQ(local.exit_code, 0) << local.output;
  Outcome token = Gpuledger("token --name bench --role admin");
  ASSERT_EQ(token.exit_code, 0) << token.output;
  std::string secret = token.output.substr(7, token.output.find('\n') - 7);
  std::string config = File("served.toml", testing::ReadAll(Path("demo.toml")) +
                                               "\n[server]\nmax_sample_age = \"30d\"\n" +
                                               token.output.substr(token.output.find("[[server.token]]")));
  int port = server::testing::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  std::string url = "http://127.0.0.1:" + std::to_string(port);
  testing::BackgroundGpuledger serve("serve --config " + config + " --db " + Path("served.db") +
                                         " --now 2026-11-24T00:00:00Z --listen 127.0.0.1:" + std::to_string(port),
                                     Path("serve.log"));
  ASSERT_TRUE(serve.started());
  Outcome up{-1, ""};
  for (int i = 0; i < 100 && up.exit_code != 0; ++i) {
    ::usleep(100'000);
    up = Gpuledger("usage --server " + url + " --token " + secret + " --window 1d");
  }
  ASSERT_EQ(up.exit_code, 0) << up.output << testing::ReadAll(Path("serve.log"));
  Outcome sent = Gpuledger("demo --once --gpus 400" + span + " --server " + url + " --token " + secret + " --senders 3");
  ASSERT_EQ(sent.exit_code, 0) << sent.output << testing::ReadAll(Path("serve.log"));
  EXPECT_THAT(sent.output, HasSubstr("(2 clusters) to 1 server"));
  // Sent again, every batch is a duplicate: nothing is counted twice.
  Outcome again = Gpuledger("demo --once --gpus 400" + span + " --server " + url + "," + url + " --token " + secret);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  serve.Stop();
  for (const char* by : {"team,pool", "job"}) {
    const std::string query =
        std::string(" --from 2026-11-23T00:00:00Z --to 2026-11-24T00:00:00Z --format csv --by ") + by;
    Outcome mine = Gpuledger("usage --config " + Path("demo.toml") + query);
    Outcome theirs = Gpuledger("usage --config " + config + " --db " + Path("served.db") + query);
    ASSERT_EQ(mine.exit_code, 0) << mine.output;
    ASSERT_EQ(theirs.exit_code, 0) << theirs.output;
    EXPECT_EQ(theirs.output, mine.output) << by;
    if (std::string(by) == "job") {
      EXPECT_THAT(mine.output, HasSubstr("\nllama-chat-70b-2,"));
      EXPECT_THAT(mine.output, HasSubstr("\nc2-llama-chat-70b-2,"));  // the second copy's name for it
    }
  }
}

TEST_F(CliTest, ServingSaysWhyItHasNothingToShow) {
  ASSERT_EQ(Gpuledger("import --db " + db_ + " " + File("b.ndjson", Batches())).exit_code, 0);
  Outcome training = Gpuledger("serving --db " + db_ + " --job j1 --window 24h");
  EXPECT_NE(training.exit_code, 0);
  EXPECT_THAT(training.output, HasSubstr("not a serving one"));
  Outcome unknown = Gpuledger("serving --db " + db_ + " --job nope --window 24h");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.output, HasSubstr("no job nope"));
}

TEST_F(CliTest, UsageRejectsBadArguments) {
  EXPECT_THAT(Gpuledger("usage --db " + db_ + " --window 7q").output, HasSubstr("unknown unit"));
  EXPECT_THAT(Gpuledger("usage --db " + db_ + " --window 7d --by colour").output,
              HasSubstr("cannot group by \"colour\""));
  EXPECT_THAT(Gpuledger("chargeback --db " + db_ + " --period 2026-13").output,
              HasSubstr("want a month"));
  EXPECT_NE(Gpuledger("frobnicate").exit_code, 0);
}

}  // namespace
}  // namespace gpuledger::cli

namespace gpuledger::cli {
namespace {

TEST_F(CliTest, RecommendsSlicesForAPodList) {
  // Four GPU pods of an hour each: 100, 460 and 900 milli-GPU, and two whole GPUs.
  auto pods = File("pods.csv",
                   "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
                   "p0,1000,1024,1,100,,LS,Running,0,3600,0\n"
                   "p1,1000,1024,1,460,,LS,Running,0,3600,0\n"
                   "p2,1000,1024,1,900,,LS,Running,0,3600,0\n"
                   "p3,1000,1024,2,1000,,LS,Running,0,3600,0\n");
  Outcome r = Gpuledger("recommend --trace " + pods + " --price 7.00");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // 100 milli -> 1g (1/7), 460 -> 4g (4/7); 900 needs the whole GPU.
  EXPECT_THAT(r.output, HasSubstr("4 GPU pods, 2 (50.0%) ask for a fraction"));
  EXPECT_THAT(r.output, HasSubstr("1g.10gb    1 pods"));
  EXPECT_THAT(r.output, HasSubstr("4g.40gb    1 pods"));
  // Whole-GPU cost: 1 + 1 + 1 + 2 GPU-hours at 7.00 = 35.00; saving 6/7 + 3/7 of 7.00 = 9.00.
  EXPECT_THAT(r.output, HasSubstr("whole-GPU cost 35.00, saving on slices 9.00"));
}

// HFU beside MFU, labelled apart: Megatron-LM's 1T run (a 102.6 s step for a batch of
// 3,072 sequences of 2,048 tokens on 3,072 A100s) with its full recomputation.
TEST_F(CliTest, MfuGivesHfuBesideItWhenRecomputationIsNamed) {
  const std::string run = "mfu --layers 128 --hidden 25600 --vocab 51200 --seq 2048 --step-time 102.6 "
                          "--batch 3072 --gpus 3072 --gpu A100";
  Outcome full = Gpuledger(run + " --recompute full");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_THAT(full.output, HasSubstr("MFU                        39.2%  (model FLOPs: recomputation never counted)"));
  EXPECT_THAT(full.output, HasSubstr("HFU                        52.3%  (hardware FLOPs: counts full recomputation; not MFU)"));
  Outcome plain = Gpuledger(run);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, Not(HasSubstr("HFU")));
  Outcome bad = Gpuledger(run + " --recompute partial");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.output, HasSubstr("recompute \"partial\": want none, selective or full"));
}

}  // namespace
}  // namespace gpuledger::cli
