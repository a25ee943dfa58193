// Cost per experiment (ledger/experiments.h): nearest-rank percentiles checked by hand,
// two teams with equal totals and different distributions, and a small fleet whose
// experiments' figures are worked out below and summed again through chargeback.
#include "ledger/experiments.h"

#include <gtest/gtest.h>

#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

Money Units(int64_t u) { return Money::FromUnits(u); }

std::vector<Money> Costs(std::initializer_list<int64_t> units) {
  std::vector<Money> out;
  for (int64_t u : units) out.push_back(Units(u));
  return out;
}

TEST(NearestRankTest, RanksAreCeilOfPercentTimesCountCountingFromOne) {
  // 1..10: the median is rank ceil(5) = 5, the p90 rank ceil(9) = 9, the p100 the top.
  auto ten = Costs({7, 3, 10, 1, 5, 9, 2, 8, 4, 6});
  EXPECT_EQ(NearestRankPercentile(ten, 50), Units(5));
  EXPECT_EQ(NearestRankPercentile(ten, 90), Units(9));
  EXPECT_EQ(NearestRankPercentile(ten, 100), Units(10));
  // Four costs: the median is rank 2 (the lower middle, never an average of two); the p90
  // rank ceil(3.6) = 4.
  auto four = Costs({40, 10, 30, 20});
  EXPECT_EQ(NearestRankPercentile(four, 50), Units(20));
  EXPECT_EQ(NearestRankPercentile(four, 90), Units(40));
  // One cost is every percentile of itself.
  EXPECT_EQ(NearestRankPercentile(Costs({12}), 50), Units(12));
  EXPECT_EQ(NearestRankPercentile(Costs({12}), 90), Units(12));
  // 11 costs: p90 is rank ceil(9.9) = 10, not 9.
  auto eleven = Costs({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_EQ(NearestRankPercentile(eleven, 90), Units(10));
  EXPECT_EQ(NearestRankPercentile(eleven, 50), Units(6));
}

ExperimentCost Exp(const std::string& name, Money cost, bool labeled = true) {
  return ExperimentCost{.team = "t", .experiment = name, .labeled = labeled, .cost = cost};
}

TEST(DistributionTest, EqualTotalsTellDifferentStoriesByTheirDistribution) {
  // 1,000 experiments at 50 and 10 at 5,000: 50,000 each, one average apart by 100x.
  // (The "50 at 5,000" would be 250,000: not an equal total.)
  std::vector<ExperimentCost> many, few, skewed;
  for (int i = 0; i < 1000; ++i) many.push_back(Exp("m" + std::to_string(i), Units(50)));
  for (int i = 0; i < 10; ++i) few.push_back(Exp("f" + std::to_string(i), Units(5000)));
  CostDistribution a = DistributionOf(many), b = DistributionOf(few);
  EXPECT_EQ(a.total, Units(50'000));
  EXPECT_EQ(b.total, Units(50'000));
  EXPECT_EQ(a.count, 1000u);
  EXPECT_EQ(b.count, 10u);
  EXPECT_EQ(a.median, Units(50));
  EXPECT_EQ(a.p90, Units(50));
  EXPECT_EQ(b.median, Units(5000));
  EXPECT_EQ(b.p90, Units(5000));
  // On a tie the costliest is the first by name.
  EXPECT_EQ(a.costliest, "m0");
  EXPECT_EQ(b.costliest, "f0");
  // 899 at 10 and 101 at 400: the median (rank 500) is 10, the p90 (rank 900) 400.
  for (int i = 0; i < 899; ++i) skewed.push_back(Exp("s" + std::to_string(i), Units(10)));
  for (int i = 0; i < 101; ++i) skewed.push_back(Exp("t" + std::to_string(i), Units(400)));
  CostDistribution c = DistributionOf(skewed);
  EXPECT_EQ(c.median, Units(10));
  EXPECT_EQ(c.p90, Units(400));
  EXPECT_EQ(c.total, Units(8990 + 40400));
}

TEST(DistributionTest, TheUnlabelledRowIsNoExperiment) {
  std::vector<ExperimentCost> rows = {Exp("a", Units(10)), Exp("b", Units(30)), Exp("c", Units(20)),
                                      Exp(std::string(kNoExperiment), Units(1000), false)};
  CostDistribution d = DistributionOf(rows);
  EXPECT_EQ(d.count, 3u);
  EXPECT_EQ(d.total, Units(60));
  EXPECT_EQ(d.median, Units(20));
  EXPECT_EQ(d.p90, Units(30));
  EXPECT_EQ(d.costliest, "b");
  EXPECT_EQ(d.costliest_cost, Units(30));
  EXPECT_EQ(DistributionOf({Exp(std::string(kNoExperiment), Units(5), false)}).count, 0u);
}

// A small fleet at 2.00 per GPU-hour, two hours of one sample a minute:
//   GPU-1 j1 nlp/llm   sweep-a  sm 0.75  held 2 h, active 1.5 h  4.00, idle 1.00
//   GPU-2 j2 nlp/rl    sweep-a  sm 0.50  held 2 h, active 1.0 h  4.00, idle 2.00
//   GPU-3 j3 nlp/llm   sweep-b  sm 1.00  held 2 h, active 2.0 h  4.00, idle 0
//   GPU-4 j4 vision/cv (none)   sm 0.25  held 2 h, active 0.5 h  4.00, idle 3.00
//   GPU-5 no job: 2 h unallocated, 4.00, nobody's experiment.
// So nlp: sweep-a 8.00 (4 h, 2.5 h active: 62.5%, waste 3.00), sweep-b 4.00 (100%,
// waste 0); median (rank 1 of 2) 4.00, p90 (rank 2) 8.00, costliest sweep-a. vision: its
// "(none)" row 4.00 (25%, waste 3.00) and no experiment in its distribution.
class ExperimentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto book = PriceBook::Create({PriceEntry{"*", "*", CapacityType::kOnDemand, Units(2), {0, kForever}}});
    ASSERT_TRUE(book.ok());
    ASSERT_TRUE(t_.ledger().SetPrices(*book).ok());
    struct Holder {
      const char* uuid;
      double sm;
      std::optional<Job> job;
    };
    std::vector<Holder> fleet = {
        {"GPU-1", 0.75, Job{.id = "j1", .team = "nlp", .project = "llm", .experiment = "sweep-a"}},
        {"GPU-2", 0.50, Job{.id = "j2", .team = "nlp", .project = "rl", .experiment = "sweep-a"}},
        {"GPU-3", 1.00, Job{.id = "j3", .team = "nlp", .project = "llm", .experiment = "sweep-b"}},
        {"GPU-4", 0.25, Job{.id = "j4", .team = "vision", .project = "cv"}},
        {"GPU-5", 0.0, std::nullopt}};
    Batch b;
    b.batch_id = "b1";
    for (const Holder& h : fleet) {
      b.devices.push_back(Device{.uuid = h.uuid, .node = "n1", .model = "H200", .pool = "p",
                                 .sample_interval_ms = kMsPerMinute});
      if (h.job) {
        b.jobs.push_back(*h.job);
        b.allocations.push_back({h.uuid, h.job->id, kBaseMs, std::nullopt});
      }
      for (int i = 0; i <= 120; ++i) {
        b.samples.push_back(Sample{.device_uuid = h.uuid, .t_ms = kBaseMs + i * kMsPerMinute, .sm_active = h.sm});
      }
    }
    auto r = t_.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto month = ParseMonth("2026-11");
    ASSERT_TRUE(month.ok());
    month_ = *month;
  }
  const TeamExperiments* Team(const ExperimentReport& r, const std::string& name) {
    for (const auto& t : r.teams) {
      if (t.team == name) return &t;
    }
    return nullptr;
  }
  testing::TempLedger t_;
  TimeRange month_;
};

TEST_F(ExperimentsTest, EachTeamsExperimentsAsWorkedOutByHand) {
  auto r = Experiments(t_.ledger(), month_, Scope::All());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->teams.size(), 2u);
  EXPECT_EQ(r->teams[0].team, "nlp");  // the costlier team first
  const TeamExperiments& nlp = r->teams[0];
  ASSERT_EQ(nlp.experiments.size(), 2u);
  const ExperimentCost& a = nlp.experiments[0];
  EXPECT_EQ(a.experiment, "sweep-a");
  EXPECT_EQ(a.cost, Units(8));
  EXPECT_EQ(a.waste, Units(3));
  EXPECT_DOUBLE_EQ(a.gpu_hours, 4.0);
  EXPECT_DOUBLE_EQ(a.effective_utilization(), 0.625);
  const ExperimentCost& b = nlp.experiments[1];
  EXPECT_EQ(b.experiment, "sweep-b");
  EXPECT_EQ(b.cost, Units(4));
  EXPECT_EQ(b.waste, Money());
  EXPECT_DOUBLE_EQ(b.effective_utilization(), 1.0);
  EXPECT_EQ(nlp.distribution.count, 2u);
  EXPECT_EQ(nlp.distribution.median, Units(4));
  EXPECT_EQ(nlp.distribution.p90, Units(8));
  EXPECT_EQ(nlp.distribution.costliest, "sweep-a");
  EXPECT_EQ(nlp.cost, Units(12));
  EXPECT_EQ(nlp.waste, Units(3));

  const TeamExperiments& vision = r->teams[1];
  ASSERT_EQ(vision.experiments.size(), 1u);
  EXPECT_FALSE(vision.experiments[0].labeled);
  EXPECT_EQ(vision.experiments[0].experiment, kNoExperiment);
  EXPECT_EQ(vision.experiments[0].cost, Units(4));
  EXPECT_EQ(vision.experiments[0].waste, Units(3));
  EXPECT_DOUBLE_EQ(vision.experiments[0].effective_utilization(), 0.25);
  EXPECT_EQ(vision.distribution.count, 0u);
  EXPECT_EQ(vision.cost, Units(4));
}

TEST_F(ExperimentsTest, EachTeamsExperimentsSumToItsChargebackByTeamAndProject) {
  // The second road: chargeback groups by team and project, not experiment.
  auto r = Experiments(t_.ledger(), month_, Scope::All());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto cb = t_.ledger().Chargeback(month_, false);
  ASSERT_TRUE(cb.ok()) << cb.status().ToString();
  std::map<std::string, Money> by_team;
  Money capacity;
  for (const ChargebackLine& l : cb->lines) {
    if (l.capacity) {
      capacity += l.total_cost();
    } else {
      by_team[l.team] += l.total_cost();
    }
  }
  ASSERT_EQ(by_team.size(), r->teams.size());
  Money experiments_total;
  for (const TeamExperiments& t : r->teams) {
    Money rows;
    for (const ExperimentCost& e : t.experiments) rows += e.cost;
    EXPECT_EQ(rows, t.cost) << t.team;
    EXPECT_EQ(t.cost, by_team[t.team]) << t.team;
    experiments_total += t.cost;
  }
  EXPECT_EQ(capacity, Units(4));  // GPU-5, held by no job, is on a capacity line
  EXPECT_EQ(experiments_total + capacity, cb->total);
}

TEST_F(ExperimentsTest, AViewerSeesItsOwnTeamsOnlyAndATeamNarrowsIt) {
  auto vision = Experiments(t_.ledger(), month_, Scope::Teams({"vision"}));
  ASSERT_TRUE(vision.ok()) << vision.status().ToString();
  ASSERT_EQ(vision->teams.size(), 1u);
  EXPECT_EQ(vision->teams[0].team, "vision");
  auto nlp = Experiments(t_.ledger(), month_, Scope::All(), "nlp");
  ASSERT_TRUE(nlp.ok());
  ASSERT_EQ(nlp->teams.size(), 1u);
  EXPECT_EQ(nlp->teams[0].team, "nlp");
  // A team the scope may not see is as one with no jobs: nothing.
  auto hidden = Experiments(t_.ledger(), month_, Scope::Teams({"vision"}), "nlp");
  ASSERT_TRUE(hidden.ok());
  EXPECT_TRUE(hidden->teams.empty());
}

}  // namespace
}  // namespace gpuledger::ledger
