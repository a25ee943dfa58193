#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "ledger/rightsizing.h"

namespace gpuledger::cli {

void AddRecommendCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  struct Opts {
    std::string team, window = "30d", format = "table";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "recommend", "Right-sizing advice per job: MIG profiles, fewer GPUs, idle shutdown, with "
                   "evidence and the saving");
  AddCommonOptions(*sub, common);
  sub->add_option("--team", o->team, "only this team's jobs");
  sub->add_option("--window", o->window, "the last whole hours up to now")->capture_default_str();
  sub->add_option("--format", o->format, "table or json")->capture_default_str();
  out.push_back({sub, [o, &common]() -> int {
                   SystemClock clock;
                   auto length = ParseDuration(o->window);
                   if (!length.ok()) return Fail(length.status());
                   if (o->format != "table" && o->format != "json") {
                     return Fail(InvalidArgument("--format: want table or json"));
                   }
                   auto ledger = OpenLedger(common, clock);
                   if (!ledger.ok()) return Fail(ledger.status());
                   TimeRange window = ledger::TrailingWindow(clock.NowMs(), *length);
                   auto recs = ledger::Recommend(**ledger, window, o->team);
                   if (!recs.ok()) return Fail(recs.status());
                   if (o->format == "json") {
                     nlohmann::json j = nlohmann::json::array();
                     for (const auto& r : *recs) {
                       j.push_back({{"kind", ledger::RecommendationKindName(r.kind)},
                                    {"job", r.job_id},
                                    {"team", r.team},
                                    {"project", r.project},
                                    {"job_kind", JobKindName(r.job_kind)},
                                    {"action", r.action},
                                    {"evidence", r.evidence},
                                    {"confidence", r.confidence},
                                    {"gpu_hours", r.gpu_hours},
                                    {"cost", r.cost.ToString()},
                                    {"saving", r.saving.ToString()}});
                     }
                     std::printf("%s\n", j.dump(2).c_str());
                     return 0;
                   }
                   std::printf("Recommendations %s .. %s (savings of one job's advice overlap)\n\n",
                               FormatTime(window.begin_ms).c_str(), FormatTime(window.end_ms).c_str());
                   for (const auto& r : *recs) {
                     std::printf("%-13s %-10s %-8s job %s (%s / %s)\n  %s\n  evidence: %s\n  saving %s of %s, %s confidence\n\n",
                                 std::string(ledger::RecommendationKindName(r.kind)).c_str(),
                                 r.team.c_str(), std::string(JobKindName(r.job_kind)).c_str(),
                                 r.job_id.c_str(), r.team.c_str(), r.project.c_str(), r.action.c_str(),
                                 r.evidence.c_str(), r.saving.ToDisplay().c_str(),
                                 r.cost.ToDisplay().c_str(), r.confidence.c_str());
                   }
                   std::printf("%zu recommendations\n", recs->size());
                   return 0;
                 }});
}

}  // namespace gpuledger::cli
