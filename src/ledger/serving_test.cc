#include "ledger/serving.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/testing/missing_component.h"

namespace gpuledger::ledger {
namespace {

using ::testing::HasSubstr;

ServingSnapshot Vllm(int64_t t_s, double prompt, double gen, double prefill_sum, double decode_sum,
                     double waiting, double kv) {
  ServingSnapshot s;
  s.t_ms = t_s * 1000;
  s.engine = "vllm";
  s.model = "llama";
  s.prompt_tokens_total = prompt;
  s.generation_tokens_total = gen;
  s.requests_waiting = waiting;
  s.requests_running = 8;
  s.kv_cache_usage_ratio = kv;
  s.preemptions_total = 0;
  s.prefill_seconds = {{0.1, 1.0, 1e300}, {0, 0, 10}, prefill_sum, 10};
  s.decode_seconds = {{1.0, 10.0, 1e300}, {0, 0, 10}, decode_sum, 10};
  return s;
}

TEST(ServingTest, RatesSplitsAndCostPerMillionTokens) {
  std::vector<ServingSnapshot> s = {Vllm(0, 1000, 500, 10, 30, 0, 0.2),
                                    Vllm(60, 61000, 30500, 25, 75, 4, 0.95),
                                    Vllm(120, 121000, 60500, 40, 120, 2, 0.5)};
  s[1].preemptions_total = 1;
  s[2].preemptions_total = 3;
  auto r = AnalyzeServing(s, Money::FromUnits(9));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->seconds, 120);
  EXPECT_DOUBLE_EQ(*r->tokens_per_second, 180000.0 / 120.0);
  EXPECT_DOUBLE_EQ(*r->generation_tokens_per_second, 60000.0 / 120.0);
  EXPECT_DOUBLE_EQ(*r->prefill_share, 30.0 / (30.0 + 90.0));
  EXPECT_DOUBLE_EQ(*r->preemptions_per_hour, 3.0 * 30.0);
  EXPECT_EQ(r->queue_depth.max, 4.0);
  EXPECT_NEAR(r->kv_cache_full_share, 1.0 / 3.0, 1e-12);
  EXPECT_EQ(*r->cost_per_million_tokens, Money::FromUnits(50));  // 9.00 / 0.18M tokens
}

TEST(ServingTest, CounterResetsAreIncreasesFromZero) {
  std::vector<ServingSnapshot> s = {Vllm(0, 5000, 0, 0, 0, 0, 0), Vllm(10, 7000, 0, 0, 0, 0, 0),
                                    Vllm(20, 500, 0, 0, 0, 0, 0)};  // the engine restarted
  auto r = *AnalyzeServing(s);
  EXPECT_DOUBLE_EQ(*r.tokens_per_second, (2000.0 + 500.0) / 20.0);
}

TEST(ServingTest, TritonBatchSizeAndQueueTime) {
  std::vector<ServingSnapshot> s(2);
  for (int i = 0; i < 2; ++i) {
    s[i].t_ms = i * 30'000;
    s[i].engine = "triton";
    s[i].model = "resnet50";
  }
  s[0].requests_total = 100;
  s[0].executions_total = 10;
  s[0].queue_seconds_total = 1;
  s[1].requests_total = 1700;
  s[1].executions_total = 110;
  s[1].queue_seconds_total = 9;
  auto r = *AnalyzeServing(s);
  EXPECT_DOUBLE_EQ(*r.mean_batch_size, 16.0);
  EXPECT_DOUBLE_EQ(*r.queue_seconds_per_request, 8.0 / 1600.0);
  EXPECT_FALSE(r.tokens_per_second.has_value());  // Triton reports no tokens: no number
  EXPECT_FALSE(r.prefill_share.has_value());
}

TEST(ServingTest, RefusesMixedOrUnorderedSeries) {
  std::vector<ServingSnapshot> s = {Vllm(10, 0, 0, 0, 0, 0, 0), Vllm(5, 0, 0, 0, 0, 0, 0)};
  EXPECT_THAT(AnalyzeServing(s).status().message(), HasSubstr("out of time order"));
  s[1].t_ms = 20'000;
  s[1].model = "other";
  EXPECT_THAT(AnalyzeServing(s).status().message(), HasSubstr("not vllm / llama"));
}

// The real serving telemetry of a production generative-AI fleet (GenTD26): the
// gateway's request queue over time, and each pod's GPU duty cycle.
TEST(ServingTest, ReplaysTheAlibabaGenAiTelemetry) {
  auto dir = std::filesystem::path(GPULEDGER_SHARED_DATA_DIR) / "telemetry/alibaba_2026_genai";
  if (!std::filesystem::exists(dir / "queue_size_raw_anon.csv")) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << dir << " is absent";
  }
  std::ifstream q(dir / "queue_size_raw_anon.csv");
  std::string line;
  std::getline(q, line);  // value,container_ip,timestamp_anon
  std::vector<ServingSnapshot> gateway;
  std::vector<double> depths;
  while (std::getline(q, line)) {
    std::stringstream ss(line);
    std::string value, ip, t;
    std::getline(ss, value, ',');
    std::getline(ss, ip, ',');
    std::getline(ss, t, ',');
    ServingSnapshot s;
    s.engine = "gateway";
    s.t_ms = static_cast<int64_t>(std::stod(t) * 1000);
    if (!gateway.empty() && s.t_ms <= gateway.back().t_ms) continue;  // keep one per instant
    s.requests_waiting = std::stod(value);
    depths.push_back(*s.requests_waiting);
    gateway.push_back(s);
  }
  ASSERT_GT(gateway.size(), 1000u);
  auto r = AnalyzeServing(gateway);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The distribution, computed here independently: nearest-rank p95 of the sorted depths.
  std::sort(depths.begin(), depths.end());
  size_t rank = (depths.size() * 95 + 99) / 100;
  EXPECT_EQ(r->queue_depth.n, gateway.size());
  EXPECT_EQ(r->queue_depth.max, depths.back());
  EXPECT_EQ(r->queue_depth.p95, depths[rank - 1]);
  EXPECT_GT(r->queue_depth.max, 0.0);
  EXPECT_GT(r->seconds, 3600);

  // Duty cycle per pod (percent): every pod idles most of the time (median under 20%),
  // yet a share of them bursts past 50% at p95: the headroom serving keeps on purpose.
  std::ifstream d(dir / "pod_gpu_duty_cycle_anon.csv");
  std::getline(d, line);  // value,timestamp_anon,container_ip
  std::map<std::string, std::vector<double>> pods;
  while (std::getline(d, line)) {
    std::stringstream ss(line);
    std::string value, t, ip;
    std::getline(ss, value, ',');
    std::getline(ss, t, ',');
    std::getline(ss, ip, ',');
    double v = std::stod(value);
    ASSERT_GE(v, 0.0);
    ASSERT_LE(v, 100.0);
    pods[ip].push_back(v / 100.0);
  }
  ASSERT_GT(pods.size(), 100u);
  size_t mostly_idle = 0, bursting = 0;
  for (const auto& [ip, v] : pods) {
    Distribution dist = Summarize(v);
    mostly_idle += dist.p50 < 0.2;
    bursting += dist.p95 >= 0.5;
  }
  EXPECT_EQ(mostly_idle, pods.size());
  EXPECT_GT(bursting, 10u);
  EXPECT_LT(bursting, pods.size() / 2);
}

}  // namespace
}  // namespace gpuledger::ledger

#include "ledger/test_fixture.h"
#include "wire/batch.h"

namespace gpuledger::ledger {
namespace {

// A vLLM deployment on two GPUs for an hour; its agent scraped the engine every minute
// and sent the snapshots in its batches, through the v1 text format.
TEST(JobServingTest, FromTheBatchesToTheReport) {
  testing::TempLedger t;
  ASSERT_TRUE(t.ledger().SetPrices(*PriceBook::Create(
      {PriceEntry{"*", "*", CapacityType::kOnDemand, Money::FromUnits(3), {0, kForever}}})).ok());
  Batch b;
  b.batch_id = "srv";
  const int64_t base = testing::kBaseMs;
  for (int g = 0; g < 2; ++g) {
    b.devices.push_back(Device{.uuid = "GPU-" + std::to_string(g), .pool = "serving", .sample_interval_ms = 60'000});
    b.allocations.push_back({"GPU-" + std::to_string(g), "chat", base, base + kMsPerHour});
  }
  b.jobs.push_back(Job{.id = "chat", .team = "nlp", .kind = JobKind::kServing});
  for (int m = 0; m <= 60; ++m) {
    for (int g = 0; g < 2; ++g) {
      Sample s;
      s.device_uuid = "GPU-" + std::to_string(g);
      s.t_ms = base + m * kMsPerMinute;
      s.sm_active = 0.3;
      b.samples.push_back(s);
    }
    ServingSnapshot v;
    v.job_id = "chat";
    v.engine = "vllm";
    v.model = "llama-70b";
    v.t_ms = base + m * kMsPerMinute;
    v.requests_waiting = m % 10;
    v.kv_cache_usage_ratio = 0.5;
    v.prompt_tokens_total = 6000.0 * m;
    v.generation_tokens_total = 3000.0 * m;
    v.iteration_tokens = {{64, 256, INFINITY}, {10.0 * m, 30.0 * m, 40.0 * m}, 4000.0 * m, 40.0 * m};
    b.serving.push_back(v);
  }
  auto text = wire::WriteBatch(b);
  auto parsed = wire::ParseBatch(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_TRUE(t.ledger().Ingest(*parsed).ok());
  auto reports = JobServing(t.ledger(), "chat", {base, base + kMsPerHour});
  ASSERT_TRUE(reports.ok()) << reports.status().ToString();
  ASSERT_EQ(reports->size(), 1u);
  const ServingReport& r = (*reports)[0].report;
  EXPECT_EQ((*reports)[0].model, "llama-70b");
  EXPECT_DOUBLE_EQ(*r.tokens_per_second, 9000.0 * 60 / 3600);
  EXPECT_EQ(r.queue_depth.max, 9.0);
  EXPECT_DOUBLE_EQ(*r.mean_tokens_per_step, 100.0);
  ASSERT_EQ(r.tokens_per_step_histogram.size(), 3u);
  EXPECT_DOUBLE_EQ(r.tokens_per_step_histogram[1].second, 1200.0);  // 20 x 60 steps in 64..256
  // Two GPUs for an hour at 3.00: 6.00 for 540,000 tokens.
  EXPECT_EQ(*r.cost_per_million_tokens, Money::FromMicros(11'111'111));
  EXPECT_EQ(JobServing(t.ledger(), "nope", {base, base + 1}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuledger::ledger
