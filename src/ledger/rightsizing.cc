#include "ledger/rightsizing.h"
#include "ledger/store_access.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace gpuledger::ledger {
namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) ;
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

bool Contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

Money Scale(Money m, int64_t num, int64_t den) {
  if (den <= 0) return Money();
  __extension__ using Wide = __int128;
  return Money::FromMicros(static_cast<int64_t>(static_cast<Wide>(m.micros()) * num / den));
}

// The saving of `r` alone: num / den of its job's cost.
void SetSaving(Recommendation& r, int64_t num, int64_t den) {
  r.saving_share_num = num;
  r.saving_share_den = den;
  r.saving = Scale(r.cost, num, den);
}

}  // namespace

std::vector<MigProfile> MigProfilesFor(std::string_view model, int64_t memory_mib) {
  // Compute slices are sevenths; memory follows the profile's name.
  if (Contains(model, "H200")) {
    return {{"1g.18gb", {1, 7}, 18 * 1024}, {"1g.35gb", {1, 7}, 35 * 1024},
            {"2g.35gb", {2, 7}, 35 * 1024}, {"3g.71gb", {3, 7}, 71 * 1024},
            {"4g.71gb", {4, 7}, 71 * 1024}, {"7g.141gb", {7, 7}, 141 * 1024}};
  }
  if (Contains(model, "H100") || (Contains(model, "A100") && memory_mib > 60 * 1024)) {
    return {{"1g.10gb", {1, 7}, 10 * 1024}, {"1g.20gb", {1, 7}, 20 * 1024},
            {"2g.20gb", {2, 7}, 20 * 1024}, {"3g.40gb", {3, 7}, 40 * 1024},
            {"4g.40gb", {4, 7}, 40 * 1024}, {"7g.80gb", {7, 7}, 80 * 1024}};
  }
  if (Contains(model, "A100")) {
    return {{"1g.5gb", {1, 7}, 5 * 1024},   {"2g.10gb", {2, 7}, 10 * 1024},
            {"3g.20gb", {3, 7}, 20 * 1024}, {"4g.20gb", {4, 7}, 20 * 1024},
            {"7g.40gb", {7, 7}, 40 * 1024}};
  }
  return {};
}

std::optional<MigProfile> SmallestFittingProfile(const std::vector<MigProfile>& profiles,
                                                 double compute_ratio, double memory_mib,
                                                 double headroom) {
  for (const MigProfile& p : profiles) {
    if (p.compute.num == p.compute.den) return std::nullopt;  // the whole GPU: no change
    double compute = static_cast<double>(p.compute.num) / static_cast<double>(p.compute.den);
    if (compute * headroom >= compute_ratio &&
        static_cast<double>(p.memory_mib) * headroom >= memory_mib) {
      return p;
    }
  }
  return std::nullopt;
}

std::string_view RecommendationKindName(RecommendationKind k) {
  switch (k) {
    case RecommendationKind::kMigProfile: return "mig-profile";
    case RecommendationKind::kFewerGpus: return "fewer-gpus";
    case RecommendationKind::kIdleShutdown: return "idle-shutdown";
  }
  return "?";
}

Result<std::vector<Recommendation>> Recommend(Ledger& ledger, const TimeRange& window,
                                              const std::string& team,
                                              const RightSizingOptions& options) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, internal_StoreOf(ledger).Snapshot());
  store::StoreSnapshot& store = *snap;
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport usage, internal_UsageOn(ledger, store, window, {Dimension::kJob}));
  std::map<std::string, const UsageRow*> usage_of;
  for (const auto& row : usage.rows) {
    if (!row.no_job) usage_of[row.key[0]] = &row;
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, store.ListDevices());
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, store.ListJobs());
  GPULEDGER_ASSIGN_OR_RETURN(auto allocations, store.AllocationsOverlapping(window));
  std::map<int64_t, const store::DeviceRecord*> device_of;
  for (const auto& d : devices) device_of[d.id] = &d;
  std::map<int64_t, const Job*> job_of;
  for (const auto& j : jobs) job_of[j.id] = &j.job;
  std::map<int64_t, std::vector<const store::AllocationRecord*>> by_job;
  for (const auto& a : allocations) by_job[a.job_id].push_back(&a);

  std::vector<Recommendation> out;
  for (const auto& [job_id, allocs] : by_job) {
    const Job* job = job_of[job_id];
    if (job == nullptr || (!team.empty() && job->team != team)) continue;
    auto u = usage_of.find(job->id);
    if (u == usage_of.end()) continue;
    const UsageRow& row = *u->second;
    Money cost = row.total_cost();
    // Per GPU: p95 activity and peak memory over the job's time on it; idle stretches.
    std::vector<double> activity_all, gpu_p95;
    double peak_memory = 0;
    int64_t sampled_ms = 0, idle_stretch_total = 0;
    const store::DeviceRecord* first_device = nullptr;
    bool on_mig = false;
    for (const store::AllocationRecord* a : allocs) {
      const store::DeviceRecord* dev = device_of[a->device_id];
      if (dev == nullptr) continue;
      if (first_device == nullptr) first_device = dev;
      on_mig |= dev->device.is_mig();
      TimeRange held = window.Intersect({a->from_ms, a->to_ms.value_or(kForever)});
      GPULEDGER_ASSIGN_OR_RETURN(auto samples, store.Samples(dev->id, {held.begin_ms, held.end_ms}));
      std::vector<double> activity;
      int64_t stretch_start = -1, prev_t = -1;
      for (const Sample& s : samples) {
        double r = s.ActivityRatio().value_or(0.0);
        activity.push_back(r);
        activity_all.push_back(r);
        peak_memory = std::max(peak_memory, s.fb_used_mib.value_or(0.0));
        if (prev_t >= 0) sampled_ms += s.t_ms - prev_t;
        if (r <= 0.001) {
          if (stretch_start < 0) stretch_start = prev_t >= 0 ? prev_t : s.t_ms;
        } else if (stretch_start >= 0) {
          int64_t len = (prev_t >= 0 ? prev_t : s.t_ms) - stretch_start;
          if (len >= options.idle_stretch_ms) idle_stretch_total += len - options.idle_stretch_ms;
          stretch_start = -1;
        }
        prev_t = s.t_ms;
      }
      if (stretch_start >= 0 && prev_t - stretch_start >= options.idle_stretch_ms) {
        idle_stretch_total += prev_t - stretch_start - options.idle_stretch_ms;
      }
      if (!activity.empty()) gpu_p95.push_back(Percentile(activity, 0.95));
    }
    if (activity_all.empty() || first_device == nullptr) continue;
    double p50 = Percentile(activity_all, 0.5), p95 = Percentile(activity_all, 0.95);
    std::string confidence = sampled_ms >= 24 * kMsPerHour  ? "high"
                             : sampled_ms >= 4 * kMsPerHour ? "medium"
                                                            : "low";
    std::string evidence = fmt::format(
        "activity p50 {:.0f}%, p95 {:.0f}%; peak memory {:.1f} GiB; {:.1f} h sampled on {} GPU(s)",
        p50 * 100, p95 * 100, peak_memory / 1024.0, static_cast<double>(sampled_ms) / kMsPerHour,
        gpu_p95.size());
    auto base = [&](RecommendationKind kind) {
      Recommendation r;
      r.kind = kind;
      r.job_id = job->id;
      r.team = job->team;
      r.project = job->project;
      r.job_kind = job->kind;
      r.evidence = evidence;
      r.confidence = confidence;
      r.gpu_hours = row.gpu_hours(Bucket::kActive) + row.gpu_hours(Bucket::kAllocatedIdle);
      r.cost = cost;
      return r;
    };
    bool small_kind = job->kind == JobKind::kServing || job->kind == JobKind::kNotebook;
    if (small_kind && !on_mig && gpu_p95.size() == 1) {
      auto profiles = MigProfilesFor(first_device->device.model, first_device->device.memory_mib);
      if (auto p = SmallestFittingProfile(profiles, p95, peak_memory)) {
        Recommendation r = base(RecommendationKind::kMigProfile);
        r.mig_profile = std::string(p->name);
        r.action = fmt::format("run on a {} MIG slice ({}/{} of the GPU)", p->name, p->compute.num,
                               p->compute.den);
        SetSaving(r, p->compute.den - p->compute.num, p->compute.den);
        out.push_back(std::move(r));
      }
    }
    if (job->kind == JobKind::kTraining && gpu_p95.size() > 1) {
      double worst = *std::max_element(gpu_p95.begin(), gpu_p95.end());
      if (worst < options.training_target_activity / 2) {
        auto n = static_cast<int64_t>(gpu_p95.size());
        double mean = 0;
        for (double v : gpu_p95) mean += v;
        mean /= static_cast<double>(n);
        auto m = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(
                                          static_cast<double>(n) * mean / options.training_target_activity)));
        if (m < n) {
          Recommendation r = base(RecommendationKind::kFewerGpus);
          r.action = fmt::format("use {} GPUs instead of {}", m, n);
          SetSaving(r, n - m, n);
          out.push_back(std::move(r));
        }
      }
    }
    if (job->kind == JobKind::kNotebook && idle_stretch_total > 0 && sampled_ms > 0) {
      Recommendation r = base(RecommendationKind::kIdleShutdown);
      r.action = fmt::format("stop after {} min without activity (idle for {:.1f} h beyond that)",
                             options.idle_stretch_ms / kMsPerMinute,
                             static_cast<double>(idle_stretch_total) / kMsPerHour);
      SetSaving(r, idle_stretch_total, std::max(sampled_ms, idle_stretch_total));
      out.push_back(std::move(r));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Recommendation& a, const Recommendation& b) { return a.saving > b.saving; });
  // Each job's advice compounds, largest saving first (the order `out` is in now).
  std::map<std::string, Money> remaining;
  for (Recommendation& r : out) {
    auto [it, first] = remaining.try_emplace(r.job_id, r.cost);
    r.net_saving = Scale(it->second, r.saving_share_num, r.saving_share_den);
    it->second -= r.net_saving;
  }
  return out;
}

Result<PodFit> FitPodsToMig(const std::vector<PodRequest>& pods, std::string_view gpu_model, Money price) {
  auto profiles = MigProfilesFor(gpu_model, 80 * 1024);
  if (profiles.empty()) return InvalidArgument(fmt::format("{} has no MIG profiles", gpu_model));
  PodFit fit;
  CostNumerator whole = 0, saving = 0;
  for (const PodRequest& pod : pods) {
    ++fit.gpu_pods;
    int64_t ticks = pod.gpus > 0 ? int64_t{pod.gpus} * kShareScale : kShareScale;
    whole += CostOf(pod.duration_ms, ticks, price);
    if (pod.gpus > 0) continue;
    double need = static_cast<double>(pod.share_ticks) / static_cast<double>(kShareScale);
    auto p = SmallestFittingProfile(profiles, need, 0, 1.0);
    if (!p) continue;
    ++fit.movable;
    ++fit.by_profile[std::string(p->name)];
    saving += CostOf(pod.duration_ms, kShareScale - p->compute.ticks(), price);
  }
  fit.whole_gpu_cost = RoundCost(whole);
  fit.saving = RoundCost(saving);
  return fit;
}

Money TotalNetSaving(const std::vector<Recommendation>& recs) {
  Money total;
  for (const Recommendation& r : recs) total += r.net_saving;
  return total;
}

}  // namespace gpuledger::ledger
