#include "server/server.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <zlib.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/testing/missing_component.h"
#include "server/client.h"
#include "server/metrics.h"
#include "server/test_support.h"
#include "wire/batch.h"
#include "wire/prometheus/remote_write.h"
#include "ledger/store_access.h"

namespace gpuledger::server {
namespace {

using nlohmann::json;
using testing::Harness;
using testing::Gzip;
using testing::MakeBatch;
using testing::TempDir;

const int64_t kNow = 1795435200000;          // 2026-11-23T12:00:00Z
const int64_t kStart = kNow - 4 * kMsPerHour;  // 08:00


HttpResponse Post(const std::string& url, const std::string& path, std::string_view body,
                  const std::string& token = "", const std::string& type = "application/json",
                  std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpRequestOptions o;
  o.token = token;
  o.headers = std::move(headers);
  auto r = HttpPost(url, path, body, type, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : HttpResponse{};
}

HttpResponse Get(const std::string& url, const std::string& path, const std::string& token = "") {
  HttpRequestOptions o;
  o.token = token;
  auto r = HttpGet(url, path, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : HttpResponse{};
}

int64_t StoredBatches(ledger::Ledger& l) {
  auto s = l.Stats();
  return s.ok() ? s->batches : -1;
}

TEST(ServerTest, IngestsNativeBatchesIdempotentlyAndAnswersQueries) {
  TempDir dir;
  ManualClock clock(kNow);
  Harness h(dir.File("ledger.db"), clock);
  ASSERT_EQ(h.error, "");
  std::string body = wire::WriteBatch(MakeBatch("n1-1", "n1", 2, kStart, 60, "nlp"));
  auto r = Post(h.url(), "/api/v1/batches", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["outcome"], "applied");
  EXPECT_EQ(json::parse(r.body)["samples"], 120);
  r = Post(h.url(), "/api/v1/batches", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["outcome"], "duplicate");
  EXPECT_EQ(StoredBatches(*h.ledger), 1);

  r = Get(h.url(), "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=team");
  ASSERT_EQ(r.status, 200) << r.body;
  json u = json::parse(r.body);
  ASSERT_GE(u["rows"].size(), 1u) << r.body;
  EXPECT_EQ(u["rows"][0]["group"]["team"], "nlp");

  r = Get(h.url(), "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=team&format=csv");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("nlp,"), std::string::npos) << r.body;

  clock.Set(kStart + 30 * kMsPerMinute);
  r = Get(h.url(), "/api/v1/fleet");
  ASSERT_EQ(r.status, 200) << r.body;
  json f = json::parse(r.body);
  ASSERT_EQ(f["devices"].size(), 2u);
  EXPECT_EQ(f["devices"][0]["model"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(f["devices"][0]["holders"][0]["job"], "n1-job");
  EXPECT_EQ(f["totals"]["gpus"], 2);

  r = Get(h.url(), "/api/v1/jobs/n1-job");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = json::parse(r.body);
  EXPECT_EQ(j["job"]["team"], "nlp");
  EXPECT_EQ(j["allocations"].size(), 2u);
  EXPECT_GT(j["gpu_hours"]["active"].get<double>(), 0);

  r = Get(h.url(), "/api/v1/chargeback?period=2026-11&format=json");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["lines"][0]["team"], "nlp");

  // The FOCUS export: CSV with the FOCUS header, the team as the sub-account; a month is required.
  r = Get(h.url(), "/api/v1/focus?period=2026-11");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.rfind("BilledCost,BillingAccountId,", 0), 0u) << r.body;
  EXPECT_NE(r.body.find(",nlp,nlp,"), std::string::npos) << r.body;
  r = Get(h.url(), "/api/v1/focus");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("period"), std::string::npos) << r.body;

  r = Get(h.url(), "/api/v1/nothing-here");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no such endpoint"), std::string::npos);
}

// [ledger] raw_retention holds for a running server: its maintenance prunes the raw
// samples past it (whole hours on SQLite), and the rollups keep the hours they held.
TEST(ServerTest, TheServerPrunesRawSamplesPastTheirRetention) {
  TempDir dir;
  ManualClock clock(kNow);
  ServerOptions o;
  o.maintenance_interval_ms = 20;
  o.retention_interval_ms = 20;
  ledger::LedgerOptions lo;
  lo.raw_retention_ms = kMsPerDay;
  Harness h(dir.File("ledger.db"), clock, o, /*durable=*/false, lo);
  ASSERT_EQ(h.error, "");
  const int64_t old_start = kNow - 3 * kMsPerDay;
  ASSERT_EQ(Post(h.url(), "/api/v1/batches", wire::WriteBatch(MakeBatch("old", "n1", 1, old_start, 60, "nlp"))).status, 200);
  ASSERT_EQ(Post(h.url(), "/api/v1/batches", wire::WriteBatch(MakeBatch("new", "n1", 1, kStart, 60, "nlp"))).status, 200);
  int64_t samples = -1;
  for (int i = 0; i < 500 && samples != 60; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto stats = h.ledger->Stats();
    samples = stats.ok() ? stats->samples : -1;
  }
  EXPECT_EQ(samples, 60) << "the old batch's 60 samples pruned, the new one's kept";
  auto old_hour = h.ledger->Usage({old_start, old_start + kMsPerHour}, {ledger::Dimension::kTeam});
  ASSERT_TRUE(old_hour.ok());
  ASSERT_FALSE(old_hour->rows.empty());
  EXPECT_EQ(old_hour->rows[0].key[0], "nlp") << "its rollups stay";
}

TEST(ServerTest, AcceptsGzipBodiesWithOrWithoutContentEncoding) {
  TempDir dir;
  ManualClock clock(kNow);
  Harness h(dir.File("ledger.db"), clock);
  ASSERT_EQ(h.error, "");
  std::string gz = Gzip(wire::WriteBatch(MakeBatch("gz-1", "n1", 1, kStart, 10, "nlp")));
  auto r = Post(h.url(), "/api/v1/batches", gz, "", "application/json", {{"Content-Encoding", "gzip"}});
  ASSERT_EQ(r.status, 200) << r.body;
  gz = Gzip(wire::WriteBatch(MakeBatch("gz-2", "n2", 1, kStart, 10, "nlp")));
  r = Post(h.url(), "/api/v1/batches", gz);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(StoredBatches(*h.ledger), 2);
}

// Each role sees what it should; team A's viewer never sees team B's jobs or costs.
TEST(ServerTest, RolesSeeExactlyWhatTheyShould) {
  TempDir dir;
  ManualClock clock(kNow);
  ServerOptions o;
  std::map<std::string, std::string> tok = {{"agent", NewToken()}, {"viewer_a", NewToken()},
                                            {"viewer_b", NewToken()}, {"admin", NewToken()}};
  auto entry = [&](const std::string& name, Role role, std::vector<std::string> teams) {
    TokenEntry e;
    e.name = name;
    e.role = role;
    e.teams = std::move(teams);
    EXPECT_TRUE(ParseTokenHash(HashToken(tok[name]), e).ok());
    return e;
  };
  o.tokens = {entry("agent", Role::kAgent, {}), entry("viewer_a", Role::kViewer, {"alpha"}),
              entry("viewer_b", Role::kViewer, {"bravo"}), entry("admin", Role::kAdmin, {})};
  Harness h(dir.File("ledger.db"), clock, o);
  ASSERT_EQ(h.error, "");
  std::string a = wire::WriteBatch(MakeBatch("a-1", "alphanode", 1, kStart, 60, "alpha"));
  std::string b = wire::WriteBatch(MakeBatch("b-1", "bravonode", 1, kStart, 60, "bravo"));

  // No token, a wrong token: 401 and no data; a viewer may not write.
  EXPECT_EQ(Post(h.url(), "/api/v1/batches", a).status, 401);
  EXPECT_EQ(Post(h.url(), "/api/v1/batches", a, "glt_wrong").status, 401);
  EXPECT_EQ(Post(h.url(), "/api/v1/batches", a, tok["viewer_a"]).status, 403);
  EXPECT_EQ(StoredBatches(*h.ledger), 0);
  ASSERT_EQ(Post(h.url(), "/api/v1/batches", a, tok["agent"]).status, 200);
  ASSERT_EQ(Post(h.url(), "/api/v1/batches", b, tok["admin"]).status, 200);

  clock.Set(kStart + 30 * kMsPerMinute);
  const std::vector<std::string> reads = {
      "/api/v1/fleet",
      "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=team,job",
      "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=node,project&format=csv",
      "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=device&format=table",
      "/api/v1/chargeback?period=2026-11",
      "/api/v1/chargeback?period=2026-11&share_idle=true&format=json",
      "/api/v1/focus?period=2026-11",
      "/api/v1/experiments?period=2026-11",
      "/api/v1/experiments?period=2026-11&format=csv",
      "/api/v1/experiments?period=2026-11&format=table&team=bravo",
      "/api/v1/jobs",
      "/api/v1/jobs/bravonode-job",
      "/api/v1/jobs/alphanode-job",
      "/api/v1/jobs/bravonode-job/mfu?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z",
      "/api/v1/jobs/alphanode-job/mfu?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z",
      "/api/v1/jobs/bravonode-job/serving?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z",
      "/api/v1/jobs/alphanode-job/serving?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z",
      "/api/v1/recommendations?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z",
      "/api/v1/info",
      "/api/v1/series?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=team,project",
      "/api/v1/series?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=node",
      "/api/v1/heatmap?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z",
      "/api/v1/budgets",
      "/api/v1/quotas",
      "/metrics"};
  for (const std::string& path : reads) {
    SCOPED_TRACE(path);
    auto none = Get(h.url(), path);
    EXPECT_EQ(none.status, 401);
    EXPECT_EQ(none.body.find("alpha"), std::string::npos);
    EXPECT_EQ(Get(h.url(), path, "nope").status, 401);
    EXPECT_EQ(Get(h.url(), path, tok["agent"]).status, 403);
    auto admin = Get(h.url(), path, tok["admin"]);
    EXPECT_EQ(admin.status, 200) << admin.body;
    auto va = Get(h.url(), path, tok["viewer_a"]);
    // Team bravo's job, project and the node only its job used never reach alpha's viewer.
    EXPECT_EQ(va.body.find("bravo-project"), std::string::npos) << va.body;
    EXPECT_EQ(va.body.find("bravonode-job"), std::string::npos) << va.body;
    EXPECT_EQ(va.body.find("\"bravo\""), std::string::npos) << va.body;
    if (path.find("bravonode-job") != std::string::npos) {
      EXPECT_EQ(va.status, 404);
      if (path == "/api/v1/jobs/bravonode-job") {
        EXPECT_NE(admin.body.find("bravo-project"), std::string::npos);
      }
    } else {
      EXPECT_EQ(va.status, 200) << va.body;
    }
    if (path == "/api/v1/jobs/alphanode-job" || path == "/api/v1/jobs") {
      EXPECT_NE(va.body.find("alphanode-job"), std::string::npos) << va.body;
      EXPECT_EQ(Get(h.url(), path, tok["viewer_b"]).body.find("alphanode-job"), std::string::npos);
    }
  }
  // The viewer's usage rows are its team's, its total the fleet's.
  json u = json::parse(Get(h.url(), "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=job",
                           tok["viewer_a"]).body);
  ASSERT_EQ(u["rows"].size(), 1u);
  EXPECT_EQ(u["rows"][0]["group"]["job"], "alphanode-job");
  json all = json::parse(Get(h.url(), "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=job",
                             tok["admin"]).body);
  EXPECT_EQ(u["total"], all["total"]);
  // Experiments: a viewer's teams only, an admin's every team; a bad period names itself.
  json ex_a = json::parse(Get(h.url(), "/api/v1/experiments?period=2026-11", tok["viewer_a"]).body);
  ASSERT_EQ(ex_a["teams"].size(), 1u);
  EXPECT_EQ(ex_a["teams"][0]["team"], "alpha");
  json ex_all = json::parse(Get(h.url(), "/api/v1/experiments?period=2026-11", tok["admin"]).body);
  EXPECT_EQ(ex_all["teams"].size(), 2u);
  EXPECT_TRUE(json::parse(Get(h.url(), "/api/v1/experiments?period=2026-11&team=bravo", tok["viewer_a"]).body)["teams"]
                  .empty());
  auto bad = Get(h.url(), "/api/v1/experiments?period=2026-13", tok["admin"]);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("period"), std::string::npos) << bad.body;
  EXPECT_EQ(Get(h.url(), "/api/v1/waste", tok["viewer_a"]).status, 403);
  EXPECT_EQ(Get(h.url(), "/api/v1/waste", tok["admin"]).status, 200);
  // The weekly report names every team: admins only.
  EXPECT_EQ(Get(h.url(), "/api/v1/reports/weekly?week=2026-W48", tok["viewer_a"]).status, 403);
  auto weekly = Get(h.url(), "/api/v1/reports/weekly?week=2026-W48", tok["admin"]);
  EXPECT_EQ(weekly.status, 200);
  EXPECT_NE(weekly.body.find("week 2026-W48"), std::string::npos);
  EXPECT_EQ(Get(h.url(), "/api/v1/reports/weekly?week=2026-W48&target=7", tok["admin"]).status, 400);
  // The monthly review too: admins only, its month named, a bad month refused naming it.
  EXPECT_EQ(Get(h.url(), "/api/v1/reports/monthly?month=2026-11", tok["viewer_a"]).status, 403);
  auto monthly = Get(h.url(), "/api/v1/reports/monthly?month=2026-11", tok["admin"]);
  EXPECT_EQ(monthly.status, 200) << monthly.body;
  EXPECT_NE(monthly.body.find("— 2026-11"), std::string::npos);
  auto bad_month = Get(h.url(), "/api/v1/reports/monthly?month=November", tok["admin"]);
  EXPECT_EQ(bad_month.status, 400);
  EXPECT_NE(bad_month.body.find("month"), std::string::npos) << bad_month.body;
  // A job's MFU without progress reports: no MFU, the labelled estimate where there is one.
  json mfu = json::parse(Get(h.url(), "/api/v1/jobs/alphanode-job/mfu?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z",
                             tok["viewer_a"]).body);
  EXPECT_TRUE(mfu["mfu"].is_null());
  EXPECT_GT(mfu["gpu_hours"].get<double>(), 0.0);
  // A viewer asking for another team's recommendations learns nothing.
  EXPECT_EQ(Get(h.url(), "/api/v1/recommendations?window=30d&team=bravo", tok["viewer_a"]).status, 404);
}

TEST(ServerTest, RefusesNonLoopbackWithoutTokensUnlessInsecure) {
  TempDir dir;
  ManualClock clock(kNow);
  auto store = store::OpenSqliteStore(dir.File("l.db"));
  ASSERT_TRUE(store.ok());
  ledger::Ledger l(std::move(*store), clock);
  ServerOptions o;
  o.listen = "0.0.0.0:0";
  auto s = Server::Create(l, clock, o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--insecure"), std::string::npos);
  o.insecure = true;
  EXPECT_TRUE(Server::Create(l, clock, o).ok());
  o.listen = "127.0.0.1:99999";
  EXPECT_FALSE(Server::Create(l, clock, o).ok());
}

// Hostile input: a clear 4xx naming the problem, and the store unchanged.
TEST(ServerTest, HostileInputIsRefusedAndChangesNothing) {
  TempDir dir;
  ManualClock clock(kNow);
  ServerOptions o;
  o.limits.max_body_bytes = 1 << 20;
  o.limits.max_samples_per_batch = 1000;
  Harness h(dir.File("ledger.db"), clock, o);
  ASSERT_EQ(h.error, "");
  ASSERT_EQ(Post(h.url(), "/api/v1/batches", wire::WriteBatch(MakeBatch("ok", "n0", 1, kStart, 5, "t"))).status, 200);
  auto stats0 = h.ledger->Stats();
  ASSERT_TRUE(stats0.ok());

  struct Case {
    std::string name, path, body, type, want_in_message;
    int want_status;
    std::vector<std::pair<std::string, std::string>> headers;
  };
  Batch far_past = MakeBatch("past", "n1", 1, kNow - 400 * kMsPerDay, 2, "t");
  Batch far_future = MakeBatch("future", "n1", 1, kNow + 2 * kMsPerDay, 2, "t");
  Batch ancient_alloc = MakeBatch("ancient", "n6", 1, kStart, 2, "t");
  ancient_alloc.allocations[0].from_ms = kNow - 3000 * kMsPerDay;
  Batch half_bad = MakeBatch("halfbad", "n2", 2, kStart, 5, "t");
  half_bad.samples.back().sm_active = 3;
  std::string nan_json = wire::WriteBatch(MakeBatch("nan", "n3", 1, kStart, 2, "t"));
  nan_json.replace(nan_json.find("\"sm_active\":") + 12, 4, "NaN,");  // JSON has no NaN
  std::string quoted = wire::WriteBatch(MakeBatch("q", "n4", 1, kStart, 2, "t"));
  quoted.replace(quoted.find("\"node\":\"n4\""), 11, "\"node\":\"n\\\"4\\nx\\u0000\"");

  prometheus::WriteRequest bad_utf8;
  bad_utf8.timeseries.push_back({{{"__name__", "DCGM_FI_DEV_GPU_UTIL"}, {"UUID", "GPU-x\xff"}}, {{50, kNow}}});
  prometheus::WriteRequest nan_ratio;
  nan_ratio.timeseries.push_back({{{"__name__", "DCGM_FI_PROF_SM_ACTIVE"}, {"UUID", "GPU-n"}},
                                  {{std::numeric_limits<double>::infinity(), kNow}}});
  prometheus::WriteRequest old_ts;
  old_ts.timeseries.push_back({{{"__name__", "DCGM_FI_DEV_GPU_UTIL"}, {"UUID", "GPU-o"}}, {{50, 86400000}}});
  prometheus::WriteRequest future_ts;
  future_ts.timeseries.push_back({{{"__name__", "DCGM_FI_DEV_GPU_UTIL"}, {"UUID", "GPU-f"}},
                                   {{50, kNow + kMsPerDay}}});
  std::string big_json(2 << 20, ' ');
  std::string bomb = Gzip(std::string(8 << 20, ' '));

  std::vector<Case> cases = {
      {"malformed json", "/api/v1/batches", "{\"version\":1,", "application/json", "batch", 400, {}},
      {"unknown field", "/api/v1/batches", R"({"version":1,"batch_id":"x","smaples":[]})", "application/json",
       "smaples", 400, {}},
      {"half-bad batch", "/api/v1/batches", wire::WriteBatch(half_bad), "application/json", "sm_active", 400, {}},
      {"NaN in JSON", "/api/v1/batches", nan_json, "application/json", "malformed JSON", 400, {}},
      {"control character in a label", "/api/v1/batches", quoted, "application/json", "node", 400, {}},
      {"timestamps far in the past", "/api/v1/batches", wire::WriteBatch(far_past), "application/json",
       "older than", 400, {}},
      {"an allocation from long ago", "/api/v1/batches", wire::WriteBatch(ancient_alloc), "application/json",
       "allocations[0].from", 400, {}},
      {"timestamps far in the future", "/api/v1/batches", wire::WriteBatch(far_future), "application/json",
       "future", 400, {}},
      {"oversized body", "/api/v1/batches", big_json, "application/json", "", 413, {}},
      {"gzip bomb", "/api/v1/batches", bomb, "application/json", "inflates", 413, {}},
      {"too many samples", "/api/v1/batches", wire::WriteBatch(MakeBatch("many", "n5", 2, kStart, 501, "t")),
       "application/json", "limit", 413, {}},
      {"bad snappy", "/api/v1/write", "definitely not snappy", "application/x-protobuf", "snappy", 400, {}},
      {"invalid protobuf", "/api/v1/write", prometheus::SnappyCompress("\x0a\xff\xff\xff\xff\x0f"),
       "application/x-protobuf", "remote-write", 400, {}},
      {"non-UTF-8 label value", "/api/v1/write", prometheus::EncodeWriteRequest(bad_utf8),
       "application/x-protobuf", "UTF-8", 400, {}},
      {"Inf ratio", "/api/v1/write", prometheus::EncodeWriteRequest(nan_ratio), "application/x-protobuf",
       "SM_ACTIVE", 400, {}},
      {"remote-write far past", "/api/v1/write", prometheus::EncodeWriteRequest(old_ts),
       "application/x-protobuf", "outside the accepted window", 400, {}},
      {"remote-write far future", "/api/v1/write", prometheus::EncodeWriteRequest(future_ts),
       "application/x-protobuf", "outside the accepted window", 400, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = Post(h.url(), c.path, c.body, "", c.type, c.headers);
    EXPECT_EQ(r.status, c.want_status) << r.body;
    if (r.status != 0 && !c.want_in_message.empty()) {
      std::string msg = ErrorMessageOf(r);
      std::transform(msg.begin(), msg.end(), msg.begin(), [](unsigned char ch) { return std::tolower(ch); });
      std::string want = c.want_in_message;
      std::transform(want.begin(), want.end(), want.begin(), [](unsigned char ch) { return std::tolower(ch); });
      EXPECT_NE(msg.find(want), std::string::npos) << r.body;
    }
    auto stats = h.ledger->Stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->batches, stats0->batches);
    EXPECT_EQ(stats->samples, stats0->samples);
    EXPECT_EQ(stats->devices, stats0->devices);
  }
  // A newline in a remote-write label value is a control character, refused as the
  // native path refuses it; quotes are taken as they are.
  prometheus::WriteRequest newline;
  newline.timeseries.push_back({{{"__name__", "DCGM_FI_DEV_GPU_UTIL"}, {"Hostname", "node\nrack"}, {"UUID", "GPU-nl"}},
                                {{50, kNow - kMsPerMinute}}});
  auto nl = Post(h.url(), "/api/v1/write", prometheus::EncodeWriteRequest(newline), "", "application/x-protobuf");
  EXPECT_EQ(nl.status, 400) << nl.body;
  EXPECT_NE(nl.body.find("devices[0].node: contains a control character"), std::string::npos) << nl.body;
  prometheus::WriteRequest quotes;
  quotes.timeseries.push_back({{{"__name__", "DCGM_FI_DEV_GPU_UTIL"},
                                {"Hostname", "node \"7\" rack"},
                                {"UUID", "GPU-quoted"},
                                {"modelName", "NVIDIA \"H100\""}},
                               {{50, kNow - kMsPerMinute}}});
  auto r = Post(h.url(), "/api/v1/write", prometheus::EncodeWriteRequest(quotes), "", "application/x-protobuf");
  EXPECT_EQ(r.status, 204) << r.body;
  json f = json::parse(Get(h.url(), "/api/v1/fleet").body);
  bool found = false;
  for (const auto& d : f["devices"]) {
    if (d["uuid"] == "GPU-quoted") {
      found = true;
      EXPECT_EQ(d["node"], "node \"7\" rack");
    }
  }
  EXPECT_TRUE(found);
}

// A remote-write stream: devices with their models, MIG instances, pods as jobs, holds
// as allocations closed when the pod is gone, retries idempotent.
TEST(ServerTest, RemoteWriteMapsDevicesJobsAndAllocations) {
  TempDir dir;
  ManualClock clock(kNow);
  ServerOptions o;
  o.prometheus.pool = "k8s";
  o.prometheus.hold_timeout_ms = 2 * kMsPerMinute;
  o.prometheus.mapping.rules = {{"namespace", prometheus::LabelRule::Match::kRegex, "team-(.+)", "$1", ""}};
  Harness h(dir.File("ledger.db"), clock, o);
  ASSERT_EQ(h.error, "");
  auto request = [&](int64_t t, bool with_pod) {
    prometheus::WriteRequest w;
    prometheus::Labels base = {{"Hostname", "gpu-node-1"}, {"UUID", "GPU-aaaa"}, {"modelName", "NVIDIA H200"}};
    if (with_pod) {
      base.push_back({"namespace", "team-vision"});
      base.push_back({"pod", "trainer-0"});
    }
    auto series = [&](std::string name, double v, prometheus::Labels extra = {}) {
      prometheus::Labels l = base;
      l.push_back({"__name__", std::move(name)});
      for (auto& e : extra) l.push_back(e);
      std::sort(l.begin(), l.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
      w.timeseries.push_back({l, {{v, t}}});
    };
    series("DCGM_FI_PROF_SM_ACTIVE", 0.5);
    series("DCGM_FI_DEV_GPU_UTIL", 90);
    series("DCGM_FI_DEV_FB_USED", 1000);
    series("DCGM_FI_DEV_GPU_TEMP", 55);
    series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.3, {{"GPU_I_ID", "1"}, {"GPU_I_PROFILE", "3g.71gb"}});
    return prometheus::EncodeWriteRequest(w);
  };
  int64_t t0 = kNow - 30 * kMsPerMinute;
  for (int i = 0; i < 10; ++i) {
    std::string body = request(t0 + i * kMsPerMinute, i < 5);
    auto r = Post(h.url(), "/api/v1/write", body, "", "application/x-protobuf");
    ASSERT_EQ(r.status, 204) << r.body;
    if (i == 3) {  // a retry: acknowledged, nothing applied twice
      ASSERT_EQ(Post(h.url(), "/api/v1/write", body, "", "application/x-protobuf").status, 204);
    }
  }
  EXPECT_EQ(h.server->metrics().Value(MetricId::kIngestRequests, {"remote_write", "duplicate"}), 1);
  EXPECT_EQ(h.server->metrics().Value(MetricId::kIgnoredPoints, {"DCGM_FI_DEV_GPU_TEMP"}), 10);
  auto devices = ledger::internal_StoreOf(*h.ledger).ListDevices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 2u);
  const auto& mig = (*devices)[0].device.is_mig() ? (*devices)[0].device : (*devices)[1].device;
  EXPECT_EQ(mig.share, (Share{3, 7}));
  EXPECT_EQ(mig.mig_profile, "3g.71gb");
  EXPECT_EQ(mig.model, "NVIDIA H200");
  auto jobs = ledger::internal_StoreOf(*h.ledger).ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].job.id, "k8s/team-vision/trainer-0");
  EXPECT_EQ((*jobs)[0].job.team, "vision");
  auto allocs = ledger::internal_StoreOf(*h.ledger).AllocationsOverlapping({0, kForever});
  ASSERT_TRUE(allocs.ok());
  ASSERT_EQ(allocs->size(), 2u);  // the GPU and its MIG instance
  for (const auto& a : *allocs) {
    ASSERT_TRUE(a.to_ms.has_value()) << "closed once the pod was gone for the hold timeout";
    EXPECT_EQ(*a.to_ms, t0 + 4 * kMsPerMinute);
  }
  EXPECT_EQ(h.server->metrics().Value(MetricId::kIngestSamples, {"remote_write"}), 20);
}

TEST(ServerTest, MetricsPassPromtoolAndTheCatalogIsDocumented) {
  TempDir dir;
  ManualClock clock(kNow);
  Harness h(dir.File("ledger.db"), clock);
  ASSERT_EQ(h.error, "");
  ASSERT_EQ(Post(h.url(), "/api/v1/batches", wire::WriteBatch(MakeBatch("m1", "n1", 2, kStart, 120, "nlp"))).status,
            200);
  Post(h.url(), "/api/v1/batches", "{");
  auto r = Get(h.url(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("gpuledger_ingest_samples_total{path=\"native\"} 240"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("gpuledger_ingest_requests_total{path=\"native\",outcome=\"rejected\"} 1"),
            std::string::npos);
  EXPECT_NE(r.body.find("gpuledger_fleet_effective_utilization_ratio{pool=\"training\"}"), std::string::npos);
  EXPECT_NE(r.body.find("gpuledger_fleet_gpu_seconds_total{bucket=\"active\"}"), std::string::npos);
  EXPECT_NE(r.body.find("gpuledger_ingest_batch_duration_seconds_bucket{path=\"native\",le=\"+Inf\"} 1"),
            std::string::npos);

  std::string doc = testing::ReadFileOrEmpty(std::string(GPULEDGER_SOURCE_DIR) + "/docs/server.md");
  EXPECT_NE(doc.find(MetricCatalogMarkdown()), std::string::npos)
      << "docs/server.md must embed the catalog as MetricCatalogMarkdown() writes it:\n"
      << MetricCatalogMarkdown();

  if (access("/usr/bin/promtool", X_OK) != 0) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "promtool not installed (Debian prometheus)";
  }
  std::string file = dir.File("metrics.txt");
  FILE* out = std::fopen(file.c_str(), "w");
  ASSERT_NE(out, nullptr);
  std::fwrite(r.body.data(), 1, r.body.size(), out);
  std::fclose(out);
  std::string cmd = "/usr/bin/promtool check metrics < " + file + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  int rc = pclose(p);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "") << output;
}

// 8 writers and 4 readers at once: no error, no lost batch, no torn read.
TEST(ServerTest, ConcurrentWritersAndReaders) {
  TempDir dir;
  ManualClock clock(kNow);
  Harness h(dir.File("ledger.db"), clock);
  ASSERT_EQ(h.error, "");
  constexpr int kWriters = 8, kBatchesEach = 12, kReaders = 4;
  std::atomic<int> errors{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kBatchesEach; ++i) {
        // Each batch: 2 GPUs x 15 minutes; a node's batches follow each other in time.
        Batch b = MakeBatch(fmt::format("w{}-{}", w, i), fmt::format("node{}", w), 2, kStart + i * 15 * kMsPerMinute,
                            15, fmt::format("team{}", w % 3), i == 0);
        auto r = HttpPost(h.url(), "/api/v1/batches", wire::WriteBatch(b), "application/json");
        if (!r.ok() || r->status != 200) ++errors;
      }
    });
  }
  std::atomic<int> reads{0};
  for (int k = 0; k < kReaders; ++k) {
    threads.emplace_back([&, k] {
      int64_t last_total = -1;
      while (!done.load()) {
        std::string path = k % 2 ? "/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T11:00:00Z&by=team,node"
                                 : "/api/v1/fleet";
        auto r = HttpGet(h.url(), path);
        if (!r.ok() || r->status != 200) {
          ++errors;
          continue;
        }
        ++reads;
        if (k % 2) {
          // Whole batches only: the total GPU time grows in steps of whole batches and
          // never shrinks (the ledger checks conservation on every report).
          json u = json::parse(r->body);
          double hours = 0;
          for (const auto& row : u["rows"]) {
            if (row["group"]["team"] != "(no job)") hours += row["gpu_hours"].get<double>();
          }
          auto total = static_cast<int64_t>(std::llround(hours * 60));  // GPU-minutes
          if (total < last_total) ++errors;
          last_total = total;
        } else {
          json f = json::parse(r->body);
          for (const auto& d : f["devices"]) {
            if (d["holders"].empty()) ++errors;  // a device is never seen without its job
          }
        }
      }
    });
  }
  for (int w = 0; w < kWriters; ++w) threads[static_cast<size_t>(w)].join();
  done = true;
  for (size_t i = kWriters; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(StoredBatches(*h.ledger), kWriters * kBatchesEach);
  auto stats = h.ledger->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->samples, kWriters * kBatchesEach * 2 * 15);
}

// Group commit, as a property: writers sending at once, each batch sent one to three
// times (a retry after its answer), some batches sent by two writers racing, some bad
// (refused by validation or by the store inside a group). Every good batch is applied
// exactly once (one "applied" answer, the others "duplicate"), every bad one is refused
// with its own error every time, and the store holds exactly the good batches.
TEST(ServerTest, ConcurrentWritersBatchesLandExactlyOnce) {
  TempDir dir;
  ManualClock clock(kNow);
  Harness h(dir.File("ledger.db"), clock);
  ASSERT_EQ(h.error, "");
  constexpr int kWriters = 8, kBatchesEach = 10;
  const unsigned seed = 20261123;
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937 rng(seed);
  struct Send {
    std::string id, body;
    bool good = true;
    int times = 1;
  };
  std::vector<std::vector<Send>> plan(kWriters);
  int64_t expected_samples = 0;
  std::set<std::string> good_ids;
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kBatchesEach; ++i) {
      // The node's first batch declares its 3 GPUs; the later ones use 1 to 3 of them.
      int gpus = i == 0 ? 3 : 1 + static_cast<int>(rng() % 3), minutes = 5 + static_cast<int>(rng() % 10);
      Batch b = MakeBatch(fmt::format("w{}-{}", w, i), fmt::format("node{}", w), gpus, kStart + i * 15 * kMsPerMinute,
                          minutes, fmt::format("team{}", w % 3), i == 0);
      Send s{b.batch_id, wire::WriteBatch(b), true, 1 + static_cast<int>(rng() % 3)};
      plan[static_cast<size_t>(w)].push_back(s);
      expected_samples += static_cast<int64_t>(b.samples.size());
      good_ids.insert(b.batch_id);
      if (i > 0 && rng() % 4 == 0) {
        Batch bad = MakeBatch(fmt::format("bad-w{}-{}", w, i), fmt::format("badnode{}", w), 1, kStart, 5, "t");
        if (rng() % 2) {
          bad.samples.back().sm_active = 3;  // refused by validation, before any group
        } else {
          bad.samples.back().device_uuid = "GPU-nowhere";  // refused by the store, in its group
          bad.samples.back().t_ms += kMsPerHour;
        }
        plan[static_cast<size_t>(w)].push_back({bad.batch_id, wire::WriteBatch(bad), false, 1 + static_cast<int>(rng() % 2)});
      }
      if (i % 3 == 1) {  // writers w and w+1 race to send the same batch
        Batch shared = MakeBatch(fmt::format("shared-{}-{}", w, i), fmt::format("shared{}-{}", w, i), 1, kStart, 4, "s");
        Send sh{shared.batch_id, wire::WriteBatch(shared), true, 1};
        plan[static_cast<size_t>(w)].push_back(sh);
        plan[static_cast<size_t>((w + 1) % kWriters)].push_back(sh);
        expected_samples += static_cast<int64_t>(shared.samples.size());
        good_ids.insert(shared.batch_id);
      }
    }
  }

  std::mutex mu;
  std::map<std::string, std::vector<std::string>> answers;  // id -> outcomes ("applied", "duplicate", "400 ...")
  std::atomic<int> transport_errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (const Send& s : plan[static_cast<size_t>(w)]) {
        for (int k = 0; k < s.times; ++k) {
          auto r = HttpPost(h.url(), "/api/v1/batches", s.body, "application/json");
          if (!r.ok()) {
            ++transport_errors;
            continue;
          }
          std::string outcome = r->status == 200 ? json::parse(r->body)["outcome"].get<std::string>()
                                                 : fmt::format("{} {}", r->status, ErrorMessageOf(*r));
          std::lock_guard lock(mu);
          answers[s.id].push_back(outcome);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(transport_errors.load(), 0);
  for (const auto& [id, outs] : answers) {
    SCOPED_TRACE(id);
    if (good_ids.count(id)) {
      EXPECT_EQ(std::count(outs.begin(), outs.end(), "applied"), 1);
      EXPECT_EQ(std::count(outs.begin(), outs.end(), "duplicate"), static_cast<long>(outs.size()) - 1);
    } else {
      for (const std::string& o : outs) {
        EXPECT_TRUE(o.starts_with("400 ")) << o;
        EXPECT_NE(o.find("batch " + id), std::string::npos) << o;
      }
    }
  }
  EXPECT_GE(answers.size(), good_ids.size());
  EXPECT_EQ(StoredBatches(*h.ledger), static_cast<int64_t>(good_ids.size()));
  auto stats = h.ledger->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->samples, expected_samples);
}

// Stop() lets requests in flight finish: every batch acknowledged is stored, and every
// batch stored was acknowledged (nothing half-done, nothing lost).
TEST(ServerTest, StopFinishesRequestsInFlight) {
  TempDir dir;
  ManualClock clock(kNow);
  Harness h(dir.File("ledger.db"), clock);
  ASSERT_EQ(h.error, "");
  std::atomic<int> acked{0};
  std::vector<std::thread> senders;
  for (int w = 0; w < 4; ++w) {
    senders.emplace_back([&, w] {
      for (int i = 0; i < 200; ++i) {
        Batch b = MakeBatch(fmt::format("s{}-{}", w, i), fmt::format("stop{}", w), 1, kStart + i * 5 * kMsPerMinute,
                            5, "t", i == 0);
        auto r = HttpPost(h.url(), "/api/v1/batches", wire::WriteBatch(b), "application/json");
        if (!r.ok() || r->status != 200) return;
        ++acked;
      }
    });
  }
  while (acked.load() < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  h.server->Stop();
  for (auto& t : senders) t.join();
  EXPECT_EQ(StoredBatches(*h.ledger), acked.load());
  EXPECT_LT(acked.load(), 800) << "the stop came after the whole stream";
}

// "GET /api/v1/jobs/{}/mfu": a route with its parameters blanked, so that the
// server's patterns and the description's templates compare.
using RouteKey = std::string;

// The server's pattern with each regular-expression group as "{}":
// "/api/v1/jobs/(.+)/mfu" -> "/api/v1/jobs/{}/mfu".
std::string BlankGroups(const std::string& pattern) {
  std::string out;
  int depth = 0;
  for (char c : pattern) {
    if (c == '(') {
      if (depth++ == 0) out += "{}";
    } else if (c == ')') {
      --depth;
    } else if (depth == 0) {
      out += c;
    }
  }
  return out;
}

// docs/openapi.yaml's paths and their operations, as "METHOD /path/{}": a path is a
// two-space-indented key under `paths:`, an operation a four-space-indented HTTP method
// under it. Fails the test on a line it cannot place.
std::set<RouteKey> DocumentedRoutes(const std::string& spec) {
  static const std::set<std::string> kMethods = {"get",     "put",  "post", "delete",
                                                 "options", "head", "patch"};
  std::set<RouteKey> out;
  std::istringstream in(spec);
  std::string line, path;
  bool in_paths = false;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] != ' ') {
      in_paths = line == "paths:";
      continue;
    }
    if (!in_paths) continue;
    if (line.starts_with("  /") && line.back() == ':') {
      path = line.substr(2, line.size() - 3);
      std::string blank;
      for (size_t i = 0; i < path.size(); ++i) {
        if (path[i] != '{') {
          blank += path[i];
          continue;
        }
        size_t close = path.find('}', i);
        EXPECT_NE(close, std::string::npos) << "docs/openapi.yaml:" << n << ": unclosed {";
        blank += "{}";
        i = close == std::string::npos ? path.size() : close;
      }
      path = blank;
    } else if (line.starts_with("    ") && line[4] != ' ' && line.back() == ':') {
      std::string key = line.substr(4, line.size() - 5);
      if (!kMethods.contains(key)) continue;  // parameters:, summary: ...
      EXPECT_FALSE(path.empty()) << "docs/openapi.yaml:" << n << ": an operation outside a path";
      std::string method = key;
      std::transform(method.begin(), method.end(), method.begin(), ::toupper);
      out.insert(method + " " + path);
    }
  }
  return out;
}

// Every route the server answers is described in docs/openapi.yaml, and every route
// described there is one the server answers: the server's own list of registrations
// against the file, both ways.
TEST(ServerTest, OpenApiDescribesEveryRoute) {
  TempDir dir;
  ManualClock clock(kNow);
  Harness h(dir.File("ledger.db"), clock);
  ASSERT_EQ(h.error, "");
  std::vector<RouteSpec> routes = h.server->Routes();
  ASSERT_FALSE(routes.empty());

  std::set<RouteKey> registered;
  for (const RouteSpec& r : routes) {
    EXPECT_TRUE(registered.insert(r.method + " " + BlankGroups(r.pattern)).second)
        << r.method << " " << r.pattern << " is registered twice";
    // The list is what the server answers: a request that fits the pattern reaches a
    // handler, not the "no such endpoint" of unmatched paths.
    std::string path = BlankGroups(r.pattern);
    for (size_t at; (at = path.find("{}")) != std::string::npos;) path.replace(at, 2, "x");
    HttpResponse res = r.method == "POST" ? Post(h.url(), path, "") : Get(h.url(), path);
    EXPECT_EQ(res.body.find("no such endpoint"), std::string::npos)
        << r.method << " " << path << ": " << res.body;
  }
  std::string spec = testing::ReadFileOrEmpty(std::string(GPULEDGER_SOURCE_DIR) + "/docs/openapi.yaml");
  std::set<RouteKey> documented = DocumentedRoutes(spec);
  ASSERT_FALSE(documented.empty()) << "no paths read from docs/openapi.yaml";

  for (const RouteKey& r : registered) {
    EXPECT_TRUE(documented.contains(r)) << r << " is served but not described in docs/openapi.yaml";
  }
  for (const RouteKey& r : documented) {
    EXPECT_TRUE(registered.contains(r)) << r << " is described in docs/openapi.yaml but not served";
  }
}

// The two readings the test above relies on.
TEST(ServerTest, RouteKeysBlankParametersOnBothSides) {
  EXPECT_EQ(BlankGroups(R"(/api/v1/jobs/(.+)/mfu)"), "/api/v1/jobs/{}/mfu");
  EXPECT_EQ(BlankGroups(R"(/assets/([A-Za-z0-9._-]+))"), "/assets/{}");
  EXPECT_EQ(BlankGroups("/api/v1/usage"), "/api/v1/usage");
  EXPECT_EQ(DocumentedRoutes("info:\n  title: x\npaths:\n  /api/v1/jobs/{id}/mfu:\n    get:\n"
                             "      summary: s\n    parameters:\n  /a:\n    post:\n    get:\n"
                             "components:\n  /not/a/path:\n    get:\n"),
            (std::set<RouteKey>{"GET /api/v1/jobs/{}/mfu", "POST /a", "GET /a"}));
}

}  // namespace
}  // namespace gpuledger::server
