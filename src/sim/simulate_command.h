// The `gpuledger simulate` subcommand: wiring from flags to the simulator and report.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/workload.h"
#include "core/status.h"
#include "sim/cluster.h"

namespace CLI {
class App;
}  // namespace CLI

namespace gpuledger::sim {

// Loads what the ledger recorded over the last `window_ms` (for --from-ledger and
// `gpuledger whatif`); the CLI wires it to ledger::RecordedWorkload.
using LedgerWorkloadLoader = std::function<Result<Workload>(int64_t window_ms)>;

struct SimulateOptions {
  std::vector<std::string> clusters;  // TOML files; several are compared
  int64_t gpus = 0;                   // without --cluster: one pool of exactly this many GPUs
  int32_t gpus_per_node = 8;          // its node size; --gpus must be a multiple (or at most one node)
  std::string trace;                  // a file, or "synthetic:N" for N seeded synthetic jobs
  std::string trace_format;           // empty: guessed from the header
  std::vector<std::string> policies{"fifo"};
  std::vector<std::string> placements{"topology"};
  std::string estimate;  // empty: the cluster file's duration_estimate (oracle by default)
  uint64_t seed = 1;
  bool skip_bad_lines = false;
  std::string report_format = "table";
  std::string timeseries_path;  // empty: no time series
  std::string jobs_out_path;    // empty: no per-job outcomes
  std::string jobs_format;      // csv or ndjson; empty: from the file name (.ndjson, .jsonl), else csv
  double failure_rate_per_gpu_hour = 0;
  int32_t max_restarts = 3;
  // Jobs left pending at the end, with every GPU free, fail the command unless allowed.
  bool allow_starved = false;
  bool from_ledger = false;
  std::string window = "30d";
};

// The cluster --gpus N [--gpus-per-node G] stands for: N / G nodes of G GPUs (one node
// of N when N <= G), at 2.00 a GPU-hour. Fails, naming the nearest sizes that work,
// when N is not a whole number of nodes: it builds exactly what was asked or nothing.
Result<ClusterSpec> PlainCluster(int64_t gpus, int32_t gpus_per_node);

// Runs every cluster x placement x policy on the workload and writes the report to
// `out`; warnings (skipped lines, jobs left pending) and the progress bar (when
// `progress_bar`) go to `err`. Fails on unreadable inputs, unknown names, a
// conservation failure, or (unless allow_starved) jobs that never got to run although
// every GPU sat free at the end.
Status RunSimulate(const SimulateOptions& options, const LedgerWorkloadLoader& loader, std::ostream& out,
                   std::ostream& err, bool progress_bar);

// Registers `simulate` on `app`. With a loader, --from-ledger and --window are offered
// too. On failure the subcommand prints the error and exits with status 1 (through
// CLI::RuntimeError).
void AddSimulateCommand(CLI::App& app, LedgerWorkloadLoader loader = {});

struct WhatIfCommandOptions {
  std::string window = "30d";
  std::vector<std::string> questions{"pools", "mig", "policy", "fleet"};
  std::vector<std::string> policies{"fair-share", "backfill"};
  std::string slo_wait = "10m";
  double slo_target_ratio = 0.95;
  std::string report_format = "table";  // table or json
};

// `gpuledger whatif`: the what-if (sim/whatif.h) on what `loader` returns, written to
// `out`. Fails on bad options, a failing loader, or a workload with nothing to replay.
Status RunWhatIf(const WhatIfCommandOptions& options, const LedgerWorkloadLoader& loader, std::ostream& out);
// Registers `whatif` on `app`; failures print the error and exit with status 1.
void AddWhatIfCommand(CLI::App& app, LedgerWorkloadLoader loader);

}  // namespace gpuledger::sim
