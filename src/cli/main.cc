// gpuledger: one binary, one subcommand per job. Wiring only; the work is in the
// libraries under src/.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace gpuledger::cli;
  CLI::App app{
      "gpuledger: every GPU-second attributed to a job, team and pool, priced, and split "
      "into useful work and waste."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuledger 0.1.0");
  CommonOptions common;
  Commands commands;
  AddDemoCommand(app, common, commands);
  AddServeCommand(app, common, commands);
  AddImportCommand(app, common, commands);
  AddUsageCommands(app, common, commands);
  AddPricesCommand(app, common, commands);
  AddStoreCommand(app, common, commands);
  AddPeriodCommand(app, common, commands);
  AddAgentCommand(app, common, commands);
  AddMfuCommand(app, common, commands);
  AddReportCommand(app, common, commands);
  AddRecommendCommand(app, common, commands);
  AddServingCommand(app, common, commands);
  AddSloCommand(app, common, commands);
  AddActionsCommand(app, common, commands);
  AddQuotaCommand(app, common, commands);
  AddSimulateCommand(app, common);
  CLI11_PARSE(app, argc, argv);
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return 0;  // a subcommand that runs in its own callback (simulate) has run
}
