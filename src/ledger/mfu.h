// Model FLOPs utilization: achieved model FLOPs over the peak FLOPs of the GPUs held.
//
// Model FLOPs per token of a dense decoder-only Transformer in training (forward and
// backward, no recomputation counted): 6 N for the parameter matmuls plus
// 12 x layers x hidden x sequence for attention's score and value matmuls (PaLM,
// Chowdhery et al. 2022, appendix B). Peaks are dense (no structured sparsity) tensor
// throughputs per GPU from the vendors' data sheets.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger::ledger {

enum class Dtype { kBf16, kFp16, kFp8, kTf32, kFp32 };
Result<Dtype> ParseDtype(std::string_view text);
std::string_view DtypeName(Dtype d);

struct PeakEntry {
  std::string_view model;  // as matched against NVML's product name
  Dtype dtype;
  double tflops;  // dense, per GPU
};

// The table of peaks (one place for every caller).
const std::vector<PeakEntry>& PeakTable();

// The peak of `gpu_model` (an NVML product name such as "NVIDIA H100 80GB HBM3", or a
// short name such as "H100", "A100", "TPU v4") for `dtype`, in FLOP/s. NotFound names
// the model and lists the known ones.
Result<double> PeakFlops(std::string_view gpu_model, Dtype dtype);

struct ModelShape {
  std::optional<double> parameters;  // N; derived from the shape when absent
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t vocabulary = 0;
  int64_t sequence = 0;  // tokens per sequence (context length)
};

// Parameters of a GPT-style model from its shape: 12 L H^2 (attention and a 4H MLP)
// plus the embedding V H and position S H matrices. REQUIRES: layers, hidden > 0.
double ParametersFromShape(const ModelShape& m);

// Model FLOPs per trained token: 6 N + 12 L H S (attention), with its two parts.
struct FlopsPerToken {
  double dense = 0;      // 6 N
  double attention = 0;  // 12 L H S; 0 when the shape is unknown
  double total() const { return dense + attention; }
};
Result<FlopsPerToken> TrainingFlopsPerToken(const ModelShape& m);

// Activation recomputation: what the GPUs compute on top of the model's FLOPs. Full
// recomputation runs every layer's forward pass again in the backward pass (2 N + 4 L H S
// more per token: the hardware FLOPs are 4/3 of the model FLOPs); selective
// recomputation (Korthikanti et al. 2022) runs again only the attention score and value
// matmuls' forward (4 L H S more per token).
enum class Recompute { kNone, kSelective, kFull };
Result<Recompute> ParseRecompute(std::string_view text);  // "none", "selective", "full"
std::string_view RecomputeName(Recompute r);

// Hardware FLOPs per trained token under `recompute`: the model FLOPs plus what is
// computed again. Equal to TrainingFlopsPerToken with kNone.
Result<FlopsPerToken> HardwareFlopsPerToken(const ModelShape& m, Recompute recompute);

struct MfuInput {
  ModelShape model;
  std::optional<double> tokens_per_second;  // or step time and batch:
  std::optional<double> step_seconds;
  std::optional<double> batch_sequences;  // global batch, in sequences of model.sequence
  int64_t gpus = 0;
  std::string gpu_model;
  Dtype dtype = Dtype::kBf16;
  Recompute recompute = Recompute::kNone;  // for HFU beside MFU
};

struct MfuResult {
  double parameters = 0;
  FlopsPerToken flops_per_token;
  double tokens_per_second = 0;
  double achieved_flops_per_gpu = 0;
  double peak_flops_per_gpu = 0;
  double mfu = 0;  // 0..1 (can exceed 1 only if the inputs are wrong; reported as is)
  // With recomputation: hardware FLOPs utilization, the FLOPs the GPUs computed
  // (recomputation counted, as Megatron-LM's "percentage of peak" counts it) over peak.
  // Never MFU: the two are labelled apart everywhere.
  std::optional<FlopsPerToken> hardware_flops_per_token;
  std::optional<double> hfu;
};

// The planning calculator behind `gpuledger mfu`. Fails with a message naming the
// missing or invalid input.
Result<MfuResult> ComputeMfu(const MfuInput& in);

// Where a job reports no progress: a hardware estimate of the FLOP/s it ran at, from the
// tensor pipes' activity ratio x the GPU's peak. An estimate, never MFU: tensor-active
// time counts any tensor work, useful or not, at whatever precision ran.
double HardwareFlopsEstimate(double tensor_active_ratio, double peak_flops);

class Ledger;

// The work a job's progress reports say it did within a window: model FLOPs (tokens x
// TrainingFlopsPerToken of the job's model, or model FLOPs as reported; an interval cut
// by the window counts in proportion) and the seconds the reports cover.
struct ReportedWork {
  double model_flops = 0;
  double seconds = 0;
  std::string basis;  // "tokens", "model_flops", "tokens and model_flops"; "" when none
  // Model FLOP/s while reported; 0 when nothing was.
  double flops_per_second() const { return seconds > 0 ? model_flops / seconds : 0; }
};
// FailedPrecondition when tokens are reported but the job's model is not.
Result<ReportedWork> WorkReported(const Job& job, const std::vector<Progress>& progress,
                                  const TimeRange& window);

// A training job's efficiency over a window, from the ledger.
struct JobEfficiency {
  std::string job_id;
  double gpu_hours = 0;             // held, capacity-weighted (a 3/7 slice counts 3/7)
  double peak_flops_capacity = 0;   // sum over held GPUs of peak x seconds held
  std::optional<double> achieved_flops;  // from the job's own progress reports
  std::optional<double> mfu;             // achieved / capacity, when reported
  std::string basis;                     // "tokens", "model_flops", or "" when none
  // With recomputation: hardware FLOPs (model FLOPs plus what was computed again) over
  // the same capacity. Never MFU.
  std::optional<double> hfu;
  Recompute recompute = Recompute::kNone;
  // Without progress reports: mean tensor-pipe activity of the held samples x peak, as a
  // share of capacity. An estimate, never MFU.
  std::optional<double> hardware_estimate;
};

// MFU of `job_id` over `window`: FLOPs from its progress reports (tokens x
// TrainingFlopsPerToken of its model, or model FLOPs as reported; an interval cut by the
// window counts in proportion), over the peak of the GPUs it held for the time it held
// them (each device's model and the job's dtype, bf16 by default). NotFound for an
// unknown job; FailedPrecondition when tokens are reported but the job's model is not.
// With `recompute` other than kNone, HFU beside MFU: the hardware FLOPs the job's model
// computes per token under that recomputation (reports in model FLOPs count the full
// recomputation's 4/3; the selective one needs the job's shape and adds nothing without it).
Result<JobEfficiency> JobMfu(Ledger& ledger, const std::string& job_id, const TimeRange& window,
                             Recompute recompute = Recompute::kNone);

}  // namespace gpuledger::ledger
