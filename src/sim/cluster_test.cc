#include "sim/cluster.h"

#include <gtest/gtest.h>

namespace gpuledger::sim {
namespace {

const std::string kTestdata = std::string(GPULEDGER_SOURCE_DIR) + "/src/sim/testdata";

TEST(ClusterTest, LoadsTheExampleCluster) {
  auto c = LoadClusterFile(kTestdata + "/example_cluster.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->name, "example-separated");
  ASSERT_EQ(c->pools.size(), 3U);
  EXPECT_EQ(c->TotalGpus(), 176);
  EXPECT_EQ(c->pools[0].price_per_gpu_hour, Money::FromMicros(3'500'000));
  EXPECT_DOUBLE_EQ(c->pools[0].cross_rack_slowdown, 0.15);
  EXPECT_EQ(c->pools[2].sharing, Sharing::kMig);
  EXPECT_EQ(c->pools[2].mig_layout, (std::vector<int32_t>{3, 2, 1, 1}));
  ASSERT_EQ(c->queues.size(), 4U);
  EXPECT_EQ(c->queues[1].parent, "research");
  EXPECT_EQ(c->queues[2].max_gpus, 96);
  EXPECT_FALSE(c->queues[3].borrowing);
  EXPECT_EQ(c->scheduler.min_runtime_ms, 10 * 60 * 1000);
  EXPECT_DOUBLE_EQ(c->scheduler.slo_target_ratio, 0.95);
  EXPECT_EQ(c->scheduler.las_thresholds_gpu_ms, (std::vector<int64_t>{3'600'000}));
  ASSERT_TRUE(LoadClusterFile(kTestdata + "/shared_pool.toml").ok());
}

TEST(ClusterTest, RoutesByPoolNameKindAndQueue) {
  auto c = LoadClusterFile(kTestdata + "/example_cluster.toml");
  ASSERT_TRUE(c.ok());
  SimJob j;
  j.kind = JobKind::kServing;
  EXPECT_EQ(c->RoutePool(j), 1);
  j.kind = JobKind::kNotebook;
  EXPECT_EQ(c->RoutePool(j), 2);
  j.pool = "training";
  EXPECT_EQ(c->RoutePool(j), 0);
  j.pool = "nope";
  j.kind = JobKind::kUnknown;
  EXPECT_EQ(c->RoutePool(j), 0);
  c->pools[0].queues = {"only-this"};
  EXPECT_EQ(c->RoutePool(j), -1);
}

struct BadToml {
  const char* text;
  const char* expect;  // part of the message
};
class ClusterErrorTest : public ::testing::TestWithParam<BadToml> {};

TEST_P(ClusterErrorTest, NamesWhereAndWhat) {
  auto c = ParseClusterToml(GetParam().text, "c.toml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(GetParam().expect), std::string::npos) << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Errors, ClusterErrorTest,
    ::testing::Values(BadToml{"name = \"x\"\n", "needs at least one [[pool]]"},
                      BadToml{"[[pool]]\nnodes = 2\ngpus = 8\n", "c.toml:3: pool[0].gpus: unknown key"},
                      BadToml{"[[pool]]\nnodes = 0\n", "pool[0].nodes: must be within 1..1000000"},
                      BadToml{"[[pool]]\nnodes = 1\nsharing = \"mps\"\n", "pool[0].sharing: must be"},
                      BadToml{"[[pool]]\nnodes = 1\nsharing = \"mig\"\n", "mig_layout: required"},
                      BadToml{"[[pool]]\nnodes = 1\nmig_layout = [4, 4]\n", "more than 7 sevenths"},
                      BadToml{"[[pool]]\nnodes = 1\nprice_per_gpu_hour = \"abc\"\n", "price_per_gpu_hour"},
                      BadToml{"[[pool]]\nnodes = 1\nkinds = [\"gaming\"]\n", "unknown job kind 'gaming'"},
                      BadToml{"[[pool]]\nnodes = 1\n[scheduler]\nmin_runtime = \"soon\"\n", "scheduler.min_runtime"},
                      BadToml{"[[pool]]\nnodes = 1\n[[queue]]\nname = \"a\"\nparent = \"b\"\n", "parent 'b' is not defined"},
                      BadToml{"[[pool]]\nnodes = 1\n[[queue]]\nname = \"a\"\nparent = \"b\"\n[[queue]]\nname = \"b\"\n"
                              "parent = \"a\"\n",
                              "cycle"},
                      BadToml{"[[pool]]\nnodes = 1\n[scheduler]\nlas_thresholds = [\"2h\", \"1h\"]\n", "ascending"},
                      BadToml{"[[pool]]\nnodes = = 1\n", "c.toml:2:"}));

}  // namespace
}  // namespace gpuledger::sim
