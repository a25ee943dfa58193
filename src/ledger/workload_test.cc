#include "ledger/workload.h"

#include <gtest/gtest.h>

#include "core/price_book.h"
#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

// Seven H100s in pool "p" at 7.00 a GPU-hour, sampled each minute for six hours:
//   serve (serving, no request recorded) holds GPU-0 at 10-20% activity and 15 GiB;
//   train (training, asked for 4 GPUs, submitted an hour before) holds GPU-1..4 at 20%;
//   GPU-5 and GPU-6 are held by no job.
class RecordedWorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(t_.ledger()
                    .SetPrices(*PriceBook::Create({PriceEntry{
                        "*", "*", CapacityType::kOnDemand, Money::FromUnits(7), {0, kForever}}}))
                    .ok());
    Batch b;
    b.batch_id = "fleet";
    for (int g = 0; g < 7; ++g) {
      b.devices.push_back(Device{.uuid = "GPU-" + std::to_string(g),
                                 .model = "NVIDIA H100 80GB HBM3",
                                 .memory_mib = 81559,
                                 .pool = "p",
                                 .sample_interval_ms = 60'000});
    }
    b.jobs.push_back(Job{.id = "serve", .team = "recsys", .kind = JobKind::kServing});
    Job train{.id = "train",
              .team = "nlp",
              .user = "ana",
              .kind = JobKind::kTraining,
              .requested_gpus = 4};
    train.submit_ms = kBaseMs - kMsPerHour;
    b.jobs.push_back(train);
    b.jobs.push_back(
        Job{.id = "never-ran", .team = "nlp", .kind = JobKind::kBatch, .requested_gpus = 1});
    b.allocations.push_back({"GPU-0", "serve", kBaseMs, end_});
    for (int g = 1; g <= 4; ++g)
      b.allocations.push_back({"GPU-" + std::to_string(g), "train", kBaseMs + 60'000, end_});
    for (int64_t t = kBaseMs; t <= end_; t += 60'000) {
      for (int g = 0; g < 7; ++g) {
        Sample s;
        s.device_uuid = "GPU-" + std::to_string(g);
        s.t_ms = t;
        const int64_t minute = (t - kBaseMs) / 60'000;
        s.sm_active = g == 0 ? (minute % 10 == 0 ? 0.2 : 0.1) : g <= 4 ? 0.2 : 0.0;
        s.fb_used_mib = g == 0 ? 15 * 1024 : g <= 4 ? 70 * 1024 : 0;
        b.samples.push_back(s);
      }
    }
    auto r = t_.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  testing::TempLedger t_;
  const int64_t end_ = kBaseMs + 6 * kMsPerHour;
};

TEST_F(RecordedWorkloadTest, JobsCarryRequestTimesActivityPriceAndAdvice) {
  // Asked for 30 days: the window shrinks to what the fleet recorded.
  auto w = RecordedWorkload(t_.ledger(), {end_ - 30 * kMsPerDay, end_ + kMsPerDay});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->window.begin_ms, kBaseMs);
  EXPECT_EQ(w->window.end_ms, end_);
  ASSERT_EQ(w->jobs.size(), 2U);  // never-ran held nothing
  EXPECT_EQ(w->left_out, 0U);

  const RecordedJob& serve = w->jobs[0];  // by start
  EXPECT_EQ(serve.id, "serve");
  EXPECT_EQ(serve.gpus, 1);  // no request recorded: the GPUs it held
  EXPECT_EQ(serve.start_ms, kBaseMs);
  EXPECT_EQ(serve.submit_ms, kBaseMs);  // no submit recorded: when it started
  EXPECT_EQ(serve.end_ms, end_);
  EXPECT_EQ(serve.kind, JobKind::kServing);
  EXPECT_GT(serve.activity_ratio, 0.1);
  EXPECT_LT(serve.activity_ratio, 0.2);
  EXPECT_EQ(serve.price_per_gpu_hour, Money::FromUnits(7));
  EXPECT_EQ(serve.advised_mig_profile, "2g.20gb");  // what right-sizing advises

  const RecordedJob& train = w->jobs[1];
  EXPECT_EQ(train.gpus, 4);
  EXPECT_EQ(train.team, "nlp");
  EXPECT_EQ(train.user, "ana");
  EXPECT_EQ(train.submit_ms, kBaseMs - kMsPerHour);
  EXPECT_EQ(train.start_ms, kBaseMs + 60'000);
  EXPECT_NEAR(train.activity_ratio, 0.2, 1e-3);
  EXPECT_EQ(train.price_per_gpu_hour, Money::FromUnits(7));
  EXPECT_TRUE(train.advised_mig_profile.empty());

  ASSERT_EQ(w->pools.size(), 1U);
  EXPECT_EQ(w->pools[0].name, "p");
  EXPECT_EQ(w->pools[0].gpus, 7);
  EXPECT_EQ(w->pools[0].gpu_model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(w->pools[0].price_per_gpu_hour, Money::FromUnits(7));
}

TEST_F(RecordedWorkloadTest, JobsThatStartedBeforeTheWindowAreNotInIt) {
  auto w = RecordedWorkload(t_.ledger(), {kBaseMs + 30'000, end_});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->jobs.size(), 1U);
  EXPECT_EQ(w->jobs[0].id, "train");
}

}  // namespace
}  // namespace gpuledger::ledger
