// The `gpuledger simulate` subcommand: wiring from flags to the simulator and report.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace gpuledger::sim {

// Loads the jobs the ledger recorded over the last `window_ms` (for --from-ledger).
using LedgerJobLoader = std::function<Result<std::vector<gpuledger::Job>>(int64_t window_ms)>;

struct SimulateOptions {
  std::vector<std::string> clusters;  // TOML files; several are compared
  int64_t gpus = 0;                   // without --cluster: one pool of this many GPUs, 8 a node
  std::string trace;                  // a file, or "synthetic:N" for N seeded synthetic jobs
  std::string format;                 // empty: guessed from the header
  std::vector<std::string> policies{"fifo"};
  std::vector<std::string> placements{"topology"};
  uint64_t seed = 1;
  bool skip_bad_lines = false;
  std::string output = "table";
  std::string timeseries_path;  // empty: no time series
  bool from_ledger = false;
  std::string window = "30d";
};

// Runs every cluster x placement x policy on the workload and writes the report to
// `out`; warnings (skipped lines) and the progress bar (when `progress_bar`) go to
// `err`. Fails on unreadable inputs, unknown names, or a conservation failure.
Status RunSimulate(const SimulateOptions& options, const LedgerJobLoader& loader, std::ostream& out,
                   std::ostream& err, bool progress_bar);

// Registers `simulate` on `app`. With a loader, --from-ledger and --window are offered
// too. On failure the subcommand prints the error and exits with status 1 (through
// CLI::RuntimeError).
void AddSimulateCommand(CLI::App& app, LedgerJobLoader loader = {});

}  // namespace gpuledger::sim
