#include "sim/pool_state.h"

#include <gtest/gtest.h>

namespace gpuledger::sim {
namespace {

PoolSpec Pool(int32_t nodes, int32_t gpus_per_node) {
  PoolSpec p;
  p.name = "p";
  p.nodes = nodes;
  p.gpus_per_node = gpus_per_node;
  return p;
}

SimJob Whole(int32_t gpus) {
  SimJob j;
  j.gpus = gpus;
  j.duration_ms = 1;
  return j;
}

SimJob Part(int32_t ticks) {
  SimJob j;
  j.share_ticks = ticks;
  j.duration_ms = 1;
  return j;
}

int32_t NodeOf(const Allocation& a, int32_t gpus_per_node) { return a.gpus.front() / gpus_per_node; }

TEST(PoolStateTest, TopologyPlacementIsBestFitOnOneNode) {
  PoolState pool(Pool(2, 4));
  Allocation a, b, c;
  ASSERT_TRUE(pool.Place(0, Whole(3), PlacementMode::kTopology, a));
  EXPECT_EQ(a.span, Span::kOneNode);
  // One GPU goes to the node with one free GPU, not to the empty node.
  ASSERT_TRUE(pool.Place(1, Whole(1), PlacementMode::kTopology, b));
  EXPECT_EQ(NodeOf(b, 4), NodeOf(a, 4));
  // So a 4-GPU job still fits on one node.
  ASSERT_TRUE(pool.Place(2, Whole(4), PlacementMode::kTopology, c));
  EXPECT_EQ(c.span, Span::kOneNode);
  EXPECT_EQ(pool.free_whole_gpus(), 0);
  EXPECT_EQ(pool.allocated_ticks(), 8 * kTicksPerGpu);
  Allocation d;
  EXPECT_FALSE(pool.Place(3, Whole(1), PlacementMode::kTopology, d));
  pool.Release(0, a);
  pool.Release(1, b);
  EXPECT_EQ(pool.free_whole_gpus(), 4);
  EXPECT_TRUE(pool.Place(3, Whole(4), PlacementMode::kTopology, d));
}

TEST(PoolStateTest, SpreadPlacementFragments) {
  PoolState pool(Pool(2, 4));
  Allocation a, b, c;
  ASSERT_TRUE(pool.Place(0, Whole(1), PlacementMode::kSpread, a));
  ASSERT_TRUE(pool.Place(1, Whole(1), PlacementMode::kSpread, b));
  EXPECT_NE(NodeOf(a, 4), NodeOf(b, 4));
  // Six GPUs are free, but no node has four: a 4-GPU job must span two nodes.
  ASSERT_TRUE(pool.Place(2, Whole(4), PlacementMode::kTopology, c));
  EXPECT_EQ(c.span, Span::kOneRack);  // one node per NVLink domain, both in rack 0
}

TEST(PoolStateTest, StrictLocalityWaitsRatherThanScatter) {
  PoolSpec spec = Pool(2, 4);
  spec.strict_locality = true;
  PoolState spread(spec), packed(spec);
  Allocation a, b, c;
  ASSERT_TRUE(spread.Place(0, Whole(1), PlacementMode::kSpread, a));
  ASSERT_TRUE(spread.Place(1, Whole(1), PlacementMode::kSpread, b));
  // Six GPUs are free, three on each node: a 4-GPU job may not span nodes.
  EXPECT_FALSE(spread.Place(2, Whole(4), PlacementMode::kTopology, c));
  EXPECT_EQ(spread.free_whole_gpus(), 6);
  ASSERT_TRUE(packed.Place(0, Whole(1), PlacementMode::kTopology, a));
  ASSERT_TRUE(packed.Place(1, Whole(1), PlacementMode::kTopology, b));
  ASSERT_TRUE(packed.Place(2, Whole(4), PlacementMode::kTopology, c));
  EXPECT_EQ(c.span, Span::kOneNode);
  // Larger than a node: the fewest nodes (two for 5 GPUs), here 4 + 2 free.
  PoolState big(spec);
  Allocation d, e;
  ASSERT_TRUE(big.Place(0, Whole(2), PlacementMode::kTopology, d));
  ASSERT_TRUE(big.Place(1, Whole(5), PlacementMode::kTopology, e));
  EXPECT_EQ(e.gpus.size(), 5U);
  EXPECT_FALSE(big.Place(2, Whole(2), PlacementMode::kTopology, d));  // one GPU left
}

TEST(PoolStateTest, MultiNodeJobsStayInOneNvlinkDomainOrRack) {
  PoolSpec spec = Pool(8, 4);
  spec.nodes_per_nvlink_domain = 2;
  spec.nodes_per_rack = 4;
  PoolState pool(spec);
  Allocation small, big, huge;
  ASSERT_TRUE(pool.Place(0, Whole(1), PlacementMode::kTopology, small));  // the last node: rack 1
  ASSERT_TRUE(pool.Place(1, Whole(8), PlacementMode::kTopology, big));
  EXPECT_EQ(big.span, Span::kOneDomain);
  for (int32_t g : big.gpus) EXPECT_EQ(g / 8, big.gpus.front() / 8);  // one domain: 8 GPUs
  // Racks have 8 and 15 GPUs free: 12 GPUs fit in rack 1 across its domains.
  ASSERT_TRUE(pool.Place(2, Whole(12), PlacementMode::kTopology, huge));
  EXPECT_EQ(huge.span, Span::kOneRack);
  EXPECT_EQ(huge.gpus.size(), 12U);
  for (int32_t g : huge.gpus) EXPECT_GE(g, 16);
  // 9 GPUs are left, 8 in rack 0 and 1 in rack 1: 9 span racks.
  Allocation spanning;
  ASSERT_TRUE(pool.Place(3, Whole(9), PlacementMode::kTopology, spanning));
  EXPECT_EQ(spanning.span, Span::kRacks);
}

TEST(PoolStateTest, MigSlicesPackOntoOneGpu) {
  PoolSpec spec = Pool(1, 2);
  spec.sharing = Sharing::kMig;
  spec.mig_layout = {3, 2, 1, 1};
  PoolState pool(spec);
  Allocation a, b, c, d, e;
  ASSERT_TRUE(pool.Place(0, Part(100), PlacementMode::kTopology, a));  // needs 1/7
  EXPECT_EQ(a.ticks, 120);
  EXPECT_TRUE(a.shared);
  ASSERT_TRUE(pool.Place(1, Part(200), PlacementMode::kTopology, b));  // 2/7
  EXPECT_EQ(b.ticks, 240);
  ASSERT_TRUE(pool.Place(2, Part(300), PlacementMode::kTopology, c));  // 3/7
  EXPECT_EQ(c.ticks, 360);
  EXPECT_EQ(a.gpus, b.gpus);
  EXPECT_EQ(a.gpus, c.gpus);
  EXPECT_EQ(pool.free_whole_gpus(), 1);
  // 4/7 is larger than any slice: a whole GPU.
  ASSERT_TRUE(pool.Place(3, Part(450), PlacementMode::kTopology, d));
  EXPECT_EQ(d.ticks, kTicksPerGpu);
  EXPECT_FALSE(d.shared);
  // The last 1/7 slice of the first GPU.
  ASSERT_TRUE(pool.Place(4, Part(1), PlacementMode::kTopology, e));
  EXPECT_EQ(e.gpus, a.gpus);
  Allocation f;
  EXPECT_FALSE(pool.Place(5, Part(1), PlacementMode::kTopology, f));
  for (auto [i, al] : {std::pair{0U, &a}, {1U, &b}, {2U, &c}, {4U, &e}}) pool.Release(i, *al);
  EXPECT_EQ(pool.free_whole_gpus(), 1);
  EXPECT_EQ(pool.allocated_ticks(), kTicksPerGpu);
  pool.Release(3, d);
  EXPECT_EQ(pool.free_whole_gpus(), 2);
  EXPECT_EQ(pool.allocated_ticks(), 0);
}

TEST(PoolStateTest, TimeSlicingPacksByShareAndTracksTenants) {
  PoolSpec spec = Pool(1, 2);
  spec.sharing = Sharing::kTimeSlicing;
  PoolState pool(spec);
  std::vector<Allocation> a(5);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(pool.Place(i, Part(210), PlacementMode::kTopology, a[i]));
  EXPECT_EQ(a[0].gpus, a[3].gpus);
  EXPECT_EQ(pool.TenantsOf(a[0].gpus.front()).size(), 4U);
  EXPECT_EQ(pool.free_whole_gpus(), 1);
  ASSERT_TRUE(pool.Place(4, Part(210), PlacementMode::kTopology, a[4]));
  EXPECT_NE(a[4].gpus, a[0].gpus);
  pool.Release(2, a[2]);
  EXPECT_EQ(pool.TenantsOf(a[0].gpus.front()).size(), 3U);
  EXPECT_EQ(pool.allocated_ticks(), 4 * 210);
  for (uint32_t i : {0U, 1U, 3U, 4U}) pool.Release(i, a[i]);
  EXPECT_EQ(pool.free_whole_gpus(), 2);
}

TEST(PoolStateTest, SubGpuRequestTakesAWholeGpuWithoutSharing) {
  PoolState pool(Pool(1, 1));
  Allocation a;
  ASSERT_TRUE(pool.Place(0, Part(100), PlacementMode::kTopology, a));
  EXPECT_EQ(a.ticks, kTicksPerGpu);
  EXPECT_EQ(AllocatedTicksFor(pool.spec(), Part(100)), kTicksPerGpu);
}

TEST(PoolStateTest, ParsesPlacementNames) {
  EXPECT_EQ(*ParsePlacementMode("spread"), PlacementMode::kSpread);
  EXPECT_EQ(*ParsePlacementMode("topology"), PlacementMode::kTopology);
  EXPECT_FALSE(ParsePlacementMode("random").ok());
}

}  // namespace
}  // namespace gpuledger::sim
