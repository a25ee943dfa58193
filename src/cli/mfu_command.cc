#include <fmt/format.h>

#include "cli/commands.h"
#include "ledger/mfu.h"

namespace gpuledger::cli {

namespace {

// `gpuledger mfu --job ID`: a recorded job's MFU from its own progress reports.
int JobMode(const CommonOptions& common, const std::string& job, const WindowOptions& w,
            ledger::Recompute recompute) {
  SystemClock clock;
  auto ledger = OpenLedger(common, clock);
  if (!ledger.ok()) return Fail(ledger.status());
  auto window = ResolveWindow(w, ledger->get(), clock);
  if (!window.ok()) return Fail(window.status());
  auto e = ledger::JobMfu(**ledger, job, *window, recompute);
  if (!e.ok()) return Fail(e.status());
  std::printf("job %s, %s .. %s\n", job.c_str(), FormatTime(window->begin_ms).c_str(),
              FormatTime(window->end_ms).c_str());
  std::printf("GPU-hours held             %.2f\n", e->gpu_hours);
  if (e->mfu) {
    std::printf("achieved model FLOPs       %.4g  (from its %s reports)\n", *e->achieved_flops,
                e->basis.c_str());
    std::printf("MFU                        %.1f%%  (model FLOPs: recomputation never counted)\n",
                *e->mfu * 100.0);
    if (e->hfu) {
      std::printf("HFU                        %.1f%%  (hardware FLOPs: counts %s recomputation; not MFU)\n",
                  *e->hfu * 100.0, std::string(ledger::RecomputeName(e->recompute)).c_str());
    }
  } else {
    std::printf("MFU                        not reported (the job sent no progress)\n");
  }
  if (e->hardware_estimate) {
    std::printf("hardware estimate          %.1f%% of peak  (tensor-pipe activity: an estimate, "
                "not MFU)\n",
                *e->hardware_estimate * 100.0);
  }
  return 0;
}

}  // namespace

void AddMfuCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    double parameters = 0, tokens_per_s = 0, step_s = 0, batch = 0;
    int64_t layers = 0, hidden = 0, vocab = 0, seq = 0, gpus = 0;
    std::string gpu = "NVIDIA H100 80GB HBM3", dtype = "bf16", recompute = "none";
    std::string job;
    WindowOptions window;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "mfu", "Planning calculator: model FLOPs per token, achieved TFLOP/s per GPU and MFU of a "
             "training run");
  sub->add_option("--params", o->parameters, "parameter count (e.g. 7e9); or give the shape");
  sub->add_option("--layers", o->layers, "transformer layers");
  sub->add_option("--hidden", o->hidden, "hidden (model) size");
  sub->add_option("--vocab", o->vocab, "vocabulary size (for the parameter count from the shape)");
  sub->add_option("--seq", o->seq, "sequence length in tokens (for attention's 12 L H S term: with --layers and --hidden)");
  sub->add_option("--tokens-per-s", o->tokens_per_s, "training throughput, tokens per second");
  sub->add_option("--step-time", o->step_s, "seconds per optimizer step (with --batch)");
  sub->add_option("--batch", o->batch, "global batch, in sequences (with --step-time)");
  sub->add_option("--gpus", o->gpus, "GPUs the job holds");
  sub->add_option("--job", o->job, "instead: a recorded job's MFU from its progress reports");
  AddWindowOptions(*sub, o->window, "7d");  // with --job
  AddCommonOptions(*sub, common);
  sub->add_option("--gpu", o->gpu, "GPU model (NVML name or short: H100, A100, L40S, ...)")
      ->capture_default_str();
  sub->add_option("--dtype", o->dtype, "bf16, fp16, fp8, tf32 or fp32")->capture_default_str();
  sub->add_option("--recompute", o->recompute,
                  "activation recomputation (none, selective, full): gives HFU, the hardware FLOPs "
                  "utilization that counts it, beside MFU")
      ->capture_default_str();
  out.push_back({sub, [o, &common]() -> int {
                   auto recompute = ledger::ParseRecompute(o->recompute);
                   if (!recompute.ok()) return Fail(recompute.status());
                   if (!o->job.empty()) return JobMode(common, o->job, o->window, *recompute);
                   ledger::MfuInput in;
                   if (o->parameters > 0) in.model.parameters = o->parameters;
                   in.model.layers = o->layers;
                   in.model.hidden = o->hidden;
                   in.model.vocabulary = o->vocab;
                   in.model.sequence = o->seq;
                   if (o->tokens_per_s > 0) in.tokens_per_second = o->tokens_per_s;
                   if (o->step_s > 0) in.step_seconds = o->step_s;
                   if (o->batch > 0) in.batch_sequences = o->batch;
                   in.gpus = o->gpus;
                   in.gpu_model = o->gpu;
                   auto dtype = ledger::ParseDtype(o->dtype);
                   if (!dtype.ok()) return Fail(dtype.status());
                   in.dtype = *dtype;
                   in.recompute = *recompute;
                   auto r = ledger::ComputeMfu(in);
                   if (!r.ok()) return Fail(r.status());
                   if (o->seq > 0 && (o->layers <= 0 || o->hidden <= 0)) {
                     std::fprintf(stderr,
                                  "gpuledger: warning: --seq %lld counts only with --layers and --hidden "
                                  "(attention's 12 L H S FLOPs per token): attention is left out\n",
                                  static_cast<long long>(o->seq));
                   }
                   std::printf("parameters                 %.4g%s\n", r->parameters,
                               in.model.parameters ? "" : "  (from the shape)");
                   std::printf("model FLOPs per token      %.4g  (6N %.4g + attention %.4g)\n",
                               r->flops_per_token.total(), r->flops_per_token.dense,
                               r->flops_per_token.attention);
                   std::printf("tokens per second          %.4g\n", r->tokens_per_second);
                   std::printf("achieved TFLOP/s per GPU   %.1f\n", r->achieved_flops_per_gpu / 1e12);
                   std::printf("peak TFLOP/s per GPU       %.1f  (%s, %s, dense)\n",
                               r->peak_flops_per_gpu / 1e12, in.gpu_model.c_str(),
                               std::string(ledger::DtypeName(in.dtype)).c_str());
                   std::printf("MFU                        %.1f%%  (model FLOPs: recomputation never counted)\n",
                               r->mfu * 100.0);
                   if (r->hfu) {
                     std::printf("hardware FLOPs per token   %.4g  (%s recomputation)\n",
                                 r->hardware_flops_per_token->total(),
                                 std::string(ledger::RecomputeName(in.recompute)).c_str());
                     std::printf("HFU                        %.1f%%  (hardware FLOPs: counts %s recomputation; not MFU)\n",
                                 *r->hfu * 100.0, std::string(ledger::RecomputeName(in.recompute)).c_str());
                   }
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
