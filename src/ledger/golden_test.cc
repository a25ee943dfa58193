// Golden scenarios: each file in testdata/golden/ holds a fleet, its samples and
// allocations, a price book, then queries with their hand-computed answers. The format
// is described in testdata/golden/README.md.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/amortization.h"
#include "core/objective.h"
#include "core/testing/golden_files.h"
#include "core/testing/missing_component.h"
#include "ledger/quotas.h"
#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

namespace fs = std::filesystem;
using testing::kBaseMs;

std::vector<std::string> Tokens(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string t; in >> t;) out.push_back(t);
  return out;
}

// "HH:MM" or "HH:MM:SS" after the base day (hours may pass 24).
int64_t At(const std::string& text) {
  int h = 0, m = 0, s = 0;
  if (std::sscanf(text.c_str(), "%d:%d:%d", &h, &m, &s) < 2) {
    ADD_FAILURE() << "bad scenario time " << text;
  }
  return kBaseMs + h * kMsPerHour + m * kMsPerMinute + s * kMsPerSecond;
}

// Splits "key=value" tokens (after the first `skip`) into a map.
std::map<std::string, std::string> Options(const std::vector<std::string>& tokens, size_t skip) {
  std::map<std::string, std::string> out;
  for (size_t i = skip; i < tokens.size(); ++i) {
    auto eq = tokens[i].find('=');
    if (eq == std::string::npos) {
      out[tokens[i]] = "";
    } else {
      out[tokens[i].substr(0, eq)] = tokens[i].substr(eq + 1);
    }
  }
  return out;
}

std::string Get(const std::map<std::string, std::string>& o, const std::string& k,
                const std::string& fallback = "") {
  auto it = o.find(k);
  return it == o.end() ? fallback : it->second;
}

Sample MakeSample(const std::string& device, int64_t t, const std::map<std::string, std::string>& o) {
  Sample s;
  s.device_uuid = device;
  s.t_ms = t;
  if (o.count("sm_active")) s.sm_active = std::stod(o.at("sm_active"));
  if (o.count("gpu_util")) s.gpu_util = std::stod(o.at("gpu_util"));
  if (o.count("health")) s.health = ParseHealth(o.at("health")).value();
  // proc=pid:job:mem_mib:sm_share, possibly several separated by ','.
  if (o.count("procs")) {
    std::istringstream in(o.at("procs"));
    for (std::string p; std::getline(in, p, ',');) {
      ProcessSample ps;
      char job[64] = {0};
      double mem = 0, sm = 0;
      long long pid = 0;
      if (std::sscanf(p.c_str(), "%lld:%63[^:]:%lf:%lf", &pid, job, &mem, &sm) != 4) {
        ADD_FAILURE() << "bad process " << p;
      }
      ps.pid = pid;
      ps.job_id = job;
      ps.fb_used_mib = mem;
      ps.sm_share = sm;
      s.processes.push_back(ps);
    }
  }
  return s;
}

std::string Seconds(int64_t ticks_ms) {
  // GPU-seconds with three decimals, rounded half up: ticks_ms / kShareScale / 1000.
  int64_t milli = (ticks_ms + kShareScale / 2) / kShareScale;
  if (milli % 1000 == 0) return std::to_string(milli / 1000);
  return fmt::format("{}.{:03}", milli / 1000, milli % 1000);
}

std::string RenderRow(const UsageRow& r) {
  std::string key;
  for (size_t i = 0; i < r.key.size(); ++i) key += (i ? "/" : "") + r.key[i];
  std::string out = key + " |";
  for (int64_t t : r.gpu_ticks_ms) out += " " + Seconds(t);
  out += " |";
  for (Money m : r.cost) out += " " + m.ToString();
  out += fmt::format(" | {}", r.activity_source());
  return out;
}

// "team:NAME" or "project:NAME", then period=, mode=, gpu_hours=, pool=, model=,
// budget=, alert_at=50%,80%.
QuotaSpec MakeQuota(const std::string& owner, const std::map<std::string, std::string>& o) {
  QuotaSpec q;
  q.owner = owner.starts_with("project:") ? QuotaSpec::Owner::kProject : QuotaSpec::Owner::kTeam;
  q.name = owner.substr(owner.find(':') + 1);
  q.period = ParseQuotaPeriod(Get(o, "period", "month")).value();
  q.mode = ParseQuotaMode(Get(o, "mode", "soft")).value();
  if (o.count("gpu_hours")) q.gpu_hours = std::stoll(o.at("gpu_hours"));
  q.pool = Get(o, "pool");
  q.model = Get(o, "model");
  if (o.count("budget")) q.budget = Money::Parse(o.at("budget")).value();
  if (o.count("alert_at")) {
    q.alert_at.clear();
    std::istringstream in(o.at("alert_at"));
    for (std::string t; std::getline(in, t, ',');) q.alert_at.push_back(ParsePercent(t).value());
  }
  return q;
}

std::string Percent(std::optional<double> ratio) {
  return ratio ? fmt::format("{:.1f}%", *ratio * 100) : "-";
}

// One quota's line of `query quota`.
std::string RenderQuota(const QuotaStatus& s, const Currency& currency) {
  std::string alerts;
  for (double t : s.crossed) alerts += fmt::format("{}{:.0f}%", alerts.empty() ? "" : ",", t * 100);
  if (s.projected_to_exceed) alerts += alerts.empty() ? "projected" : ",projected";
  return fmt::format("{} | {} to {} | used {:.3f} h {}{} | burn {} {} | projected {} {} | {} | alerts {}",
                     s.spec.Label(), s.period_label, FormatTime(s.to_date.end_ms), s.used.gpu_hours(),
                     s.used.cost.ToString(), currency.Suffix(), Percent(s.gpu_hours_burn), Percent(s.budget_burn),
                     s.projected_gpu_hours ? fmt::format("{:.3f} h", *s.projected_gpu_hours) : "-",
                     s.projected_cost ? s.projected_cost->ToString() + currency.Suffix() : "-", s.basis_text,
                     alerts.empty() ? "-" : alerts);
}

struct Scenario {
  std::string name;
  Batch batch;
  std::vector<PriceEntry> prices;
  Currency currency;
  std::vector<QuotaSpec> quotas;
  struct Query {
    std::string line;
    std::vector<std::string> expected;  // normalized lines
    int source_line = 0;
  };
  std::vector<Query> queries;
};

std::string Normalize(const std::string& line) {
  std::string out;
  for (const auto& t : Tokens(line)) out += (out.empty() ? "" : " ") + t;
  return out;
}

Scenario Load(const fs::path& path) {
  Scenario sc;
  sc.batch.batch_id = path.stem().string();
  std::ifstream in(path);
  std::string line;
  int n = 0;
  bool in_query = false;
  std::set<std::string> jobs_seen;
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("#", 0) == 0 || Normalize(line).empty()) continue;
    auto tok = Tokens(line);
    if (tok[0] == "name:") {
      sc.name = line.substr(6);
      continue;
    }
    if (tok[0] == "description:") continue;
    if (tok[0] == "----") {
      if (tok.size() > 1 && tok[1] == "query") {
        sc.queries.push_back({Normalize(line.substr(line.find("query") + 5)), {}, n});
        in_query = true;
      }
      continue;
    }
    if (in_query) {
      sc.queries.back().expected.push_back(Normalize(line));
      continue;
    }
    auto o = Options(tok, 2);
    if (tok[0] == "price") {
      PriceEntry e;
      e.model = Get(o, "model", "*");
      e.pool = Get(o, "pool", "*");
      e.valid = {o.count("from") ? At(o["from"]) : 0, o.count("to") ? At(o["to"]) : kForever};
      if (tok[1] == "amortized") {
        // Reserved capacity bought up front, spread over its term as [[price]] purchase is.
        e.capacity_type = CapacityType::kReserved;
        e.per_gpu_hour =
            AmortizedPerGpuHour(Money::Parse(o.at("purchase")).value(), std::stoll(o.at("gpus")), e.valid).value();
      } else {
        e.capacity_type = ParseCapacityType(Get(o, "type", "on-demand")).value();
        e.per_gpu_hour = Money::Parse(tok[1]).value();
      }
      sc.prices.push_back(e);
    } else if (tok[0] == "currency") {
      sc.currency = Currency::Iso4217(tok[1]).value();
    } else if (tok[0] == "quota") {
      sc.quotas.push_back(MakeQuota(tok[1], Options(tok, 2)));
    } else if (tok[0] == "device") {
      Device d;
      d.uuid = tok[1];
      d.model = Get(o, "model", "GPU");
      d.pool = Get(o, "pool", "default");
      d.node = Get(o, "node", "node-1");
      if (o.count("type")) d.capacity_type = ParseCapacityType(o["type"]).value();
      if (o.count("interval")) d.sample_interval_ms = ParseDuration(o["interval"]).value();
      if (o.count("parent")) {
        d.parent_uuid = o["parent"];
        d.share = ParseShare(o["share"]).value();
        d.mig_profile = Get(o, "profile");
      }
      sc.batch.devices.push_back(d);
    } else if (tok[0] == "job") {
      Job j;
      j.id = tok[1];
      j.team = Get(o, "team");
      j.project = Get(o, "project");
      j.experiment = Get(o, "experiment");
      j.user = Get(o, "user");
      j.kind = ParseJobKind(Get(o, "kind", "unknown")).value();
      sc.batch.jobs.push_back(j);
    } else if (tok[0] == "allocation") {
      Allocation a{tok[1], tok[2], At(Get(Options(tok, 3), "from")), std::nullopt};
      auto ao = Options(tok, 3);
      if (ao.count("to")) a.to_ms = At(ao["to"]);
      sc.batch.allocations.push_back(a);
    } else if (tok[0] == "samples") {
      int64_t every = ParseDuration(o["every"]).value();
      for (int64_t t = At(o["from"]); t <= At(o["to"]); t += every) {
        sc.batch.samples.push_back(MakeSample(tok[1], t, o));
      }
    } else if (tok[0] == "sample") {
      sc.batch.samples.push_back(MakeSample(tok[1], At(o["at"]), o));
    } else {
      ADD_FAILURE() << path << ":" << n << ": unknown directive " << tok[0];
    }
  }
  std::stable_sort(sc.batch.samples.begin(), sc.batch.samples.end(),
                   [](const Sample& a, const Sample& b) {
                     return std::tie(a.device_uuid, a.t_ms) < std::tie(b.device_uuid, b.t_ms);
                   });
  return sc;
}

std::vector<std::string> RunQuery(Ledger& ledger, const Scenario& sc, const std::string& query) {
  auto tok = Tokens(query);
  auto o = Options(tok, 1);
  TimeRange window{o.count("from") ? At(o["from"]) : 0, o.count("to") ? At(o["to"]) : 0};
  std::vector<std::string> out;
  if (tok[0] == "quota") {
    auto r = JudgeQuotas(ledger, sc.quotas, Scope::All(), /*now_ms=*/0, Get(o, "period"));
    if (!r.ok()) return {"error: " + r.status().ToString()};
    for (const QuotaStatus& s : r->quotas) out.push_back(Normalize(RenderQuota(s, r->currency)));
  } else if (tok[0] == "usage") {
    auto by = ParseDimensions(Get(o, "by", "team"));
    EXPECT_TRUE(by.ok());
    auto r = ledger.Usage(window, *by);
    if (!r.ok()) return {"error: " + r.status().ToString()};
    for (const auto& row : r->rows) out.push_back(Normalize(RenderRow(row)));
    out.push_back(Normalize(RenderRow(r->total)));
  } else if (tok[0] == "chargeback") {
    auto r = ledger.Chargeback(window, o.count("share-idle") > 0);
    if (!r.ok()) return {"error: " + r.status().ToString()};
    for (const auto& l : r->lines) {
      out.push_back(Normalize(fmt::format("{}/{} | {:.3f} | {} {} {}", l.team,
                                          l.project.empty() ? "-" : l.project, l.gpu_hours,
                                          l.direct_cost.ToString(), l.shared_idle_cost.ToString(),
                                          l.total_cost().ToString())));
    }
    out.push_back(Normalize("total | " + r->total.ToString()));
  } else {
    out.push_back("unknown query " + tok[0]);
  }
  return out;
}

// Each scenario on each backend: the same expected text, so the backends agree to the
// millisecond and the micro-unit.
class GoldenTest : public ::testing::TestWithParam<std::tuple<fs::path, testing::Backend>> {};

TEST_P(GoldenTest, MatchesHandComputedBuckets) {
  const auto& [path, backend] = GetParam();
  if (std::string why = testing::BackendMissing(backend); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  Scenario sc = Load(path);
  testing::TempLedger t(LedgerOptions{.currency = sc.currency}, backend);
  auto book = PriceBook::Create(sc.prices);
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  ASSERT_TRUE(t.ledger().SetPrices(*book).ok());
  auto applied = t.ledger().Ingest(sc.batch);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  for (const auto& q : sc.queries) {
    auto got = RunQuery(t.ledger(), sc, q.line);
    std::string want_text, got_text;
    for (const auto& l : q.expected) want_text += l + "\n";
    for (const auto& l : got) got_text += l + "\n";
    EXPECT_EQ(got_text, want_text) << path.filename().string() << ":" << q.source_line
                                   << ": query " << q.line;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, GoldenTest,
                         ::testing::Combine(::testing::ValuesIn(gpuledger::test_env::GoldenFiles("src/ledger/testdata/golden")),
                                            ::testing::Values(testing::Backend::kSqlite, testing::Backend::kPostgres)),
                         [](const ::testing::TestParamInfo<GoldenTest::ParamType>& param_info) {
                           ::testing::TestParamInfo<fs::path> file(std::get<0>(param_info.param), param_info.index);
                           return gpuledger::test_env::GoldenTestName(file) + "_" +
                                  testing::BackendName(std::get<1>(param_info.param));
                         });

}  // namespace
}  // namespace gpuledger::ledger

namespace gpuledger::ledger {
namespace {

// The timeline of a golden fleet adds up to its usage, bucket by bucket.
TEST(TimelineTest, AddsUpToUsage) {
  Scenario sc = Load(fs::path(GPULEDGER_SOURCE_DIR) / "src/ledger/testdata/golden/window_cuts.test");
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().Ingest(sc.batch).ok());
  TimeRange window{testing::kBaseMs, testing::kBaseMs + 3 * kMsPerHour};
  auto points = t.ledger().Timeline(window, 15 * kMsPerMinute);
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  ASSERT_EQ(points->size(), 12u);
  std::array<int64_t, kBucketCount> sum{};
  for (const auto& p : *points) {
    for (size_t b = 0; b < kBucketCount; ++b) sum[b] += p.gpu_ticks_ms[b];
  }
  auto usage = *t.ledger().Usage(window, {Dimension::kPool});
  EXPECT_EQ(sum, usage.total.gpu_ticks_ms);
  // 00:45-01:00 is the job's first quarter hour: 25% active.
  EXPECT_EQ((*points)[3].gpu_ticks_ms[0], 15 * kMsPerMinute / 4 * kShareScale - 30'000 / 4 * kShareScale);
  EXPECT_FALSE(t.ledger().Timeline(window, 90'000).ok());
}

}  // namespace
}  // namespace gpuledger::ledger
