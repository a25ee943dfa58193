// The endpoints the dashboard draws (/info, /series, /heatmap, /budgets, a job's series)
// and the dashboard's own files: their figures agree with /usage and /chargeback, a
// viewer sees only its teams, and the page is served without a token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "core/money.h"
#include "dashboard/dashboard.h"
#include "server/client.h"
#include "server/server.h"
#include "server/slurm_limits_cache.h"
#include "server/test_support.h"
#include "server/whatif_api.h"
#include "wire/batch.h"

namespace gpuledger::server {
namespace {

using nlohmann::json;
using testing::Harness;
using testing::MakeBatch;
using testing::TempDir;
using testing::TokenEntryFor;
using ::testing::HasSubstr;

const int64_t kNow = 1795435200000;            // 2026-11-23T12:00:00Z
const int64_t kStart = kNow - 4 * kMsPerHour;  // 08:00
const std::string kWindow = "from=2026-11-23T08:00:00Z&to=2026-11-23T12:00:00Z";


// Two teams on three H100s for the four hours before now, 2.00 per GPU-hour, with
// targets and budgets; an admin and a viewer of team alpha.
class SeriesApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.tokens = {TokenEntryFor(admin_, "admin", Role::kAdmin, {}), TokenEntryFor(viewer_, "viewer", Role::kViewer, {"alpha"})};
    o.goals.fleet_target = 0.6;
    o.goals.pool_targets = {{"training", 0.7}};
    o.goals.monthly_budgets = {{"alpha", *Money::Parse("100.00")}, {"bravo", *Money::Parse("5.00")}};
    o.quotas = {QuotaSpec{.name = "alpha", .mode = QuotaMode::kHard, .gpu_hours = 10, .source = "q.toml:1"},
                QuotaSpec{.name = "bravo", .budget = *Money::Parse("5.00"), .source = "q.toml:5"},
                QuotaSpec{.owner = QuotaSpec::Owner::kProject, .name = "p", .gpu_hours = 1, .source = "q.toml:9"}};
    // The what-if replay stands in for the simulator (the CLI injects the real one): it
    // counts its calls and answers with what it was given.
    o.what_if = std::make_shared<WhatIfService>([this](const Workload& w) -> Result<std::string> {
      ++replays_;
      return json{{"jobs", w.jobs.size()}, {"window", {{"begin", FormatTime(w.window.begin_ms)}}}}.dump();
    });
    // sacctmgr stands in for Slurm here (actuators_test:slurmdbd reads a real one): it
    // answers with slurm_text_, or fails with slurm_error_.
    o.slurm_runner = [this](const std::vector<std::string>& argv) -> Result<std::string> {
      slurm_argv_ = argv;
      if (!slurm_error_.empty()) return Unavailable(slurm_error_);
      return slurm_text_;
    };
    h_ = std::make_unique<Harness>(dir_.File("ledger.db"), clock_, o, true,
                                   ledger::LedgerOptions{.currency = *Currency::Iso4217("EUR")});
    ASSERT_EQ(h_->error, "");
    auto book = PriceBook::Create({{"*", "*", CapacityType::kOnDemand, *Money::Parse("2.00"), {0, kForever}}});
    ASSERT_TRUE(h_->ledger->SetPrices(*book).ok());
    for (const Batch& b : {MakeBatch("a-1", "anode", 2, kStart, 240, "alpha"),
                           MakeBatch("b-1", "bnode", 1, kStart, 240, "bravo")}) {
      ASSERT_TRUE(h_->ledger->Ingest(b).ok());
    }
  }

  json GetJson(const std::string& path, const std::string& token) {
    HttpRequestOptions o;
    o.token = token;
    auto r = HttpGet(h_->url(), path, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return nullptr;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }
  HttpResponse GetRaw(const std::string& path, const std::string& token) {
    HttpRequestOptions o;
    o.token = token;
    auto r = HttpGet(h_->url(), path, o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : HttpResponse{};
  }

  TempDir dir_;
  ManualClock clock_{kNow};
  std::string admin_ = NewToken(), viewer_ = NewToken();
  std::unique_ptr<Harness> h_;
  int replays_ = 0;
  std::vector<std::string> slurm_argv_;
  std::string slurm_text_, slurm_error_;
};

Money Sum(const json& costs) {
  Money m;
  for (const auto& c : costs) m += *Money::Parse(c.get<std::string>());
  return m;
}

TEST_F(SeriesApiTest, SeriesAddUpToUsageForTheSameWindowAndGrouping) {
  json s = GetJson("/api/v1/series?" + kWindow + "&by=team", admin_);
  json u = GetJson("/api/v1/usage?" + kWindow + "&by=team", admin_);
  ASSERT_EQ(s["times"].size(), 4u);
  EXPECT_EQ(s["times"][0], kStart / 1000);
  EXPECT_EQ(s["step_seconds"], 3600);
  // alpha and bravo: the window ends where the data ends (the last samples at 11:59), so
  // no unmonitored minute after them is billed to "(no job)".
  ASSERT_EQ(s["groups"].size(), 2u) << s["groups"].dump();
  EXPECT_EQ(u["window"]["to"], "2026-11-23T11:59:00Z");
  EXPECT_EQ(u["requested"]["to"], "2026-11-23T12:00:00Z");
  size_t hours = s["times"].size();
  for (const json& row : u["rows"]) {
    std::string team = row["group"]["team"];
    const json* g = nullptr;
    for (const json& x : s["groups"]) {
      if (x["key"][0] == team) g = &x;
    }
    ASSERT_NE(g, nullptr) << team;
    for (const char* b : {"active", "allocated_idle", "unallocated", "unavailable", "unmonitored"}) {
      double h = 0;
      for (const auto& v : (*g)["gpu_hours"][b]) h += v.get<double>();
      EXPECT_NEAR(h, row["buckets"][b]["gpu_hours"].get<double>(), 1e-9) << team << " " << b;
      // Money is rounded once per report: each hour's row may differ by a micro-unit.
      Money diff = Sum((*g)["cost"][b]) - *Money::Parse(row["buckets"][b]["cost"].get<std::string>());
      EXPECT_LE(std::abs(diff.micros()), static_cast<int64_t>(hours)) << team << " " << b;
    }
  }
  // The fleet's total adds up exactly.
  Money total;
  for (const auto& [bucket, costs] : s["total"]["cost"].items()) total += Sum(costs);
  EXPECT_EQ(total.ToString(), u["total"]["cost"]);
  EXPECT_EQ(total.ToString(), "23.900000");  // 3 GPUs x 3 h 59 min x 2.00
  // Each hour's effective utilization is that hour's usage.
  json first = GetJson("/api/v1/usage?from=2026-11-23T08:00:00Z&to=2026-11-23T09:00:00Z&by=team", admin_);
  EXPECT_NEAR(s["total"]["effective_utilization"][0].get<double>(),
              first["total"]["effective_utilization"].get<double>(), 1e-12);

  // Two-hour steps hold the same figures.
  json two = GetJson("/api/v1/series?" + kWindow + "&by=team&step=2h", admin_);
  ASSERT_EQ(two["times"].size(), 2u);
  Money two_total;
  for (const auto& [bucket, costs] : two["total"]["cost"].items()) two_total += Sum(costs);
  EXPECT_EQ(two_total, total);
}

TEST_F(SeriesApiTest, PoolsCarryTheirOwnTargetAndTheFleetItsOwn) {
  json s = GetJson("/api/v1/series?" + kWindow + "&by=pool", admin_);
  ASSERT_EQ(s["groups"].size(), 1u);
  EXPECT_EQ(s["groups"][0]["key"][0], "training");
  EXPECT_DOUBLE_EQ(s["groups"][0]["target"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(s["total"]["target"].get<double>(), 0.6);
  json u = GetJson("/api/v1/usage?" + kWindow + "&by=pool", admin_);
  EXPECT_DOUBLE_EQ(u["rows"][0]["target"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(u["total"]["target"].get<double>(), 0.6);
  // Without a grouping: the fleet's series alone.
  json fleet = GetJson("/api/v1/series?" + kWindow, admin_);
  EXPECT_TRUE(fleet["groups"].empty());
  EXPECT_EQ(fleet["total"]["cost"], s["total"]["cost"]);
}

TEST_F(SeriesApiTest, ABadSeriesRequestNamesTheParameter) {
  struct Case {
    std::string query, expected;
  } cases[] = {
      {"window=7d&step=90m", "step \"90m\": want a whole number of hours"},
      {"window=7d&step=soon", "step"},
      {"window=7d&by=hour", "by: a series is already by time"},
      {"window=7d&by=colour", "cannot group by \"colour\""},
      {"window=7d&from=2026-11-01T00:00:00Z", "give either window or from/to"},
  };
  for (const Case& c : cases) {
    auto r = GetRaw("/api/v1/series?" + c.query, admin_);
    EXPECT_EQ(r.status, 400) << c.query;
    EXPECT_NE(ErrorMessageOf(r).find(c.expected), std::string::npos) << c.query << ": " << r.body;
  }
  // A window from 2000 is the data's span (docs/server.md, "Limits"): the four hours.
  json century = GetJson("/api/v1/series?from=2000-01-01T00:00:00Z&step=1h", admin_);
  EXPECT_EQ(century["from"], "2026-11-23T07:00:00Z");  // the hour of the allocations' start
  EXPECT_EQ(century["times"].size(), 5u);
  EXPECT_EQ(GetJson("/api/v1/heatmap?from=2000-01-01T00:00:00Z", admin_)["times"].size(), 5u);
}

TEST_F(SeriesApiTest, AViewerSeesItsTeamsGroupsAndTheFleetTotal) {
  json mine = GetJson("/api/v1/series?" + kWindow + "&by=team,project", viewer_);
  json all = GetJson("/api/v1/series?" + kWindow + "&by=team,project", admin_);
  ASSERT_EQ(mine["groups"].size(), 1u);
  EXPECT_EQ(mine["groups"][0]["key"], json({"alpha", "alpha-project"}));
  EXPECT_EQ(mine["total"], all["total"]);
  EXPECT_EQ(mine.dump().find("bravo"), std::string::npos);
  // Grouped by something other than team, a viewer's groups count its teams' time only.
  json pool = GetJson("/api/v1/series?" + kWindow + "&by=pool", viewer_);
  double held = 0;
  for (const auto& v : pool["groups"][0]["gpu_hours"]["active"]) held += v.get<double>();
  for (const auto& v : pool["groups"][0]["gpu_hours"]["allocated_idle"]) held += v.get<double>();
  // alpha's two GPUs from 08:00 to 11:59, the last sample's end (the minute after it is
  // unmonitored, and so no job's).
  EXPECT_NEAR(held, 2 * 239 / 60.0, 1e-9);
}

TEST_F(SeriesApiTest, TheHeatmapHasEveryDeviceHourAsUsageHasIt) {
  json m = GetJson("/api/v1/heatmap?" + kWindow, admin_);
  ASSERT_EQ(m["times"].size(), 4u);
  ASSERT_EQ(m["devices"].size(), 3u);
  EXPECT_EQ(m["devices"][0]["node"], "anode");
  EXPECT_EQ(m["devices"][2]["node"], "bnode");
  EXPECT_EQ(m["devices"][0]["holders"], json({"anode-job"}));
  for (int h = 0; h < 4; ++h) {
    std::string from = FormatTime(kStart + h * kMsPerHour), to = FormatTime(kStart + (h + 1) * kMsPerHour);
    json u = GetJson("/api/v1/usage?from=" + from + "&to=" + to + "&by=device", admin_);
    for (const json& row : u["rows"]) {
      for (const json& d : m["devices"]) {
        if (d["uuid"] != row["group"]["device"]) continue;
        double expected = std::floor(100 * row["effective_utilization"].get<double>() + 0.5);
        EXPECT_EQ(d["values"][h].get<double>(), expected) << d["uuid"] << " hour " << h;
      }
    }
  }
  // Each cell's share held by jobs: every device is held by its job for the whole window
  // (its allocation began a minute before its samples), so every cell is 100% held and
  // none is mostly unallocated, unavailable or unmonitored.
  for (const json& d : m["devices"]) {
    EXPECT_EQ(d["allocated"], json({100, 100, 100, 100})) << d["uuid"];
    EXPECT_EQ(d["mostly"], json({nullptr, nullptr, nullptr, nullptr})) << d["uuid"];
  }
  // A viewer sees the devices its team held, and none of the other team's.
  json v = GetJson("/api/v1/heatmap?" + kWindow, viewer_);
  ASSERT_EQ(v["devices"].size(), 2u);
  EXPECT_FALSE(v["devices"][0].contains("mostly")) << "a viewer's cells are its jobs' time only";
  EXPECT_EQ(v.dump().find("bnode"), std::string::npos);
  EXPECT_EQ(v.dump().find("bravo"), std::string::npos);
}

// A GPU no job held: its cells are 0% held and mostly unallocated, which the dashboard
// draws apart from a held GPU idling at 0%.
TEST_F(SeriesApiTest, TheHeatmapTellsUnallocatedFromHeldIdle) {
  Batch idle = MakeBatch("c-1", "cnode", 1, kStart, 240, "nobody");
  idle.allocations.clear();
  idle.jobs.clear();
  ASSERT_TRUE(h_->ledger->Ingest(idle).ok());
  json m = GetJson("/api/v1/heatmap?" + kWindow, admin_);
  bool seen = false;
  for (const json& d : m["devices"]) {
    if (d["node"] != "cnode") {
      EXPECT_EQ(d["mostly"], json({nullptr, nullptr, nullptr, nullptr})) << d["uuid"];
      continue;
    }
    seen = true;
    EXPECT_EQ(d["allocated"], json({0, 0, 0, 0}));
    EXPECT_EQ(d["mostly"], json({"unallocated", "unallocated", "unallocated", "unallocated"}));
  }
  EXPECT_TRUE(seen) << m.dump();
}

TEST_F(SeriesApiTest, BudgetsBurnAndProjectAtTheMonthsPace) {
  // 2026-11-23T12:00Z is 22.5 of November's 30 days; the data ends a minute earlier, at
  // 11:59, and the pace is the pace up to there.
  json b = GetJson("/api/v1/budgets", admin_);
  EXPECT_EQ(b["period"], "2026-11");
  EXPECT_EQ(b["to"], "2026-11-23T11:59:00Z");
  const double elapsed = (22.5 * kMsPerDay - kMsPerMinute) / (30.0 * kMsPerDay);
  EXPECT_DOUBLE_EQ(b["elapsed"].get<double>(), elapsed);
  ASSERT_EQ(b["teams"].size(), 2u);
  json cb = GetJson("/api/v1/chargeback?period=2026-11", admin_);
  for (const json& t : b["teams"]) {
    Money direct;
    for (const json& l : cb["lines"]) {
      if (l["team"] == t["team"]) direct += *Money::Parse(l["direct_cost"].get<std::string>());
    }
    EXPECT_EQ(t["spent"], direct.ToString()) << t["team"];
  }
  EXPECT_EQ(b["teams"][0]["team"], "alpha");
  EXPECT_EQ(b["teams"][0]["spent"], "15.933333");      // 2 GPUs x 239 min x 2.00 / 60
  EXPECT_EQ(b["teams"][0]["projected"], "21.245100");  // 15.933333 / elapsed, half up
  EXPECT_DOUBLE_EQ(b["teams"][0]["burn"].get<double>(), 0.15933333);
  EXPECT_EQ(b["teams"][1]["spent"], "7.966667");       // 1 GPU (largest remainder takes the micro-unit)
  EXPECT_DOUBLE_EQ(b["teams"][1]["burn"].get<double>(), 7.966667 / 5);  // over budget
  // A viewer sees its team's budget only.
  json v = GetJson("/api/v1/budgets", viewer_);
  ASSERT_EQ(v["teams"].size(), 1u);
  EXPECT_EQ(v["teams"][0]["team"], "alpha");
  // A month not begun has spent nothing and projects nothing.
  json dec = GetJson("/api/v1/budgets?period=2026-12", admin_);
  EXPECT_EQ(dec["teams"][0]["spent"], "0.000000");
  EXPECT_TRUE(dec["teams"][0]["projected"].is_null());
  EXPECT_EQ(GetRaw("/api/v1/budgets?period=November", admin_).status, 400);
}

TEST_F(SeriesApiTest, QuotasRunToTheLastWholeHourOfDataAndAViewerSeesItsTeamsOnly) {
  // The data ends at 11:59: the figures run to 11:00, three hours of the four.
  json a = GetJson("/api/v1/quotas", admin_);
  EXPECT_EQ(a["anchor"], "2026-11-23T11:00:00Z");
  EXPECT_EQ(a["currency"], "EUR");
  ASSERT_EQ(a["quotas"].size(), 3u) << a.dump();
  const json& alpha = a["quotas"][0];
  EXPECT_EQ(alpha["name"], "alpha");
  EXPECT_EQ(alpha["period"], "2026-11");
  EXPECT_EQ(alpha["source"], "q.toml:1");
  EXPECT_DOUBLE_EQ(alpha["gpu_hours_used"].get<double>(), 6.0);  // 2 GPUs x 08:00..11:00
  EXPECT_DOUBLE_EQ(alpha["gpu_hours_burn_ratio"].get<double>(), 0.6);
  EXPECT_EQ(alpha["crossed"], json({0.5}));
  EXPECT_TRUE(alpha["budget"].is_null());
  // Three hours of data are too few for a rate: no projection, and the basis says why.
  EXPECT_TRUE(alpha["gpu_hours_projected"].is_null());
  EXPECT_TRUE(alpha["basis"]["from"].is_null());
  EXPECT_THAT(alpha["basis"]["text"].get<std::string>(), HasSubstr("no projection: 3h of data"));
  const json& bravo = a["quotas"][1];
  EXPECT_EQ(bravo["spent"], "6.000000");  // 1 GPU x 3 h x 2.00
  EXPECT_EQ(bravo["budget"], "5.000000");
  EXPECT_EQ(bravo["crossed"], json({0.5, 0.8, 1.0}));
  EXPECT_EQ(a["quotas"][2]["owner"], "project");
  // A viewer of alpha: alpha's team quota, no other team's, no project's.
  json v = GetJson("/api/v1/quotas", viewer_);
  ASSERT_EQ(v["quotas"].size(), 1u);
  EXPECT_EQ(v["quotas"][0]["name"], "alpha");
  // A second later, the same figures.
  clock_.Advance(kMsPerSecond);
  EXPECT_EQ(GetJson("/api/v1/quotas", admin_), a);
  json q4 = GetJson("/api/v1/quotas?period=2026-Q4", admin_);
  EXPECT_EQ(q4["quotas"].size(), 0u);  // every quota here is monthly
  HttpResponse bad = GetRaw("/api/v1/quotas?period=2026-Q5", admin_);
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(json::parse(bad.body)["message"].get<std::string>(), HasSubstr("period \"2026-Q5\""));
}

TEST_F(SeriesApiTest, QuotaDriftSetsTheHardQuotasBesideWhatSlurmEnforcesAndAViewerSeesItsAccounts) {
  // alpha's hard 10 GPU-hours are 600 GPU-minutes; Slurm has 900 (raised by hand), and
  // limits ops, which no quota names.
  slurm_text_ = "root||\nalpha||cpu=10,gres/gpu=900\nalpha|ann|\nops||gres/gpu=7\n";
  json a = GetJson("/api/v1/quotas/drift", admin_);
  EXPECT_EQ(slurm_argv_, (std::vector<std::string>{"sacctmgr", "-n", "-P", "show", "assoc",
                                                   "format=Account,User,GrpTRESMins"}));
  EXPECT_EQ(a["drift"], true);
  ASSERT_EQ(a["accounts"].size(), 2u) << a.dump();
  EXPECT_EQ(a["accounts"][0], json({{"account", "alpha"},
                                    {"quota_gpu_minutes", 600},
                                    {"slurm_gpu_minutes", 900},
                                    {"state", "differs"},
                                    {"source", "q.toml:1"}}));
  EXPECT_EQ(a["accounts"][1]["account"], "ops");
  EXPECT_TRUE(a["accounts"][1]["quota_gpu_minutes"].is_null());
  EXPECT_EQ(a["accounts"][1]["state"], "unmanaged");
  EXPECT_EQ(a["left_out"], json::array());
  // A viewer of alpha sees alpha's account only.
  json v = GetJson("/api/v1/quotas/drift", viewer_);
  ASSERT_EQ(v["accounts"].size(), 1u);
  EXPECT_EQ(v["accounts"][0]["account"], "alpha");
  EXPECT_EQ(v["read_at"], a["read_at"]);  // the admin's read, reused within the cache time
  EXPECT_EQ(a["read_at"], FormatTime(kNow));
  // The limit pushed: in force, no drift, once the cached read has aged out.
  slurm_text_ = "alpha||gres/gpu=600\n";
  EXPECT_EQ(GetJson("/api/v1/quotas/drift", admin_)["drift"], true);  // still the cached read
  clock_.Advance(SlurmLimitsCache::kDefaultTtlMs);
  json ok = GetJson("/api/v1/quotas/drift", admin_);
  EXPECT_EQ(ok["drift"], false);
  EXPECT_EQ(ok["accounts"][0]["state"], "in_force");
  EXPECT_EQ(ok["read_at"], FormatTime(kNow + SlurmLimitsCache::kDefaultTtlMs));
  // Slurm not answering is the server's trouble: 503, with sacctmgr's words (an admin's
  // refresh=1 reads now; a viewer may not ask for it).
  slurm_error_ = "sacctmgr: error: Problem talking to the database";
  EXPECT_EQ(GetRaw("/api/v1/quotas/drift?refresh=1", viewer_).status, 403);
  EXPECT_EQ(GetRaw("/api/v1/quotas/drift?refresh=yes", admin_).status, 400);
  HttpResponse down = GetRaw("/api/v1/quotas/drift?refresh=1", admin_);
  EXPECT_EQ(down.status, 503);
  EXPECT_THAT(json::parse(down.body)["message"].get<std::string>(),
              HasSubstr("reading Slurm's limits: sacctmgr: error: Problem talking to the database"));
}

TEST_F(SeriesApiTest, InfoTellsRoleTeamsDataSpanTargetsAndBudgets) {
  json a = GetJson("/api/v1/info", admin_);
  EXPECT_EQ(a["role"], "admin");
  EXPECT_EQ(a["teams"], json({"alpha", "bravo"}));
  EXPECT_EQ(a["data"]["from"], FormatTime(kStart - kMsPerMinute));  // the allocations' start
  EXPECT_EQ(a["data"]["to"], FormatTime(kStart + 239 * kMsPerMinute));
  EXPECT_DOUBLE_EQ(a["targets"]["pools"]["training"].get<double>(), 0.7);
  EXPECT_EQ(a["budgets"]["bravo"], "5.000000");
  // The price book's currency, for every money figure the dashboard shows.
  EXPECT_EQ(a["currency"], "EUR");
  EXPECT_EQ(a["currency_kind"], "iso4217");
  EXPECT_EQ(a["currency_label"], "EUR");
  EXPECT_EQ(GetJson("/api/v1/usage?" + kWindow, admin_)["currency"], "EUR");
  EXPECT_EQ(GetJson("/api/v1/series?" + kWindow, admin_)["currency"], "EUR");
  EXPECT_EQ(GetJson("/api/v1/chargeback?period=2026-11", admin_)["currency"], "EUR");
  EXPECT_EQ(GetJson("/api/v1/budgets", admin_)["currency"], "EUR");
  json v = GetJson("/api/v1/info", viewer_);
  EXPECT_EQ(v["role"], "viewer");
  EXPECT_EQ(v["teams"], json({"alpha"}));
  EXPECT_FALSE(v["budgets"].contains("bravo"));
  EXPECT_EQ(GetRaw("/api/v1/info", "").status, 401);
}

TEST_F(SeriesApiTest, AJobCarriesItsHourlySeriesAndIdleCauses) {
  json j = GetJson("/api/v1/jobs/anode-job", viewer_);
  ASSERT_TRUE(j.contains("series")) << j.dump();
  double active = 0;
  for (const auto& v : j["series"]["gpu_hours"]["active"]) active += v.get<double>();
  EXPECT_NEAR(active, j["gpu_hours"]["active"].get<double>(), 1e-9);
  double causes = 0;
  for (const auto& [cause, v] : j["idle_causes"].items()) causes += v["gpu_hours"].get<double>();
  EXPECT_NEAR(causes, j["gpu_hours"]["allocated_idle"].get<double>(), 1e-9);
}

// Finer than hourly: the job's own GPUs minute by minute from their samples; each whole
// hour's steps add up to the hourly series' hour.
TEST_F(SeriesApiTest, AJobCarriesItsActivityFinerThanHourly) {
  json j = GetJson("/api/v1/jobs/anode-job", viewer_);
  ASSERT_TRUE(j.contains("activity")) << j.dump();
  const json& a = j["activity"];
  // Its life from 07:59, up to the data end at 11:59 (it still runs): 240 steps of a minute.
  EXPECT_EQ(a["step_seconds"], 60);
  EXPECT_EQ(a["from"], "2026-11-23T07:59:00Z");
  EXPECT_EQ(a["to"], "2026-11-23T11:59:00Z");
  EXPECT_EQ(a["times"].size(), 240u);
  const json& hourly = j["series"];
  for (size_t h = 0; h < hourly["times"].size(); ++h) {
    double active = 0, idle = 0;
    for (size_t i = 0; i < a["times"].size(); ++i) {
      if (a["times"][i].get<int64_t>() / 3600 != hourly["times"][h].get<int64_t>() / 3600) continue;
      active += a["gpu_hours"]["active"][i].get<double>();
      idle += a["gpu_hours"]["allocated_idle"][i].get<double>();
    }
    EXPECT_NEAR(active, hourly["gpu_hours"]["active"][h].get<double>(), 1e-9) << "hour " << h;
    EXPECT_NEAR(idle, hourly["gpu_hours"]["allocated_idle"][h].get<double>(), 1e-9) << "hour " << h;
  }
  // What it read: two GPUs' samples from 07:59 to the last one at 11:59.
  EXPECT_EQ(a["device_hours_read"], 2 * 4);
}

// /api/v1/whatif: the last N days' workload handed to the replay, bounded, one answer per
// window kept until the data move on, admins only.
TEST_F(SeriesApiTest, WhatIfReplaysTheRecordedDaysOnceAndIsBounded) {
  json a = GetJson("/api/v1/whatif?days=2", admin_);
  EXPECT_EQ(a["jobs"], 2);  // the two teams' jobs started in the window
  EXPECT_EQ(replays_, 1);
  json again = GetJson("/api/v1/whatif?days=2", admin_);
  EXPECT_EQ(again, a);
  EXPECT_EQ(replays_, 1) << "the same window, the same data: the kept answer";
  GetJson("/api/v1/whatif?days=3", admin_);
  EXPECT_EQ(replays_, 2);
  for (const char* bad : {"0", "31", "2d", "-1"}) {
    HttpResponse r = GetRaw(std::string("/api/v1/whatif?days=") + bad, admin_);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_NE(r.body.find("days"), std::string::npos) << r.body;
  }
  EXPECT_EQ(GetRaw("/api/v1/whatif", viewer_).status, 403);
  EXPECT_EQ(replays_, 2);
}

TEST_F(SeriesApiTest, TheDashboardIsServedWithoutATokenAndCachedByValidator) {
  auto [host, port] = *ParseListenAddress(h_->url().substr(7));
  httplib::Client c(host, port);
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->body, dashboard::FindAsset("index.html")->body);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("script-src 'self'"), std::string::npos);
  auto js = c.Get("/assets/uPlot.iife.min.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  std::string etag = js->get_header_value("ETag");
  EXPECT_EQ(etag, dashboard::FindAsset("uPlot.iife.min.js")->etag);
  auto again = c.Get("/assets/uPlot.iife.min.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto missing = c.Get("/assets/nothing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto outside = c.Get("/assets/..%2F..%2Fetc%2Fpasswd");
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->status, 404);
  // The data behind it still needs a token.
  auto api = c.Get("/api/v1/fleet");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 401);
}

}  // namespace
}  // namespace gpuledger::server
