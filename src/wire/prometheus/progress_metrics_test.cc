#include "wire/prometheus/progress_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuledger::prometheus {
namespace {

using ::testing::HasSubstr;

std::vector<Family> Parse(std::string_view text) {
  auto parsed = ParseText(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? parsed->families : std::vector<Family>{};
}

TEST(ProgressMetricsTest, ReadsBothCountersWhateverTheTypeLineCallsThem) {
  // Text format 0.0.4 as Python's client writes it (TYPE with _total), and OpenMetrics'
  // habit (TYPE without it): both are read by sample name.
  auto x = ExtractProgress(Parse("# HELP gpuledger_job_tokens_total Tokens trained.\n"
                                 "# TYPE gpuledger_job_tokens_total counter\n"
                                 "gpuledger_job_tokens_total 1.5e6\n"
                                 "# TYPE gpuledger_job_model_flops counter\n"
                                 "gpuledger_job_model_flops_total 9e18\n"
                                 "# TYPE gpuledger_job_model_flops_created gauge\n"
                                 "gpuledger_job_model_flops_created 1.7e9\n"),
                           7'000);
  EXPECT_EQ(x.counters.t_ms, 7'000);
  EXPECT_EQ(x.counters.tokens_total, 1.5e6);
  EXPECT_EQ(x.counters.model_flops_total, 9e18);
  EXPECT_FALSE(x.absent);
  EXPECT_TRUE(x.invalid.empty());
}

TEST(ProgressMetricsTest, SeriesOfOneCounterAddUp) {
  auto x = ExtractProgress(Parse("# TYPE gpuledger_job_tokens_total counter\n"
                                 "gpuledger_job_tokens_total{rank=\"0\"} 100\n"
                                 "gpuledger_job_tokens_total{rank=\"1\"} 250\n"),
                           0);
  EXPECT_EQ(x.counters.tokens_total, 350.0);
  EXPECT_FALSE(x.counters.model_flops_total.has_value());
  EXPECT_FALSE(x.absent);
}

TEST(ProgressMetricsTest, AbsentCountersAreSaidNotInvented) {
  auto x = ExtractProgress(Parse("# TYPE python_gc_objects_collected_total counter\n"
                                 "python_gc_objects_collected_total{generation=\"0\"} 12\n"),
                           0);
  EXPECT_TRUE(x.absent);
  EXPECT_TRUE(x.counters.empty());
  EXPECT_TRUE(x.invalid.empty());
}

TEST(ProgressMetricsTest, OneBadSeriesLeavesTheWholeCounterOut) {
  auto x = ExtractProgress(Parse("# TYPE gpuledger_job_tokens_total counter\n"
                                 "gpuledger_job_tokens_total{rank=\"0\"} 100\n"
                                 "gpuledger_job_tokens_total{rank=\"1\"} NaN\n"
                                 "# TYPE gpuledger_job_model_flops_total counter\n"
                                 "gpuledger_job_model_flops_total -1\n"),
                           0);
  EXPECT_TRUE(x.counters.empty());
  EXPECT_FALSE(x.absent);
  ASSERT_EQ(x.invalid.size(), 2u);
  EXPECT_THAT(x.invalid[0], HasSubstr("gpuledger_job_tokens_total{rank=\"1\"} line 3: value NaN"));
  EXPECT_THAT(x.invalid[1], HasSubstr("value -1 is not a count"));
}

TEST(ProgressMetricsTest, AHistogramIsNotACounter) {
  auto x = ExtractProgress(Parse("# TYPE gpuledger_job_tokens_total summary\n"
                                 "gpuledger_job_tokens_total{quantile=\"0.5\"} 3\n"
                                 "gpuledger_job_tokens_total_sum 3\n"
                                 "gpuledger_job_tokens_total_count 1\n"),
                           0);
  EXPECT_FALSE(x.counters.tokens_total.has_value());
  ASSERT_EQ(x.invalid.size(), 1u);
  EXPECT_THAT(x.invalid[0], HasSubstr("type summary"));
}

TEST(ProgressMetricsTest, OtherNamesCanBeRead) {
  ProgressMetricNames names;
  names.tokens = "trainer_tokens_seen_total";
  names.model_flops.clear();
  auto x = ExtractProgress(Parse("trainer_tokens_seen_total 42\n"
                                 "gpuledger_job_model_flops_total 1e15\n"),
                           0, names);
  EXPECT_EQ(x.counters.tokens_total, 42.0);
  EXPECT_FALSE(x.counters.model_flops_total.has_value()) << "an empty name is not read";
}

TEST(ProgressMetricsTest, IncreasesBecomeOneReportOverTheInterval) {
  ProgressCounters a{1'000, 1e6, 6e15}, b{16'000, 3e6, 1.8e16};
  auto step = ProgressBetween(a, b, "train-1");
  ASSERT_TRUE(step.progress.has_value());
  EXPECT_EQ(step.progress->job_id, "train-1");
  EXPECT_EQ(step.progress->t_ms, 16'000);
  EXPECT_EQ(step.progress->interval_ms, 15'000);
  EXPECT_EQ(step.progress->tokens, 2e6);
  EXPECT_EQ(step.progress->model_flops, 1.2e16);
  EXPECT_TRUE(step.resets.empty());

  // No increase is a report of no work, not an absence of one.
  auto idle = ProgressBetween(b, {31'000, 3e6, std::nullopt}, "train-1");
  ASSERT_TRUE(idle.progress.has_value());
  EXPECT_EQ(idle.progress->tokens, 0.0);
  EXPECT_FALSE(idle.progress->model_flops.has_value());
}

TEST(ProgressMetricsTest, ACounterThatWentDownGivesNothingNeverANegativeCount) {
  ProgressCounters a{1'000, 5e6, std::nullopt}, b{16'000, 2e5, std::nullopt};
  auto step = ProgressBetween(a, b, "train-1");
  EXPECT_FALSE(step.progress.has_value());
  ASSERT_EQ(step.resets.size(), 1u);
  EXPECT_THAT(step.resets[0], HasSubstr("tokens went down from 5000000 to 200000"));

  // One counter reset, the other still counts.
  auto mixed = ProgressBetween({1'000, 5e6, 1e15}, {16'000, 2e5, 3e15}, "train-1");
  ASSERT_TRUE(mixed.progress.has_value());
  EXPECT_FALSE(mixed.progress->tokens.has_value());
  EXPECT_EQ(mixed.progress->model_flops, 2e15);
  EXPECT_EQ(mixed.resets.size(), 1u);
}

TEST(ProgressMetricsTest, ACounterWithoutABaselineGivesNothing) {
  auto step =
      ProgressBetween({1'000, std::nullopt, std::nullopt}, {16'000, 3e6, std::nullopt}, "j");
  EXPECT_FALSE(step.progress.has_value());
  EXPECT_TRUE(step.resets.empty());
}

}  // namespace
}  // namespace gpuledger::prometheus
