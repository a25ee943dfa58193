#include "ledger/rightsizing.h"

#include <gmock/gmock.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

#include "ledger/advice_internal.h"
#include "core/testing/missing_component.h"
#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

// The advice's percentiles and medians against a second road: the sorted vector read at
// the nearest rank (and the two middles averaged), over random vectors with ties.
TEST(AdvicePercentileTest, NearestRankAndMedianAgreeWithASortedCopy) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 500; ++trial) {
    size_t n = 1 + static_cast<size_t>(rng() % 60);
    std::vector<double> v(n);
    std::vector<int64_t> w(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = static_cast<double>(rng() % 20) / 7.0;
      w[i] = static_cast<int64_t>(rng() % 25) - 5;
    }
    std::vector<double> sv = v;
    std::sort(sv.begin(), sv.end());
    for (double p : {0.0, 0.1, 0.5, 0.95, 0.99, 1.0}) {
      size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
      EXPECT_EQ(advice::Percentile(v, p), sv[rank == 0 ? 0 : rank - 1]) << "trial " << trial << " p " << p;
    }
    std::vector<int64_t> sw = w;
    std::sort(sw.begin(), sw.end());
    double median = n % 2 ? static_cast<double>(sw[n / 2])
                          : (static_cast<double>(sw[n / 2 - 1]) + static_cast<double>(sw[n / 2])) / 2.0;
    EXPECT_EQ(advice::Median(w), median) << "trial " << trial;
  }
  EXPECT_EQ(advice::Percentile({}, 0.5), 0.0);
  EXPECT_EQ(advice::Median({}), 0.0);
}

using ::testing::HasSubstr;
using testing::kBaseMs;

TEST(RightSizingTest, ProfileTablesAndTheSmallestFit) {
  auto h100 = MigProfilesFor("NVIDIA H100 80GB HBM3", 81559);
  ASSERT_EQ(h100.size(), 6u);
  EXPECT_EQ(h100.front().name, "1g.10gb");
  EXPECT_EQ(MigProfilesFor("NVIDIA A100-SXM4-40GB", 40960).front().name, "1g.5gb");
  EXPECT_EQ(MigProfilesFor("NVIDIA A100-SXM4-80GB", 81920).front().name, "1g.10gb");
  EXPECT_EQ(MigProfilesFor("NVIDIA H200", 143771).back().name, "7g.141gb");
  EXPECT_TRUE(MigProfilesFor("NVIDIA L40S", 46068).empty());
  // 20% of the compute and 15 GiB: 1g is too small (1/7 x 0.9 < 0.2), 2g.20gb fits.
  EXPECT_EQ(SmallestFittingProfile(h100, 0.2, 15 * 1024)->name, "2g.20gb");
  // Tiny compute but 30 GiB of memory: 3g.40gb.
  EXPECT_EQ(SmallestFittingProfile(h100, 0.05, 30 * 1024)->name, "3g.40gb");
  // Needs most of the GPU: no slice.
  EXPECT_FALSE(SmallestFittingProfile(h100, 0.7, 10 * 1024).has_value());
}

// A pod list's fractional requests on slices: a quarter-GPU pod fits a 2g slice (2/7
// covers 1/4; 1/7 does not) and frees 5/7 of its GPU; a whole-GPU pod frees nothing.
TEST(RightSizingTest, FitsAPodListsFractionsToSlices) {
  std::vector<PodRequest> pods = {{1, 0, kMsPerHour}, {0, kShareScale / 4, kMsPerHour}, {2, 0, 30 * kMsPerMinute}};
  auto fit = FitPodsToMig(pods, "NVIDIA H100 80GB HBM3", Money::FromUnits(7));
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_EQ(fit->gpu_pods, 3u);
  EXPECT_EQ(fit->movable, 1u);
  EXPECT_EQ(fit->by_profile.at("2g.20gb"), 1u);
  EXPECT_EQ(fit->whole_gpu_cost, Money::FromUnits(21));  // 7 + 7 (a whole GPU) + 2 x 0.5 h x 7
  EXPECT_EQ(fit->saving, Money::FromUnits(5));
  EXPECT_FALSE(FitPodsToMig(pods, "NVIDIA L40S", Money::FromUnits(7)).ok());
}

class RecommendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(t_.ledger().SetPrices(*PriceBook::Create(
        {PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromUnits(7), {0, kForever}}})).ok());
    Batch b;
    b.batch_id = "fleet";
    for (int g = 0; g < 7; ++g) {
      b.devices.push_back(Device{.uuid = "GPU-" + std::to_string(g), .model = "NVIDIA H100 80GB HBM3",
                                 .memory_mib = 81559, .pool = "p", .sample_interval_ms = 60'000});
    }
    b.jobs.push_back(Job{.id = "serve", .team = "recsys", .kind = JobKind::kServing});
    b.jobs.push_back(Job{.id = "train", .team = "nlp", .kind = JobKind::kTraining});
    b.jobs.push_back(Job{.id = "nb", .team = "nlp", .kind = JobKind::kNotebook});
    const int64_t end = kBaseMs + 6 * kMsPerHour;
    b.allocations.push_back({"GPU-0", "serve", kBaseMs, end});
    for (int g = 1; g <= 4; ++g) b.allocations.push_back({"GPU-" + std::to_string(g), "train", kBaseMs, end});
    b.allocations.push_back({"GPU-5", "nb", kBaseMs, end});
    for (int64_t t = kBaseMs; t <= end; t += 60'000) {
      for (int g = 0; g < 7; ++g) {
        Sample s;
        s.device_uuid = "GPU-" + std::to_string(g);
        s.t_ms = t;
        int64_t minute = (t - kBaseMs) / 60'000;
        if (g == 0) {
          s.sm_active = minute % 10 == 0 ? 0.2 : 0.1;  // p95 0.2
          s.fb_used_mib = 15 * 1024;
        } else if (g <= 4) {
          s.sm_active = 0.2;
          s.fb_used_mib = 70 * 1024;
        } else if (g == 5) {
          s.sm_active = minute < 30 ? 0.3 : 0.0;  // worked on for 30 min, then forgotten
          s.fb_used_mib = 8 * 1024;
        } else {
          s.sm_active = 0;
        }
        b.samples.push_back(s);
      }
    }
    auto r = t_.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  testing::TempLedger t_;
  TimeRange window_{kBaseMs, kBaseMs + 6 * kMsPerHour};
};

TEST_F(RecommendTest, FindsEachKindWithEvidenceAndSaving) {
  auto recs = Recommend(t_.ledger(), window_);
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  std::map<std::string, Recommendation> by;
  for (const auto& r : *recs) by[std::string(RecommendationKindName(r.kind)) + ":" + r.job_id] = r;

  ASSERT_TRUE(by.count("mig-profile:serve"));
  const auto& mig = by["mig-profile:serve"];
  EXPECT_THAT(mig.action, HasSubstr("2g.20gb"));
  EXPECT_EQ(mig.mig_profile, "2g.20gb");
  EXPECT_THAT(mig.evidence, HasSubstr("p95 20%"));
  EXPECT_THAT(mig.evidence, HasSubstr("peak memory 15.0 GiB"));
  EXPECT_EQ(mig.cost, Money::FromUnits(42));    // 6 h at 7.00
  EXPECT_EQ(mig.saving, Money::FromUnits(30));  // 5/7 of it
  EXPECT_EQ(mig.confidence, "low");  // no engine metrics to check its latency
  EXPECT_THAT(mig.evidence, HasSubstr("queue and KV cache not checked"));

  ASSERT_TRUE(by.count("fewer-gpus:train"));
  EXPECT_THAT(by["fewer-gpus:train"].action, HasSubstr("use 2 GPUs instead of 4"));
  EXPECT_EQ(by["fewer-gpus:train"].saving, Money::FromUnits(84));  // half of 4 x 6 h x 7

  ASSERT_TRUE(by.count("idle-shutdown:nb"));
  EXPECT_THAT(by["idle-shutdown:nb"].action, HasSubstr("idle for 4.5 h beyond that"));
  // The notebook also fits a 1g slice.
  EXPECT_TRUE(by.count("mig-profile:nb"));
  // Sorted by saving.
  for (size_t i = 1; i < recs->size(); ++i) EXPECT_GE((*recs)[i - 1].saving, (*recs)[i].saving);
}

// A job with several pieces of advice saves each alone, but together they compound: the
// notebook's idle shutdown stops 4.5 of its 6 hours, and a MIG slice then saves a share of
// the 1.5 hours left, never the whole cost twice.
TEST_F(RecommendTest, OneNetSavingPerJobNeverAboveItsCost) {
  auto recs = Recommend(t_.ledger(), window_);
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  std::map<std::string, Money> net, alone, cost;
  for (const auto& r : *recs) {
    net[r.job_id] += r.net_saving;
    alone[r.job_id] += r.saving;
    cost[r.job_id] = r.cost;
  }
  for (const auto& [job, m] : net) EXPECT_LE(m, cost[job]) << job;
  // The notebook (6 h at 7.00 = 42): idle shutdown saves the most alone, so it applies
  // first and its net saving is its saving alone; its MIG slice then saves its share of
  // what the shutdown leaves.
  const Recommendation* idle = nullptr;
  const Recommendation* mig = nullptr;
  for (const auto& r : *recs) {
    if (r.job_id != "nb") continue;
    (r.kind == RecommendationKind::kIdleShutdown ? idle : mig) = &r;
  }
  ASSERT_NE(idle, nullptr);
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(idle->cost, Money::FromUnits(42));
  ASSERT_GT(idle->saving, mig->saving);
  EXPECT_EQ(idle->net_saving, idle->saving);
  EXPECT_EQ(mig->saving, Money::FromUnits(24));  // a 3g slice: 4/7 of 42
  __extension__ using Wide = __int128;
  Money left = idle->cost - idle->saving;
  EXPECT_EQ(mig->net_saving.micros(), static_cast<int64_t>(static_cast<Wide>(left.micros()) * 4 / 7));
  EXPECT_GT(alone["nb"], cost["nb"]);  // the plain sum the totals used to show
  EXPECT_LT(net["nb"], cost["nb"]);
  // The total is the net savings' sum; a job with one piece of advice saves it whole.
  Money total;
  for (const auto& [job, m] : net) total += m;
  EXPECT_EQ(TotalNetSaving(*recs), total);
  EXPECT_EQ(net["serve"], alone["serve"]);
}

TEST_F(RecommendTest, FiltersByTeam) {
  auto recs = *Recommend(t_.ledger(), window_, "recsys");
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].job_id, "serve");
}

// The samples of a fleet's allocations are read a block at a time: 300 notebooks, each on
// its own GPU with its own peak memory, are each advised from their own samples, on both
// sides of a block's end.
TEST(RecommendManyTest, EachJobIsAdvisedFromItsOwnSamples) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(
      {PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromUnits(7), {0, kForever}}})).ok());
  constexpr int kJobs = 300;
  const int64_t end = kBaseMs + 6 * kMsPerHour;
  auto peak_gib = [](int k) { return 1 + k % 40; };
  Batch b;
  b.batch_id = "many";
  for (int k = 0; k < kJobs; ++k) {
    std::string gpu = "GPU-" + std::to_string(k), job = "nb-" + std::to_string(k);
    b.devices.push_back(Device{.uuid = gpu, .model = "NVIDIA H100 80GB HBM3", .memory_mib = 81559, .pool = "p",
                               .sample_interval_ms = 60'000});
    b.jobs.push_back(Job{.id = job, .team = "nlp", .kind = JobKind::kNotebook});
    b.allocations.push_back({gpu, job, kBaseMs, end});
    for (int64_t ts = kBaseMs; ts <= end; ts += 60'000) {
      Sample s;
      s.device_uuid = gpu;
      s.t_ms = ts;
      s.sm_active = ts - kBaseMs < 30 * kMsPerMinute ? 0.3 : 0.0;
      // The peak once, an hour in; a quarter of it otherwise.
      s.fb_used_mib = (ts == kBaseMs + kMsPerHour ? 1024 : 256) * peak_gib(k);
      b.samples.push_back(s);
    }
  }
  auto r = t.ledger().Ingest(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto recs = Recommend(t.ledger(), {kBaseMs, end});
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  std::map<std::string, int> advised;
  for (const Recommendation& rec : *recs) {
    int k = std::stoi(rec.job_id.substr(3));
    EXPECT_THAT(rec.evidence, HasSubstr(fmt::format("peak memory {}.0 GiB", peak_gib(k)))) << rec.job_id;
    EXPECT_THAT(rec.evidence, HasSubstr("6.0 h sampled on 1 GPU(s)")) << rec.job_id;
    ++advised[rec.job_id];
  }
  EXPECT_EQ(advised.size(), static_cast<size_t>(kJobs));  // every notebook, idle after 30 min
}

// A job's GPUs may lie on both sides of a block's end (each block's samples are decoded
// and reduced on a second thread while the next block is read): 100 notebooks on three
// GPUs each are 300 spans, and the 86th's three are the 256th to the 258th. Each job's
// activity percentiles, peak memory and sampled hours are those of its own three GPUs'
// samples, taken here by sorting them. Twelve serving deployments after them, whose
// engine snapshots are read in the read loop's pauses or, on PostgreSQL, on a third
// thread through a sibling snapshot, are each advised from their own: those whose queue
// is empty give up GPUs, each naming its own KV cache level; those with a queue none.
class RecommendOnBackendTest : public ::testing::TestWithParam<testing::Backend> {
 protected:
  void SetUp() override {
    if (std::string why = testing::BackendMissing(GetParam()); !why.empty()) GPULEDGER_SKIP_OR_FAIL_IN_CI() << why;
  }
};
INSTANTIATE_TEST_SUITE_P(Stores, RecommendOnBackendTest,
                         ::testing::Values(testing::Backend::kSqlite, testing::Backend::kPostgres),
                         [](const auto& p) { return testing::BackendName(p.param); });

TEST_P(RecommendOnBackendTest, AJobWhoseGpusStraddleReadBlocksIsAdvisedFromAllOfThem) {
  testing::TempLedger t(GetParam());
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(
      {PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromUnits(7), {0, kForever}}})).ok());
  constexpr int kJobs = 100, kGpusEach = 3;
  constexpr int64_t kStep = 5 * kMsPerMinute;
  const int64_t end = kBaseMs + 3 * kMsPerHour;
  Batch b;
  b.batch_id = "straddle";
  std::map<std::string, std::vector<double>> activity_of;
  std::map<std::string, double> peak_of;
  std::map<std::string, int64_t> sampled_of;
  for (int k = 0; k < kJobs; ++k) {
    const std::string job = fmt::format("nb-{:03}", k);
    b.jobs.push_back(Job{.id = job, .team = "nlp", .kind = JobKind::kNotebook});
    for (int g = 0; g < kGpusEach; ++g) {
      const std::string gpu = fmt::format("GPU-{:03}-{}", k, g);
      b.devices.push_back(Device{.uuid = gpu, .model = "NVIDIA H100 80GB HBM3", .memory_mib = 81559, .pool = "p",
                                 .sample_interval_ms = kStep});
      b.allocations.push_back({gpu, job, kBaseMs, end});
      // Busy for the first hour at levels of the job's and GPU's own, then idle (so that
      // every notebook is advised to stop when idle); the last sample 5 min before the end.
      for (int64_t ts = kBaseMs; ts < end; ts += kStep) {
        const int64_t i = (ts - kBaseMs) / kStep;
        Sample s{.device_uuid = gpu, .t_ms = ts};
        s.sm_active = i < 12 ? static_cast<double>((k * 13 + g * 29 + i * 7) % 61 + 1) / 100.0 : 0.0;
        s.fb_used_mib = static_cast<double>(1024 * (1 + (k * 3 + g + i) % 50));
        activity_of[job].push_back(*s.sm_active);
        peak_of[job] = std::max(peak_of[job], *s.fb_used_mib);
        b.samples.push_back(s);
      }
      sampled_of[job] += end - kStep - kBaseMs;
    }
  }
  constexpr int kDeployments = 12;  // even: an empty queue, KV cache at (21 + d)%; odd: a queue
  for (int d = 0; d < kDeployments; ++d) {
    const std::string job = fmt::format("serve-{:02}", d);
    b.jobs.push_back(Job{.id = job, .team = "recsys", .kind = JobKind::kServing});
    for (int g = 0; g < 4; ++g) {
      const std::string gpu = fmt::format("GPU-{}-{}", job, g);
      b.devices.push_back(Device{.uuid = gpu, .model = "NVIDIA H100 80GB HBM3", .memory_mib = 81559, .pool = "p",
                                 .sample_interval_ms = kStep});
      b.allocations.push_back({gpu, job, kBaseMs, end});
      for (int64_t ts = kBaseMs; ts < end; ts += kStep) {
        b.samples.push_back(Sample{.device_uuid = gpu, .t_ms = ts, .sm_active = 0.2, .fb_used_mib = 30 * 1024.0});
      }
    }
    for (int64_t ts = kBaseMs + kStep; ts < end; ts += kStep) {
      b.serving.push_back(ServingSnapshot{.job_id = job, .t_ms = ts, .engine = "vllm", .model = "m",
                                          .requests_waiting = d % 2 == 1 ? 3.0 : 0.0,
                                          .kv_cache_usage_ratio = (21 + d) / 100.0});
    }
  }
  auto r = t.ledger().Ingest(b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto recs = Recommend(t.ledger(), {kBaseMs, end});
  ASSERT_TRUE(recs.ok()) << recs.status().ToString();
  std::map<std::string, int> serving_advice, want_serving_advice;
  for (int d = 0; d < kDeployments; d += 2) want_serving_advice[fmt::format("serve-{:02}", d)] = 1;
  std::erase_if(*recs, [&](const Recommendation& rec) {
    if (rec.job_id.starts_with("nb-")) return false;
    ++serving_advice[rec.job_id];
    const int d = std::stoi(rec.job_id.substr(6));
    EXPECT_EQ(rec.kind, RecommendationKind::kServingHeadroom) << rec.job_id;
    // Its load at p95 is its KV cache's 21% to 31%: two GPUs carry it, at 42% to 62% each.
    EXPECT_THAT(rec.action, HasSubstr("serve on 2 GPUs instead of 4")) << rec.job_id;
    EXPECT_THAT(rec.evidence, HasSubstr(fmt::format("queue empty at p99 (35 scrapes); KV cache p95 {0}%, max {0}%", 21 + d)))
        << rec.job_id;
    return true;
  });
  EXPECT_EQ(serving_advice, want_serving_advice);
  auto nearest_rank = [](std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
    return v[rank == 0 ? 0 : rank - 1];
  };
  std::map<std::string, int> advised;
  for (const Recommendation& rec : *recs) {
    const std::vector<double>& v = activity_of.at(rec.job_id);
    EXPECT_EQ(rec.evidence,
              fmt::format("activity p50 {:.0f}%, p95 {:.0f}%; peak memory {:.1f} GiB; {:.1f} h sampled on 3 GPU(s)",
                          nearest_rank(v, 0.5) * 100, nearest_rank(v, 0.95) * 100, peak_of.at(rec.job_id) / 1024.0,
                          static_cast<double>(sampled_of.at(rec.job_id)) / kMsPerHour))
        << rec.job_id;
    ++advised[rec.job_id];
  }
  EXPECT_EQ(advised.size(), static_cast<size_t>(kJobs));
  EXPECT_TRUE(advised.count("nb-085")) << "the job across the first block's end";
}

}  // namespace
}  // namespace gpuledger::ledger
