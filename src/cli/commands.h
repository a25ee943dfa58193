// The gpuledger subcommands. Each Add*Command registers its CLI11 subcommand and the
// function main() runs when it is chosen; the functions return the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

#include "cli/config.h"

namespace gpuledger::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

// Adds --config and --db to a subcommand.
void AddCommonOptions(CLI::App& sub, CommonOptions& common);

void AddImportCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddUsageCommands(CLI::App& app, CommonOptions& common, Commands& out);  // usage, chargeback
void AddPricesCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddDemoCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddServeCommand(CLI::App& app, CommonOptions& common, Commands& out);  // serve, token
void AddAgentCommand(CLI::App& app, CommonOptions& common, Commands& out);  // src/agent
void AddMfuCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddReportCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddRecommendCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddServingCommand(CLI::App& app, CommonOptions& common, Commands& out);
// `simulate` runs in its CLI11 callback (src/sim); --from-ledger reads `common`'s store.
void AddSimulateCommand(CLI::App& app, CommonOptions& common);

// `--window 7d`: the last whole hours up to the current hour's start, by `clock`.
Result<TimeRange> LastWholeHours(const std::string& window, const Clock& clock);

// Prints a failed status to stderr as "gpuledger: <message>" and returns exit code 1.
int Fail(const Status& status);

}  // namespace gpuledger::cli
