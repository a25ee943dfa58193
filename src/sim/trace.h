// Workloads for the simulator: the job record it replays, the readers for public traces
// and for our own CSV format, the conversion from the ledger's recorded jobs, and a
// seeded synthetic generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/money.h"
#include "core/status.h"

namespace gpuledger::sim {

// A GPU is kShareScale ticks (840): a 3/7 MIG slice is exactly 360 ticks, and a request
// of 250 milli-GPU is rounded up to 210 ticks.
inline constexpr int32_t kTicksPerGpu = static_cast<int32_t>(kShareScale);

// One job as the simulator replays it. Plain data.
struct SimJob {
  std::string id;
  std::string queue;  // team / virtual cluster / QoS class: fair-share leaf and SLO unit
  std::string pool;   // the pool the job asked for; empty routes it by kind and queue
  std::string user;   // who submitted it, where the trace says; the key of user-mean estimates
  int64_t submit_ms = 0;
  // Run time on the full request, alone on its devices, without slowdown. Always > 0.
  int64_t duration_ms = 0;
  int32_t gpus = 0;         // whole GPUs; 0 for a sub-GPU request
  int32_t share_ticks = 0;  // a sub-GPU request, 1..kTicksPerGpu-1; 0 for whole GPUs
  int32_t priority = 0;     // larger is more important
  JobKind kind = JobKind::kUnknown;
  // The fraction of its allocation the job keeps busy, where the trace says; < 0 if not.
  float activity_ratio = -1.0F;
  // The trace records that this run failed (Philly's status "Failed"): the job runs its
  // duration, then ends failed, and its GPU time counts as failed GPU time.
  bool failed = false;

  bool is_fractional() const { return gpus == 0; }
  // What the job asks for, in ticks (gpus x 840, or share_ticks).
  int64_t RequestTicks() const {
    return gpus > 0 ? static_cast<int64_t>(gpus) * kTicksPerGpu : share_ticks;
  }
};

enum class TraceFormat {
  kPhilly,        // philly_pollux.csv: timestamp,duration,num_gpus,gpu_time,cluster
  kTiresias,      // job_id,num_gpu,submit_time,iterations,model_name,duration,interval
  kAlibaba2023,   // openb_pod_list_*.csv (fractional gpu_milli, QoS classes)
  kAlibaba2025,   // alibaba_2025_dlrm_serving.csv (serving instances)
  kGpuledgerCsv,  // our own format, see docs/simulator.md
};
std::string_view TraceFormatName(TraceFormat f);
// "philly", "tiresias", "alibaba2023", "alibaba2025", "gpuledger-csv".
Result<TraceFormat> ParseTraceFormat(std::string_view text);
// Recognises a format from its header line; fails naming the header when none matches.
Result<TraceFormat> GuessTraceFormat(std::string_view header_line);

struct ReadOptions {
  // false: the first malformed line fails the read. true: malformed lines are skipped,
  // counted and the first kMaxReportedErrors of them reported in Trace::errors.
  bool skip_bad_lines = false;
};
inline constexpr size_t kMaxReportedErrors = 20;

struct Trace {
  std::vector<SimJob> jobs;  // in file order; the simulator sorts by submit time
  size_t lines_read = 0;     // data lines, header excluded
  size_t skipped_bad_lines = 0;
  size_t filtered = 0;  // well-formed lines that are not GPU jobs (CPU-only pods, ...)
  std::vector<std::string> errors;  // "file:line: message", at most kMaxReportedErrors
};

// Reads a trace. On a malformed line (unless skipping) fails with InvalidArgument
// "FILE:LINE: what is wrong". NotFound if the file cannot be opened.
Result<Trace> ReadTraceFile(const std::string& path, TraceFormat format,
                            const ReadOptions& options);
// Reads a whole file with the format guessed from its header.
Result<Trace> ReadTraceFileGuessing(const std::string& path, const ReadOptions& options);
// The same from text in memory; `source_name` stands for FILE in messages.
Result<Trace> ReadTraceText(std::string_view text, std::string_view source_name,
                            TraceFormat format, const ReadOptions& options);

// The share of a GPU a MIG profile stands for, in ticks: "3g.71gb" -> 360 (3/7).
// Fails naming the text for anything that does not start with "<N>g." with N in 1..7.
Result<int32_t> MigProfileTicks(std::string_view profile);

// A seeded synthetic workload: Poisson arrivals, log-uniform durations, a Philly-like
// GPU-count mix, a share of sub-GPU jobs, several queues and priorities. Bit-for-bit the
// same for the same spec and seed with the same C library (durations go through
// std::log and std::exp; the random draws themselves are the same everywhere).
struct SyntheticSpec {
  size_t jobs = 1000;
  int64_t mean_interarrival_ms = 10 * 1000;
  int64_t min_duration_ms = 60 * 1000;
  int64_t max_duration_ms = 24 * 3600 * 1000LL;
  int32_t max_gpus = 8;
  double fractional_ratio = 0.0;  // share of jobs asking for a part of a GPU
  int32_t queues = 4;
  int32_t priorities = 1;  // priorities drawn from 0..priorities-1
};
Trace SyntheticTrace(const SyntheticSpec& spec, uint64_t seed);

// A small deterministic PRNG (splitmix64): the same draws on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, 1).
  double Uniform();
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t Below(uint64_t n);

 private:
  uint64_t state_;
};

}  // namespace gpuledger::sim
