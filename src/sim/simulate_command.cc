#include "sim/simulate_command.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/time.h"
#include "sim/cluster.h"
#include "sim/report.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace gpuledger::sim {
namespace {

Result<std::vector<SimJob>> LoadWorkload(const SimulateOptions& o, const LedgerJobLoader& loader, std::ostream& err) {
  if (o.from_ledger) {
    if (!loader) return FailedPrecondition("--from-ledger needs a ledger store, which this build does not wire");
    GPULEDGER_ASSIGN_OR_RETURN(int64_t window_ms, ParseDuration(o.window));
    GPULEDGER_ASSIGN_OR_RETURN(std::vector<gpuledger::Job> recorded, loader(window_ms));
    size_t skipped = 0;
    std::vector<SimJob> jobs = JobsFromLedger(recorded, &skipped);
    if (skipped > 0) err << fmt::format("note: {} recorded jobs lack a start, an end or a request; left out\n", skipped);
    return jobs;
  }
  if (o.trace.empty()) return InvalidArgument("give --trace FILE, --trace synthetic:N or --from-ledger");
  constexpr std::string_view kSynthetic = "synthetic:";
  if (o.trace.rfind(kSynthetic, 0) == 0) {
    SyntheticSpec spec;
    std::string_view n = std::string_view(o.trace).substr(kSynthetic.size());
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), spec.jobs);
    if (ec != std::errc() || p != n.data() + n.size() || spec.jobs == 0) {
      return InvalidArgument(fmt::format("--trace {}: expected synthetic:N with N > 0", o.trace));
    }
    return SyntheticTrace(spec, o.seed).jobs;
  }
  ReadOptions ro;
  ro.skip_bad_lines = o.skip_bad_lines;
  Result<Trace> trace = o.format.empty() ? ReadTraceFileGuessing(o.trace, ro) : [&]() -> Result<Trace> {
    GPULEDGER_ASSIGN_OR_RETURN(TraceFormat f, ParseTraceFormat(o.format));
    return ReadTraceFile(o.trace, f, ro);
  }();
  if (!trace.ok()) {
    if (!o.skip_bad_lines && trace.status().code() == StatusCode::kInvalidArgument) {
      return trace.status().WithContext("reading the trace (--skip-bad-lines skips malformed lines)");
    }
    return trace.status();
  }
  if (trace->skipped_bad_lines > 0) {
    err << fmt::format("warning: skipped {} malformed lines of {}:\n", trace->skipped_bad_lines, o.trace);
    for (const auto& e : trace->errors) err << "  " << e << "\n";
  }
  return std::move(trace->jobs);
}

class ProgressBar {
 public:
  ProgressBar(std::ostream& err, bool on, std::string label) : err_(err), on_(on), label_(std::move(label)) {}
  ~ProgressBar() {
    if (on_ && drawn_) err_ << "\r\033[K" << std::flush;
  }
  void Update(size_t done, size_t total) {
    if (!on_ || total == 0) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(static_cast<double>(done) / static_cast<double>(total) * kWidth);
    err_ << fmt::format("\r{:<20} [{}{}] {:3}%", label_, std::string(static_cast<size_t>(filled), '#'),
                        std::string(static_cast<size_t>(kWidth - filled), ' '), done * 100 / total)
         << std::flush;
    drawn_ = true;
  }

 private:
  std::ostream& err_;
  bool on_;
  std::string label_;
  bool drawn_ = false;
};

}  // namespace

Status RunSimulate(const SimulateOptions& o, const LedgerJobLoader& loader, std::ostream& out, std::ostream& err,
                   bool progress_bar) {
  GPULEDGER_ASSIGN_OR_RETURN(OutputFormat output, ParseOutputFormat(o.output));
  std::vector<ClusterSpec> clusters;
  for (const auto& path : o.clusters) {
    GPULEDGER_ASSIGN_OR_RETURN(ClusterSpec c, LoadClusterFile(path));
    clusters.push_back(std::move(c));
  }
  if (clusters.empty()) {
    if (o.gpus <= 0) return InvalidArgument("give --cluster FILE (or --gpus N for one plain pool)");
    const int32_t nodes = static_cast<int32_t>((o.gpus + 7) / 8);
    clusters.push_back(UniformCluster(nodes, 8, Money::FromUnits(2)));
  }
  std::vector<PlacementMode> placements;
  for (const auto& p : o.placements) {
    GPULEDGER_ASSIGN_OR_RETURN(PlacementMode m, ParsePlacementMode(p));
    placements.push_back(m);
  }
  for (const auto& name : o.policies) {
    GPULEDGER_RETURN_IF_ERROR(MakePolicy(name, SchedulerSpec()).status());
  }
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<SimJob> jobs, LoadWorkload(o, loader, err));
  std::vector<SimResult> runs;
  for (const auto& cluster : clusters) {
    for (PlacementMode placement : placements) {
      for (const auto& name : o.policies) {
        ProgressBar bar(err, progress_bar, fmt::format("{} {}", name, PlacementModeName(placement)));
        SimOptions so;
        so.placement = placement;
        so.keep_job_outcomes = false;
        so.progress = [&bar](size_t done, size_t total) { bar.Update(done, total); };
        GPULEDGER_ASSIGN_OR_RETURN(SimResult r, Simulate(cluster, jobs, name, so));
        runs.push_back(std::move(r));
      }
    }
  }
  switch (output) {
    case OutputFormat::kTable:
      out << RenderTable(runs);
      break;
    case OutputFormat::kJson:
      out << RenderJson(runs);
      break;
    case OutputFormat::kCsv:
      out << RenderSummaryCsv(runs);
      break;
  }
  if (!o.timeseries_path.empty()) {
    std::ofstream ts(o.timeseries_path, std::ios::binary | std::ios::trunc);
    if (!ts) return Unavailable(fmt::format("cannot write the time series to '{}'", o.timeseries_path));
    ts << RenderTimeseriesCsv(runs);
    if (!ts) return Unavailable(fmt::format("writing the time series to '{}' failed", o.timeseries_path));
  }
  for (const auto& r : runs) {
    if (!r.conservation.ok()) return r.conservation.WithContext(fmt::format("run {}", r.policy));
  }
  return Status::Ok();
}

void AddSimulateCommand(CLI::App& app, LedgerJobLoader loader) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Replay a job trace (or the ledger's own history) on a cluster layout under scheduling policies, and "
      "compare utilization, waiting, completion, cost, preemptions and per-queue SLOs");
  cmd->add_option("--cluster", options->clusters, "Cluster TOML file(s); several are compared")->delimiter(',');
  cmd->add_option("--gpus", options->gpus, "Without --cluster: one pool of N GPUs, 8 per node, at 2.00 a GPU-hour");
  cmd->add_option("--trace", options->trace, "Trace CSV file, or synthetic:N for N seeded synthetic jobs");
  cmd->add_option("--format", options->format,
                  "Trace format: philly, tiresias, alibaba2023, alibaba2025, gpuledger-csv (default: from the header)");
  cmd->add_option("--policy", options->policies, "Policies to compare: fifo, priority, sjf, fair-share, backfill, las")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--placement", options->placements, "Placement(s): topology (best fit, packed) or spread")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed for synthetic traces")->capture_default_str();
  cmd->add_flag("--skip-bad-lines", options->skip_bad_lines, "Skip malformed trace lines (reported) instead of failing");
  cmd->add_option("--output", options->output, "Report format: table, json or csv")->capture_default_str();
  cmd->add_option("--timeseries", options->timeseries_path, "Write allocated/active utilization over time to this CSV");
  if (loader) {
    cmd->add_flag("--from-ledger", options->from_ledger, "Replay the jobs the ledger recorded instead of a trace");
    cmd->add_option("--window", options->window, "With --from-ledger: how far back, e.g. 30d")->capture_default_str();
  }
  cmd->callback([options, loader]() {
    const bool tty = isatty(STDERR_FILENO) != 0;
    Status st = RunSimulate(*options, loader, std::cout, std::cerr, tty);
    if (!st.ok()) {
      std::cerr << "error: " << st.ToString() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace gpuledger::sim
