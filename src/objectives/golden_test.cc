// Golden SLO scenarios: each file in testdata/golden/ holds a fleet, its jobs and samples,
// objectives and rules, then queries (status, decide, backtest) with hand-computed answers.
// The format is described in testdata/golden/README.md.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/testing/golden_files.h"
#include "ledger/test_fixture.h"
#include "objectives/backtest.h"
#include "objectives/evaluate.h"
#include "objectives/interventions.h"

namespace gpuledger::objectives {
namespace {

namespace fs = std::filesystem;
using ledger::testing::kBaseMs;

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// "HH:MM" after the base day; hours may pass 24.
int64_t Clock(const std::string& text) {
  int h = 0, m = 0;
  if (std::sscanf(text.c_str(), "%d:%d", &h, &m) != 2) ADD_FAILURE() << "bad scenario time " << text;
  return kBaseMs + h * kMsPerHour + m * kMsPerMinute;
}

std::string ClockText(int64_t t) {
  int64_t minutes = (t - kBaseMs) / kMsPerMinute;
  return fmt::format("{:02}:{:02}", minutes / 60, minutes % 60);
}

// key=value words after the first `skip`.
using Keys = std::map<std::string, std::string>;
Keys KeysOf(const std::vector<std::string>& words, size_t skip) {
  Keys out;
  for (size_t i = skip; i < words.size(); ++i) {
    auto eq = words[i].find('=');
    out[words[i].substr(0, eq)] = eq == std::string::npos ? "" : words[i].substr(eq + 1);
  }
  return out;
}

std::string Or(const Keys& k, const std::string& key, const std::string& fallback = "") {
  auto it = k.find(key);
  return it == k.end() ? fallback : it->second;
}

int64_t Duration(const std::string& text) { return ParseDuration(text).value(); }

Job JobFrom(const std::string& id, const Keys& k) {
  Job j;
  j.id = id;
  j.team = Or(k, "team");
  j.user = Or(k, "user");
  j.project = Or(k, "project");
  j.pool = Or(k, "pool");
  j.kind = ParseJobKind(Or(k, "kind", "unknown")).value();
  j.priority = std::stoi(Or(k, "priority", "0"));
  j.requested_gpus = std::stoi(Or(k, "gpus", "1"));
  if (k.count("submit")) j.submit_ms = Clock(k.at("submit"));
  if (k.count("start")) j.start_ms = Clock(k.at("start"));
  if (k.count("end")) j.end_ms = Clock(k.at("end"));
  // labels=KEY=VALUE,KEY=VALUE (annotations= alike): the set the agent kept.
  for (auto [key, out] : {std::pair{"labels", &j.labels}, std::pair{"annotations", &j.annotations}}) {
    if (!k.count(key)) continue;
    out->emplace();
    std::istringstream entries(k.at(key));
    for (std::string e; std::getline(entries, e, ',');) {
      auto eq = e.find('=');
      (**out)[e.substr(0, eq)] = eq == std::string::npos ? "" : e.substr(eq + 1);
    }
  }
  return j;
}

ObjectiveSpec ObjectiveFrom(const std::string& name, const Keys& k) {
  ObjectiveSpec o;
  o.name = name;
  o.kind = ParseObjectiveKind(Or(k, "kind")).value();
  o.scope = ParseObjectiveScope(Or(k, "scope", "fleet")).value();
  o.measure = ParseUtilizationMeasure(Or(k, "measure", "effective")).value();
  o.target = ParsePercent(Or(k, "target", "100%")).value();
  o.window_ms = Duration(Or(k, "window", "7d"));
  if (k.count("start_within")) o.start_within_ms = Duration(k.at("start_within"));
  if (k.count("budget")) o.monthly_budget = Money::Parse(k.at("budget")).value();
  return o;
}

InterventionRule RuleFrom(const std::string& name, const Keys& k) {
  InterventionRule r;
  r.name = name;
  r.action = ParseInterventionAction(Or(k, "action")).value();
  r.enforce = Or(k, "mode", "dry-run") == "enforce";
  r.objective = Or(k, "objective");
  if (k.count("kind")) r.kind = ParseJobKind(k.at("kind")).value();
  r.pool = Or(k, "pool");
  r.team = Or(k, "team");
  if (k.count("idle_below")) r.idle_below = ParsePercent(k.at("idle_below")).value();
  if (k.count("idle_for")) r.idle_for_ms = Duration(k.at("idle_for"));
  if (k.count("grace")) r.grace_ms = k.at("grace") == "0" ? 0 : Duration(k.at("grace"));
  if (k.count("staleness")) r.staleness_limit_ms = Duration(k.at("staleness"));
  if (k.count("cooldown")) r.cooldown_ms = Duration(k.at("cooldown"));
  if (k.count("max_per_hour")) r.max_actions_per_hour = std::stoi(k.at("max_per_hour"));
  if (k.count("raise_to")) r.raise_to = std::stoi(k.at("raise_to"));
  std::istringstream exempt(Or(k, "exempt"));
  for (std::string e; std::getline(exempt, e, ',');) r.exempt.push_back(e);
  return r;
}

struct Query {
  std::string line;
  std::vector<std::string> expected;
  int source_line = 0;
};

struct Scenario {
  Batch batch;
  std::vector<PriceEntry> prices;
  std::vector<ObjectiveSpec> objectives;
  std::vector<InterventionRule> rules;
  std::vector<Query> queries;
};

Scenario Load(const fs::path& path) {
  Scenario sc;
  sc.batch.batch_id = path.stem().string();
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    auto w = Words(line);
    if (w.empty() || w[0][0] == '#' || w[0] == "name:" || w[0] == "description:") continue;
    if (w[0] == "----") {
      sc.queries.push_back({Joined({w.begin() + 1, w.end()}), {}, n});
      continue;
    }
    if (!sc.queries.empty()) {
      sc.queries.back().expected.push_back(Joined(w));
      continue;
    }
    Keys k = KeysOf(w, 2);
    if (w[0] == "price") {
      sc.prices.push_back({.model = "*", .pool = "*", .per_gpu_hour = Money::Parse(w[1]).value()});
    } else if (w[0] == "device") {
      Device d{.uuid = w[1], .node = Or(k, "node", "node-1"), .model = "GPU", .pool = Or(k, "pool", "default")};
      d.sample_interval_ms = Duration(Or(k, "interval", "1m"));
      sc.batch.devices.push_back(d);
    } else if (w[0] == "job") {
      sc.batch.jobs.push_back(JobFrom(w[1], k));
    } else if (w[0] == "jobs") {
      // jobs PREFIX count=N from=T every=D wait=D [job keys]: N requests, each started `wait` after it was submitted.
      int count = std::stoi(k.at("count"));
      for (int i = 0; i < count; ++i) {
        Job j = JobFrom(fmt::format("{}-{}", w[1], i), k);
        j.submit_ms = Clock(k.at("from")) + i * Duration(k.at("every"));
        j.start_ms = *j.submit_ms + Duration(k.at("wait"));
        sc.batch.jobs.push_back(j);
      }
    } else if (w[0] == "allocation") {
      Allocation a{w[1], w[2], Clock(Or(KeysOf(w, 3), "from")), std::nullopt};
      if (auto to = Or(KeysOf(w, 3), "to"); !to.empty()) a.to_ms = Clock(to);
      sc.batch.allocations.push_back(a);
    } else if (w[0] == "samples") {
      // samples DEV from=T to=T every=D [sm_active=R] [procs=N]: `to` included.
      for (int64_t t = Clock(k.at("from")); t <= Clock(k.at("to")); t += Duration(Or(k, "every", "1m"))) {
        Sample s{.device_uuid = w[1], .t_ms = t, .sm_active = std::stod(Or(k, "sm_active", "0"))};
        if (k.count("procs")) s.process_count = std::stoi(k.at("procs"));
        sc.batch.samples.push_back(s);
      }
    } else if (w[0] == "objective") {
      sc.objectives.push_back(ObjectiveFrom(w[1], k));
    } else if (w[0] == "rule") {
      sc.rules.push_back(RuleFrom(w[1], k));
    } else {
      ADD_FAILURE() << path << ":" << n << ": unknown directive " << w[0];
    }
  }
  std::stable_sort(sc.batch.samples.begin(), sc.batch.samples.end(), [](const Sample& a, const Sample& b) {
    return std::tie(a.device_uuid, a.t_ms) < std::tie(b.device_uuid, b.t_ms);
  });
  return sc;
}

std::string Pct(double ratio) { return fmt::format("{:.3f}%", ratio * 100); }
std::string Secs(const std::optional<int64_t>& ms) {
  return ms ? fmt::format("{:g}s", static_cast<double>(*ms) / 1000.0) : std::string("-");
}

std::vector<std::string> RenderStatus(const ObjectiveStatus& st) {
  std::vector<std::string> out;
  out.push_back(fmt::format("value {} | met {} | budget_left {} | at_stake {}",
                            st.tally.has_data ? Pct(st.tally.sli) : "-", st.met ? "yes" : "no", Pct(st.budget_left),
                            st.at_stake.ToString()));
  for (const AlertStatus& a : st.alerts) {
    out.push_back(fmt::format("{} long {:.3f} short {:.3f} {}{}", BurnWindowName(a.window), a.long_burn, a.short_burn,
                              a.firing ? "firing" : "quiet", a.attainable ? "" : " unattainable"));
  }
  if (st.availability) {
    const WaitSummary& s = st.availability->all;
    out.push_back(fmt::format("requests {} | gpus {:g} in_time {:g} | waiting {} | p50 {} p90 {} p99 {} max {} mean {}",
                              s.requests, s.gpus, s.gpus_in_time, s.waiting, Secs(s.p50_ms), Secs(s.p90_ms),
                              Secs(s.p99_ms), Secs(s.max_ms), Secs(s.mean_ms)));
  }
  return out;
}

std::string RenderDecision(const Decision& d) {
  std::string line = fmt::format("{} {} {} {}", ClockText(d.at_ms), d.rule, d.job.id, OutcomeName(d.outcome));
  if (d.new_priority != 0) line += fmt::format(" priority={}", d.new_priority);
  if (d.per_hour_freed.micros() != 0) line += " per_hour=" + d.per_hour_freed.ToString();
  // A warning: when the action follows, and what the job's GPUs cost meanwhile (its notice's).
  if (d.deadline_ms != 0) line += " deadline=" + ClockText(d.deadline_ms);
  if (d.outcome == Outcome::kWarned && d.per_hour_held.micros() != 0) line += " held_per_hour=" + d.per_hour_held.ToString();
  if (!d.reason.empty()) line += " | " + d.reason;
  return Joined(Words(line));
}

class Runner {
 public:
  explicit Runner(const Scenario& sc) : sc_(sc) {}

  std::vector<std::string> Run(ledger::Ledger& ledger, const std::string& query) {
    auto w = Words(query);
    Keys k = KeysOf(w, 1);
    if (w[0] == "status") {
      auto o = std::find_if(sc_.objectives.begin(), sc_.objectives.end(),
                            [&](const ObjectiveSpec& s) { return s.name == w[1]; });
      if (o == sc_.objectives.end()) return {"no objective " + w[1]};
      auto source = LedgerSource(ledger);
      auto st = Evaluate(*o, *source, Clock(k.at("at")));
      if (!st.ok()) return {"error: " + st.status().ToString()};
      return RenderStatus(*st);
    }
    if (w[0] == "decide") {
      int64_t at = Clock(k.at("at"));
      std::set<std::string> firing;
      std::istringstream names(Or(k, "firing"));
      for (std::string name; std::getline(names, name, ',');) firing.insert(name);
      auto in = GatherDecisionInputs(ledger, at, sc_.rules, firing);
      if (!in.ok()) return {"error: " + in.status().ToString()};
      std::vector<std::string> out;
      for (const Decision& d : Decide(sc_.rules, *in, history_)) out.push_back(RenderDecision(d));
      if (out.empty()) out.push_back("(none)");
      return out;
    }
    if (w[0] == "backtest") {
      auto r = Backtest(ledger, sc_.objectives, sc_.rules, {Clock(k.at("from")), Clock(k.at("to"))},
                        Duration(Or(k, "step", "1h")));
      if (!r.ok()) return {"error: " + r.status().ToString()};
      std::vector<std::string> out;
      for (const AlertEpisode& e : r->alerts) {
        out.push_back(fmt::format("alert {} {} fired {} resolved {} peak {:.3f}", e.objective, BurnWindowName(e.window),
                                  ClockText(e.fired_ms), e.resolved_ms ? ClockText(*e.resolved_ms) : "-", e.peak_burn));
      }
      for (const ObjectiveSummary& s : r->objectives) {
        out.push_back(fmt::format("objective {} steps {} met {} firing {}", s.name, s.steps, s.steps_met, s.steps_firing));
      }
      for (const Decision& d : r->decisions) out.push_back(RenderDecision(d));
      out.push_back(fmt::format("skipped {} | freed {:.3f} GPU-hours {}", r->skipped, r->gpu_hours_freed,
                                r->money_freed.ToString()));
      return out;
    }
    return {"unknown query " + w[0]};
  }

 private:
  const Scenario& sc_;
  InterventionHistory history_;  // decide queries of one file act one after the other
};

class ObjectivesGoldenTest : public ::testing::TestWithParam<fs::path> {};

TEST_P(ObjectivesGoldenTest, MatchesHandComputedAnswers) {
  Scenario sc = Load(GetParam());
  ledger::testing::TempLedger t;
  auto book = PriceBook::Create(sc.prices);
  ASSERT_TRUE(book.ok()) << book.status().ToString();
  ASSERT_TRUE(t.ledger().SetPrices(*book).ok());
  auto applied = t.ledger().Ingest(sc.batch);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  ASSERT_TRUE(t.ledger().RefreshRollups().ok());
  ASSERT_FALSE(sc.queries.empty());
  Runner runner(sc);
  for (const Query& q : sc.queries) {
    std::string want, got;
    for (const auto& l : q.expected) want += l + "\n";
    for (const auto& l : runner.Run(t.ledger(), q.line)) got += l + "\n";
    EXPECT_EQ(got, want) << GetParam().filename().string() << ":" << q.source_line << ": " << q.line;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, ObjectivesGoldenTest,
                         ::testing::ValuesIn(gpuledger::test_env::GoldenFiles("src/objectives/testdata/golden")),
                         gpuledger::test_env::GoldenTestName);

}  // namespace
}  // namespace gpuledger::objectives
