// Training and batch advice: input-bound, checkpoint-bound, fewer GPUs (per job or per
// trial of a sweep) and GPUs held with nothing running (docs/recommendations.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ledger/advice_internal.h"

namespace gpuledger::ledger::advice {
namespace {

double Hours(int64_t ms) { return static_cast<double>(ms) / kMsPerHour; }
double Minutes(double ms) { return ms / kMsPerMinute; }

// One level lower: an estimate resting on an assumption.
std::string Lower(const std::string& confidence) {
  return confidence == "high" ? "medium" : "low";
}

std::string WindowText(const TimeRange& w) {
  return fmt::format("window {} .. {}", FormatTime(w.begin_ms), FormatTime(w.end_ms));
}

void AdviseInputBound(const JobEvidence& e, const FleetEvidence& fleet, const TimeRange& window,
                      const RightSizingOptions& options, std::vector<Recommendation>& out) {
  double share = e.CauseShare(IdleCause::kInputStall);
  if (share < options.input_stall_share) return;
  double freed = share - fleet.best_input_stall_share;
  if (freed <= 0) return;
  Recommendation r = Base(e, RecommendationKind::kInputBound, window);
  SetLost(r, e, IdleCause::kInputStall);
  SetSavingPpm(r, freed);
  double profiled = static_cast<double>(std::max<int64_t>(1, e.gap_interval_ms));
  r.action = fmt::format(
      "the data pipeline starves the GPUs: {:.1f} GPU-h ({}) a week lost waiting on input; at the "
      "fleet's best input-stall level ({:.0f}%) it would free {:.0f}% of its GPU time",
      r.lost_gpu_hours * static_cast<double>(7 * kMsPerDay) / static_cast<double>(window.length_ms()),
      r.lost_per_week.ToDisplay(), fleet.best_input_stall_share * 100, freed * 100);
  r.evidence = fmt::format(
      "input stall {:.1f}% of {:.1f} GPU-h held; gap profile: {:.1f}% of the profiled time idle in gaps "
      "under 2 s between bursts, {:.1f}% without a kernel in all, over {:.1f} h profiled; {}; {}",
      share * 100, r.gpu_hours, static_cast<double>(e.gap_short_idle_ms) / profiled * 100,
      static_cast<double>(e.gap_idle_ms) / profiled * 100, Hours(e.gap_interval_ms), e.activity_evidence,
      WindowText(window));
  r.remedies =
      "more data-loader workers; prefetching onto the GPU ahead of the step; decoding and augmentation "
      "moved off the training node; a streaming data plane feeding the job";
  // The split rests on the gap profile: a job profiled for under half its time is less sure.
  if (e.gap_interval_ms * 2 < e.sampled_ms) r.confidence = Lower(r.confidence);
  out.push_back(std::move(r));
}

void AdviseCheckpointBound(const JobEvidence& e, const TimeRange& window, const RightSizingOptions& options,
                           std::vector<Recommendation>& out) {
  double share = e.CauseShare(IdleCause::kCheckpointStall);
  if (share < options.checkpoint_stall_share || e.pause_intervals_ms.empty()) return;
  double every = Median(e.pause_intervals_ms), lasts = Median(e.pause_lengths_ms);
  Recommendation r = Base(e, RecommendationKind::kCheckpointBound, window);
  SetLost(r, e, IdleCause::kCheckpointStall);
  SetSavingPpm(r, share);  // asynchronous checkpoints: the GPUs no longer wait for them
  r.action = fmt::format(
      "checkpoints stop the GPUs for {:.1f} min every {:.0f} min: {} a week; asynchronous checkpoints "
      "would free {:.1f}% of its GPU time, checkpoints half as often {:.1f}%",
      Minutes(lasts), Minutes(every), r.lost_per_week.ToDisplay(), share * 100, share * 50);
  r.evidence = fmt::format(
      "checkpoint stall {:.1f}% of {:.1f} GPU-h held; {} pauses without work of 1 to 15 min, median {:.1f} "
      "min, median {:.0f} min between the starts of consecutive ones on a GPU; {}; {}",
      share * 100, r.gpu_hours, e.pause_lengths_ms.size(), Minutes(lasts), Minutes(every),
      e.activity_evidence, WindowText(window));
  r.remedies =
      "asynchronous checkpointing (copy to host memory, write in the background); sharded checkpoints "
      "written in parallel; a checkpoint interval matched to the failure rate; a faster target than the "
      "shared filesystem";
  out.push_back(std::move(r));
}

// The median model FLOP/s of `runs` holding `gpus` GPUs.
std::map<int, double> ThroughputByGpus(const std::vector<const JobEvidence*>& runs) {
  std::map<int, std::vector<double>> by;
  for (const JobEvidence* run : runs) by[run->gpus].push_back(*run->flops_per_second);
  std::map<int, double> out;
  for (auto& [gpus, v] : by) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    out[gpus] = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
  }
  return out;
}

void AdviseFewerGpus(const JobEvidence& e, const FleetEvidence& fleet, const TimeRange& window,
                     const RightSizingOptions& options, std::vector<Recommendation>& out) {
  if (e.gpu_p95.size() < 2) return;
  const double bar = options.training_target_activity / 2;
  double worst = *std::max_element(e.gpu_p95.begin(), e.gpu_p95.end());
  if (worst >= bar) return;
  // The guard: when the stalls explain the low activity (the GPUs work well whenever the
  // data, the checkpoint or the job lets them), fewer GPUs is the wrong advice; the
  // input-bound, checkpoint-bound or release advice says what is.
  double stalls = e.CauseShare(IdleCause::kInputStall) + e.CauseShare(IdleCause::kCheckpointStall) +
                  e.CauseShare(IdleCause::kHeldIdle);
  double active = e.held_ticks > 0 ? static_cast<double>(e.row->gpu_ticks_ms[static_cast<size_t>(Bucket::kActive)]) /
                                         static_cast<double>(e.held_ticks)
                                   : 0;
  if (stalls >= 1 || active / (1 - stalls) >= bar) return;
  const int n = e.gpus;
  Recommendation r = Base(e, RecommendationKind::kFewerGpus, window);
  const bool sweep = !e.job().experiment.empty();
  std::string per = sweep ? fmt::format(" per trial of {}", e.job().experiment) : "";
  // Measured: runs of the same experiment (else project) at fewer GPUs, and their
  // throughput next to this job's.
  if (e.flops_per_second && *e.flops_per_second > 0) {
    for (const auto* group : {sweep ? &fleet.by_experiment : nullptr, &fleet.by_project}) {
      if (group == nullptr) continue;
      const std::string& key = group == &fleet.by_experiment ? e.job().experiment : e.job().project;
      auto it = group->find(key);
      if (it == group->end()) continue;
      double best_share = 0, best_ratio = 0;
      int best_k = 0;
      for (const auto& [k, tput] : ThroughputByGpus(it->second)) {
        if (k >= n || k <= 0) continue;
        double ratio = tput / *e.flops_per_second;  // the k-GPU run's throughput, as a share of this one's
        // The same work on k GPUs: k GPUs for 1 / ratio as long, against n GPUs.
        double share = 1.0 - static_cast<double>(k) / (static_cast<double>(n) * ratio);
        if (share > best_share) {
          best_share = share;
          best_k = k;
          best_ratio = ratio;
        }
      }
      if (best_k == 0) continue;
      SetSavingPpm(r, best_share);
      r.action = fmt::format("use {} GPUs instead of {}{}", best_k, n, per);
      r.evidence = fmt::format(
          "{}; measured scaling: runs of {} {} on {} GPUs train at {:.0f}% of this job's throughput ({:.3g} "
          "against {:.3g} model FLOP/s), so the same work on {} GPUs costs {:.0f}% less; {}",
          e.activity_evidence, group == &fleet.by_experiment ? "experiment" : "project", key, best_k,
          best_ratio * 100, best_ratio * *e.flops_per_second, *e.flops_per_second, best_k, best_share * 100,
          WindowText(window));
      out.push_back(std::move(r));
      return;
    }
  }
  double mean = 0;
  for (double v : e.gpu_p95) mean += v;
  mean /= static_cast<double>(e.gpu_p95.size());
  auto m = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(static_cast<double>(n) * mean / options.training_target_activity)));
  if (m >= n) return;
  r.action = fmt::format("use {} GPUs instead of {}{}", m, n, per);
  r.saving_share_num = n - m;
  r.saving_share_den = n;
  r.saving = Scale(r.cost, n - m, n);
  r.evidence = fmt::format(
      "{}; assumed linear scaling (no run of the same experiment or project at another GPU count to "
      "measure it): {} GPUs at {:.0f}% reach the target {:.0f}%; {}",
      e.activity_evidence, m, mean * static_cast<double>(n) / static_cast<double>(m) * 100,
      options.training_target_activity * 100, WindowText(window));
  r.confidence = Lower(r.confidence);
  out.push_back(std::move(r));
}

void AdviseRelease(const JobEvidence& e, const TimeRange& window, const RightSizingOptions& options,
                   std::vector<Recommendation>& out) {
  double share = e.CauseShare(IdleCause::kHeldIdle);
  if (e.longest_unused_ms < options.held_stretch_ms || share <= 0) return;
  Recommendation r = Base(e, RecommendationKind::kHeldNothingRunning, window);
  SetLost(r, e, IdleCause::kHeldIdle);
  SetSavingPpm(r, share);
  r.action = fmt::format(
      "release the GPUs when nothing runs: {:.1f} GPU-h ({}) held idle with no process or no kernel, "
      "{} a week",
      r.lost_gpu_hours, r.lost.ToDisplay(), r.lost_per_week.ToDisplay());
  r.evidence = fmt::format(
      "held idle {:.1f}% of {:.1f} GPU-h held; {:.1f} GPU-h in stretches of {} min or more with no process "
      "on the GPU or no kernel, the longest {:.1f} h from {}; {}; {}",
      share * 100, r.gpu_hours, Hours(e.unused_ms), options.held_stretch_ms / kMsPerMinute,
      Hours(e.longest_unused_ms), FormatTime(e.longest_unused_from_ms), e.activity_evidence,
      WindowText(window));
  r.remedies =
      "end the job when its work is done (a wrapper that releases the allocation on exit); a scheduler "
      "limit on time held without a process";
  out.push_back(std::move(r));
}

}  // namespace

void AdviseTraining(const JobEvidence& e, const FleetEvidence& fleet, const TimeRange& window,
                    const RightSizingOptions& options, std::vector<Recommendation>& out) {
  if (e.job().kind == JobKind::kTraining) {
    AdviseInputBound(e, fleet, window, options, out);
    AdviseCheckpointBound(e, window, options, out);
    AdviseFewerGpus(e, fleet, window, options, out);
  }
  AdviseRelease(e, window, options, out);
}

}  // namespace gpuledger::ledger::advice
