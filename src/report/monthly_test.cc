// The monthly review (report/monthly.h) on a small deterministic store: its spend is the
// month's chargeback to the micro-unit, each team's experiments add up to the team's
// chargeback lines, every section is there in order, and the what-if section shows what
// the injected replay answered for the month's recorded jobs (or says why not).
#include "report/monthly.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "ledger/actions.h"
#include "ledger/test_fixture.h"

namespace gpuledger::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kNov1 = 1'793'491'200'000;  // 2026-11-01T00:00:00Z

// Four GPUs at 2.17 per GPU-hour, sampled every 2 minutes from 2026-10-25 to 2026-11-10:
//   GPU-0 nlp/llm   experiment sweep-a, sm 0.8
//   GPU-1 nlp/rl    experiment sweep-b, sm 0.3 (from 2026-11-02)
//   GPU-2 "<b>x</b>"/web, no experiment (a hostile team name), sm 0.5
//   GPU-3 held by no job.
class MonthlyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock().Set(kNov1 + 20 * kMsPerDay);
    ASSERT_TRUE(ledger().SetPrices(*PriceBook::Create(
        {PriceEntry{"*", "*", CapacityType::kOnDemand, *Money::Parse("2.17"), {0, kForever}}})).ok());
    Batch b;
    b.batch_id = "weeks";
    for (int g = 0; g < 4; ++g) {
      b.devices.push_back(Device{.uuid = "GPU-" + std::to_string(g), .node = "n1", .model = "NVIDIA H100",
                                 .pool = "training", .sample_interval_ms = 2 * kMsPerMinute});
    }
    const int64_t start = kNov1 - 7 * kMsPerDay, end = kNov1 + 9 * kMsPerDay;
    b.jobs = {Job{.id = "j0", .team = "nlp", .project = "llm", .experiment = "sweep-a", .kind = JobKind::kTraining,
                  .requested_gpus = 1, .start_ms = start},
              Job{.id = "j1", .team = "nlp", .project = "rl", .experiment = "sweep-b", .kind = JobKind::kTraining,
                  .requested_gpus = 1, .start_ms = kNov1 + kMsPerDay, .end_ms = kNov1 + 5 * kMsPerDay},
              Job{.id = "j2", .team = "<b>x</b>", .project = "web", .kind = JobKind::kServing, .requested_gpus = 1,
                  .start_ms = start}};
    b.allocations = {{"GPU-0", "j0", start, std::nullopt},
                     {"GPU-1", "j1", kNov1 + kMsPerDay, kNov1 + 5 * kMsPerDay},
                     {"GPU-2", "j2", start, std::nullopt}};
    const double sm[4] = {0.8, 0.3, 0.5, 0.0};
    for (int64_t t = start; t <= end; t += 2 * kMsPerMinute) {
      for (int g = 0; g < 4; ++g) {
        b.samples.push_back(Sample{.device_uuid = "GPU-" + std::to_string(g), .t_ms = t, .sm_active = sm[g]});
      }
    }
    auto r = ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    november_ = *ParseMonth("2026-11");
  }
  ledger::Ledger& ledger() { return t_.ledger(); }
  ManualClock& clock() { return t_.clock(); }
  std::string Render(const MonthlyOptions& options = {}) {
    auto html = RenderMonthlyReport(ledger(), november_, options);
    EXPECT_TRUE(html.ok()) << html.status().ToString();
    return html.ok() ? *html : "";
  }

  ledger::testing::TempLedger t_;
  TimeRange november_;
};

// The first capture of `pattern` in `html`, or "" when it does not match.
std::string Capture(const std::string& html, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(html, m, std::regex(pattern)) ? m[1].str() : "";
}

TEST_F(MonthlyTest, SpendIsTheMonthsChargebackToTheMicroUnit) {
  std::string html = Render();
  auto chargeback = ledger().Chargeback(november_, false);
  ASSERT_TRUE(chargeback.ok()) << chargeback.status().ToString();
  ASSERT_GT(chargeback->total, Money());
  ASSERT_FALSE(chargeback->lines.empty());
  EXPECT_FALSE(chargeback->lines.front().capacity) << "the fleet must be monitored: teams' lines first";
  // The KPI tile and the month's row of the trend both carry the exact figure.
  EXPECT_EQ(Capture(html, R"re(class="value"><span data-spend="([0-9.]+)")re"), chargeback->total.ToString());
  EXPECT_EQ(Capture(html, R"re(<tr data-month="2026-11">.*?data-spend="([0-9.]+)")re"), chargeback->total.ToString());
  // October's row is October's chargeback, and the quarter to date is the two summed.
  auto october = ledger().Chargeback(*ParseMonth("2026-10"), false);
  ASSERT_TRUE(october.ok());
  EXPECT_EQ(Capture(html, R"re(<tr data-month="2026-10">.*?data-spend="([0-9.]+)")re"), october->total.ToString());
  EXPECT_EQ(Capture(html, R"re(<tr class="total" data-month="2026-Q4">.*?data-spend="([0-9.]+)")re"),
            (october->total + chargeback->total).ToString());
}

TEST_F(MonthlyTest, EachTeamsExperimentsSumToItsChargebackLines) {
  std::string html = Render();
  auto chargeback = ledger().Chargeback(november_, false);
  ASSERT_TRUE(chargeback.ok());
  std::map<std::string, Money> billed;
  for (const auto& l : chargeback->lines) {
    if (!l.capacity) billed[l.team] += l.total_cost();
  }
  ASSERT_EQ(billed.size(), 2u);
  for (const auto& [team, cost] : billed) {
    std::string escaped = team == "nlp" ? "nlp" : "&lt;b&gt;x&lt;/b&gt;";
    EXPECT_EQ(Capture(html, "data-experiments=\"" + escaped + "\" data-team-cost=\"([0-9.]+)\""),
              cost.ToString())
        << team;
  }
  // nlp's two experiments: sweep-a held GPU-0 all month long, sweep-b GPU-1 for 4 days,
  // so the median (rank 1 of 2) is sweep-b's and the p90 (rank 2) sweep-a's.
  EXPECT_EQ(Capture(html, R"re(data-experiments="nlp"[^>]*data-count="([0-9]+)")re"), "2");
  std::string median = Capture(html, R"re(data-experiments="nlp"[^>]*data-median="([0-9.]+)")re");
  std::string p90 = Capture(html, R"re(data-experiments="nlp"[^>]*data-p90="([0-9.]+)")re");
  EXPECT_LT(*Money::Parse(median), *Money::Parse(p90));
  EXPECT_THAT(html, HasSubstr("sweep-a · "));  // the costliest, named
  // The hostile team has no labelled experiment: all of it is its "(none)".
  EXPECT_EQ(Capture(html, R"re(data-experiments="&lt;b&gt;x&lt;/b&gt;"[^>]*data-count="([0-9]+)")re"), "0");
  EXPECT_THAT(html, Not(HasSubstr("<b>x</b>")));
}

TEST_F(MonthlyTest, EverySectionInTheReviewsOrder) {
  std::vector<QuotaSpec> quotas = {QuotaSpec{.name = "nlp", .gpu_hours = 100},
                                   QuotaSpec{.name = "nlp", .period = QuotaPeriod::kQuarter, .budget = Money::FromUnits(5000)}};
  std::string html = Render({.quotas = quotas});
  size_t at = 0;
  for (const char* heading : {"<h1>GPU monthly review — 2026-11</h1>", "<h2>Where the money is</h2>",
                              "<h2>Month over month and the quarter</h2>", "<h2>Budgets and quotas</h2>",
                              "<h2>SLO attainment</h2>", "<h3>Actions taken</h3>", "<h2>Largest sources of waste</h2>",
                              "<h2>Cost per experiment</h2>", "<h2>What if</h2>"}) {
    size_t found = html.find(heading, at);
    ASSERT_NE(found, std::string::npos) << heading << " (after offset " << at << ")";
    at = found;
  }
  // The month's monthly quota and the quarter's quarterly one, judged.
  EXPECT_THAT(html, HasSubstr("data-quota=\"team:nlp month gpu_hours\""));
  EXPECT_THAT(html, HasSubstr("<td class=\"l\">2026-Q4 (soft)</td>"));
  EXPECT_THAT(html, HasSubstr("<tr data-month=\"2026-10\">"));
  // Nothing fetched, nothing run: a self-contained page.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("src=\"http")));
  // Unallocated GPU-3 is a source of waste.
  EXPECT_THAT(html, HasSubstr("data-waste=\"1\""));
}

TEST_F(MonthlyTest, ActionsTakenShowTheMoneyPerHourTheyFreed) {
  std::vector<ledger::RecordedAction> actions = {
      {.decision_id = "d1", .at_ms = kNov1 + 2 * kMsPerDay, .rule = "idle-notebooks", .job = "j2", .team = "<b>x</b>",
       .action = "stop", .outcome = "taken", .enforce = true, .per_hour_freed = *Money::Parse("2.17")},
      {.decision_id = "d2", .at_ms = kNov1 + 3 * kMsPerDay, .rule = "idle-notebooks", .job = "j0", .team = "nlp",
       .action = "stop", .outcome = "proposed", .per_hour_freed = *Money::Parse("2.17")},
      // October's decision is not November's.
      {.decision_id = "d0", .at_ms = kNov1 - kMsPerDay, .rule = "idle-notebooks", .job = "j0", .team = "nlp",
       .action = "stop", .outcome = "taken", .enforce = true, .per_hour_freed = *Money::Parse("2.17")}};
  auto recorded = ledger::RecordActions(ledger(), actions);
  ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
  std::string html = Render();
  EXPECT_THAT(html, HasSubstr("data-actions-taken=\"1\""));
  EXPECT_EQ(Capture(html, R"re(data-freed-per-hour="([0-9.]+)")re"), "2.170000");
  EXPECT_THAT(html, HasSubstr("<tr data-action=\"d1\">"));
  EXPECT_THAT(html, Not(HasSubstr("data-action=\"d0\"")));
}

TEST_F(MonthlyTest, TheWhatIfShowsTheReplayOfTheMonthsJobsWithItsAssumptions) {
  size_t jobs_replayed = 0;
  MonthlyOptions options;
  // The simulator stands behind this seam (the report library does not link it): the
  // replay receives the month's recorded workload, and its document is rendered.
  options.what_if = [&](const Workload& w) -> Result<std::string> {
    jobs_replayed = w.jobs.size();
    return std::string(R"({"jobs": 1, "left_out": 0, "assumptions": ["replayed under fifo"],
      "answers": [{"question": "pools", "title": "Merge the pools", "findings": ["saves 12.34"],
        "assumptions": ["nodes of 8"], "scenarios": [
          {"label": "as recorded", "gpus": 4, "fleet_cost": "1234.560000", "allocated_ratio": 0.5,
           "wait_mean_seconds": 120, "wait_p95_seconds": 600, "slo_granted_ratio": 1.0, "slo_met": true},
          {"label": "merged", "gpus": 3, "fleet_cost": "925.920000", "allocated_ratio": 0.66,
           "wait_mean_seconds": 60, "wait_p95_seconds": 300, "slo_granted_ratio": 0.9, "slo_met": false}]}]})");
  };
  std::string html = Render(options);
  // Only j1 started in November (j0 and j2 started in October).
  EXPECT_EQ(jobs_replayed, 1u);
  EXPECT_THAT(html, HasSubstr("<h3 data-whatif=\"pools\">Merge the pools</h3>"));
  EXPECT_THAT(html, HasSubstr("<td>1,234.56</td><td>925.92</td>"));
  EXPECT_THAT(html, HasSubstr("<li>replayed under fifo</li>"));
  EXPECT_THAT(html, HasSubstr("<li>nodes of 8</li>"));
  EXPECT_THAT(html, HasSubstr("<li>saves 12.34</li>"));
  EXPECT_THAT(html, HasSubstr("<td>100.0% met</td><td>90.0% missed</td>"));
}

TEST_F(MonthlyTest, AWhatIfThatCannotRunIsSaidAndTheRestStands) {
  EXPECT_THAT(Render(), HasSubstr("data-note=\"whatif-not-run\""));
  MonthlyOptions options;
  options.what_if = [](const Workload&) -> Result<std::string> { return Unavailable("a replay is running"); };
  std::string html = Render(options);
  EXPECT_THAT(html, HasSubstr("The what-if could not run: a replay is running"));
  EXPECT_THAT(html, HasSubstr("<h2>Cost per experiment</h2>"));
}

}  // namespace
}  // namespace gpuledger::report
