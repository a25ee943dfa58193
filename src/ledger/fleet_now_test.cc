// FleetNow answers "which GPUs are idle right now, who holds them, since when, and what
// has that idleness cost so far?", ordered by that cost.
#include <gtest/gtest.h>

#include "ledger/test_fixture.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

constexpr int64_t kMinute = kMsPerMinute;
const int64_t kNow = kBaseMs + 4 * kMsPerHour;

Sample At(const std::string& uuid, int64_t t, double sm) {
  Sample s;
  s.device_uuid = uuid;
  s.t_ms = t;
  s.sm_active = sm;
  s.process_count = sm > 0 ? 1 : 0;
  return s;
}

Device Gpu(const std::string& uuid, const std::string& node, const std::string& model = "H100") {
  return Device{.uuid = uuid, .node = node, .model = model, .memory_mib = 81920, .pool = "training",
                .sample_interval_ms = kMinute};
}

// Samples every minute over [from, to], busy before `busy_until` and idle after it.
void AddSamples(Batch& b, const std::string& uuid, int64_t from, int64_t to, int64_t busy_until) {
  for (int64_t t = from; t <= to; t += kMinute) b.samples.push_back(At(uuid, t, t < busy_until ? 0.8 : 0.0));
}

const DeviceNow& Find(const std::vector<DeviceNow>& fleet, const std::string& uuid) {
  for (const auto& n : fleet) {
    if (n.record.device.uuid == uuid) return n;
  }
  ADD_FAILURE() << "no device " << uuid;
  return fleet.front();
}

class FleetNowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(t_.ledger().SetPrices(*PriceBook::Create(
        {PriceEntry{"H100", "*", CapacityType::kOnDemand, Money::FromUnits(2), {0, kForever}}})).ok());
  }
  void Ingest(const Batch& b) { ASSERT_TRUE(t_.ledger().Ingest(b).ok()); }
  std::vector<DeviceNow> Fleet() {
    auto f = t_.ledger().FleetNow(kNow);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? *f : std::vector<DeviceNow>{};
  }
  testing::TempLedger t_;
};

TEST_F(FleetNowTest, IdleSinceAndIdleCostSoFarOrderTheFleet) {
  Batch b;
  b.batch_id = "b1";
  // n1: GPU-A held by train-1, busy until 30 minutes ago; GPU-B held by eval-1 until two
  // hours ago. n2: GPU-C busy now.
  b.devices = {Gpu("GPU-A", "n1"), Gpu("GPU-B", "n1"), Gpu("GPU-C", "n2")};
  b.jobs = {Job{.id = "train-1", .team = "nlp", .user = "ana", .kind = JobKind::kTraining},
            Job{.id = "eval-1", .team = "vision", .kind = JobKind::kBatch},
            Job{.id = "train-2", .team = "nlp", .kind = JobKind::kTraining}};
  b.allocations = {{"GPU-A", "train-1", kBaseMs, std::nullopt},
                   {"GPU-B", "eval-1", kBaseMs, kBaseMs + 2 * kMsPerHour},
                   {"GPU-C", "train-2", kBaseMs, std::nullopt}};
  AddSamples(b, "GPU-A", kBaseMs, kNow, kNow - 30 * kMinute);
  AddSamples(b, "GPU-B", kBaseMs, kNow, kBaseMs + 2 * kMsPerHour);
  AddSamples(b, "GPU-C", kBaseMs, kNow, kNow + 1);
  Ingest(b);

  auto fleet = Fleet();
  ASSERT_EQ(fleet.size(), 3u);
  const DeviceNow& a = Find(fleet, "GPU-A");
  EXPECT_EQ(a.state, DeviceState::kAllocatedIdle);
  ASSERT_TRUE(a.idle_since_ms.has_value());
  EXPECT_EQ(*a.idle_since_ms, kNow - 30 * kMinute);  // the first idle sample
  EXPECT_EQ(a.idle_cost, Money::FromUnits(1));        // half an hour at 2.00
  EXPECT_FALSE(a.idle_since_clipped);

  const DeviceNow& bdev = Find(fleet, "GPU-B");
  EXPECT_EQ(bdev.state, DeviceState::kUnallocated);
  EXPECT_EQ(*bdev.idle_since_ms, kBaseMs + 2 * kMsPerHour);  // its allocation's end
  EXPECT_EQ(bdev.idle_cost, Money::FromUnits(4));

  const DeviceNow& c = Find(fleet, "GPU-C");
  EXPECT_EQ(c.state, DeviceState::kActive);
  EXPECT_FALSE(c.idle_since_ms.has_value());
  EXPECT_EQ(c.idle_cost, Money());

  // The costliest idleness first.
  EXPECT_EQ(fleet[0].record.device.uuid, "GPU-B");
  EXPECT_EQ(fleet[1].record.device.uuid, "GPU-A");
  EXPECT_EQ(fleet[2].record.device.uuid, "GPU-C");
  // Indexes on the node, in the order the devices were declared.
  EXPECT_EQ(a.gpu_index, 0);
  EXPECT_EQ(bdev.gpu_index, 1);
  EXPECT_EQ(c.gpu_index, 0);
  EXPECT_FALSE(a.slice_index.has_value());
}

TEST_F(FleetNowTest, AHeldGpuIdleSinceItsHolderTookItCountsFromTheAllocation) {
  Batch b;
  b.batch_id = "b1";
  b.devices = {Gpu("GPU-A", "n1")};
  b.jobs = {Job{.id = "nb-1", .team = "nlp", .kind = JobKind::kNotebook}};
  b.allocations = {{"GPU-A", "nb-1", kNow - kMsPerHour, std::nullopt}};
  AddSamples(b, "GPU-A", kBaseMs, kNow, kNow - 2 * kMsPerHour);  // busy before, for someone else
  Ingest(b);
  const std::vector<DeviceNow> fleet = Fleet();  // kept: a reference into a temporary would dangle
  const DeviceNow& a = fleet.front();
  EXPECT_EQ(a.state, DeviceState::kAllocatedIdle);
  EXPECT_EQ(*a.idle_since_ms, kNow - kMsPerHour);
  EXPECT_EQ(a.idle_cost, Money::FromUnits(2));
}

// Each held GPU's spell is searched back from now in widening steps (reaching back 1, 5,
// 21 and 85 hours), every GPU still searching in one read per step: GPUs found in
// different steps, and one never found, are each answered from their own samples.
TEST_F(FleetNowTest, HeldGpusIdleForDifferentSpellsAreEachFoundInTheirOwnStep) {
  Batch b;
  b.batch_id = "b1";
  const int64_t from = kNow - 2 * kMsPerDay;
  const std::vector<std::pair<std::string, int64_t>> idle_for = {
      {"GPU-A", 20 * kMinute}, {"GPU-B", 3 * kMsPerHour}, {"GPU-C", 30 * kMsPerHour}, {"GPU-D", 50 * kMsPerHour}};
  for (const auto& [uuid, spell] : idle_for) {
    b.devices.push_back(Gpu(uuid, "n1"));
    b.jobs.push_back(Job{.id = "job-" + uuid, .team = "nlp"});
    b.allocations.push_back({uuid, "job-" + uuid, from, std::nullopt});
    AddSamples(b, uuid, from, kNow, kNow - spell);
  }
  Ingest(b);
  const std::vector<DeviceNow> fleet = Fleet();  // kept: a reference into a temporary would dangle
  for (const auto& [uuid, spell] : idle_for) {
    const DeviceNow& n = Find(fleet, uuid);
    EXPECT_EQ(n.state, DeviceState::kAllocatedIdle) << uuid;
    ASSERT_TRUE(n.idle_since_ms.has_value()) << uuid;
    // The first idle sample; GPU-D idled since before its holder took it: from then.
    EXPECT_EQ(*n.idle_since_ms, spell < 48 * kMsPerHour ? kNow - spell : from) << uuid;
  }
}

// Many held GPUs still searching are read a block at a time: 300 of them, idle for 5 to
// 35 hours, each found at its own first idle sample.
TEST_F(FleetNowTest, ManyHeldGpusAreSearchedABlockAtATimeEachFromItsOwnSamples) {
  Batch b;
  b.batch_id = "b1";
  const int64_t from = kNow - 2 * kMsPerDay;
  auto spell = [](int k) { return (k % 7 + 1) * 5 * kMsPerHour; };
  for (int k = 0; k < 300; ++k) {
    std::string uuid = "GPU-" + std::to_string(k);
    b.devices.push_back(Gpu(uuid, "n" + std::to_string(k / 8)));
    b.devices.back().sample_interval_ms = 10 * kMinute;
    b.jobs.push_back(Job{.id = "job-" + uuid, .team = "nlp"});
    b.allocations.push_back({uuid, "job-" + uuid, from, std::nullopt});
    for (int64_t t = from; t <= kNow; t += 10 * kMinute) b.samples.push_back(At(uuid, t, t < kNow - spell(k) ? 0.8 : 0));
  }
  Ingest(b);
  const std::vector<DeviceNow> fleet = Fleet();  // kept: a reference into a temporary would dangle
  ASSERT_EQ(fleet.size(), 300u);
  for (int k = 0; k < 300; ++k) {
    const DeviceNow& n = Find(fleet, "GPU-" + std::to_string(k));
    ASSERT_TRUE(n.idle_since_ms.has_value()) << k;
    EXPECT_EQ(*n.idle_since_ms, kNow - spell(k)) << k;
  }
}

TEST_F(FleetNowTest, IdleForLongerThanTheLookBackIsClippedAndSaysSo) {
  Batch b;
  b.batch_id = "b1";
  b.devices = {Gpu("GPU-A", "n1")};
  const int64_t from = kNow - 10 * kMsPerDay;
  for (int64_t t = from; t <= kNow; t += 10 * kMinute) b.samples.push_back(At("GPU-A", t, 0));
  b.devices[0].sample_interval_ms = 10 * kMinute;
  Ingest(b);
  const std::vector<DeviceNow> fleet = Fleet();  // kept: a reference into a temporary would dangle
  const DeviceNow& a = fleet.front();
  EXPECT_EQ(a.state, DeviceState::kUnallocated);
  EXPECT_EQ(*a.idle_since_ms, kNow - kIdleLookBackMs);
  EXPECT_TRUE(a.idle_since_clipped);
  EXPECT_EQ(a.idle_cost, Money::FromUnits(2 * 24 * 7));
}

TEST_F(FleetNowTest, UnpricedIdlenessCostsZeroAndSaysSo) {
  Batch b;
  b.batch_id = "b1";
  b.devices = {Gpu("GPU-X", "n1", "NO-PRICE")};
  AddSamples(b, "GPU-X", kNow - kMsPerHour, kNow, 0);
  Ingest(b);
  const std::vector<DeviceNow> fleet = Fleet();  // kept: a reference into a temporary would dangle
  const DeviceNow& x = fleet.front();
  EXPECT_EQ(x.state, DeviceState::kUnallocated);
  EXPECT_EQ(*x.idle_since_ms, kNow - kMsPerHour);
  EXPECT_EQ(x.idle_cost, Money());
  EXPECT_FALSE(x.idle_priced);
}

TEST_F(FleetNowTest, MigSlicesCarryTheirParentsIndexAndTheirShareOfTheCost) {
  Batch b;
  b.batch_id = "b1";
  auto slice = [](const char* uuid, Share share, const char* profile) {
    Device d = Gpu(uuid, "n1");
    d.parent_uuid = "GPU-P";
    d.share = share;
    d.mig_profile = profile;
    return d;
  };
  b.devices = {Gpu("GPU-0", "n1"), Gpu("GPU-P", "n1"), slice("MIG-0", {3, 7}, "3g.40gb"), slice("MIG-1", {4, 7}, "4g.40gb")};
  for (const auto* u : {"GPU-0", "GPU-P", "MIG-0", "MIG-1"}) AddSamples(b, u, kNow - 7 * kMsPerHour, kNow, 0);
  Ingest(b);
  auto fleet = Fleet();
  EXPECT_EQ(Find(fleet, "GPU-P").gpu_index, 1);
  EXPECT_EQ(Find(fleet, "MIG-0").gpu_index, 1);
  EXPECT_EQ(*Find(fleet, "MIG-0").slice_index, 0);
  EXPECT_EQ(*Find(fleet, "MIG-1").slice_index, 1);
  // Seven hours: 3/7 of a GPU costs 3 GPU-hours at 2.00, 4/7 costs 4; the parent, all of
  // whose capacity is in its slices, costs nothing.
  EXPECT_EQ(Find(fleet, "MIG-0").idle_cost, Money::FromUnits(6));
  EXPECT_EQ(Find(fleet, "MIG-1").idle_cost, Money::FromUnits(8));
  EXPECT_EQ(Find(fleet, "GPU-P").idle_cost, Money());
  EXPECT_EQ(Find(fleet, "GPU-0").idle_cost, Money::FromUnits(14));
}

}  // namespace
}  // namespace gpuledger::ledger
