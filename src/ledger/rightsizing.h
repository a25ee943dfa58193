// Advice where the money is: recommendations with their evidence, a confidence and the
// saving in money (docs/recommendations.md). Training: a data pipeline that starves the
// GPUs (input-bound), checkpoints that stop them (checkpoint-bound), a job or a sweep's
// trials that hold more GPUs than their work needs (fewer GPUs; never where stalls
// explain the low activity), GPUs held with nothing running. Serving: replicas beyond
// what the load needs at p95 (never when requests queue or the KV cache fills). Notebooks
// and small serving jobs: a MIG slice; notebooks held idle for hours: an idle shutdown.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/money.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

struct MigProfile {
  std::string_view name;  // "3g.40gb"
  Share compute;          // of the GPU's compute slices, e.g. 3/7
  int64_t memory_mib;
};

// The MIG profiles of `gpu_model` (A100 40GB/80GB, H100, H200), smallest first; empty for
// GPUs without MIG.
std::vector<MigProfile> MigProfilesFor(std::string_view gpu_model, int64_t gpu_memory_mib);

// The smallest profile with compute >= `compute_ratio` / headroom and memory >=
// `memory_mib` / headroom, unless that is the whole GPU. headroom: 0.9 leaves 10%.
std::optional<MigProfile> SmallestFittingProfile(const std::vector<MigProfile>& profiles,
                                                 double compute_ratio, double memory_mib,
                                                 double headroom = 0.9);

enum class RecommendationKind {
  kInputBound,        // "input-bound": the data pipeline starves the GPUs
  kCheckpointBound,   // "checkpoint-bound": long periodic gaps while checkpoints are written
  kFewerGpus,         // "fewer-gpus": the work fits on fewer GPUs per job or per trial
  kServingHeadroom,   // "serving-headroom": fewer replicas carry the load at p95
  kHeldNothingRunning,  // "release-held": a training or batch job holding GPUs with nothing running
  kMigProfile,        // "mig-profile"
  kIdleShutdown,      // "idle-shutdown": notebooks
};
inline constexpr size_t kRecommendationKindCount = 7;
std::string_view RecommendationKindName(RecommendationKind k);

struct Recommendation {
  RecommendationKind kind = RecommendationKind::kMigProfile;
  std::string job_id;
  std::string team;
  std::string project;
  std::string experiment;
  std::string pool;  // the job's pool, else its first GPU's
  JobKind job_kind = JobKind::kUnknown;
  TimeRange window;  // the window the evidence and the money cover
  std::string action;    // "run on 2g.20gb", "use 4 GPUs instead of 8", ...
  std::string mig_profile;  // kMigProfile: the profile advised, e.g. "2g.20gb"
  std::string evidence;  // percentiles, gaps, the window
  std::string remedies;  // the usual remedies, stated as facts (empty where the action says it)
  std::string confidence;  // high | medium | low
  double gpu_hours = 0;    // held in the window
  Money cost;              // of the job in the window
  // What the cause this advice names cost in the window (the input stall's idle time,
  // the checkpoints', the time held with nothing running); zero for kinds without one.
  Money lost;
  double lost_gpu_hours = 0;
  Money lost_per_week;     // `lost` scaled to 7 days of the window
  Money saving;            // estimated, over the same window, if this advice alone is taken
  // This advice's part of its job's net saving when all of the job's advice is taken:
  // the job's pieces of advice apply one after another, largest saving first, each to
  // what the earlier ones leave (idle shutdown stops 40% of the hours, a MIG slice then
  // saves 4/7 of the remaining 60%). A job's net savings add up to at most its cost, so
  // totals add these, never `saving`.
  Money net_saving;
  // The saving alone as a share of the job's cost, saving_share_num / saving_share_den.
  int64_t saving_share_num = 0;
  int64_t saving_share_den = 1;
};

// The net saving of `recs` (the sum of their net_saving): what following all of them
// would save, each job counted once and never above its cost.
Money TotalNetSaving(const std::vector<Recommendation>& recs);

// Advice grouped by kind and team, the group with the largest net saving first and each
// group's advice by net saving: what every surface (CLI, API, dashboard, reports) lists.
struct AdviceGroup {
  RecommendationKind kind = RecommendationKind::kMigProfile;
  std::string team;
  Money net_saving;
  std::vector<const Recommendation*> items;  // into the vector grouped
};
std::vector<AdviceGroup> GroupAdvice(const std::vector<Recommendation>& recs);

// Net savings summed per kind, per team and per pool (each of the three adds up to
// TotalNetSaving), largest first.
struct AdviceTotal {
  std::string key;
  size_t count = 0;
  Money net_saving;
};
struct AdviceTotals {
  std::vector<AdviceTotal> by_kind, by_team, by_pool;
  Money net_saving;
};
AdviceTotals TotalAdvice(const std::vector<Recommendation>& recs);

// `recs` reordered as the surfaces list them: group by group (GroupAdvice), and the
// first `n` of that order (all when n is 0).
std::vector<Recommendation> TopAdvice(const std::vector<Recommendation>& recs, size_t n = 0);

struct RightSizingOptions {
  // Activity a training GPU should reach; fewer GPUs are advised when the fleet of the
  // job's GPUs averages under half of it at p95.
  double training_target_activity = 0.7;
  // A stretch with no activity at all this long, on a notebook, is held idle.
  int64_t idle_stretch_ms = kMsPerHour;
  // Input-bound: input stall above this share of the job's held time.
  double input_stall_share = 0.15;
  // Checkpoint-bound: checkpoint stall above this share of the job's held time.
  double checkpoint_stall_share = 0.05;
  // Held with nothing running: a stretch this long with no process, or no kernel.
  int64_t held_stretch_ms = 30 * kMsPerMinute;
  // Serving: the load (activity, KV cache) a replica may carry at p95 after the change.
  double serving_target_load = 0.8;
  // Serving: a KV cache at this share or more is near full.
  double kv_cache_near_full = 0.9;
};

// A pod of a pod list (a trace): how much GPU it asked for and how long it ran.
struct PodRequest {
  int32_t gpus = 0;          // whole GPUs; 0 with a fraction
  int64_t share_ticks = 0;   // with gpus == 0: the fraction of one GPU, in kShareScale ticks
  int64_t duration_ms = 0;
};

// What fitting a pod list's fractional requests to MIG slices would save: each pod asking
// for a fraction of one GPU holds a whole GPU without sharing; the smallest slice of
// `gpu_model` that covers its fraction frees the rest. Memory is not in such lists, so
// compute alone decides.
struct PodFit {
  size_t gpu_pods = 0;
  size_t movable = 0;                        // fractional pods a slice covers
  std::map<std::string, size_t> by_profile;  // slice name -> pods
  Money whole_gpu_cost;                      // every pod on whole GPUs
  Money saving;                              // of it, freed by the slices
};
Result<PodFit> FitPodsToMig(const std::vector<PodRequest>& pods, std::string_view gpu_model, Money price_per_gpu_hour);

// Recommendations for the jobs that held GPUs in `window` (optionally one team's), from
// their raw samples, by descending saving, with each job's net saving apportioned.
Result<std::vector<Recommendation>> Recommend(Ledger& ledger, const TimeRange& window,
                                              const std::string& team = "",
                                              const RightSizingOptions& options = {});
// The same over the window `read` was read for (Ledger::ReadUsage), from its snapshot.
Result<std::vector<Recommendation>> Recommend(Ledger& ledger, const UsageRead& read, const std::string& team = "",
                                              const RightSizingOptions& options = {});

}  // namespace gpuledger::ledger
