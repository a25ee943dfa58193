#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/commands.h"
#include "ledger/serving.h"
#include "report/usage_format.h"

namespace gpuledger::cli {
namespace {

std::string OptText(const std::optional<double>& v, const char* spec) {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string("not reported");
}

}  // namespace

void AddServingCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    std::string job, format = "table";
    WindowOptions window;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "serving", "Serving pressure of a serving job: queue depth, KV cache, prefill/decode, batch "
                 "sizes, tokens per second, cost per million tokens");
  AddCommonOptions(*sub, common);
  sub->add_option("--job", o->job, "the serving job")->required();
  AddWindowOptions(*sub, o->window, "24h");
  sub->add_option("--format", o->format, "table or json")->capture_default_str();
  out.push_back({sub, [o, &common]() -> int {
                   SystemClock clock;

                   if (o->format != "table" && o->format != "json") {
                     return Fail(InvalidArgument("--format: want table or json"));
                   }
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   auto window = ResolveWindow(o->window, ledger->get(), clock);
                   if (!window.ok()) return Fail(window.status());
                   auto reports = ledger::JobServing(**ledger, o->job, *window);
                   if (!reports.ok()) return Fail(reports.status());
                   if (o->format == "json") {
                     std::fputs(report::ServingJson(o->job, *reports).c_str(), stdout);
                     return 0;
                   }
                   if (reports->empty()) {
                     // Nothing to show: say why, and fail unless it is a serving job that
                     // was quiet in this window.
                     auto jobs = (*ledger)->Jobs();
                     if (!jobs.ok()) return Fail(jobs.status());
                     auto job = std::find_if(jobs->begin(), jobs->end(), [&](const Job& j) { return j.id == o->job; });
                     if (job == jobs->end()) return Fail(NotFound(fmt::format("--job {}: no such job", o->job)));
                     if (job->kind != JobKind::kServing) {
                       return Fail(InvalidArgument(fmt::format(
                           "--job {}: a {} job, not a serving one: serving figures come from serving engines "
                           "(for a training job's efficiency: gpuledger mfu --job {})",
                           o->job, JobKindName(job->kind), o->job)));
                     }
                     std::printf("job %s sent no serving-engine figures in the window\n", o->job.c_str());
                     return 0;
                   }
                   for (const auto& r : *reports) {
                     const auto& x = r.report;
                     std::printf("%s / %s, over %s\n", r.engine.c_str(), r.model.c_str(),
                                 FormatDuration(x.seconds * kMsPerSecond).c_str());
                     std::printf("  queue depth         mean %.1f, p95 %.0f, max %.0f\n", x.queue_depth.mean,
                                 x.queue_depth.p95, x.queue_depth.max);
                     std::printf("  running             mean %.1f, p95 %.0f\n", x.running.mean, x.running.p95);
                     std::printf("  KV cache            mean %.0f%%, p95 %.0f%%, at 90%%+ %.0f%% of the time\n",
                                 x.kv_cache_usage.mean * 100, x.kv_cache_usage.p95 * 100,
                                 x.kv_cache_full_share * 100);
                     std::printf("  prefill share       %s\n", OptText(x.prefill_share, "{:.0%}").c_str());
                     std::printf("  tokens/s            %s (generation %s)\n",
                                 OptText(x.tokens_per_second, "{:.1f}").c_str(),
                                 OptText(x.generation_tokens_per_second, "{:.1f}").c_str());
                     std::printf("  tokens per step     %s\n", OptText(x.mean_tokens_per_step, "{:.1f}").c_str());
                     std::printf("  batch size          %s\n", OptText(x.mean_batch_size, "{:.1f}").c_str());
                     std::printf("  preemptions/hour    %s\n", OptText(x.preemptions_per_hour, "{:.1f}").c_str());
                     std::printf("  cost per 1M tokens  %s\n",
                                 x.cost_per_million_tokens ? x.cost_per_million_tokens->ToDisplay().c_str()
                                                           : "not known");
                   }
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
