#include "ledger/mfu.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuledger::ledger {
namespace {

using ::testing::HasSubstr;

TEST(MfuTest, PeaksComeFromOneTableAndMatchNvmlNames) {
  EXPECT_DOUBLE_EQ(*PeakFlops("NVIDIA H100 80GB HBM3", Dtype::kBf16), 989.4e12);
  EXPECT_DOUBLE_EQ(*PeakFlops("NVIDIA H100 PCIe", Dtype::kBf16), 756e12);
  EXPECT_DOUBLE_EQ(*PeakFlops("NVIDIA A100-SXM4-80GB", Dtype::kTf32), 156e12);
  EXPECT_DOUBLE_EQ(*PeakFlops("NVIDIA L40S", Dtype::kFp8), 733e12);
  EXPECT_DOUBLE_EQ(*PeakFlops("NVIDIA L4", Dtype::kBf16), 121e12);
  EXPECT_THAT(PeakFlops("NVIDIA A100-SXM4-80GB", Dtype::kFp8).status().message(),
              HasSubstr("no fp8 peak"));
  EXPECT_THAT(PeakFlops("Voodoo 2", Dtype::kBf16).status().message(), HasSubstr("not in the peak table"));
}

TEST(MfuTest, FlopsPerTokenIsSixNPlusAttention) {
  ModelShape m{.parameters = 1e9, .layers = 24, .hidden = 2048, .sequence = 2048};
  auto f = *TrainingFlopsPerToken(m);
  EXPECT_DOUBLE_EQ(f.dense, 6e9);
  EXPECT_DOUBLE_EQ(f.attention, 12.0 * 24 * 2048 * 2048);
  ModelShape shape{.layers = 24, .hidden = 2048, .vocabulary = 50257, .sequence = 2048};
  EXPECT_DOUBLE_EQ(ParametersFromShape(shape), 12.0 * 24 * 2048 * 2048 + (50257.0 + 2048) * 2048);
}

// PaLM 540B (Chowdhery et al. 2022, table 3 and appendix B): 118 layers, d_model
// 18,432, sequences of 2,048, 540.35B parameters, 238.3K tokens/s on 6,144 TPU v4
// chips (275 TFLOP/s bf16): published MFU 46.2%.
TEST(MfuTest, ReproducesPalm540B) {
  MfuInput in;
  in.model = {.parameters = 540.35e9, .layers = 118, .hidden = 18432, .sequence = 2048};
  in.tokens_per_second = 238.3e3;
  in.gpus = 6144;
  in.gpu_model = "TPU v4";
  auto r = ComputeMfu(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->mfu, 0.462, 0.005);
}

// Megatron-LM (Narayanan et al., SC'21, table 1) reports hardware FLOP/s that count
// activation recomputation: 96 B s l h^2 (1 + s/6h + V/16lh) per iteration. From their
// 163 TFLOP/s per GPU for the 1T model (128 layers, h 25,600, s 2,048, V 51,200,
// batch 3,072, 3,072 A100s) we recover the iteration time; our model-FLOPs MFU must be
// 3/4 of their 52% (no recomputation counted): about 39%.
TEST(MfuTest, AgreesWithMegatron1TWithoutRecomputation) {
  const double b = 3072, s = 2048, l = 128, h = 25600, v = 51200, gpus = 3072;
  double hw_flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  double step = hw_flops / (163e12 * gpus);
  MfuInput in;
  in.model = {.layers = 128, .hidden = 25600, .vocabulary = 51200, .sequence = 2048};
  in.step_seconds = step;
  in.batch_sequences = b;
  in.gpus = 3072;
  in.gpu_model = "NVIDIA A100-SXM4-80GB";
  auto r = *ComputeMfu(in);
  EXPECT_NEAR(r.mfu, 163.0 * 0.75 / 312.0, 0.005);
  EXPECT_NEAR(r.parameters, 1.008e12, 0.01e12);  // "1T" in their table: 1008B
}

// The same run with its full activation recomputation counted: hardware FLOPs
// utilization (HFU), the figure Megatron-LM publishes as "percentage of peak", comes out
// at their 52% for the 1T model (163 of 312 TFLOP/s), beside the MFU of 39.2%.
TEST(MfuTest, HfuWithFullRecomputationIsMegatronsPublished52Percent) {
  const double b = 3072, s = 2048, l = 128, h = 25600, v = 51200, gpus = 3072;
  double hw_flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
  MfuInput in;
  in.model = {.layers = 128, .hidden = 25600, .vocabulary = 51200, .sequence = 2048};
  in.step_seconds = hw_flops / (163e12 * gpus);
  in.batch_sequences = b;
  in.gpus = 3072;
  in.gpu_model = "NVIDIA A100-SXM4-80GB";
  EXPECT_FALSE(ComputeMfu(in)->hfu.has_value());  // no recomputation: MFU alone
  in.recompute = Recompute::kFull;
  auto r = *ComputeMfu(in);
  ASSERT_TRUE(r.hfu.has_value());
  EXPECT_NEAR(*r.hfu, 0.52, 0.005);
  EXPECT_NEAR(r.mfu, 0.392, 0.005);  // unchanged: model FLOPs never count recomputation
  EXPECT_NEAR(*r.hfu / r.mfu, 4.0 / 3.0, 1e-9);
  // Selective recomputation computes again only attention's score and value matmuls:
  // 4 L H S more per token, between MFU and full recomputation's HFU.
  in.recompute = Recompute::kSelective;
  auto sel = *ComputeMfu(in);
  EXPECT_DOUBLE_EQ(sel.hardware_flops_per_token->total() - sel.flops_per_token.total(), 4 * l * h * s);
  EXPECT_GT(*sel.hfu, sel.mfu);
  EXPECT_LT(*sel.hfu, *r.hfu);
  EXPECT_EQ(*ParseRecompute("full"), Recompute::kFull);
  EXPECT_THAT(ParseRecompute("partial").status().message(), HasSubstr("want none, selective or full"));
}

TEST(MfuTest, BadInputNamesWhatIsMissing) {
  MfuInput in;
  in.gpus = 8;
  in.gpu_model = "H100";
  EXPECT_THAT(ComputeMfu(in).status().message(), HasSubstr("parameter count"));
  in.model.parameters = 7e9;
  EXPECT_THAT(ComputeMfu(in).status().message(), HasSubstr("tokens per second"));
  in.tokens_per_second = -5;
  EXPECT_THAT(ComputeMfu(in).status().message(), HasSubstr("positive"));
  in.tokens_per_second.reset();
  in.step_seconds = 1;
  in.batch_sequences = 8;
  EXPECT_THAT(ComputeMfu(in).status().message(), HasSubstr("sequence length"));
  EXPECT_FALSE(ParseDtype("int4").ok());
}

TEST(MfuTest, HardwareEstimateIsTensorActivityTimesPeak) {
  EXPECT_DOUBLE_EQ(HardwareFlopsEstimate(0.5, 989.4e12), 494.7e12);
  EXPECT_DOUBLE_EQ(HardwareFlopsEstimate(1.7, 100), 100);
}

}  // namespace
}  // namespace gpuledger::ledger

#include "ledger/test_fixture.h"
#include "wire/batch.h"

namespace gpuledger::ledger {
namespace {

using testing::kBaseMs;

// Eight H100s held for an hour by a 7B-parameter model (32 layers, hidden 4096,
// sequences of 4096) that reports the tokens it trained every ten minutes.
class JobMfuTest : public ::testing::Test {
 protected:
  void Ingest(bool with_model, bool with_progress) {
    Batch b;
    b.batch_id = "train";
    for (int g = 0; g < 8; ++g) {
      b.devices.push_back(Device{.uuid = "GPU-" + std::to_string(g), .model = "NVIDIA H100 80GB HBM3",
                                 .pool = "training", .sample_interval_ms = 60'000});
      b.allocations.push_back({"GPU-" + std::to_string(g), "llm", kBaseMs, kBaseMs + kMsPerHour});
    }
    Job j{.id = "llm", .team = "nlp", .kind = JobKind::kTraining};
    if (with_model) {
      j.model_parameters = 7e9;
      j.model_layers = 32;
      j.model_hidden = 4096;
      j.model_sequence = 4096;
    }
    b.jobs.push_back(j);
    for (int64_t t = kBaseMs; t <= kBaseMs + kMsPerHour; t += 60'000) {
      for (int g = 0; g < 8; ++g) {
        Sample s;
        s.device_uuid = "GPU-" + std::to_string(g);
        s.t_ms = t;
        s.sm_active = 0.9;
        s.tensor_active = 0.45;
        b.samples.push_back(s);
      }
    }
    if (with_progress) {
      for (int k = 1; k <= 6; ++k) {
        b.progress.push_back(Progress{"llm", kBaseMs + k * 10 * kMsPerMinute, 10 * kMsPerMinute, kTokens, std::nullopt});
      }
    }
    auto r = t_.ledger().Ingest(b);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  static constexpr double kTokens = 3.9e7;  // per ten minutes: 65,000 tokens/s
  testing::TempLedger t_;
};

TEST_F(JobMfuTest, FromTokensAndTheModelShape) {
  Ingest(true, true);
  auto e = JobMfu(t_.ledger(), "llm", {kBaseMs, kBaseMs + kMsPerHour});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  double per_token = 6 * 7e9 + 12.0 * 32 * 4096 * 4096;
  double expected = 6 * kTokens * per_token / (8 * 989.4e12 * 3600);
  EXPECT_NEAR(*e->mfu, expected, 1e-9);
  EXPECT_NEAR(*e->mfu, 0.3977, 0.001);
  EXPECT_EQ(e->basis, "tokens");
  EXPECT_NEAR(e->gpu_hours, 8.0, 1e-9);
  EXPECT_NEAR(*e->hardware_estimate, 0.45, 1e-9);
  // Half the hour: three whole intervals inside, MFU the same.
  auto half = *JobMfu(t_.ledger(), "llm", {kBaseMs, kBaseMs + 30 * kMsPerMinute});
  EXPECT_NEAR(*half.mfu, expected, 1e-9);
  // A window cutting an interval in half counts half its tokens.
  auto cut = *JobMfu(t_.ledger(), "llm", {kBaseMs + 5 * kMsPerMinute, kBaseMs + 35 * kMsPerMinute});
  EXPECT_NEAR(*cut.mfu, expected, 1e-9);
}

// A job from its reports with its recomputation named: HFU beside an unchanged MFU.
TEST_F(JobMfuTest, HfuBesideMfuWhenTheJobRecomputes) {
  Ingest(true, true);
  const TimeRange hour{kBaseMs, kBaseMs + kMsPerHour};
  auto plain = *JobMfu(t_.ledger(), "llm", hour);
  EXPECT_FALSE(plain.hfu.has_value());
  auto full = *JobMfu(t_.ledger(), "llm", hour, Recompute::kFull);
  EXPECT_NEAR(*full.mfu, *plain.mfu, 1e-12);
  EXPECT_NEAR(*full.hfu, *plain.mfu * 4 / 3, 1e-9);
  EXPECT_EQ(full.recompute, Recompute::kFull);
  auto selective = *JobMfu(t_.ledger(), "llm", hour, Recompute::kSelective);
  double model = 6 * 7e9 + 12.0 * 32 * 4096 * 4096, again = 4.0 * 32 * 4096 * 4096;
  EXPECT_NEAR(*selective.hfu, *plain.mfu * (model + again) / model, 1e-9);
}

TEST_F(JobMfuTest, WithoutReportsOnlyTheLabelledEstimate) {
  Ingest(true, false);
  auto e = *JobMfu(t_.ledger(), "llm", {kBaseMs, kBaseMs + kMsPerHour});
  EXPECT_FALSE(e.mfu.has_value());
  EXPECT_NEAR(*e.hardware_estimate, 0.45, 1e-9);
}

TEST_F(JobMfuTest, TokensWithoutAModelAreAnErrorNotANumber) {
  Ingest(false, true);
  auto e = JobMfu(t_.ledger(), "llm", {kBaseMs, kBaseMs + kMsPerHour});
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("reports tokens but not its model"));
  EXPECT_EQ(JobMfu(t_.ledger(), "nope", {kBaseMs, kBaseMs + 1}).status().code(), StatusCode::kNotFound);
}

TEST(ProgressReportTest, BadReportsAreRefusedByTheBatch) {
  auto neg = wire::ParseBatch(
      R"({"version":1,"batch_id":"p","progress":[{"job":"j","t":1795392600000,"interval_ms":600000,"tokens":-5}]})");
  ASSERT_FALSE(neg.ok());
  EXPECT_THAT(neg.status().message(), HasSubstr("batch p: progress[0].tokens: must be within 0.."));
  auto empty = wire::ParseBatch(
      R"({"version":1,"batch_id":"p","progress":[{"job":"j","t":1795392600000,"interval_ms":600000}]})");
  ASSERT_TRUE(empty.ok());
  EXPECT_THAT(ValidateBatch(*empty, kBaseMs + kMsPerDay).message(), HasSubstr("progress[0]: needs tokens or model_flops"));
  testing::TempLedger t;
  auto unknown = wire::ParseBatch(
      R"({"version":1,"batch_id":"p","progress":[{"job":"ghost","t":1795392600000,"interval_ms":600000,"tokens":5}]})");
  ASSERT_TRUE(unknown.ok());
  EXPECT_THAT(t.ledger().Ingest(*unknown).status().message(), HasSubstr("progress[0].job: unknown job ghost"));
}

}  // namespace
}  // namespace gpuledger::ledger
