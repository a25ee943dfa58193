#include "wire/prometheus/labels.h"

#include <gtest/gtest.h>

namespace gpuledger::prometheus {
namespace {

TEST(LabelsTest, MetricNamesAllowColonsButNotLeadingDigits) {
  EXPECT_TRUE(IsValidMetricName("vllm:num_requests_running"));
  EXPECT_TRUE(IsValidMetricName("DCGM_FI_DEV_GPU_UTIL"));
  EXPECT_TRUE(IsValidMetricName("_x:y9"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("9lives"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName("a b"));
}

TEST(LabelsTest, LabelNamesRejectColons) {
  EXPECT_TRUE(IsValidLabelName("GPU_I_PROFILE"));
  EXPECT_TRUE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("1a"));
  EXPECT_FALSE(IsValidLabelName(""));
}

TEST(LabelsTest, Utf8ValidationRejectsMalformedSequences) {
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("Z\xc3\xbcrich \xe2\x9c\x93 \xf0\x9f\x9a\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("a\x80z"));            // lone continuation byte
}

TEST(LabelsTest, FormatLabelsEscapesValues) {
  Labels labels = {{"a", "x"}, {"b", "q\"uo\\te\nnl"}};
  EXPECT_EQ(FormatLabels(labels), R"({a="x",b="q\"uo\\te\nnl"})");
  EXPECT_EQ(FormatLabels({}), "");
  EXPECT_EQ(FindLabel(labels, "b").value_or(""), "q\"uo\\te\nnl");
  EXPECT_FALSE(FindLabel(labels, "c").has_value());
}

}  // namespace
}  // namespace gpuledger::prometheus
