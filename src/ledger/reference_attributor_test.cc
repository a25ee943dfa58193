// The ledger against a naive reference model (reference_attributor.h): for tiny random
// fleets, every bucket of every device, and of every job on it, is what a
// millisecond-by-millisecond reading of the rules gives. A sum law cannot see time
// moved between active and allocated_idle, or from one job to another; this can.
#include "ledger/reference_attributor.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "ledger/random_fleet.h"
#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

// One or two GPUs (maybe in MIG slices), four jobs, two hours.
constexpr testing::RandomFleetShape kTiny{
    .max_gpus = 2, .max_slices = 2, .jobs = 4, .horizon_ms = 2 * kMsPerHour};

// The ledger's usage rows by device and job, in GPU-milliseconds x kShareScale.
using Cells = std::map<std::pair<std::string, std::string>, std::array<int64_t, kBucketCount>>;
Cells ByDeviceAndJob(const UsageReport& r) {
  Cells out;
  for (const UsageRow& row : r.rows) out[{row.key[0], row.key[1]}] = row.gpu_ticks_ms;
  return out;
}

// A report rounds once and apportions over its rows and buckets, each cell its exact
// cost rounded down or up: a sum of `rows` cells is within a micro-unit per row of the
// exact sum.
void ExpectCostNear(Money got, CostNumerator exact, size_t rows, const std::string& what) {
  CostNumerator diff = static_cast<CostNumerator>(got.micros()) * kCostDenominator - exact;
  EXPECT_LT(diff < 0 ? -diff : diff,
            static_cast<CostNumerator>(std::max<size_t>(rows, 1)) * kCostDenominator)
      << what << " costs " << got.micros() << " micro-units, exactly "
      << static_cast<double>(exact) / static_cast<double>(kCostDenominator) << ", over " << rows
      << " rows";
}

std::string Describe(const TimeRange& w) {
  return FormatTime(w.begin_ms) + " .. " + FormatTime(w.end_ms);
}

// Compares one window of the ledger with the model: each device's buckets exactly in
// time and to the report's rounding in cost, each job's on it to within the rounding of
// shared stretches, the fleet's total cost exactly.
void ExpectSameUsage(const UsageReport& got,
                     const std::map<std::string, reference::DeviceUsage>& want,
                     const reference::Model& model) {
  SCOPED_TRACE(Describe(got.window));
  Cells cells = ByDeviceAndJob(got);
  std::array<CostNumerator, kBucketCount> fleet_cost{};
  for (const auto& [uuid, u] : want) {
    const int64_t ticks = model.devices().at(uuid).share_ticks;
    std::array<int64_t, kBucketCount> device{};
    std::array<Money, kBucketCount> device_cost{};
    size_t device_rows = 0;
    for (const UsageRow& row : got.rows) {
      if (row.key[0] != uuid) continue;
      ++device_rows;
      for (size_t b = 0; b < kBucketCount; ++b) {
        device[b] += row.gpu_ticks_ms[b];
        device_cost[b] += row.cost[b];
      }
    }
    for (size_t b = 0; b < kBucketCount; ++b) {
      EXPECT_EQ(device[b], u.ms[b] * ticks)
          << uuid << " " << BucketName(kAllBuckets[b]) << ": the ledger has "
          << device[b] / std::max<int64_t>(ticks, 1) << " ms, the model " << u.ms[b] << " ms";
      ExpectCostNear(device_cost[b], u.cost[b], device_rows,
                     uuid + " " + std::string(BucketName(kAllBuckets[b])));
      fleet_cost[b] += u.cost[b];
    }
    const double slack_ms = static_cast<double>(u.shared_segments + 2);
    for (const auto& [job, v] : u.by_job) {
      auto it = cells.find({uuid, job});
      for (size_t b = 0; b < kBucketCount; ++b) {
        double want_ticks = v[b] * static_cast<double>(ticks);
        double got_ticks = it == cells.end() ? 0.0 : static_cast<double>(it->second[b]);
        EXPECT_LE(std::abs(got_ticks - want_ticks), slack_ms * static_cast<double>(ticks) + 1e-6)
            << uuid << " job " << job << " " << BucketName(kAllBuckets[b]) << ": the ledger has "
            << got_ticks / static_cast<double>(std::max<int64_t>(ticks, 1)) << " ms, the model "
            << v[b] << " ms (shared stretches: " << u.shared_segments << ")";
      }
    }
    for (const auto& [key, v] : cells) {
      if (key.first != uuid || u.by_job.contains(key.second)) continue;
      EXPECT_EQ(v, (std::array<int64_t, kBucketCount>{}))
          << uuid << " job " << key.second << " is not the model's";
    }
  }
  for (const auto& [key, v] : cells) {
    EXPECT_TRUE(want.contains(key.first)) << "device " << key.first << " is not the model's";
  }
  // Money over the fleet: each bucket within a micro-unit per row of its exact cost, the
  // total the exact total rounded.
  CostNumerator exact_total = 0;
  for (size_t b = 0; b < kBucketCount; ++b) {
    exact_total += fleet_cost[b];
    ExpectCostNear(got.total.cost[b], fleet_cost[b], got.rows.size(),
                   "the fleet's " + std::string(BucketName(kAllBuckets[b])));
  }
  EXPECT_EQ(got.total.total_cost(), RoundCost(exact_total));
}

class ReferenceAttributorTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(ReferenceAttributorTest, EveryBucketOfEveryDeviceAndJobIsTheNaiveModels) {
  testing::RandomFleet fleet = testing::MakeRandomFleet(GetParam(), kTiny);
  // Every third fleet under one staleness limit for all devices (the config's override).
  const int64_t staleness_override_ms = GetParam() % 3 == 0 ? 45'000 : 0;
  testing::TempLedger t(LedgerOptions{.staleness_override_ms = staleness_override_ms});
  PriceBook book = *PriceBook::Create(fleet.prices);
  ASSERT_TRUE(t.ledger().SetPrices(book).ok());
  for (const Batch& b : fleet.batches) {
    auto r = t.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << b.batch_id << ": " << r.status().ToString();
  }
  // Windows: everything (from before the first sample to after the last), whole hours
  // (read from rollups), and random cuts through hours and minutes.
  std::mt19937_64 rng(GetParam() * 7919 + 1);
  std::vector<TimeRange> windows = {{kBaseMs - 30 * kMsPerMinute, kBaseMs + 150 * kMsPerMinute},
                                    {kBaseMs, kBaseMs + kMsPerHour}};
  for (int w = 0; w < 3; ++w) {
    int64_t a = kBaseMs - 20 * kMsPerMinute + static_cast<int64_t>(rng() % (150 * 60'000));
    int64_t b =
        std::min(a + 1 + static_cast<int64_t>(rng() % (90 * 60'000)), kBaseMs + 150 * kMsPerMinute);
    windows.push_back({a, b});
  }
  // A report ends where the data ends, at the fleet's latest sample (docs/ARCHITECTURE.md):
  // the model is asked for the same window, found from the batches themselves.
  int64_t data_end = 0;
  for (const Batch& b : fleet.batches) {
    for (const Sample& smp : b.samples) data_end = std::max(data_end, smp.t_ms);
  }
  for (TimeRange& w : windows) w.end_ms = std::max(w.begin_ms, std::min(w.end_ms, data_end));
  std::erase_if(windows, [](const TimeRange& w) { return w.empty(); });
  reference::Model model(fleet.batches, book, staleness_override_ms);
  std::vector<std::map<std::string, reference::DeviceUsage>> want = model.Usage(windows);
  for (size_t i = 0; i < windows.size(); ++i) {
    auto got = t.ledger().Usage(windows[i], {Dimension::kDevice, Dimension::kJob});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->window, windows[i]);
    ExpectSameUsage(*got, want[i], model);
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, ReferenceAttributorTest, ::testing::Range<uint64_t>(1, 13));

// The model itself on a case counted by hand, and the ledger on the same case: one
// device sampled every 10 s (staleness 30 s) over 100 s.
//   [0, 5 s)       covered by the sample at 10 s, held by nobody: unallocated 5 s
//   [5 s, 10 s)    job a from 5 s, activity 0.5 over the span [0, 10 s): of its
//                  10 000 ms, 5 000 active, 2 500 of them before 5 s: a gets 2.5 s
//                  active, 2.5 s idle
//   [10 s, 20 s)   the sample at 20 s reports the GPU lost: unavailable 10 s
//   [20 s, 80 s)   no sample for 60 s, over the limit: unmonitored 60 s
//   [80 s, 90 s)   a and b (from 80 s) share it at activity 0.3: 3 s active split by SM
//                  share 0.2 : 0.1, 7 s idle split by memory 1000 : 3000 MiB
//   [90 s, 100 s)  after the last sample: unmonitored 10 s
TEST(ReferenceModelTest, CountsAHandWorkedDeviceAsTheRulesSay) {
  const int64_t t0 = kBaseMs;
  Batch b;
  b.batch_id = "hand";
  Device d;
  d.uuid = "GPU-hand";
  d.node = "n0";
  d.model = "NVIDIA-H200";
  d.pool = "training";
  d.sample_interval_ms = 10'000;
  b.devices.push_back(d);
  for (const char* id : {"a", "b"}) {
    Job j;
    j.id = id;
    j.team = id;
    b.jobs.push_back(j);
  }
  b.allocations.push_back({d.uuid, "a", t0 + 5'000, std::nullopt});
  b.allocations.push_back({d.uuid, "b", t0 + 80'000, std::nullopt});
  auto sample = [&](int64_t at, double sm, Health h = Health::kOk) {
    Sample s;
    s.device_uuid = d.uuid;
    s.t_ms = t0 + at;
    s.sm_active = sm;
    s.health = h;
    return s;
  };
  b.samples = {sample(0, 0.5), sample(10'000, 0.5), sample(20'000, 0.5, Health::kLost),
               sample(80'000, 1.0), sample(90'000, 0.3)};
  b.samples.back().processes = {{1, "a", 1000, 0.2}, {2, "b", 3000, 0.1}};
  PriceBook book = *PriceBook::Create(
      {{"*", "*", CapacityType::kOnDemand, Money::FromMicros(3'600'000), {0, kForever}}});

  const TimeRange window{t0, t0 + 100'000};
  reference::Model model(std::span<const Batch>(&b, 1), book);
  auto want = model.Usage(std::span<const TimeRange>(&window, 1))[0].at(d.uuid);
  using A = std::array<int64_t, kBucketCount>;  // active, allocated_idle, unallocated, unavailable,
                                                // unmonitored
  EXPECT_EQ(want.ms, (A{5'500, 9'500, 5'000, 10'000, 70'000}));
  // Shares are fractions summed a millisecond at a time: equal to well under a ms.
  auto near = [](const std::array<double, kBucketCount>& got, const A& ms) {
    for (size_t k = 0; k < kBucketCount; ++k) {
      if (std::abs(got[k] - static_cast<double>(ms[k])) > 1e-6) return false;
    }
    return true;
  };
  EXPECT_TRUE(near(want.by_job.at("a"), A{4'500, 4'250, 0, 0, 0}));
  EXPECT_TRUE(near(want.by_job.at("b"), A{1'000, 5'250, 0, 0, 0}));
  EXPECT_TRUE(near(want.by_job.at(std::string(kNoJob)), A{0, 0, 5'000, 10'000, 70'000}));
  EXPECT_EQ(want.shared_segments, 1);  // [80 s, 90 s): one sample, one minute, one pair
  // One GPU-second costs 1000 micro-units at 3.6 units an hour.
  EXPECT_EQ(RoundCost(want.cost[0]), Money::FromMicros(5'500));

  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().SetPrices(book).ok());
  ASSERT_TRUE(t.ledger().Ingest(b).ok());
  // The ledger's report ends where the data ends, with the last sample at 90 s: the 10 s
  // after it, unmonitored above, are no capacity there.
  auto got = t.ledger().Usage(window, {Dimension::kDevice, Dimension::kJob});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->window, (TimeRange{t0, t0 + 90'000}));
  Cells cells = ByDeviceAndJob(*got);
  EXPECT_EQ((cells[{d.uuid, "a"}]), (A{4'500 * kShareScale, 4'250 * kShareScale, 0, 0, 0}));
  EXPECT_EQ((cells[{d.uuid, "b"}]), (A{1'000 * kShareScale, 5'250 * kShareScale, 0, 0, 0}));
  EXPECT_EQ((cells[{d.uuid, std::string(kNoJob)}]),
            (A{0, 0, 5'000 * kShareScale, 10'000 * kShareScale, 60'000 * kShareScale}));
}

// MIG: a slice carries its share of the GPU, the parent what its slices leave.
TEST(ReferenceModelTest, SlicesCarryTheirShareAndTheParentTheRest) {
  Batch b;
  b.batch_id = "mig";
  Device gpu;
  gpu.uuid = "GPU-p";
  gpu.model = "NVIDIA-H200";
  b.devices.push_back(gpu);
  for (auto [name, n] : {std::pair{"GPU-p-3g", 3}, std::pair{"GPU-p-2g", 2}}) {
    Device m = gpu;
    m.uuid = name;
    m.parent_uuid = gpu.uuid;
    m.share = {n, 7};
    b.devices.push_back(m);
  }
  for (const Device& d : b.devices) {
    Sample s;
    s.device_uuid = d.uuid;
    s.t_ms = kBaseMs + (d.is_mig() ? 1'000 : 0);
    s.sm_active = 0.5;
    b.samples.push_back(s);
  }
  PriceBook book = *PriceBook::Create(
      {{"*", "*", CapacityType::kOnDemand, Money::FromMicros(1), {0, kForever}}});
  reference::Model model(std::span<const Batch>(&b, 1), book);
  EXPECT_EQ(model.devices().at("GPU-p-3g").share_ticks, 3 * kShareScale / 7);
  EXPECT_EQ(model.devices().at("GPU-p-2g").share_ticks, 2 * kShareScale / 7);
  EXPECT_EQ(model.devices().at("GPU-p").share_ticks, 2 * kShareScale / 7);
  // In service from each one's first sample: the parent 1 s before its slices.
  EXPECT_EQ(model.InServiceTicks({kBaseMs, kBaseMs + 10'000}),
            10'000 * 2 * kShareScale / 7 + 9'000 * 5 * kShareScale / 7);
}

}  // namespace
}  // namespace gpuledger::ledger
