#include "wire/prometheus/serving_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/testing/missing_component.h"

namespace gpuledger::prometheus {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ServingMetricsTest, ReadsTheRealVllmCapture) {
  auto path = std::filesystem::path(GPULEDGER_SHARED_DATA_DIR) / "telemetry/vllm/vllm_v1_idle.prom";
  if (!std::filesystem::exists(path)) GPULEDGER_SKIP_OR_FAIL_IN_CI() << path << " is absent";
  auto parsed = ParseText(Read(path));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto x = ExtractServing(parsed->families, 1'000);
  ASSERT_EQ(x.snapshots.size(), 1u);
  const ServingSnapshot& s = x.snapshots[0];
  EXPECT_EQ(s.engine, "vllm");
  EXPECT_EQ(s.model, "Qwen/Qwen2.5-0.5B-Instruct");
  // An idle server: everything present and zero, nothing invented.
  EXPECT_EQ(s.requests_waiting, 0.0);
  EXPECT_EQ(s.requests_running, 0.0);
  EXPECT_EQ(s.kv_cache_usage_ratio, 0.0);
  EXPECT_EQ(s.prompt_tokens_total, 0.0);
  EXPECT_EQ(s.generation_tokens_total, 0.0);
  EXPECT_EQ(s.preemptions_total, 0.0);
  EXPECT_FALSE(s.prefill_seconds.empty());
  EXPECT_FALSE(s.decode_seconds.empty());
  EXPECT_FALSE(s.iteration_tokens.empty());
  EXPECT_EQ(s.iteration_tokens.total, 0.0);
  EXPECT_FALSE(s.executions_total.has_value());  // a Triton figure
  EXPECT_TRUE(x.skipped.empty()) << x.skipped.front();
}

TEST(ServingMetricsTest, ReadsTritonPerModelAcrossVersions) {
  auto parsed = ParseText(Read(std::filesystem::path(GPULEDGER_PROM_TESTDATA_DIR) / "triton.prom"));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto x = ExtractServing(parsed->families, 5'000);
  ASSERT_EQ(x.snapshots.size(), 2u);
  const ServingSnapshot& bert = x.snapshots[0];
  EXPECT_EQ(bert.model, "bert");
  EXPECT_EQ(bert.requests_total, 400.0);
  EXPECT_EQ(bert.executions_total, 200.0);
  EXPECT_EQ(bert.requests_waiting, 1.0);
  EXPECT_DOUBLE_EQ(*bert.queue_seconds_total, 0.04);
  const ServingSnapshot& resnet = x.snapshots[1];
  EXPECT_EQ(resnet.requests_total, 9600.0);
  EXPECT_EQ(resnet.executions_total, 600.0);
  EXPECT_DOUBLE_EQ(*resnet.compute_seconds_total, 6.0);
  EXPECT_EQ(resnet.t_ms, 5'000);
}

TEST(ServingMetricsTest, BadValuesAreSkippedAndSaid) {
  auto parsed = ParseText(
      "# TYPE vllm:num_requests_waiting gauge\n"
      "vllm:num_requests_waiting{model_name=\"m\"} NaN\n"
      "# TYPE vllm:kv_cache_usage_perc gauge\n"
      "vllm:kv_cache_usage_perc{model_name=\"m\"} 87\n"
      "# TYPE vllm:num_requests_running counter\n"
      "vllm:num_requests_running{model_name=\"m\"} 3\n"
      "# TYPE vllm:num_requests_running_x gauge\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto x = ExtractServing(parsed->families, 0);
  ASSERT_EQ(x.snapshots.size(), 1u);
  EXPECT_FALSE(x.snapshots[0].requests_waiting.has_value());
  EXPECT_FALSE(x.snapshots[0].kv_cache_usage_ratio.has_value());
  ASSERT_EQ(x.skipped.size(), 3u);
  EXPECT_THAT(x.skipped[0], HasSubstr("value NaN"));
  EXPECT_THAT(x.skipped[1], HasSubstr("87 is not a ratio"));
  EXPECT_THAT(x.skipped[2], HasSubstr("type counter where gauge was expected"));
}

}  // namespace
}  // namespace gpuledger::prometheus
