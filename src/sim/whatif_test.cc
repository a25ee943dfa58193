#include "sim/whatif.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuledger::sim {
namespace {

constexpr int64_t kS = 1000;

RecordedJob Recorded(std::string id, std::string team, JobKind kind, int32_t gpus, int64_t submit_s,
                     int64_t start_s, int64_t end_s, Money price) {
  RecordedJob j;
  j.id = std::move(id);
  j.team = std::move(team);
  j.kind = kind;
  j.gpus = gpus;
  j.submit_ms = submit_s * kS;
  j.start_ms = start_s * kS;
  j.end_ms = end_s * kS;
  j.price_per_gpu_hour = price;
  j.pool = "main";
  return j;
}

// One pool of 4 GPUs at 2.00 a GPU-hour over a one-hour window:
//   S serving, team c, 1 GPU, 0-3000 s, at 3.50 a GPU-hour, advised a 1g slice (1/7);
//   A training, team a, 2 GPUs, 0-1800 s, at 2.00, activity 0.5;
//   B training, team b, 2 GPUs, submitted at 300 s, 1800 s long, at 2.00.
Workload HandCase() {
  Workload w;
  w.window = {0, 3600 * kS};
  w.pools.push_back({"main", "NVIDIA H200", 4, Money::FromUnits(2)});
  RecordedJob s =
      Recorded("S", "c", JobKind::kServing, 1, 0, 0, 3000, Money::FromMicros(3'500'000));
  s.advised_mig_profile = "1g.18gb";
  RecordedJob a = Recorded("A", "a", JobKind::kTraining, 2, 0, 0, 1800, Money::FromUnits(2));
  a.activity_ratio = 0.5;
  RecordedJob b = Recorded("B", "b", JobKind::kTraining, 2, 300, 300, 2100, Money::FromUnits(2));
  w.jobs = {s, a, b};
  return w;
}

const WhatIfAnswer& AnswerOf(const WhatIfReport& r, WhatIfQuestion q) {
  for (const auto& a : r.answers) {
    if (a.question == q) return a;
  }
  ADD_FAILURE() << "no answer " << WhatIfQuestionName(q);
  return r.answers.front();
}

TEST(WhatIfTest, ConvertsTheRecordedWorkload) {
  Workload w = HandCase();
  w.jobs[1].mig_profile = "9g.1gb";  // unreadable: left out and counted
  size_t skipped = 0;
  auto jobs = SimJobsFromWorkload(w, false, &skipped);
  ASSERT_EQ(jobs.size(), 2U);
  EXPECT_EQ(skipped, 1U);
  EXPECT_EQ(jobs[0].queue, "c");
  EXPECT_EQ(jobs[0].gpus, 1);
  EXPECT_EQ(jobs[0].duration_ms, 3000 * kS);
  EXPECT_EQ(jobs[1].submit_ms, 300 * kS);
  auto advised = SimJobsFromWorkload(HandCase(), true);
  EXPECT_EQ(advised[0].share_ticks, 120);  // 1/7 of a GPU
  EXPECT_EQ(advised[0].gpus, 0);
  const ClusterSpec c = ClusterFromWorkload(HandCase());
  ASSERT_EQ(c.pools.size(), 1U);
  EXPECT_EQ(c.pools[0].gpus(), 4);
  EXPECT_EQ(c.pools[0].gpus_per_node, 4);
}

// The money figures against a hand computation.
// Baseline (FIFO, 4 GPUs): S and A start at 0 (3 GPUs); B needs 2 with 1 free and waits
// until A ends at 1800: B 1800-3600. Waits 0, 0, 1500 s: mean 500 s.
//   Allocated: S 3000 s x 1 GPU at 3.50 = 2.916667; A 1 GPU-hour at 2.00 = 2.00; B 2.00:
//   6.916667 for 2.8333 GPU-hours, 70.83% of 4 GPUs x 1 h; active 0.5 GPU-hour = 12.5%.
//   The fleet: 4 GPUs x 1 h x 2.00 = 8.00. SLO: of 5 requested GPUs, 3 started within
//   10 minutes: 60%, missed.
// MIG: S asks for 1/7 of a GPU and the pool is cut 3+2+1+1. S takes a 1g slice of GPU 0,
//   A two whole GPUs, and B still waits for A (only one GPU has no slice in use).
//   S costs 3000 s x 1/7 x 3.50 = 0.416667: allocated 4.416667, 2.50 less; freed
//   0.8333 x 6/7 = 0.714 GPU-hours.
// Fleet: at 4 GPUs the SLO fails; nodes are 4 GPUs, so the next size is 8, where every
//   job starts at once: 8 GPUs x 1 h x 2.00 = 16.00, 8.00 more.
TEST(WhatIfTest, MoneyMatchesAHandComputedCase) {
  auto r = WhatIf(HandCase(), WhatIfOptions());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->answers.size(), 4U);
  const ScenarioFigures& base = AnswerOf(*r, WhatIfQuestion::kFleet).scenarios[0];
  EXPECT_EQ(base.gpus, 4);
  EXPECT_EQ(base.allocated_cost.ToString(), "6.916667");
  EXPECT_EQ(base.fleet_cost.ToString(), "8.000000");
  EXPECT_NEAR(base.allocated_gpu_hours, 2.833333, 1e-6);
  EXPECT_NEAR(base.allocated_ratio, 0.708333, 1e-6);
  ASSERT_TRUE(base.active_ratio.has_value());
  EXPECT_NEAR(*base.active_ratio, 0.125, 1e-9);
  EXPECT_DOUBLE_EQ(base.wait_mean_s, 500.0);
  EXPECT_DOUBLE_EQ(base.slo_granted_ratio, 0.6);
  EXPECT_FALSE(base.slo_met);
  EXPECT_NE(RenderWhatIfText(*r).find("SLO (GPUs started within 10m)"), std::string::npos) << RenderWhatIfText(*r);
  EXPECT_NE(RenderWhatIfText(*r).find("60.0%, target 95%: MISSED"), std::string::npos) << RenderWhatIfText(*r);

  const WhatIfAnswer& mig = AnswerOf(*r, WhatIfQuestion::kMig);
  ASSERT_EQ(mig.scenarios.size(), 2U);
  EXPECT_EQ(mig.scenarios[1].allocated_cost.ToString(), "4.416667");
  EXPECT_NEAR(mig.scenarios[1].allocated_gpu_hours, 2.0 + 3000.0 / 3600.0 / 7.0, 1e-6);
  EXPECT_DOUBLE_EQ(mig.scenarios[1].wait_mean_s, 500.0);
  EXPECT_NE(mig.findings[0].find("0.7 of 2.8 allocated GPU-hours freed"), std::string::npos)
      << mig.findings[0];
  EXPECT_NE(mig.findings[0].find("2.50 less"), std::string::npos) << mig.findings[0];

  const WhatIfAnswer& fleet = AnswerOf(*r, WhatIfQuestion::kFleet);
  EXPECT_EQ(fleet.scenarios[1].gpus, 8);
  EXPECT_EQ(fleet.scenarios[1].fleet_cost.ToString(), "16.000000");
  EXPECT_TRUE(fleet.scenarios[1].slo_met);
  EXPECT_NE(fleet.findings[0].find("needs 8 GPUs instead of 4 GPUs (4 GPUs more), costing 16.00 "
                                   "instead of 8.00 over the window (8.00 more)"),
            std::string::npos)
      << fleet.findings[0];
}

TEST(WhatIfTest, SeparatesOnePoolByWhatEachSideAskedFor) {
  auto r = WhatIf(HandCase(), WhatIfOptions());
  ASSERT_TRUE(r.ok());
  const WhatIfAnswer& pools = AnswerOf(*r, WhatIfQuestion::kPools);
  // Training asked for 2 x 1800 x 2 = 7200 GPU-seconds, serving 3000: 71% of 4 GPUs
  // rounds to 3 for training, 1 for serving.
  ASSERT_EQ(pools.scenarios.size(), 2U);
  EXPECT_EQ(pools.scenarios[1].label, "separated");
  EXPECT_EQ(pools.scenarios[1].gpus, 4);
  EXPECT_NE(pools.assumptions[0].find("3 GPUs for training and batch jobs, 1 GPU for serving"),
            std::string::npos)
      << pools.assumptions[0];
  // Same GPU time, same prices: the allocated cost does not change.
  EXPECT_EQ(pools.scenarios[1].allocated_cost, pools.scenarios[0].allocated_cost);
}

TEST(WhatIfTest, PolicyAnswersPerTeam) {
  WhatIfOptions o;
  o.questions = {WhatIfQuestion::kPolicy};
  auto r = WhatIf(HandCase(), o);
  ASSERT_TRUE(r.ok());
  const WhatIfAnswer& a = r->answers.front();
  ASSERT_EQ(a.scenarios.size(), 3U);  // fifo, fair-share, backfill
  EXPECT_EQ(a.scenarios[1].policy, "fair-share");
  ASSERT_EQ(a.scenarios[1].teams.size(), 3U);
  EXPECT_EQ(a.scenarios[1].teams[0].team, "a");
  size_t team_lines = 0;
  for (const auto& f : a.findings) team_lines += f.find("  team ") == 0 ? 1 : 0;
  EXPECT_EQ(team_lines, 6U);  // 3 teams x 2 policies
}

TEST(WhatIfTest, SmallestPoolSearchFindsTheFewestNodes) {
  // Eight 1-GPU jobs at once, 10 minutes each; SLO 95% within 5 minutes: all must start
  // at once, so 8 GPUs (4 nodes of 2).
  ClusterSpec c = UniformCluster(1, 2, Money::FromUnits(1));
  std::vector<SimJob> jobs;
  for (int i = 0; i < 8; ++i) {
    SimJob j;
    j.id = "j" + std::to_string(i);
    j.queue = "q";
    j.duration_ms = 600 * kS;
    j.gpus = 1;
    jobs.push_back(j);
  }
  auto gpus = SmallestPoolMeetingSlo(c, 0, jobs, "fifo", 5 * 60 * kS, 0.95);
  ASSERT_TRUE(gpus.ok());
  ASSERT_TRUE(gpus->has_value());
  EXPECT_EQ(**gpus, 8);
  // With 10 minutes allowed (inclusive), half as many do: the second wave starts at 10.
  gpus = SmallestPoolMeetingSlo(c, 0, jobs, "fifo", 10 * 60 * kS, 0.95);
  ASSERT_TRUE(gpus.ok());
  EXPECT_EQ(**gpus, 4);
}

TEST(WhatIfTest, RendersOneScreenPerAnswerWithItsAssumptions) {
  auto r = WhatIf(HandCase(), WhatIfOptions());
  ASSERT_TRUE(r.ok());
  const std::string text = RenderWhatIfText(*r);
  EXPECT_NE(text.find("== A smaller or larger fleet (fleet) =="), std::string::npos) << text;
  EXPECT_NE(text.find("fleet cost"), std::string::npos);
  EXPECT_NE(text.find("Assumptions:"), std::string::npos);
  auto doc = nlohmann::json::parse(RenderWhatIfJson(*r));
  EXPECT_EQ(doc["answers"].size(), 4U);
  EXPECT_EQ(doc["answers"][3]["scenarios"][0]["allocated_cost"], "6.916667");
}

TEST(WhatIfTest, RefusesAnEmptyWorkload) {
  Workload w = HandCase();
  w.jobs.clear();
  EXPECT_EQ(WhatIf(w, WhatIfOptions()).status().code(), StatusCode::kFailedPrecondition);
  w = HandCase();
  w.pools.clear();
  EXPECT_EQ(WhatIf(w, WhatIfOptions()).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpuledger::sim
