// Quotas judged by the ledger (ledger/quotas.h): what a viewer may see, when there is no
// projection yet, and that the figures hold still between two calls a second apart. The
// figures themselves are checked by hand in testdata/golden/quota_*.test.
#include "ledger/quotas.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using ::testing::HasSubstr;
using testing::kBaseMs;

// GPU-1 held by j1 (nlp, project llm), GPU-2 by j2 (vision, project llm) from kBaseMs, one
// busy sample a minute from `from_ms` for `minutes` minutes.
Batch Fleet(const std::string& id, int64_t from_ms, int minutes, bool declare) {
  Batch b;
  b.batch_id = id;
  if (declare) {
    for (const char* uuid : {"GPU-1", "GPU-2"}) {
      b.devices.push_back(Device{.uuid = uuid, .node = "n1", .model = "H200", .pool = "p",
                                 .sample_interval_ms = kMsPerMinute});
    }
    b.jobs = {Job{.id = "j1", .team = "nlp", .project = "llm"}, Job{.id = "j2", .team = "vision", .project = "llm"}};
    b.allocations = {{"GPU-1", "j1", kBaseMs, std::nullopt}, {"GPU-2", "j2", kBaseMs, std::nullopt}};
  }
  for (int i = 0; i < minutes; ++i) {
    for (const char* uuid : {"GPU-1", "GPU-2"}) {
      b.samples.push_back(Sample{.device_uuid = uuid, .t_ms = from_ms + i * kMsPerMinute, .sm_active = 1.0});
    }
  }
  return b;
}

std::vector<QuotaSpec> Quotas() {
  return {QuotaSpec{.name = "nlp", .gpu_hours = 100}, QuotaSpec{.name = "vision", .budget = Money::FromUnits(50)},
          QuotaSpec{.owner = QuotaSpec::Owner::kProject, .name = "llm", .gpu_hours = 10}};
}

class QuotasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto book = PriceBook::Create({PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromUnits(2), {0, kForever}}});
    ASSERT_TRUE(book.ok());
    ASSERT_TRUE(t_.ledger().SetPrices(*book).ok());
  }
  void Ingest(const Batch& b) {
    auto r = t_.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  int64_t Now() { return t_.clock().NowMs(); }
  testing::TempLedger t_;
};

TEST_F(QuotasTest, ATeamViewerSeesItsTeamsQuotasOnlyAndNoProjectQuota) {
  Ingest(Fleet("b1", kBaseMs, 2 * 60 + 1, true));  // to 02:00
  auto all = JudgeQuotas(t_.ledger(), Quotas(), Scope::All(), Now());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->quotas.size(), 3u);
  EXPECT_EQ(all->quotas[2].spec.OwnerLabel(), "project:llm");
  EXPECT_DOUBLE_EQ(all->quotas[2].used.gpu_hours(), 4.0);  // both teams' jobs, two hours each
  auto nlp = JudgeQuotas(t_.ledger(), Quotas(), Scope::Teams({"nlp"}), Now());
  ASSERT_TRUE(nlp.ok());
  ASSERT_EQ(nlp->quotas.size(), 1u);
  EXPECT_EQ(nlp->quotas[0].spec.name, "nlp");
}

TEST_F(QuotasTest, UnderADayOfDataThereIsNoProjectionAndTheBasisSaysWhy) {
  Ingest(Fleet("b1", kBaseMs, 8 * 60 + 1, true));
  auto r = JudgeQuotas(t_.ledger(), Quotas(), Scope::All(), Now());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const QuotaStatus& nlp = r->quotas[0];
  EXPECT_EQ(r->anchor_ms, kBaseMs + 8 * kMsPerHour);
  EXPECT_DOUBLE_EQ(nlp.used.gpu_hours(), 8.0);
  EXPECT_DOUBLE_EQ(*nlp.gpu_hours_burn, 0.08);
  EXPECT_FALSE(nlp.projected_gpu_hours.has_value());
  EXPECT_FALSE(nlp.projected_cost.has_value());
  EXPECT_TRUE(nlp.basis.empty());
  EXPECT_EQ(nlp.basis_text, "no projection: 8h of data before 2026-11-23T08:00:00Z, under the 1d the rate needs");
  EXPECT_FALSE(nlp.projected_to_exceed);
}

TEST_F(QuotasTest, TwoCallsASecondApartAgreeWhileTheHourOfDataIsIncomplete) {
  Ingest(Fleet("b1", kBaseMs, 30 * 60 + 10, true));  // to 30:09
  auto first = JudgeQuotas(t_.ledger(), Quotas(), Scope::All(), Now());
  ASSERT_TRUE(first.ok());
  t_.clock().Advance(kMsPerSecond);
  Ingest(Fleet("b2", kBaseMs + (30 * 60 + 10) * kMsPerMinute, 1, false));  // a sample at 30:10
  auto second = JudgeQuotas(t_.ledger(), Quotas(), Scope::All(), Now());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(first->anchor_ms, kBaseMs + 30 * kMsPerHour);
  EXPECT_EQ(second->anchor_ms, first->anchor_ms);
  for (size_t i = 0; i < first->quotas.size(); ++i) {
    EXPECT_EQ(first->quotas[i].used.gpu_ticks_ms, second->quotas[i].used.gpu_ticks_ms) << i;
    EXPECT_EQ(first->quotas[i].projected_cost, second->quotas[i].projected_cost) << i;
    EXPECT_EQ(first->quotas[i].basis_text, second->quotas[i].basis_text) << i;
  }
  // The money a projection carries is the trailing 30 hours' (60.00 for vision) spread
  // over the 30 days of November left after the anchor, plus what is spent.
  const QuotaStatus& vision = first->quotas[1];
  EXPECT_EQ(vision.used.cost, Money::FromUnits(60));
  EXPECT_EQ(vision.basis_text, "trailing 30h rate (2026-11-23T00:00:00Z to 2026-11-24T06:00:00Z)");
  // 60 + 60 x (6 d 18 h = 162 h) / 30 h = 60 + 324 = 384.
  EXPECT_EQ(vision.projected_cost, Money::FromUnits(384));
  EXPECT_THAT(vision.crossed, ::testing::ElementsAre(0.5, 0.8, 1.0));
  EXPECT_FALSE(vision.projected_to_exceed);  // already past: the 100% threshold says it
  // nlp: 30 of 100 GPU-hours, 30 + 162 = 192 projected.
  const QuotaStatus& nlp = first->quotas[0];
  EXPECT_DOUBLE_EQ(*nlp.projected_gpu_hours, 192.0);
  EXPECT_TRUE(nlp.projected_to_exceed);
}

TEST_F(QuotasTest, ABadPeriodIsRefusedNamingIt) {
  auto r = JudgeQuotas(t_.ledger(), Quotas(), Scope::All(), Now(), "2026-Q9");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("period \"2026-Q9\""));
}

TEST_F(QuotasTest, WithNoDataEachQuotaShowsItsAmountAgainstNothingSpent) {
  auto r = JudgeQuotas(t_.ledger(), Quotas(), Scope::All(), Now());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->anchor_ms, 0);
  ASSERT_EQ(r->quotas.size(), 3u);
  EXPECT_EQ(r->quotas[1].period_label, "2026-12");  // the month of now: kBaseMs + 30 days
  EXPECT_EQ(r->quotas[1].spec.budget, Money::FromUnits(50));
  EXPECT_EQ(*r->quotas[1].budget_burn, 0.0);
  EXPECT_FALSE(r->quotas[1].projected_cost.has_value());
  EXPECT_EQ(r->quotas[1].basis_text, "no projection: no data yet");
}

TEST(SlurmLimitsTest, HardTeamQuotasBecomeAccountGpuMinutesAndTheRestSayWhyNot) {
  std::vector<QuotaSpec> quotas = {
      QuotaSpec{.name = "nlp", .mode = QuotaMode::kHard, .gpu_hours = 500, .source = "q.toml:1"},
      QuotaSpec{.name = "vision", .gpu_hours = 100},  // soft: alerts only
      QuotaSpec{.name = "cv", .mode = QuotaMode::kHard, .gpu_hours = 10, .pool = "training", .source = "q.toml:9"},
      QuotaSpec{.owner = QuotaSpec::Owner::kProject, .name = "llm", .mode = QuotaMode::kHard, .gpu_hours = 5},
      QuotaSpec{.name = "nlp", .period = QuotaPeriod::kQuarter, .mode = QuotaMode::kHard, .gpu_hours = 1200}};
  std::vector<std::string> skipped;
  std::vector<SlurmLimit> limits = SlurmLimits(quotas, &skipped);
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].account, "nlp");
  EXPECT_EQ(limits[0].gpu_minutes, 30'000);
  EXPECT_EQ(limits[0].source, "q.toml:1");
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_THAT(skipped[0], HasSubstr("team:cv month gpu_hours pool:training (q.toml:9): an account limit covers"));
  EXPECT_THAT(skipped[1], HasSubstr("a project is no Slurm account"));
  EXPECT_THAT(skipped[2], HasSubstr("Slurm keeps one GrpTRESMins per account"));
}

TEST(SlurmLimitsTest, ReconcilingNamesEachAccountsStateAndAViewerSeesItsTeamsOnly) {
  std::vector<SlurmLimit> want = {{"cv", 600, "q.toml:1"}, {"nlp", 30'000, "q.toml:5"}, {"vision", 60, "q.toml:9"}};
  // cv as wanted; nlp changed by hand; vision never pushed; ops limited by nobody's quota.
  std::map<std::string, int64_t> have = {{"cv", 600}, {"nlp", 99'999}, {"ops", 10}};
  std::vector<SlurmAccountLimit> all = ReconcileSlurmLimits(want, have);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].account, "cv");
  EXPECT_EQ(all[0].state, SlurmLimitState::kInForce);
  EXPECT_FALSE(all[0].drift());
  EXPECT_EQ(all[1].account, "nlp");
  EXPECT_EQ(all[1].state, SlurmLimitState::kDiffers);
  EXPECT_EQ(all[1].want_gpu_minutes, 30'000);
  EXPECT_EQ(all[1].have_gpu_minutes, 99'999);
  EXPECT_EQ(all[1].source, "q.toml:5");
  EXPECT_TRUE(all[1].drift());
  EXPECT_EQ(all[2].account, "ops");
  EXPECT_EQ(all[2].state, SlurmLimitState::kUnmanaged);
  EXPECT_FALSE(all[2].want_gpu_minutes.has_value());
  EXPECT_EQ(all[2].source, "");
  EXPECT_EQ(all[3].account, "vision");
  EXPECT_EQ(all[3].state, SlurmLimitState::kNotPushed);
  EXPECT_FALSE(all[3].have_gpu_minutes.has_value());
  EXPECT_EQ(SlurmLimitStateName(all[3].state), "not_pushed");

  EXPECT_TRUE(HasSlurmDrift(all));
  EXPECT_FALSE(HasSlurmDrift({all[0]}));
  EXPECT_FALSE(HasSlurmDrift({}));

  std::vector<SlurmAccountLimit> viewer = ReconcileSlurmLimits(want, have, Scope::Teams({"nlp", "ops"}));
  ASSERT_EQ(viewer.size(), 2u);
  EXPECT_EQ(viewer[0].account, "nlp");
  EXPECT_EQ(viewer[1].account, "ops");
}

TEST(KueueQueuesTest, AQuotaIsSpreadOverItsPeriodsHoursAndOnlyASoftOneBorrows) {
  const int64_t november = ParseTime("2026-11-15T00:00:00Z").value();  // 720 hours
  std::vector<QuotaSpec> quotas = {
      QuotaSpec{.name = "nlp", .mode = QuotaMode::kHard, .gpu_hours = 5000, .model = "NVIDIA H200", .source = "q:1"},
      QuotaSpec{.name = "vision", .gpu_hours = 720},
      QuotaSpec{.name = "vision", .period = QuotaPeriod::kQuarter, .gpu_hours = 3000},
      QuotaSpec{.owner = QuotaSpec::Owner::kProject, .name = "llm", .gpu_hours = 5},
      QuotaSpec{.name = "Team_X", .gpu_hours = 5},
      QuotaSpec{.name = "ops", .budget = Money::FromUnits(10)}};  // no GPU-hours: no queue
  std::vector<std::string> skipped;
  std::vector<KueueQueue> q = KueueQueues(quotas, november, &skipped);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].name, "gpuledger-nlp");
  EXPECT_EQ(q[0].cohort, "gpuledger");
  EXPECT_EQ(q[0].flavor, "nvidia-h200");
  EXPECT_EQ(q[0].nominal_gpus, 7);  // 5000 / 720 = 6.94, up
  EXPECT_EQ(q[0].borrowing_limit_gpus, 0);
  EXPECT_EQ(q[0].source, "q:1");
  EXPECT_EQ(q[1].name, "gpuledger-vision");
  EXPECT_EQ(q[1].flavor, "default-flavor");
  EXPECT_EQ(q[1].nominal_gpus, 1);
  EXPECT_EQ(q[1].borrowing_limit_gpus, 1);
  ASSERT_EQ(skipped.size(), 3u);
  EXPECT_THAT(skipped[0], HasSubstr("sized by its first GPU-hour quota"));
  EXPECT_THAT(skipped[1], HasSubstr("a project has no queue"));
  EXPECT_THAT(skipped[2], HasSubstr("team:Team_X month gpu_hours (): the team's name is not a DNS-1123 label"));
}

}  // namespace
}  // namespace gpuledger::ledger
