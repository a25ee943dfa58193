// The gpuledger subcommands. Each Add*Command registers its CLI11 subcommand and the
// function main() runs when it is chosen; the functions return the process exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "cli/config.h"
#include "core/workload.h"
#include "ledger/ledger.h"

namespace gpuledger::server {
class WhatIfService;  // server/whatif_api.h
}  // namespace gpuledger::server

namespace gpuledger::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

// Adds --config and --db to a subcommand.
void AddCommonOptions(CLI::App& sub, CommonOptions& common);

void AddImportCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddUsageCommands(CLI::App& app, CommonOptions& common, Commands& out);  // usage, chargeback, experiments
void AddPricesCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddStoreCommand(CLI::App& app, CommonOptions& common, Commands& out);
// `period close MONTH`, `period list`: billing periods (ledger::Ledger::ClosePeriod).
void AddPeriodCommand(CLI::App& app, CommonOptions& common, Commands& out);
// "the store is sound", or its problems and the tables they name (Store::Check).
std::string StoreCheckText(const store::StoreCheck& check);
void AddDemoCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddServeCommand(CLI::App& app, CommonOptions& common, Commands& out);  // serve, token
void AddAgentCommand(CLI::App& app, CommonOptions& common, Commands& out);  // src/agent
void AddMfuCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddReportCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddRecommendCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddServingCommand(CLI::App& app, CommonOptions& common, Commands& out);
void AddSloCommand(CLI::App& app, CommonOptions& common, Commands& out);  // slo status, slo backtest
void AddActionsCommand(CLI::App& app, CommonOptions& common, Commands& out);  // the audit log
void AddQuotaCommand(CLI::App& app, CommonOptions& common, Commands& out);  // quota status (docs/quotas.md)
// `simulate` runs in its CLI11 callback (src/sim); --from-ledger reads `common`'s store.
void AddSimulateCommand(CLI::App& app, CommonOptions& common);
// The simulator's what-if with `gpuledger whatif`'s defaults (every question, fifo
// against fair-share and backfill, 95% within 10m), as JSON (sim::RenderWhatIfJson): for
// the server's /api/v1/whatif and the monthly report's what-if section.
using WhatIfReplay = std::function<Result<std::string>(const Workload&)>;
WhatIfReplay WhatIfReplayWithDefaults();
// The server's /api/v1/whatif replay (WhatIfReplayWithDefaults).
std::shared_ptr<server::WhatIfService> WhatIfForServer();

// The window a command reports on: --window D (trailing), or --from T [--to T].
struct WindowOptions {
  std::string window, from, to;
  std::string now;       // hidden --now: pretend the time is this (reproducible reports)
  std::string fallback;  // the trailing window when none of the above is given; "" = required
};
// Adds --window, --from, --to and the hidden --now to `sub`; `fallback` as above.
void AddWindowOptions(CLI::App& sub, WindowOptions& w, const std::string& fallback);
// The window the options name. A trailing window is whole hours ending where `ledger`'s
// data ends (ledger::TrailingWindow; with no ledger, at the current hour). An explicit
// --to defaults to now. Every report then cuts its window where the data ends.
Result<TimeRange> ResolveWindow(const WindowOptions& w, ledger::Ledger* ledger, const Clock& clock);

// The text of a file that holds a secret (a token, a store URL with its password): its
// trailing whitespace dropped, since `kubectl create secret --from-file` and editors leave a
// newline. Fails naming `what` and the file when it cannot be read or holds nothing; the
// secret itself never appears in the error.
Result<std::string> ReadSecretFile(const std::string& path, const std::string& what);

// Prints a failed status to stderr as "gpuledger: <message>" and returns exit code 1.
int Fail(const Status& status);

// A span as every command (and the dashboard, format.js) writes one: "6d 23h", "5h 10m",
// "12m", "45s"; rounded down to the unit shown last.
std::string FormatDuration(int64_t ms);

// "1 batch", "3 batches": `n` and the noun, plural unless n is 1.
std::string Plural(int64_t n, std::string_view one, std::string_view many);

}  // namespace gpuledger::cli
