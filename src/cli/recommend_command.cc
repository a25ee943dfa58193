#include <fmt/format.h>

#include <map>

#include "cli/commands.h"
#include "ledger/rightsizing.h"
#include "report/usage_format.h"
#include "sim/trace.h"

namespace gpuledger::cli {

namespace {

// Right-sizing of a pod list (`--trace`): each single-GPU pod asking for a fraction of a
// GPU would hold a whole GPU without sharing; the smallest MIG slice that covers its
// fraction frees the rest. Memory is not in such traces, so compute alone decides.
int RecommendForTrace(const std::string& path, const std::string& gpu_model, Money price) {
  auto trace = sim::ReadTraceFileGuessing(path, {.skip_bad_lines = false});
  if (!trace.ok()) return Fail(trace.status());
  std::vector<ledger::PodRequest> pods;
  pods.reserve(trace->jobs.size());
  for (const sim::SimJob& j : trace->jobs) pods.push_back({j.gpus, j.share_ticks, j.duration_ms});
  auto fit = ledger::FitPodsToMig(pods, gpu_model, price);
  if (!fit.ok()) return Fail(fit.status());
  auto share = [](double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; };
  std::printf("%s: %zu GPU pods, %zu (%.1f%%) ask for a fraction of one GPU that a %s MIG slice covers\n",
              path.c_str(), fit->gpu_pods, fit->movable,
              share(static_cast<double>(fit->movable), static_cast<double>(fit->gpu_pods)), gpu_model.c_str());
  for (const auto& [name, n] : fit->by_profile) std::printf("  %-10s %zu pods\n", name.c_str(), n);
  std::printf("at %s per GPU-hour: whole-GPU cost %s, saving on slices %s (%.1f%%)\n", price.ToDisplay().c_str(),
              fit->whole_gpu_cost.ToDisplay().c_str(), fit->saving.ToDisplay().c_str(),
              share(static_cast<double>(fit->saving.micros()), static_cast<double>(fit->whole_gpu_cost.micros())));
  return 0;
}

}  // namespace

void AddRecommendCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    std::string team, format = "table";
    WindowOptions window;
    std::string trace, gpu_model = "NVIDIA A100-SXM4-80GB", price = "2.00";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "recommend", "Advice where the money is, by kind and team: input-bound and checkpoint-bound "
                   "training, fewer GPUs, serving headroom, GPUs held with nothing running, MIG slices, idle "
                   "shutdown; with evidence, confidence and the saving");
  AddCommonOptions(*sub, common);
  sub->add_option("--team", o->team, "only this team's jobs");
  AddWindowOptions(*sub, o->window, "30d");
  sub->add_option("--format", o->format, "table or json")->capture_default_str();
  sub->add_option("--trace", o->trace,
                  "instead of the ledger: a pod list (e.g. alibaba2023 openb_pod_list_*.csv) whose "
                  "fractional GPU requests are fitted to MIG slices");
  sub->add_option("--gpu-model", o->gpu_model, "with --trace: the GPU the pods run on")
      ->capture_default_str();
  sub->add_option("--price", o->price, "with --trace: price per GPU-hour")->capture_default_str();
  out.push_back({sub, [o, &common]() -> int {
                   if (!o->trace.empty()) {
                     auto price = Money::Parse(o->price);
                     if (!price.ok()) return Fail(price.status());
                     return RecommendForTrace(o->trace, o->gpu_model, *price);
                   }
                   SystemClock clock;

                   if (o->format != "table" && o->format != "json") {
                     return Fail(InvalidArgument("--format: want table or json"));
                   }
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto window = ResolveWindow(o->window, ledger->get(), clock);
                   if (!window.ok()) return Fail(window.status());
                   auto recs = ledger::Recommend(**ledger, *window, o->team);
                   if (!recs.ok()) return Fail(recs.status());
                   if (o->format == "json") {
                     std::fputs(report::RecommendationsJson(*recs, *window).c_str(), stdout);
                     return 0;
                   }
                   std::fputs(report::RecommendationsText(*recs, *window).c_str(), stdout);
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
