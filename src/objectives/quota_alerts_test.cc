#include "objectives/quota_alerts.h"

#include <gtest/gtest.h>

namespace gpuledger::objectives {
namespace {

// A judged quota with the thresholds crossed and the projection given.
ledger::QuotaStatus Judged(const char* team, QuotaMode mode, std::vector<double> crossed, bool projected) {
  ledger::QuotaStatus s;
  s.spec = QuotaSpec{.name = team, .mode = mode, .gpu_hours = 100};
  s.crossed = std::move(crossed);
  s.projected_to_exceed = projected;
  return s;
}

TEST(QuotaAlertsTest, OnlyTheHighestThresholdReachedFiresAndProjectionFiresBesides) {
  ledger::QuotaReport r;
  r.quotas = {Judged("nlp", QuotaMode::kSoft, {0.5, 0.8}, true), Judged("vision", QuotaMode::kSoft, {}, false),
              Judged("cv", QuotaMode::kHard, {0.5, 0.8, 1.0}, false)};
  std::vector<QuotaAlert> a = QuotaAlerts(r);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].quota->spec.name, "nlp");
  EXPECT_EQ(a[0].threshold, "80%");
  EXPECT_FALSE(a[0].page);
  EXPECT_EQ(a[1].quota->spec.name, "nlp");
  EXPECT_EQ(a[1].threshold, "projected");
  EXPECT_FALSE(a[1].page);  // a soft quota never pages
  EXPECT_EQ(a[2].quota->spec.name, "cv");
  EXPECT_EQ(a[2].threshold, "100%");
  EXPECT_TRUE(a[2].page);  // a hard quota used up pages
}

TEST(QuotaAlertsTest, AProjectedHardOverrunPagesAndAQuotaBelowEveryThresholdIsQuiet) {
  ledger::QuotaReport r;
  r.quotas = {Judged("nlp", QuotaMode::kHard, {0.5}, true), Judged("vision", QuotaMode::kHard, {}, false)};
  std::vector<QuotaAlert> a = QuotaAlerts(r);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].threshold, "50%");
  EXPECT_FALSE(a[0].page);
  EXPECT_EQ(a[1].threshold, "projected");
  EXPECT_TRUE(a[1].page);
}

}  // namespace
}  // namespace gpuledger::objectives
