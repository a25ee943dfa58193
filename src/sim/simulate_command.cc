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
#include "sim/whatif.h"

namespace gpuledger::sim {
namespace {

Result<std::vector<SimJob>> LoadWorkload(const SimulateOptions& o, const LedgerWorkloadLoader& loader, std::ostream& err) {
  if (o.from_ledger) {
    if (!loader) return FailedPrecondition("--from-ledger needs a ledger store, which this build does not wire");
    GPULEDGER_ASSIGN_OR_RETURN(int64_t window_ms, ParseDuration(o.window));
    GPULEDGER_ASSIGN_OR_RETURN(Workload recorded, loader(window_ms));
    size_t skipped = 0;
    std::vector<SimJob> jobs = SimJobsFromWorkload(recorded, false, &skipped);
    skipped += recorded.left_out;
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
  Result<Trace> trace = o.trace_format.empty() ? ReadTraceFileGuessing(o.trace, ro) : [&]() -> Result<Trace> {
    GPULEDGER_ASSIGN_OR_RETURN(TraceFormat f, ParseTraceFormat(o.trace_format));
    return ReadTraceFile(o.trace, f, ro);
  }();
  if (!trace.ok()) {
    // Skipping lines cannot mend a header (line 1): suggest it only for data lines.
    const bool header = trace.status().message().rfind(o.trace + ":1:", 0) == 0;
    if (!o.skip_bad_lines && !header && trace.status().code() == StatusCode::kInvalidArgument) {
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

// The per-job outcomes file, in the format asked for or named by its extension.
Status WriteJobsOut(const SimulateOptions& o, const std::vector<SimJob>& jobs, const std::vector<SimResult>& runs) {
  std::string format = o.jobs_format;
  if (format.empty()) {
    const std::string& p = o.jobs_out_path;
    auto ends = [&](std::string_view suffix) {
      return p.size() >= suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    format = ends(".ndjson") || ends(".jsonl") ? "ndjson" : "csv";
  }
  if (format != "csv" && format != "ndjson") {
    return InvalidArgument(fmt::format("--jobs-format '{}': want csv or ndjson", format));
  }
  std::ofstream f(o.jobs_out_path, std::ios::binary | std::ios::trunc);
  if (!f) return Unavailable(fmt::format("cannot write the per-job outcomes to '{}'", o.jobs_out_path));
  f << (format == "csv" ? RenderJobsCsv(jobs, runs) : RenderJobsNdjson(jobs, runs));
  if (!f) return Unavailable(fmt::format("writing the per-job outcomes to '{}' failed", o.jobs_out_path));
  return Status::Ok();
}

// A subcommand's failure: the error on stderr, exit status 1.
void ExitOnError(const Status& st) {
  if (st.ok()) return;
  std::cerr << "error: " << st.ToString() << "\n";
  throw CLI::RuntimeError(1);
}

}  // namespace

Result<ClusterSpec> PlainCluster(int64_t gpus, int32_t gpus_per_node) {
  if (gpus <= 0) return InvalidArgument("give --cluster FILE (or --gpus N for one plain pool)");
  if (gpus_per_node <= 0) return InvalidArgument(fmt::format("--gpus-per-node must be > 0, is {}", gpus_per_node));
  if (gpus > kMaxPoolGpus) {
    return InvalidArgument(fmt::format("--gpus {}: more than the {} GPUs a pool may have", gpus, kMaxPoolGpus));
  }
  if (gpus <= gpus_per_node) return UniformCluster(1, static_cast<int32_t>(gpus), Money::FromUnits(2));
  if (gpus % gpus_per_node != 0) {
    const int64_t below = gpus / gpus_per_node * gpus_per_node;
    return InvalidArgument(fmt::format(
        "--gpus {} is not a whole number of {}-GPU nodes (a pool is made of whole nodes): give --gpus {} or {}, "
        "or a --gpus-per-node that divides {}",
        gpus, gpus_per_node, below, below + gpus_per_node, gpus));
  }
  return UniformCluster(static_cast<int32_t>(gpus / gpus_per_node), gpus_per_node, Money::FromUnits(2));
}

Status RunSimulate(const SimulateOptions& o, const LedgerWorkloadLoader& loader, std::ostream& out, std::ostream& err,
                   bool progress_bar) {
  GPULEDGER_ASSIGN_OR_RETURN(OutputFormat output, ParseOutputFormat(o.report_format));
  std::vector<ClusterSpec> clusters;
  for (const auto& path : o.clusters) {
    GPULEDGER_ASSIGN_OR_RETURN(ClusterSpec c, LoadClusterFile(path));
    clusters.push_back(std::move(c));
  }
  if (clusters.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(ClusterSpec plain, PlainCluster(o.gpus, o.gpus_per_node));
    clusters.push_back(std::move(plain));
  }
  if (!o.estimate.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(DurationEstimate e, ParseDurationEstimate(o.estimate));
    for (auto& c : clusters) c.scheduler.duration_estimate = e;
  }
  if (o.failure_rate_per_gpu_hour < 0 || o.max_restarts < 0) {
    return InvalidArgument("--failure-rate and --max-restarts must not be negative");
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
        so.keep_job_outcomes = !o.jobs_out_path.empty();
        so.failure_rate_per_gpu_hour = o.failure_rate_per_gpu_hour;
        so.max_restarts = o.max_restarts;
        so.failure_seed = o.seed;
        so.progress = [&bar](size_t done, size_t total) { bar.Update(done, total); };
        GPULEDGER_ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(name, cluster.scheduler));
        GPULEDGER_ASSIGN_OR_RETURN(SimResult r, Simulate(cluster, jobs, *policy, so));
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
  if (!o.jobs_out_path.empty()) GPULEDGER_RETURN_IF_ERROR(WriteJobsOut(o, jobs, runs));
  for (const auto& r : runs) {
    if (!r.conservation.ok()) return r.conservation.WithContext(fmt::format("run {}", RunLabel(r, true)));
  }
  size_t starved_runs = 0;
  for (const auto& r : runs) {
    if (r.starved == 0) continue;
    ++starved_runs;
    err << fmt::format("warning: run {}: {} of {} jobs never finished: they were still pending at the end, with "
                       "every GPU free (a queue's max_gpus or a non-borrowing guarantee below the job's size, or "
                       "a policy that never looked at them)\n",
                       RunLabel(r, true), r.starved, r.jobs);
  }
  if (starved_runs > 0 && !o.allow_starved) {
    return FailedPrecondition(fmt::format("{} run(s) left jobs pending while GPUs sat free (see the warnings; "
                                          "--allow-starved accepts such runs)",
                                          starved_runs));
  }
  return Status::Ok();
}

void AddSimulateCommand(CLI::App& app, LedgerWorkloadLoader loader) {
  auto options = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Replay a job trace (or the ledger's own history) on a cluster layout under scheduling policies, and "
      "compare utilization, waiting, completion, cost, preemptions and per-queue SLOs");
  cmd->add_option("--cluster", options->clusters, "Cluster TOML file(s); several are compared")->delimiter(',');
  cmd->add_option("--gpus", options->gpus,
                  "Without --cluster: one pool of exactly N GPUs (whole nodes of --gpus-per-node), at 2.00 a GPU-hour");
  cmd->add_option("--gpus-per-node", options->gpus_per_node, "With --gpus: GPUs per node")->capture_default_str();
  cmd->add_option("--trace", options->trace, "Trace CSV file, or synthetic:N for N seeded synthetic jobs");
  cmd->add_option("--trace-format,--format", options->trace_format,
                  "Trace format: philly, tiresias, alibaba2023, alibaba2025, gpuledger-csv (default: from the "
                  "header; --format is the old name, kept for one release)");
  cmd->add_option("--policy", options->policies,
                  "Policies to compare: fifo, firstfit, priority, sjf, srtf, fair-share, backfill, las; "
                  "sjf and srtf may name a duration estimate, e.g. sjf:queue-mean")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--placement", options->placements, "Placement(s): topology (best fit, packed) or spread")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--estimate", options->estimate,
                  "What sjf and srtf know of durations: oracle, user-mean or queue-mean (default: the cluster "
                  "file's, else oracle)");
  cmd->add_option("--seed", options->seed, "Seed for synthetic traces and random failures")->capture_default_str();
  cmd->add_flag("--skip-bad-lines", options->skip_bad_lines, "Skip malformed trace lines (reported) instead of failing");
  cmd->add_option("--report-format,--output", options->report_format,
                  "Report format: table, json or csv (--output is the old name, kept for one release)")
      ->capture_default_str();
  cmd->add_option("--timeseries", options->timeseries_path, "Write allocated/active utilization over time to this CSV");
  cmd->add_option("--jobs-out", options->jobs_out_path, "Write every job's outcome in every run to this file");
  cmd->add_option("--jobs-format", options->jobs_format, "csv or ndjson (default: from --jobs-out's extension)");
  cmd->add_option("--failure-rate", options->failure_rate_per_gpu_hour,
                  "Random job failures per GPU-hour of running (restart from the beginning); 0: none");
  cmd->add_option("--max-restarts", options->max_restarts, "With failures: restarts before a job ends failed")
      ->capture_default_str();
  cmd->add_flag("--allow-starved", options->allow_starved,
                "Exit 0 even when jobs were left pending with GPUs free (still warned)");
  if (loader) {
    cmd->add_flag("--from-ledger", options->from_ledger, "Replay the jobs the ledger recorded instead of a trace");
    cmd->add_option("--window", options->window, "With --from-ledger: how far back, e.g. 30d")->capture_default_str();
  }
  cmd->callback([options, loader]() {
    const bool tty = isatty(STDERR_FILENO) != 0;
    ExitOnError(RunSimulate(*options, loader, std::cout, std::cerr, tty));
  });
}

Status RunWhatIf(const WhatIfCommandOptions& o, const LedgerWorkloadLoader& loader, std::ostream& out) {
  if (!loader) return FailedPrecondition("whatif needs a ledger store, which this build does not wire");
  if (o.report_format != "table" && o.report_format != "json") {
    return InvalidArgument(fmt::format("--report-format '{}': want table or json", o.report_format));
  }
  WhatIfOptions w;
  w.questions.clear();
  for (const auto& q : o.questions) {
    GPULEDGER_ASSIGN_OR_RETURN(WhatIfQuestion parsed, ParseWhatIfQuestion(q));
    w.questions.push_back(parsed);
  }
  w.other_policies = o.policies;
  GPULEDGER_ASSIGN_OR_RETURN(w.slo_wait_ms, ParseDuration(o.slo_wait));
  if (o.slo_target_ratio <= 0 || o.slo_target_ratio > 1) {
    return InvalidArgument(fmt::format("--slo-target must be within (0, 1], is {}", o.slo_target_ratio));
  }
  w.slo_target_ratio = o.slo_target_ratio;
  GPULEDGER_ASSIGN_OR_RETURN(int64_t window_ms, ParseDuration(o.window));
  GPULEDGER_ASSIGN_OR_RETURN(Workload recorded, loader(window_ms));
  GPULEDGER_ASSIGN_OR_RETURN(WhatIfReport report, WhatIf(recorded, w));
  out << (o.report_format == "json" ? RenderWhatIfJson(report) : RenderWhatIfText(report));
  return Status::Ok();
}

void AddWhatIfCommand(CLI::App& app, LedgerWorkloadLoader loader) {
  auto options = std::make_shared<WhatIfCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "whatif",
      "Replay the ledger's recorded jobs on changed pools, MIG slices, policies and fleet sizes, and say what each "
      "would have changed in money, utilization and waiting");
  cmd->add_option("--window", options->window, "How far back, e.g. 30d")->capture_default_str();
  cmd->add_option("--question", options->questions, "Questions: pools, mig, policy, fleet")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--policy", options->policies, "Policies to compare with fifo")->delimiter(',')->capture_default_str();
  cmd->add_option("--slo-wait", options->slo_wait, "Availability SLO: requested GPUs started within this")
      ->capture_default_str();
  cmd->add_option("--slo-target", options->slo_target_ratio, "Availability SLO: share of requested GPUs")
      ->capture_default_str();
  cmd->add_option("--report-format", options->report_format, "table or json")->capture_default_str();
  cmd->callback([options, loader]() {
    ExitOnError(RunWhatIf(*options, loader, std::cout));
  });
}

}  // namespace gpuledger::sim
