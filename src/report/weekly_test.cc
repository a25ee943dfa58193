#include "report/weekly.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "ledger/rightsizing.h"
#include "objectives/evaluate.h"
#include "report/html_internal.h"
#include "store/store.h"

namespace gpuledger::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kWeek48 = 1'795'392'000'000;  // Monday 2026-11-23T00:00:00Z

// Two weeks of four GPUs: two teams (one with a hostile name), sampled every 2 minutes.
class WeeklyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("gpuledger-weekly-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(path_);
    auto store = store::OpenSqliteStore(path_.string());
    ASSERT_TRUE(store.ok());
    ledger_ = std::make_unique<ledger::Ledger>(std::move(*store), clock_);
    ASSERT_TRUE(ledger_->SetPrices(*PriceBook::Create(
        {PriceEntry{"*", "*", CapacityType::kOnDemand, *Money::Parse("2.17"), {0, kForever}}})).ok());
    Batch b;
    b.batch_id = "two-weeks";
    for (int g = 0; g < 4; ++g) {
      b.devices.push_back(Device{.uuid = "GPU-" + std::to_string(g), .model = "NVIDIA H100",
                                 .pool = g < 2 ? "training" : "serving", .sample_interval_ms = 120'000});
    }
    b.jobs.push_back(Job{.id = "t1", .team = "vision", .experiment = "sweep-1", .kind = JobKind::kTraining});
    b.jobs.push_back(Job{.id = "s1", .team = "<script>alert(1)</script>", .kind = JobKind::kServing});
    int64_t start = kWeek48 - 7 * kMsPerDay;
    b.allocations.push_back({"GPU-0", "t1", start, std::nullopt});
    b.allocations.push_back({"GPU-1", "t1", start + 3 * kMsPerDay, start + 10 * kMsPerDay});
    b.allocations.push_back({"GPU-2", "s1", start, std::nullopt});
    for (int64_t t = start; t <= start + 14 * kMsPerDay; t += 120'000) {
      for (int g = 0; g < 4; ++g) {
        Sample s;
        s.device_uuid = "GPU-" + std::to_string(g);
        s.t_ms = t;
        s.sm_active = static_cast<double>((t / 120'000) % 10 + g) / 12.0;
        b.samples.push_back(s);
      }
    }
    auto r = ledger_->Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  void TearDown() override {
    ledger_.reset();
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path_.string() + s);
  }

  std::filesystem::path path_;
  ManualClock clock_{kWeek48 + 8 * kMsPerDay};
  std::unique_ptr<ledger::Ledger> ledger_;
};

TEST_F(WeeklyTest, FiguresEqualUsageAndChargeback) {
  TimeRange week = *ParseIsoWeek("2026-W48");
  auto html = RenderWeeklyReport(*ledger_, week, {.goals = {.fleet_target = 0.5}});
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  auto usage = *ledger_->Usage(week, {ledger::Dimension::kTeam});
  for (const auto& row : usage.rows) {
    std::string team = row.key[0] == "vision" ? "vision" : row.key[0] == ledger::kNoJob ? "(no job)" : "";
    if (team.empty()) continue;
    EXPECT_THAT(*html, HasSubstr(fmt::format("<tr data-team=\"{}\">", team)));
    std::regex cost("data-team=\"" + std::regex_replace(team, std::regex(R"([()])"), R"(\$&)") +
                    "\">.*?data-cost=\"([0-9.]+)\"");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(*html, m, cost)) << team;
    EXPECT_EQ(m[1].str(), row.total_cost().ToString()) << team;
  }
  EXPECT_THAT(*html, HasSubstr(fmt::format("data-team=\"(total)\"><td>fleet</td>")));
  EXPECT_THAT(*html, HasSubstr(fmt::format("data-cost=\"{}\"", usage.total.total_cost().ToString())));
  auto cb = *ledger_->Chargeback(week, false);
  EXPECT_EQ(cb.total, usage.total.total_cost());
  for (const auto& l : cb.lines) {
    EXPECT_THAT(*html, HasSubstr(fmt::format("data-cost=\"{}\"", l.total_cost().ToString())));
  }
  // Both teams are there, with work in them.
  EXPECT_GE(usage.rows.size(), 3u);
  EXPECT_GT(usage.total.gpu_hours(Bucket::kActive), 100.0);
  // Four GPUs for a week.
  EXPECT_THAT(*html, HasSubstr("672 GPU-hours of capacity"));
  EXPECT_THAT(*html, HasSubstr("week 2026-W48"));
  EXPECT_THAT(*html, HasSubstr(" w/w"));  // the previous week has data
}

// Each day's bar is that day's usage, asked for by itself: the charts are drawn from the
// figures the tables add up.
TEST_F(WeeklyTest, EachDaysBarIsThatDaysUsage) {
  TimeRange week = *ParseIsoWeek("2026-W48");
  auto html = RenderWeeklyReport(*ledger_, week, {.goals = {.fleet_target = 0.5}});
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  for (int64_t d = 0; d < 7; ++d) {
    TimeRange day{week.begin_ms + d * kMsPerDay, week.begin_ms + (d + 1) * kMsPerDay};
    auto usage = ledger_->Usage(day, {ledger::Dimension::kTeam});
    ASSERT_TRUE(usage.ok()) << usage.status().ToString();
    EXPECT_THAT(*html, HasSubstr(fmt::format("<title>{} {}</title>", FormatTime(day.begin_ms).substr(0, 10),
                                             html::Pct(usage->total.effective_utilization()))))
        << FormatTime(day.begin_ms);
  }
}

TEST_F(WeeklyTest, EachPoolHasItsOwnTarget) {
  auto html = *RenderWeeklyReport(*ledger_, *ParseIsoWeek("2026-W48"),
                                   {.goals = {.fleet_target = 0.99, .pool_targets = {{"serving", 0.01}}}});
  EXPECT_THAT(html, HasSubstr("<tr data-pool=\"serving\">"));
  EXPECT_THAT(html, HasSubstr("1.0% met"));
  EXPECT_THAT(html, HasSubstr("99.0% missed"));
  EXPECT_THAT(html, HasSubstr("Why held GPUs idled"));
}

TEST_F(WeeklyTest, SloStatusWasteCausesAndRecommendations) {
  TimeRange week = *ParseIsoWeek("2026-W48");
  // Work the advice is for in week 48: four notebooks, each worked on for an hour and then
  // left open on a GPU of its own (an idle shutdown and a MIG slice each).
  {
    Batch b;
    b.batch_id = "advice";
    for (int g = 4; g < 8; ++g) {
      std::string uuid = "GPU-" + std::to_string(g), job = "nb-" + std::to_string(g);
      b.devices.push_back(Device{.uuid = uuid, .model = "NVIDIA H100 80GB HBM3", .memory_mib = 81559,
                                 .pool = "dev", .sample_interval_ms = 120'000});
      b.jobs.push_back(Job{.id = job, .team = "nlp", .kind = JobKind::kNotebook});
      b.allocations.push_back({uuid, job, kWeek48, kWeek48 + g * kMsPerDay / 4});
      for (int64_t t = kWeek48; t <= kWeek48 + g * kMsPerDay / 4; t += 120'000) {
        Sample s;
        s.device_uuid = uuid;
        s.t_ms = t;
        s.sm_active = t < kWeek48 + kMsPerHour ? 0.2 : 0.0;
        s.fb_used_mib = 8 * 1024;
        b.samples.push_back(s);
      }
    }
    ASSERT_TRUE(ledger_->Ingest(b).ok());
  }
  WeeklyOptions o{.goals = {.fleet_target = 0.99, .pool_targets = {{"serving", 0.01}}}};
  // November has 30 days: a week's share of 3,000.00 is 700.00; of 30.00, 7.00.
  o.goals.monthly_budgets = {{"vision", *Money::Parse("3000.00")}, {"<script>alert(1)</script>", *Money::Parse("30.00")}};
  auto html = *RenderWeeklyReport(*ledger_, week, o);
  EXPECT_THAT(html, HasSubstr("<h2>SLO status</h2>"));
  EXPECT_THAT(html, HasSubstr("<tr data-slo=\"fleet\"><td>fleet effective utilization</td><td>99.0%</td>"));
  EXPECT_THAT(html, HasSubstr("<tr data-slo=\"pool/serving\"><td>pool serving effective utilization</td><td>1.0%</td>"));
  auto usage = *ledger_->Usage(week, {ledger::Dimension::kTeam});
  Money vision;
  for (const auto& row : usage.rows) {
    if (row.key[0] == "vision") vision = row.total_cost();
  }
  ASSERT_LT(vision, *Money::Parse("700.00"));
  EXPECT_THAT(html, HasSubstr(fmt::format("<tr data-slo=\"budget/vision\"><td>team vision spend within budget</td>"
                                          "<td>700.00</td><td>{}</td><td class=\"l met\">met</td>",
                                          vision.ToDisplay())));
  EXPECT_THAT(html, HasSubstr("data-slo=\"budget/&lt;script&gt;alert(1)&lt;/script&gt;\"><td>team "
                              "&lt;script&gt;alert(1)&lt;/script&gt; spend within budget</td><td>7.00</td>"));
  // Waste names its causes: held GPUs by idle cause, money first.
  auto waste = *ledger_->TopWaste(week, 5);
  ASSERT_FALSE(waste.empty());
  for (const auto& w : waste) {
    if (w.bucket != Bucket::kAllocatedIdle) continue;
    Money causes;
    for (Money m : w.idle_cause_cost) causes += m;
    EXPECT_EQ(causes, w.cost) << w.what;
  }
  EXPECT_THAT(html, HasSubstr("<th class=\"l\">causes</th>"));
  // It leads with the top five pieces of advice, as `gpuledger recommend` lists them for
  // the week: before the capacity chart, in the order of ledger::TopAdvice.
  auto recs = *ledger::Recommend(*ledger_, week);
  ASSERT_GE(recs.size(), 5u);
  ASSERT_FALSE(recs.empty());
  EXPECT_THAT(html, HasSubstr(fmt::format("of {} pieces of advice", recs.size())));
  auto top = ledger::TopAdvice(recs, 5);
  size_t lead = html.find("<h2>Where the money is</h2>");
  ASSERT_NE(lead, std::string::npos);
  EXPECT_LT(lead, html.find("<h2>Where the capacity went</h2>"));
  size_t at = lead;
  for (const auto& r : top) {
    size_t row = html.find(fmt::format("<tr data-recommendation=\"{}\">", r.job_id), at);
    ASSERT_NE(row, std::string::npos) << r.job_id;
    at = row;
  }
  EXPECT_EQ(o.recommendations, 5u);
}

// The currency is named once at the top, on the money KPIs and on every money column.
// The SLO section's objectives come from the engine `gpuledger slo status` uses: the
// same value, judged at the week's end, and missed when that engine says so.
TEST_F(WeeklyTest, ObjectivesInTheSloSectionAreJudgedByTheObjectivesEngine) {
  TimeRange week = *ParseIsoWeek("2026-W48");
  ObjectiveSpec serving{.name = "serving-utilization", .kind = ObjectiveKind::kUtilization,
                        .scope = {ObjectiveScope::Of::kPool, "serving"}, .target = 0.95, .window_ms = 7 * kMsPerDay};
  auto html = RenderWeeklyReport(*ledger_, week, {.objectives = {serving}});
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  auto source = objectives::LedgerSource(*ledger_);
  auto st = objectives::Evaluate(serving, *source, week.end_ms);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_TRUE(st->tally.has_data);
  ASSERT_FALSE(st->met);  // a third active at most: far under 95%
  std::string row = fmt::format(
      "<tr data-slo=\"objective/serving-utilization\"><td>serving-utilization (utilization pool:serving over 7d; "
      "error budget left {:.1f}%{})</td><td>95.0%</td><td>{:.1f}%</td><td class=\"l missed\">missed</td></tr>",
      st->budget_left * 100, st->firing() ? "; alert firing" : "", st->tally.sli * 100);
  EXPECT_THAT(*html, HasSubstr(row));
}

TEST_F(WeeklyTest, NamesTheCurrencyOfItsMoney) {
  const TimeRange week = *ParseIsoWeek("2026-W48");
  std::string unnamed = *RenderWeeklyReport(*ledger_, week);
  EXPECT_THAT(unnamed, HasSubstr("amounts in an unnamed unit"));
  EXPECT_THAT(unnamed, HasSubstr("<th>cost (unnamed unit)</th>"));
  EXPECT_THAT(unnamed, Not(HasSubstr("USD")));
  // The same store through a ledger whose price book is in Swiss francs.
  ledger_.reset();
  auto store = store::OpenSqliteStore(path_.string());
  ASSERT_TRUE(store.ok());
  ledger_ = std::make_unique<ledger::Ledger>(std::move(*store), clock_,
                                             ledger::LedgerOptions{.currency = *Currency::Iso4217("CHF")});
  std::string chf = *RenderWeeklyReport(*ledger_, week);
  EXPECT_THAT(chf, HasSubstr("<span data-currency=\"CHF\">amounts in CHF</span>"));
  EXPECT_THAT(chf, HasSubstr("<div class=\"label\">Spend (CHF)</div>"));
  EXPECT_THAT(chf, Not(HasSubstr("<th>cost</th>")));
  EXPECT_THAT(chf, HasSubstr("<th>cost (CHF)</th>"));
}

TEST_F(WeeklyTest, IsSelfContainedAndEscapesLabels) {
  auto html = *RenderWeeklyReport(*ledger_, *ParseIsoWeek("2026-W48"));
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, HasSubstr("&lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  EXPECT_THAT(html, HasSubstr("<svg"));
  EXPECT_THAT(html, HasSubstr("@media print"));
}

}  // namespace
}  // namespace gpuledger::report
