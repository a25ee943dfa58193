#include "ledger/rightsizing.h"

#include "ledger/advice_internal.h"
#include "ledger/mfu.h"
#include "ledger/store_access.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <system_error>

namespace gpuledger::ledger {
namespace {

bool Contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
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
    case RecommendationKind::kInputBound: return "input-bound";
    case RecommendationKind::kCheckpointBound: return "checkpoint-bound";
    case RecommendationKind::kServingHeadroom: return "serving-headroom";
    case RecommendationKind::kHeldNothingRunning: return "release-held";
    case RecommendationKind::kMigProfile: return "mig-profile";
    case RecommendationKind::kFewerGpus: return "fewer-gpus";
    case RecommendationKind::kIdleShutdown: return "idle-shutdown";
  }
  return "?";
}

namespace advice {

double JobEvidence::CauseShare(IdleCause c) const {
  if (held_ticks <= 0) return 0;
  return static_cast<double>(row->idle_cause_ticks_ms[static_cast<size_t>(c)]) /
         static_cast<double>(held_ticks);
}

namespace {
// Nearest rank: where the p-th percentile of n values is once they are sorted.
std::ptrdiff_t NearestRank(size_t n, double p) {
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  return static_cast<std::ptrdiff_t>(std::min(n - 1, i == 0 ? 0 : i - 1));
}
}  // namespace

// The k-th smallest, found without sorting the rest (a week of a busy GPU's samples is
// tens of thousands of them, and the weekly report takes thousands of these); `v` is
// left in another order.
double PercentileInPlace(std::span<double> v, double p) {
  if (v.empty()) return 0;
  const std::ptrdiff_t k = NearestRank(v.size(), p);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[static_cast<size_t>(k)];
}

double Percentile(std::vector<double> v, double p) { return PercentileInPlace(v, p); }

// In place and without a copy (a 10,000-GPU week is 20 million ratios): once the p95 is
// in its place, the p50 is among the values before it, so the second selection reads
// only those.
void TakeActivityPercentiles(JobEvidence& e) {
  std::vector<double>& v = e.activity;
  e.activity_samples = v.size();
  if (v.empty()) return;
  const std::ptrdiff_t k95 = NearestRank(v.size(), 0.95), k50 = NearestRank(v.size(), 0.5);
  std::nth_element(v.begin(), v.begin() + k95, v.end());
  e.activity_p95 = v[static_cast<size_t>(k95)];
  std::nth_element(v.begin(), v.begin() + k50, v.begin() + k95);
  e.activity_p50 = v[static_cast<size_t>(k50)];
  std::vector<double>().swap(v);
}

double Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  size_t n = v.size();
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (n % 2 == 1) return static_cast<double>(*mid);
  // The lower middle is the largest of the half below.
  return (static_cast<double>(*std::max_element(v.begin(), mid)) + static_cast<double>(*mid)) / 2.0;
}

Money Scale(Money m, int64_t num, int64_t den) {
  if (den <= 0) return Money();
  __extension__ using Wide = __int128;
  return Money::FromMicros(static_cast<int64_t>(static_cast<Wide>(m.micros()) * num / den));
}

void SetSavingPpm(Recommendation& r, double share) {
  constexpr int64_t kPpm = 1'000'000;
  auto num = static_cast<int64_t>(std::llround(std::clamp(share, 0.0, 1.0) * kPpm));
  r.saving_share_num = num;
  r.saving_share_den = kPpm;
  r.saving = Scale(r.cost, num, kPpm);
}

void SetLost(Recommendation& r, const JobEvidence& e, IdleCause cause) {
  r.lost = e.row->idle_cause_cost[static_cast<size_t>(cause)];
  r.lost_gpu_hours = e.row->idle_cause_gpu_hours(cause);
  r.lost_per_week = Scale(r.lost, 7 * kMsPerDay, std::max<int64_t>(1, r.window.length_ms()));
}

Recommendation Base(const JobEvidence& e, RecommendationKind kind, const TimeRange& window) {
  Recommendation r;
  const Job& job = e.job();
  r.kind = kind;
  r.job_id = job.id;
  r.team = job.team;
  r.project = job.project;
  r.experiment = job.experiment;
  r.pool = !job.pool.empty() ? job.pool : e.first_device != nullptr ? e.first_device->device.pool : "";
  r.job_kind = job.kind;
  r.window = window;
  r.evidence = e.activity_evidence;
  r.confidence = e.confidence;
  r.gpu_hours = e.row->gpu_hours(Bucket::kActive) + e.row->gpu_hours(Bucket::kAllocatedIdle);
  r.cost = e.cost;
  return r;
}

FleetEvidence GatherFleet(const std::vector<JobEvidence>& jobs) {
  FleetEvidence f;
  std::vector<double> input_shares;
  for (const JobEvidence& e : jobs) {
    if (e.job().kind != JobKind::kTraining || e.held_ticks <= 0) continue;
    // Only jobs whose agent profiled gaps can show their input-stall level.
    if (e.gap_interval_ms > 0) input_shares.push_back(e.CauseShare(IdleCause::kInputStall));
    if (!e.flops_per_second || *e.flops_per_second <= 0) continue;
    if (!e.job().experiment.empty()) f.by_experiment[e.job().experiment].push_back(&e);
    if (!e.job().project.empty()) f.by_project[e.job().project].push_back(&e);
  }
  // The best tenth of the fleet's training jobs: a level others reach, not one outlier.
  f.best_input_stall_share = Percentile(input_shares, 0.1);
  return f;
}

namespace {

// One GPU's samples over the job's time on it, into `e`.
void ReadDeviceSamples(const std::vector<store::ActivitySample>& samples, const RightSizingOptions& options,
                       JobEvidence& e) {
  constexpr double kNoWork = 0.01;  // the idle-cause rules' "did no work"
  const size_t from = e.activity.size();  // this GPU's ratios are e.activity's from here
  int64_t prev_t = -1;
  int64_t idle_from = -1;    // notebooks' idle stretch (no activity at all)
  int64_t pause_from = -1;   // a stretch without work
  int64_t unused_from = -1;  // no process or no kernel
  int64_t last_pause_start = -1;
  auto end_pause = [&](int64_t until) {
    int64_t len = until - pause_from;
    if (len >= kMsPerMinute && len <= 15 * kMsPerMinute) {
      e.pause_lengths_ms.push_back(len);
      if (last_pause_start >= 0) e.pause_intervals_ms.push_back(pause_from - last_pause_start);
      last_pause_start = pause_from;
    }
    pause_from = -1;
  };
  auto end_unused = [&](int64_t until) {
    int64_t len = until - unused_from;
    if (len >= options.held_stretch_ms) {
      e.unused_ms += len;
      if (len > e.longest_unused_ms) {
        e.longest_unused_ms = len;
        e.longest_unused_from_ms = unused_from;
      }
    }
    unused_from = -1;
  };
  for (const store::ActivitySample& s : samples) {
    double r = s.activity.value_or(0.0);
    int64_t before = prev_t >= 0 ? prev_t : s.t_ms;
    e.activity.push_back(r);
    e.peak_memory_mib = std::max(e.peak_memory_mib, s.fb_used_mib.value_or(0.0));
    if (prev_t >= 0) e.sampled_ms += s.t_ms - prev_t;
    if (s.gaps) {
      e.gap_interval_ms += s.gaps->interval_ms;
      e.gap_idle_ms += s.gaps->idle_ms;
      e.gap_short_idle_ms += s.gaps->short_idle_ms;
    }
    if (r <= 0.001) {
      if (idle_from < 0) idle_from = before;
    } else if (idle_from >= 0) {
      int64_t len = before - idle_from;
      if (len >= options.idle_stretch_ms) e.idle_stretch_beyond_ms += len - options.idle_stretch_ms;
      idle_from = -1;
    }
    if (r <= kNoWork) {
      if (pause_from < 0) pause_from = before;
    } else if (pause_from >= 0) {
      end_pause(before);
    }
    bool unused = r <= kNoWork || (s.process_count && *s.process_count == 0);
    if (unused) {
      if (unused_from < 0) unused_from = before;
    } else if (unused_from >= 0) {
      end_unused(before);
    }
    prev_t = s.t_ms;
  }
  if (idle_from >= 0 && prev_t - idle_from >= options.idle_stretch_ms) {
    e.idle_stretch_beyond_ms += prev_t - idle_from - options.idle_stretch_ms;
  }
  if (pause_from >= 0) end_pause(prev_t);
  if (unused_from >= 0) end_unused(prev_t);
  // The GPU's p95 among its own ratios, in place: the job's percentiles, taken over all
  // of them once its GPUs are read, do not mind their order.
  if (e.activity.size() > from) {
    e.gpu_p95.push_back(PercentileInPlace(std::span(e.activity).subspan(from), 0.95));
  }
}

// The MIG slice and the idle shutdown: advice for one GPU's worth of notebook (serving
// jobs get theirs from AdviseServing, behind its latency guards).
void AdviseNotebook(const JobEvidence& e, const TimeRange& window, const RightSizingOptions& options,
                    std::vector<Recommendation>& out) {
  if (!e.on_mig && e.gpu_p95.size() == 1) {
    auto profiles = MigProfilesFor(e.first_device->device.model, e.first_device->device.memory_mib);
    if (auto p = SmallestFittingProfile(profiles, e.activity_p95, e.peak_memory_mib)) {
      out.push_back(MigAdvice(e, *p, window));
    }
  }
  if (e.idle_stretch_beyond_ms > 0 && e.sampled_ms > 0) {
    Recommendation r = Base(e, RecommendationKind::kIdleShutdown, window);
    r.action = fmt::format("stop after {} min without activity (idle for {:.1f} h beyond that)",
                           options.idle_stretch_ms / kMsPerMinute,
                           static_cast<double>(e.idle_stretch_beyond_ms) / kMsPerHour);
    r.saving_share_num = e.idle_stretch_beyond_ms;
    r.saving_share_den = std::max(e.sampled_ms, e.idle_stretch_beyond_ms);
    r.saving = Scale(r.cost, r.saving_share_num, r.saving_share_den);
    out.push_back(std::move(r));
  }
}

}  // namespace

Recommendation MigAdvice(const JobEvidence& e, const MigProfile& p, const TimeRange& window) {
  Recommendation r = Base(e, RecommendationKind::kMigProfile, window);
  r.mig_profile = std::string(p.name);
  r.action = fmt::format("run on a {} MIG slice ({}/{} of the GPU)", p.name, p.compute.num, p.compute.den);
  r.saving_share_num = p.compute.den - p.compute.num;
  r.saving_share_den = p.compute.den;
  r.saving = Scale(r.cost, r.saving_share_num, r.saving_share_den);
  return r;
}

}  // namespace advice

Result<std::vector<Recommendation>> Recommend(Ledger& ledger, const TimeRange& asked,
                                              const std::string& team,
                                              const RightSizingOptions& options) {
  GPULEDGER_ASSIGN_OR_RETURN(UsageRead read, ledger.ReadUsage(asked));
  return Recommend(ledger, read, team, options);
}

Result<std::vector<Recommendation>> Recommend(Ledger&, const UsageRead& read, const std::string& team,
                                              const RightSizingOptions& options) {
  using advice::JobEvidence;
  store::StoreSnapshot& store = internal_SnapshotOf(read);
  const TimeRange& asked = read.requested();
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport usage, read.By({Dimension::kJob}));
  const TimeRange window = usage.window.length_ms() > 0 ? usage.window : asked;
  std::map<std::string, const UsageRow*> usage_of;
  for (const auto& row : usage.rows) {
    if (!row.no_job) usage_of[row.key[0]] = &row;
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, store.ListDevices());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, store.SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  GPULEDGER_ASSIGN_OR_RETURN(auto allocations, store.AllocationsOverlapping(window));
  std::map<int64_t, const store::DeviceRecord*> device_of;
  for (const auto& d : devices) device_of[d.id] = &d;
  std::map<int64_t, const store::JobRecord*> job_of;
  for (const auto& j : jobs) job_of[j.id] = &j;
  std::map<int64_t, std::vector<const store::AllocationRecord*>> by_job;
  for (const auto& a : allocations) by_job[a.job_id].push_back(&a);

  // Every job's evidence first (the fleet's best input-stall level and the runs of an
  // experiment are read across teams), then the advice for the jobs asked for.
  std::vector<JobEvidence> candidates;
  candidates.reserve(by_job.size());
  std::vector<int> gpus_of;  // by candidate: the devices it held
  // Each candidate's time on each device it held, in the order its allocations come.
  std::vector<store::DeviceRange> held;
  std::vector<size_t> held_by;  // the candidate of each
  for (const auto& [job_id, allocs] : by_job) {
    auto j = job_of.find(job_id);
    if (j == job_of.end()) continue;
    auto u = usage_of.find(j->second->job.id);
    if (u == usage_of.end()) continue;
    JobEvidence& e = candidates.emplace_back();
    e.record = j->second;
    e.row = u->second;
    e.cost = e.row->total_cost();
    e.held_ticks = e.row->gpu_ticks_ms[static_cast<size_t>(Bucket::kActive)] +
                   e.row->gpu_ticks_ms[static_cast<size_t>(Bucket::kAllocatedIdle)];
    std::map<int64_t, bool> held_devices;
    for (const store::AllocationRecord* a : allocs) {
      const store::DeviceRecord* dev = device_of[a->device_id];
      if (dev == nullptr) continue;
      if (e.first_device == nullptr) e.first_device = dev;
      e.on_mig |= dev->device.is_mig();
      held_devices[dev->id] = true;
      held.push_back({dev->id, window.Intersect({a->from_ms, a->to_ms.value_or(kForever)})});
      held_by.push_back(candidates.size() - 1);
    }
    gpus_of.push_back(static_cast<int>(held_devices.size()));
  }
  // Their samples' activity figures alone (store::ActivitySample), a block of spans per
  // read (store::SampleReadEnd): one round trip per block rather than per allocation (a
  // week of 1,000 GPUs has about 10,000).
  // Two threads take turns on the blocks: this one reads a block's chunks from the
  // snapshot while a second decodes the block before and reduces it into the candidates
  // (a 10,000-GPU week is 20 million samples; reading and decoding them was most of the
  // weekly report, one after the other). The snapshot is used by this thread alone, the
  // candidates by the second alone until it is waited for.
  // A candidate's spans are one run of `held`: once the blocks before a block are reduced,
  // the candidates before that block's first are whole, their ratios reduced to percentiles.
  size_t whole = 0;  // the candidates before it are
  // The per-job reads (a training job's progress reports, a serving job's queue and KV
  // cache), each claimed once, by whichever thread comes first: a third thread's, on a
  // second snapshot of the same moment where the store has one to give (StoreSnapshot::
  // Sibling: on PostgreSQL the jobs' reads then wait on a second connection while the chunks
  // are read on the first: the weekly report at 10,000 GPUs took 4.9-5.5 s, not 6.2-6.7);
  // this one's, in the loop's pauses, and the rest after the loop.
  struct JobRead {
    size_t candidate;
    int64_t job_id;
    const Job* job;
  };
  std::vector<JobRead> job_reads;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const Job& job = candidates[c].job();
    if (job.kind == JobKind::kTraining || (job.kind == JobKind::kServing && (team.empty() || job.team == team))) {
      job_reads.push_back({c, candidates[c].record->id, &job});
    }
  }
  // What each read leaves (not the reports and snapshots themselves: a week of a
  // 10,000-GPU fleet's engine snapshots held at once was 150 MB more at its peak). Each
  // slot is written by the one thread that claimed its read.
  std::vector<std::optional<double>> flops_of(candidates.size());  // measured throughput
  std::vector<advice::ServingEvidence> serving_of(candidates.size());
  std::atomic<size_t> job_reads_claimed{0};
  std::atomic<bool> job_reads_stop{false};  // set when this query ends early
  // Reads the next unclaimed job's from `from`; false when none is left.
  auto read_next_job = [&](store::StoreReads& from) -> Result<bool> {
    const size_t k = job_reads_claimed.fetch_add(1);
    if (k >= job_reads.size()) return false;
    const JobRead& j = job_reads[k];
    if (j.job->kind == JobKind::kTraining) {
      GPULEDGER_ASSIGN_OR_RETURN(auto progress, from.ProgressOf(j.job_id, window));
      if (!progress.empty()) {
        auto work = WorkReported(*j.job, progress, window);
        // A job whose reports cannot be read has no measured throughput; its advice
        // falls back to the linear assumption rather than failing the whole list.
        if (work.ok() && work->seconds > 0) flops_of[j.candidate] = work->flops_per_second();
      }
    } else {
      GPULEDGER_ASSIGN_OR_RETURN(auto gauges, from.ServingGaugesOf(j.job_id, window));
      serving_of[j.candidate] = advice::SummarizeServing(gauges);
    }
    return true;
  };
  auto jobs_left = [&] { return job_reads_claimed.load() < job_reads.size(); };
  std::future<Status> job_reading;
  if (std::unique_ptr<store::StoreSnapshot> beside = job_reads.empty() ? nullptr : store.Sibling()) {
    try {
      job_reading = std::async(std::launch::async, [&read_next_job, &job_reads_stop, beside = std::move(beside)] {
        while (!job_reads_stop.load()) {
          GPULEDGER_ASSIGN_OR_RETURN(bool more, read_next_job(*beside));
          if (!more) break;
        }
        return Status::Ok();
      });
    } catch (const std::system_error&) {  // no thread to be had: this one reads them all
    }
  }
  // Ending early (an error), the third thread claims no more reads; it is waited for.
  struct StopOnExit {
    std::atomic<bool>& stop;
    ~StopOnExit() { stop.store(true); }
  } stop_job_reads{job_reads_stop};
  auto reduce = [&](size_t first, size_t end, const store::EncodedChunks& chunks) -> Status {
    const std::span block = std::span<const store::DeviceRange>(held).subspan(first, end - first);
    GPULEDGER_ASSIGN_OR_RETURN(auto samples_of, store::DecodeActivityOf(block, chunks));
    for (size_t k = first; k < end; ++k) {
      advice::ReadDeviceSamples(samples_of[k - first], options, candidates[held_by[k]]);
    }
    return Status::Ok();
  };
  std::future<Status> reducing;
  auto reduced = [&reducing] { return reducing.valid() ? reducing.get() : Status::Ok(); };
  for (size_t first = 0, end = 0; first < held.size(); first = end) {
    end = store::SampleReadEnd(held, first);
    Result<store::EncodedChunks> chunks = store.EncodedChunksOf(std::span(held).subspan(first, end - first));
    // Job reads while the second thread still works on the block before; without a third
    // thread for them, one for each block at least (the rest wait for the loop's end).
    for (bool one = !job_reading.valid(); chunks.ok() && jobs_left() && reducing.valid() &&
                          (one || reducing.wait_for(std::chrono::seconds(0)) != std::future_status::ready);
         one = false) {
      GPULEDGER_RETURN_IF_ERROR(read_next_job(store).status());
    }
    Status before = reduced();
    if (!chunks.ok()) return chunks.status();
    if (!before.ok()) return before;
    auto block = std::make_shared<const store::EncodedChunks>(std::move(*chunks));
    try {
      reducing = std::async(std::launch::async, [&reduce, first, end, block] { return reduce(first, end, *block); });
    } catch (const std::system_error&) {  // no thread to be had: this one reduces the block
      GPULEDGER_RETURN_IF_ERROR(reduce(first, end, *block));
    }
    // Meanwhile, here: the candidates before this block's first, whole and no longer
    // touched by the second thread, reduced to their percentiles.
    for (; whole < held_by[first]; ++whole) advice::TakeActivityPercentiles(candidates[whole]);
  }
  GPULEDGER_RETURN_IF_ERROR(reduced());
  for (; whole < candidates.size(); ++whole) advice::TakeActivityPercentiles(candidates[whole]);
  for (bool more = true; more;) {
    GPULEDGER_ASSIGN_OR_RETURN(more, read_next_job(store));
  }
  if (job_reading.valid()) GPULEDGER_RETURN_IF_ERROR(job_reading.get());
  std::vector<JobEvidence> evidence;
  std::vector<size_t> candidate_of;  // of each evidence
  evidence.reserve(candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    JobEvidence& e = candidates[c];
    e.gpus = gpus_of[c];
    if (e.activity_samples == 0 || e.first_device == nullptr) continue;
    e.flops_per_second = flops_of[c];
    e.confidence = e.sampled_ms >= 24 * kMsPerHour  ? "high"
                   : e.sampled_ms >= 4 * kMsPerHour ? "medium"
                                                    : "low";
    e.activity_evidence = fmt::format(
        "activity p50 {:.0f}%, p95 {:.0f}%; peak memory {:.1f} GiB; {:.1f} h sampled on {} GPU(s)",
        e.activity_p50 * 100, e.activity_p95 * 100, e.peak_memory_mib / 1024.0, static_cast<double>(e.sampled_ms) / kMsPerHour,
        e.gpu_p95.size());
    evidence.push_back(std::move(e));
    candidate_of.push_back(c);
  }
  advice::FleetEvidence fleet = advice::GatherFleet(evidence);

  std::vector<Recommendation> out;
  for (size_t i = 0; i < evidence.size(); ++i) {
    const JobEvidence& e = evidence[i];
    if (!team.empty() && e.job().team != team) continue;
    switch (e.job().kind) {
      case JobKind::kServing:
        advice::AdviseServing(serving_of[candidate_of[i]], e, window, options, out);
        break;
      case JobKind::kNotebook:
        advice::AdviseNotebook(e, window, options, out);
        break;
      case JobKind::kTraining:
      case JobKind::kBatch:
      case JobKind::kUnknown:
        advice::AdviseTraining(e, fleet, window, options, out);
        break;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Recommendation& a, const Recommendation& b) { return a.saving > b.saving; });
  // One rule for every kind (the "one front door" rule): a job's advice compounds,
  // largest saving first (the order `out` is in now), each applying to what the earlier
  // ones leave, so a job's net savings never add up to more than its cost.
  std::map<std::string, Money> remaining;
  for (Recommendation& r : out) {
    auto [it, first] = remaining.try_emplace(r.job_id, r.cost);
    r.net_saving = advice::Scale(it->second, r.saving_share_num, r.saving_share_den);
    it->second -= r.net_saving;
  }
  return out;
}

std::vector<AdviceGroup> GroupAdvice(const std::vector<Recommendation>& recs) {
  std::map<std::pair<RecommendationKind, std::string>, AdviceGroup> groups;
  for (const Recommendation& r : recs) {
    AdviceGroup& g = groups[{r.kind, r.team}];
    g.kind = r.kind;
    g.team = r.team;
    g.net_saving += r.net_saving;
    g.items.push_back(&r);
  }
  std::vector<AdviceGroup> out;
  for (auto& [key, g] : groups) {
    std::stable_sort(g.items.begin(), g.items.end(), [](const Recommendation* a, const Recommendation* b) {
      return a->net_saving > b->net_saving;
    });
    out.push_back(std::move(g));
  }
  // Ties keep the kinds' order: training advice before serving, notebooks last.
  std::stable_sort(out.begin(), out.end(),
                   [](const AdviceGroup& a, const AdviceGroup& b) { return a.net_saving > b.net_saving; });
  return out;
}

AdviceTotals TotalAdvice(const std::vector<Recommendation>& recs) {
  std::map<std::string, AdviceTotal> kind, team, pool;
  AdviceTotals t;
  auto add = [](std::map<std::string, AdviceTotal>& m, const std::string& key, Money net) {
    AdviceTotal& x = m[key];
    x.key = key;
    ++x.count;
    x.net_saving += net;
  };
  for (const Recommendation& r : recs) {
    add(kind, std::string(RecommendationKindName(r.kind)), r.net_saving);
    add(team, r.team, r.net_saving);
    add(pool, r.pool, r.net_saving);
    t.net_saving += r.net_saving;
  }
  auto sorted = [](std::map<std::string, AdviceTotal>& m) {
    std::vector<AdviceTotal> v;
    for (auto& [k, x] : m) v.push_back(std::move(x));
    std::stable_sort(v.begin(), v.end(),
                     [](const AdviceTotal& a, const AdviceTotal& b) { return a.net_saving > b.net_saving; });
    return v;
  };
  t.by_kind = sorted(kind);
  t.by_team = sorted(team);
  t.by_pool = sorted(pool);
  return t;
}

std::vector<Recommendation> TopAdvice(const std::vector<Recommendation>& recs, size_t n) {
  std::vector<Recommendation> out;
  for (const AdviceGroup& g : GroupAdvice(recs)) {
    for (const Recommendation* r : g.items) {
      if (n != 0 && out.size() >= n) return out;
      out.push_back(*r);
    }
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
