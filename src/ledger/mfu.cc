#include "ledger/mfu.h"
#include "ledger/store_access.h"

#include "ledger/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace gpuledger::ledger {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Positive(const std::optional<double>& v) { return v && std::isfinite(*v) && *v > 0; }

}  // namespace

Result<Dtype> ParseDtype(std::string_view text) {
  std::string t = Lower(text);
  if (t == "bf16" || t == "bfloat16") return Dtype::kBf16;
  if (t == "fp16" || t == "float16" || t == "half") return Dtype::kFp16;
  if (t == "fp8") return Dtype::kFp8;
  if (t == "tf32") return Dtype::kTf32;
  if (t == "fp32" || t == "float32") return Dtype::kFp32;
  return InvalidArgument(fmt::format("dtype \"{}\": want bf16, fp16, fp8, tf32 or fp32", text));
}

std::string_view DtypeName(Dtype d) {
  switch (d) {
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp16: return "fp16";
    case Dtype::kFp8: return "fp8";
    case Dtype::kTf32: return "tf32";
    case Dtype::kFp32: return "fp32";
  }
  return "?";
}

const std::vector<PeakEntry>& PeakTable() {
  // Dense tensor TFLOP/s per GPU (data-sheet figures; "with sparsity" figures halved).
  // Order matters: the first entry whose model is contained in the name wins, so more
  // specific names come first (H100 PCIe before H100, L40S before L4).
  static const std::vector<PeakEntry> kTable = {
      {"H100 PCIe", Dtype::kBf16, 756.0},  {"H100 PCIe", Dtype::kFp16, 756.0},
      {"H100 PCIe", Dtype::kFp8, 1513.0},  {"H100 PCIe", Dtype::kTf32, 378.0},
      {"H100 PCIe", Dtype::kFp32, 51.2},
      {"H100", Dtype::kBf16, 989.4},       {"H100", Dtype::kFp16, 989.4},
      {"H100", Dtype::kFp8, 1978.9},       {"H100", Dtype::kTf32, 494.7},
      {"H100", Dtype::kFp32, 66.9},
      {"H200", Dtype::kBf16, 989.4},       {"H200", Dtype::kFp16, 989.4},
      {"H200", Dtype::kFp8, 1978.9},       {"H200", Dtype::kTf32, 494.7},
      {"H200", Dtype::kFp32, 66.9},
      {"B200", Dtype::kBf16, 2250.0},      {"B200", Dtype::kFp16, 2250.0},
      {"B200", Dtype::kFp8, 4500.0},       {"B200", Dtype::kTf32, 1100.0},
      {"A100", Dtype::kBf16, 312.0},       {"A100", Dtype::kFp16, 312.0},
      {"A100", Dtype::kTf32, 156.0},       {"A100", Dtype::kFp32, 19.5},
      {"L40S", Dtype::kBf16, 362.05},      {"L40S", Dtype::kFp16, 362.05},
      {"L40S", Dtype::kFp8, 733.0},        {"L40S", Dtype::kTf32, 183.0},
      {"L40S", Dtype::kFp32, 91.6},
      {"L4", Dtype::kBf16, 121.0},         {"L4", Dtype::kFp16, 121.0},
      {"L4", Dtype::kFp8, 242.5},          {"L4", Dtype::kFp32, 30.3},
      {"A10", Dtype::kBf16, 125.0},        {"A10", Dtype::kFp16, 125.0},
      {"A10", Dtype::kFp32, 31.2},
      {"V100", Dtype::kFp16, 125.0},       {"V100", Dtype::kFp32, 15.7},
      {"TPU v4", Dtype::kBf16, 275.0},
  };
  return kTable;
}

Result<double> PeakFlops(std::string_view gpu_model, Dtype dtype) {
  std::string name = Lower(gpu_model);
  bool model_known = false;
  for (const PeakEntry& e : PeakTable()) {
    if (name.find(Lower(e.model)) == std::string::npos) continue;
    model_known = true;
    if (e.dtype == dtype) return e.tflops * 1e12;
  }
  if (model_known) {
    return NotFound(fmt::format("no {} peak for \"{}\" in the table", DtypeName(dtype), gpu_model));
  }
  std::string known;
  for (const PeakEntry& e : PeakTable()) {
    if (known.find(e.model) == std::string::npos) known += (known.empty() ? "" : ", ") + std::string(e.model);
  }
  return NotFound(fmt::format("GPU model \"{}\" is not in the peak table (known: {})", gpu_model, known));
}

double ParametersFromShape(const ModelShape& m) {
  double l = static_cast<double>(m.layers), h = static_cast<double>(m.hidden);
  return 12.0 * l * h * h + static_cast<double>(m.vocabulary + m.sequence) * h;
}

Result<FlopsPerToken> TrainingFlopsPerToken(const ModelShape& m) {
  FlopsPerToken f;
  double n = 0;
  if (m.parameters) {
    if (!Positive(m.parameters)) return InvalidArgument("parameters must be a positive number");
    n = *m.parameters;
  } else if (m.layers > 0 && m.hidden > 0) {
    n = ParametersFromShape(m);
  } else {
    return InvalidArgument("give the parameter count, or layers and hidden size");
  }
  f.dense = 6.0 * n;
  if (m.layers > 0 && m.hidden > 0 && m.sequence > 0) {
    f.attention = 12.0 * static_cast<double>(m.layers) * static_cast<double>(m.hidden) *
                  static_cast<double>(m.sequence);
  }
  return f;
}

Result<Recompute> ParseRecompute(std::string_view text) {
  std::string t = Lower(text);
  if (t == "none" || t.empty()) return Recompute::kNone;
  if (t == "selective") return Recompute::kSelective;
  if (t == "full") return Recompute::kFull;
  return InvalidArgument(fmt::format("recompute \"{}\": want none, selective or full", text));
}

std::string_view RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

namespace {

// The hardware FLOPs per token from the model's, under `recompute`.
FlopsPerToken WithRecompute(const FlopsPerToken& model, Recompute recompute) {
  FlopsPerToken f = model;
  switch (recompute) {
    case Recompute::kNone: break;
    case Recompute::kSelective: f.attention += model.attention / 3.0; break;  // + 4 L H S
    case Recompute::kFull:  // one more forward: 2 N + 4 L H S
      f.dense += model.dense / 3.0;
      f.attention += model.attention / 3.0;
      break;
  }
  return f;
}

}  // namespace

Result<FlopsPerToken> HardwareFlopsPerToken(const ModelShape& m, Recompute recompute) {
  GPULEDGER_ASSIGN_OR_RETURN(FlopsPerToken model, TrainingFlopsPerToken(m));
  return WithRecompute(model, recompute);
}

Result<MfuResult> ComputeMfu(const MfuInput& in) {
  MfuResult r;
  GPULEDGER_ASSIGN_OR_RETURN(r.flops_per_token, TrainingFlopsPerToken(in.model));
  r.parameters = r.flops_per_token.dense / 6.0;
  if (in.tokens_per_second) {
    if (!Positive(in.tokens_per_second)) return InvalidArgument("tokens per second must be positive");
    r.tokens_per_second = *in.tokens_per_second;
  } else if (in.step_seconds && in.batch_sequences) {
    if (!Positive(in.step_seconds) || !Positive(in.batch_sequences)) {
      return InvalidArgument("step time and batch must be positive");
    }
    if (in.model.sequence <= 0) {
      return InvalidArgument("with a step time and a batch of sequences, give the sequence length");
    }
    r.tokens_per_second =
        *in.batch_sequences * static_cast<double>(in.model.sequence) / *in.step_seconds;
  } else {
    return InvalidArgument("give tokens per second, or the step time and the global batch");
  }
  if (in.gpus <= 0) return InvalidArgument("the GPU count must be positive");
  GPULEDGER_ASSIGN_OR_RETURN(r.peak_flops_per_gpu, PeakFlops(in.gpu_model, in.dtype));
  r.achieved_flops_per_gpu =
      r.tokens_per_second * r.flops_per_token.total() / static_cast<double>(in.gpus);
  r.mfu = r.achieved_flops_per_gpu / r.peak_flops_per_gpu;
  if (in.recompute != Recompute::kNone) {
    r.hardware_flops_per_token = WithRecompute(r.flops_per_token, in.recompute);
    r.hfu = r.tokens_per_second * r.hardware_flops_per_token->total() / static_cast<double>(in.gpus) /
            r.peak_flops_per_gpu;
  }
  return r;
}

double HardwareFlopsEstimate(double tensor_active_ratio, double peak_flops) {
  return std::clamp(tensor_active_ratio, 0.0, 1.0) * peak_flops;
}

Result<ReportedWork> WorkReported(const Job& job, const std::vector<Progress>& progress,
                                  const TimeRange& window) {
  ReportedWork w;
  std::optional<FlopsPerToken> per_token;
  for (const Progress& p : progress) {
    TimeRange interval{p.t_ms - p.interval_ms, p.t_ms};
    int64_t inside = interval.Intersect(window).length_ms();
    if (inside <= 0 || p.interval_ms <= 0) continue;
    double part = static_cast<double>(inside) / static_cast<double>(p.interval_ms);
    w.seconds += static_cast<double>(inside) / 1000.0;
    if (p.model_flops) {
      w.model_flops += *p.model_flops * part;
      w.basis = w.basis.empty() || w.basis == "model_flops" ? "model_flops" : "tokens and model_flops";
      continue;
    }
    if (!per_token) {
      ModelShape shape{job.model_parameters, job.model_layers, job.model_hidden, 0, job.model_sequence};
      auto f = TrainingFlopsPerToken(shape);
      if (!f.ok()) {
        return FailedPrecondition(fmt::format(
            "job {} reports tokens but not its model (parameters, or layers and hidden): {}", job.id,
            f.status().message()));
      }
      per_token = *f;
    }
    w.model_flops += p.tokens.value_or(0.0) * per_token->total() * part;
    w.basis = w.basis.empty() || w.basis == "tokens" ? "tokens" : "tokens and model_flops";
  }
  return w;
}

Result<JobEfficiency> JobMfu(Ledger& ledger, const std::string& job_id, const TimeRange& window,
                             Recompute recompute) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, internal_StoreOf(ledger).Snapshot());
  store::StoreSnapshot& store = *snap;
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, store.SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  const store::JobRecord* job = nullptr;
  for (const auto& j : jobs) {
    if (j.job.id == job_id) job = &j;
  }
  if (job == nullptr) return NotFound(fmt::format("no job {}", job_id));
  Dtype dtype = Dtype::kBf16;
  if (!job->job.model_dtype.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(dtype, ParseDtype(job->job.model_dtype));
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, store.ListDevices());
  GPULEDGER_ASSIGN_OR_RETURN(auto allocations, store.AllocationsOverlapping(window));
  JobEfficiency e;
  e.job_id = job_id;
  double tensor_weighted = 0, tensor_weight = 0;
  for (const auto& a : allocations) {
    if (a.job_id != job->id) continue;
    const store::DeviceRecord* dev = nullptr;
    for (const auto& d : devices) {
      if (d.id == a.device_id) dev = &d;
    }
    if (dev == nullptr) continue;
    TimeRange held = window.Intersect({a.from_ms, a.to_ms.value_or(kForever)});
    double share = static_cast<double>(dev->device.share.num) / static_cast<double>(dev->device.share.den);
    double seconds = static_cast<double>(held.length_ms()) / 1000.0 * share;
    GPULEDGER_ASSIGN_OR_RETURN(double peak, PeakFlops(dev->device.model, dtype));
    e.gpu_hours += seconds / 3600.0;
    e.peak_flops_capacity += peak * seconds;
    GPULEDGER_ASSIGN_OR_RETURN(auto samples, store.Samples(dev->id, {held.begin_ms, held.end_ms}));
    for (const Sample& smp : samples) {
      if (smp.tensor_active) {
        tensor_weighted += *smp.tensor_active * peak * share;
        tensor_weight += peak * share;
      }
    }
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto progress, store.ProgressOf(job->id, window));
  if (!progress.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(ReportedWork work, WorkReported(job->job, progress, window));
    e.basis = work.basis;
    e.achieved_flops = work.model_flops;
    if (e.peak_flops_capacity > 0) e.mfu = work.model_flops / e.peak_flops_capacity;
    e.recompute = recompute;
    if (recompute != Recompute::kNone && e.mfu) {
      // The recomputation's share of the job's model: its shape's when it has one (the
      // attention term), else the dense part alone.
      ModelShape shape{job->job.model_parameters, job->job.model_layers, job->job.model_hidden, 0,
                       job->job.model_sequence};
      auto model = TrainingFlopsPerToken(shape);
      FlopsPerToken per_token = model.ok() ? *model : FlopsPerToken{6.0, 0.0};
      e.hfu = *e.mfu * WithRecompute(per_token, recompute).total() / per_token.total();
    }
  }
  if (tensor_weight > 0) e.hardware_estimate = tensor_weighted / tensor_weight;
  return e;
}

}  // namespace gpuledger::ledger
