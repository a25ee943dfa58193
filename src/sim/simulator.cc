#include "sim/simulator.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/pool_state.h"

namespace gpuledger::sim {
namespace {

__extension__ using Int128 = __int128;

constexpr int32_t kNoSlot = -1;

enum class JobPhase : uint8_t { kNotArrived, kPending, kRunning, kDone, kFailed, kUnschedulable };

// Per-job engine state; 72 bytes, so a million jobs cost 72 MB here.
struct JobState {
  int64_t remaining_ms = 0;  // work left, in ms of run time without slowdown
  int64_t run_start_ms = -1;  // start of the current run
  int64_t since_ms = -1;      // start of the current segment at one speed
  int64_t first_start_ms = -1;
  int64_t end_ms = -1;  // the planned end while running, the end once done
  int64_t tick_ms = 0;  // share held x time, all runs together
  int32_t slot = kNoSlot;
  int32_t stretch_permille = 1000;
  uint32_t epoch = 0;  // bumped whenever a planned end becomes stale
  int32_t queue = 0;
  int16_t pool = -1;
  uint16_t preemptions = 0;
  JobPhase phase = JobPhase::kNotArrived;
};

static_assert(sizeof(JobState) <= 72, "per-job state is budgeted at 72 bytes (docs/simulator.md)");

struct EndEvent {
  int64_t t_ms;
  JobIndex job;
  uint32_t epoch;
  bool failure;  // the run fails at t_ms rather than ends
  bool operator>(const EndEvent& o) const { return t_ms != o.t_ms ? t_ms > o.t_ms : job > o.job; }
};

// A run keeps at most this many time-series steps; longer runs get a coarser step.
constexpr size_t kMaxTimeBins = 1 << 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int32_t PermilleOf(double slowdown) { return 1000 + static_cast<int32_t>(std::llround(slowdown * 1000.0)); }

// Nearest-rank p50, p95, p99 and the mean of `values` (sorted in place); zeros if empty.
template <typename Value, typename Sum>
void Distribution(std::vector<Value>& values, Value& p50, Value& p95, Value& p99, double& mean) {
  if (values.empty()) return;
  std::sort(values.begin(), values.end());
  auto rank = [&](double q) {
    size_t r = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    return values[std::max<size_t>(r, 1) - 1];
  };
  p50 = rank(0.50);
  p95 = rank(0.95);
  p99 = rank(0.99);
  Sum sum = 0;
  for (Value v : values) sum += v;
  mean = static_cast<double>(sum) / static_cast<double>(values.size());
}

Percentiles PercentilesOf(std::vector<int64_t>& values) {
  Percentiles p;
  Distribution<int64_t, Int128>(values, p.p50_ms, p.p95_ms, p.p99_ms, p.mean_ms);
  return p;
}

RatioPercentiles RatioPercentilesOf(std::vector<double>& values) {
  RatioPercentiles p;
  Distribution<double, double>(values, p.p50, p.p95, p.p99, p.mean);
  return p;
}

double TickMsToGpuHours(Int128 tick_ms) {
  return static_cast<double>(tick_ms) / static_cast<double>(kTicksPerGpu) / static_cast<double>(kMsPerHour);
}

class Engine final : public SchedulerContext {
 public:
  Engine(const ClusterSpec& cluster, const std::vector<SimJob>& jobs, Policy& policy, const SimOptions& options)
      : cluster_(cluster), jobs_(jobs), policy_(policy), options_(options) {}

  Result<SimResult> Run();

  // SchedulerContext.
  const Clock& clock() const override { return clock_; }
  const SimJob& job(JobIndex j) const override { return jobs_[order_[j]]; }
  int32_t queue_of(JobIndex j) const override { return st_[j].queue; }
  int64_t RemainingMs(JobIndex j) const override { return st_[j].remaining_ms; }
  int64_t WorkLeftNowMs(JobIndex j) const override {
    const JobState& s = st_[j];
    if (s.phase != JobPhase::kRunning) return s.remaining_ms;
    return s.remaining_ms - std::min(s.remaining_ms, (clock_.NowMs() - s.since_ms) * 1000 / s.stretch_permille);
  }
  int64_t RunningSinceMs(JobIndex j) const override { return st_[j].run_start_ms; }
  int32_t AllocatedTicks(JobIndex j) const override {
    return st_[j].slot == kNoSlot ? 0 : allocs_[static_cast<size_t>(st_[j].slot)].ticks;
  }
  int32_t FreeWholeGpus(int pool) const override { return pools_[static_cast<size_t>(pool)].free_whole_gpus(); }
  int32_t WholeGpusHeld(JobIndex j) const override {
    if (st_[j].slot == kNoSlot) return 0;
    const Allocation& a = allocs_[static_cast<size_t>(st_[j].slot)];
    return a.shared ? 0 : static_cast<int32_t>(a.gpus.size());
  }
  const std::set<std::pair<int64_t, JobIndex>>& RunningByEnd(int pool) const override {
    return by_end_[static_cast<size_t>(pool)];
  }
  bool TryStart(JobIndex j) override;
  void Preempt(JobIndex j) override;
  void WakeAt(int pool, int64_t t_ms) override {
    if (t_ms > clock_.NowMs()) wakeups_.push({t_ms, pool});
  }

 private:
  Status Validate() const;
  void Prepare();
  void Advance(int64_t t_ms);
  // Doubles the time series' step, merging pairs of bins, to keep at most kMaxTimeBins.
  void CoarsenTimeSeries();
  // Credits the work of the current run up to now and charges its share; the job keeps
  // running (the caller releases or restarts it).
  void CloseRun(JobIndex j);
  void PlanEnd(JobIndex j);
  void Release(JobIndex j);
  void Finish(JobIndex j);
  // A run fails: its work is lost and its GPU time counted as failed; the job restarts
  // from the beginning, or ends failed once out of restarts.
  void Fail(JobIndex j);
  // When the run starting now fails, from the job's own seeded stream; INT64_MAX: never.
  int64_t DrawFailure(JobIndex j, int32_t ticks);
  // Re-plans the ends of the jobs time-sharing `gpu` of `pool` after its tenants changed.
  void RestretchTenants(int pool, int32_t gpu);
  int32_t StretchFor(int pool, const Allocation& a, size_t tenants) const;
  void AddActive(JobIndex j, int pool, int32_t ticks, int sign);
  SimResult Summarize();

  const ClusterSpec& cluster_;
  const std::vector<SimJob>& jobs_;
  Policy& policy_;
  const SimOptions& options_;
  SimClock clock_;

  std::vector<uint32_t> order_;  // JobIndex -> input index
  std::vector<JobState> st_;
  std::vector<PoolState> pools_;
  std::vector<std::set<std::pair<int64_t, JobIndex>>> by_end_;
  std::vector<Allocation> allocs_;
  std::vector<int32_t> free_slots_;
  std::priority_queue<EndEvent, std::vector<EndEvent>, std::greater<>> events_;
  std::vector<uint8_t> dirty_;
  // Failures, sized only when the run can have any (a failure rate, or a failed job).
  bool failures_on_ = false;
  std::vector<int64_t> fail_at_ms_;      // when the current run fails; INT64_MAX: never
  std::vector<int64_t> failed_tick_ms_;  // GPU time of failed runs
  std::vector<uint16_t> restarts_;
  std::vector<std::string> last_nodes_;  // with outcomes: the nodes of the last run
  std::priority_queue<std::pair<int64_t, int>, std::vector<std::pair<int64_t, int>>, std::greater<>> wakeups_;
  PolicyEnv env_;

  // Accounting, independent of the per-job sums so that each checks the other.
  int64_t last_ms_ = 0;
  Int128 integral_tick_ms_ = 0;
  std::vector<double> active_ticks_;  // per pool, from jobs carrying activity
  bool any_activity_ = false;
  TimeSeries ts_;
  int64_t preemptions_ = 0;
  uint64_t events_done_ = 0;
  std::string capacity_violation_;
};

Status Engine::Validate() const {
  for (const SimJob& j : jobs_) {
    if (j.duration_ms <= 0) return InvalidArgument(fmt::format("job '{}': duration must be > 0", j.id));
    if (j.gpus < 0) return InvalidArgument(fmt::format("job '{}': negative GPU count", j.id));
    if (j.gpus == 0 && (j.share_ticks <= 0 || j.share_ticks >= kTicksPerGpu)) {
      return InvalidArgument(fmt::format("job '{}': a sub-GPU request must be 1..{} ticks", j.id, kTicksPerGpu - 1));
    }
    if (j.gpus > 0 && j.share_ticks != 0) {
      return InvalidArgument(fmt::format("job '{}': both whole GPUs and a sub-GPU share", j.id));
    }
  }
  return ValidateCluster(cluster_);
}

void Engine::Prepare() {
  const size_t n = jobs_.size();
  order_.resize(n);
  for (size_t i = 0; i < n; ++i) order_[i] = static_cast<uint32_t>(i);
  std::stable_sort(order_.begin(), order_.end(),
                   [&](uint32_t a, uint32_t b) { return jobs_[a].submit_ms < jobs_[b].submit_ms; });
  st_.assign(n, JobState());
  env_.cluster = &cluster_;
  env_.pool_queues.assign(cluster_.pools.size(), {});
  std::unordered_map<std::string, int32_t> queue_ids;
  std::vector<std::vector<uint8_t>> seen(cluster_.pools.size());
  for (JobIndex j = 0; j < n; ++j) {
    const SimJob& jb = job(j);
    auto [it, fresh] = queue_ids.emplace(jb.queue, static_cast<int32_t>(env_.queue_names.size()));
    if (fresh) env_.queue_names.push_back(jb.queue);
    JobState& s = st_[j];
    s.queue = it->second;
    s.remaining_ms = jb.duration_ms;
    s.pool = static_cast<int16_t>(cluster_.RoutePool(jb));
    if (s.pool >= 0) {
      auto& pool_seen = seen[static_cast<size_t>(s.pool)];
      if (pool_seen.size() <= static_cast<size_t>(s.queue)) pool_seen.resize(static_cast<size_t>(s.queue) + 1, 0);
      if (!pool_seen[static_cast<size_t>(s.queue)]) {
        pool_seen[static_cast<size_t>(s.queue)] = 1;
        env_.pool_queues[static_cast<size_t>(s.pool)].push_back(s.queue);
      }
    }
    if (jb.activity_ratio >= 0) any_activity_ = true;
    if (jb.failed) failures_on_ = true;
  }
  if (options_.failure_rate_per_gpu_hour > 0) failures_on_ = true;
  if (failures_on_) {
    fail_at_ms_.assign(n, INT64_MAX);
    failed_tick_ms_.assign(n, 0);
    restarts_.assign(n, 0);
  }
  if (options_.keep_job_outcomes) last_nodes_.assign(n, {});
  for (const PoolSpec& p : cluster_.pools) pools_.emplace_back(p);
  by_end_.assign(pools_.size(), {});
  dirty_.assign(pools_.size(), 0);
  active_ticks_.assign(pools_.size(), 0.0);
  policy_.Init(env_);

  ts_.step_ms = std::max<int64_t>(1, cluster_.scheduler.timeseries_step_ms);
  ts_.begin_ms = n == 0 ? 0 : FloorTo(job(0).submit_ms, ts_.step_ms);
  for (const auto& p : pools_) {
    ts_.pools.push_back(p.spec().name);
    ts_.pool_capacity_ticks.push_back(p.capacity_ticks());
  }
  ts_.allocated_tick_ms.assign(pools_.size(), {});
  ts_.active_tick_ms.assign(pools_.size(), {});
  last_ms_ = n == 0 ? 0 : job(0).submit_ms;
}

void Engine::Advance(int64_t t_ms) {
  if (t_ms > last_ms_) {
    for (size_t p = 0; p < pools_.size(); ++p) {
      const int64_t ticks = pools_[p].allocated_ticks();
      if (ticks > pools_[p].capacity_ticks() && capacity_violation_.empty()) {
        capacity_violation_ = fmt::format("pool '{}' allocated {} of {} ticks at {}", pools_[p].spec().name, ticks,
                                          pools_[p].capacity_ticks(), last_ms_);
      }
      integral_tick_ms_ += static_cast<Int128>(ticks) * (t_ms - last_ms_);
      const double active = active_ticks_[p];
      if (ticks == 0 && active == 0) continue;
      auto& bins = ts_.allocated_tick_ms[p];
      auto& act = ts_.active_tick_ms[p];
      int64_t from = last_ms_;
      while (from < t_ms) {
        size_t bin = static_cast<size_t>((from - ts_.begin_ms) / ts_.step_ms);
        if (bin >= kMaxTimeBins) {
          CoarsenTimeSeries();
          continue;
        }
        const int64_t bin_end = ts_.begin_ms + static_cast<int64_t>(bin + 1) * ts_.step_ms;
        const int64_t to = std::min(bin_end, t_ms);
        if (bins.size() <= bin) {
          bins.resize(bin + 1, 0);
          act.resize(bin + 1, 0.0);
        }
        bins[bin] += ticks * (to - from);
        act[bin] += active * static_cast<double>(to - from);
        from = to;
      }
    }
    last_ms_ = t_ms;
  }
  clock_.Set(t_ms);
}

void Engine::CoarsenTimeSeries() {
  ts_.step_ms *= 2;
  for (size_t p = 0; p < ts_.allocated_tick_ms.size(); ++p) {
    auto& alloc = ts_.allocated_tick_ms[p];
    auto& act = ts_.active_tick_ms[p];
    for (size_t i = 0; i < alloc.size(); ++i) {
      alloc[i / 2] = i % 2 == 0 ? alloc[i] : alloc[i / 2] + alloc[i];
      act[i / 2] = i % 2 == 0 ? act[i] : act[i / 2] + act[i];
    }
    alloc.resize((alloc.size() + 1) / 2);
    act.resize((act.size() + 1) / 2);
  }
}

int32_t Engine::StretchFor(int pool, const Allocation& a, size_t tenants) const {
  const PoolSpec& spec = pools_[static_cast<size_t>(pool)].spec();
  double slowdown = 0;
  switch (a.span) {
    case Span::kOneNode:
      break;
    case Span::kOneDomain:
      slowdown = spec.cross_node_slowdown;
      break;
    case Span::kOneRack:
      slowdown = spec.cross_domain_slowdown;
      break;
    case Span::kRacks:
      slowdown = spec.cross_rack_slowdown;
      break;
  }
  if (a.shared && spec.sharing == Sharing::kTimeSlicing && tenants > 1) slowdown += spec.timeslice_slowdown;
  return PermilleOf(slowdown);
}

void Engine::PlanEnd(JobIndex j) {
  JobState& s = st_[j];
  s.end_ms = s.since_ms + CeilDiv(s.remaining_ms * s.stretch_permille, 1000);
  ++s.epoch;
  const int64_t fail_at = failures_on_ ? fail_at_ms_[j] : INT64_MAX;
  if (fail_at < s.end_ms) {
    events_.push({fail_at, j, s.epoch, true});
  } else {
    events_.push({s.end_ms, j, s.epoch, false});
  }
  // Policies plan with the end the job would have without failing: they cannot know.
  by_end_[static_cast<size_t>(s.pool)].insert({s.end_ms, j});
}

void Engine::AddActive(JobIndex j, int pool, int32_t ticks, int sign) {
  const float a = job(j).activity_ratio;
  if (a >= 0) active_ticks_[static_cast<size_t>(pool)] += sign * static_cast<double>(ticks) * a;
}

bool Engine::TryStart(JobIndex j) {
  JobState& s = st_[j];
  assert(s.phase == JobPhase::kPending);
  PoolState& pool = pools_[static_cast<size_t>(s.pool)];
  int32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<int32_t>(allocs_.size());
    allocs_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Allocation& a = allocs_[static_cast<size_t>(slot)];
  if (!pool.Place(j, job(j), options_.placement, a)) {
    free_slots_.push_back(slot);
    return false;
  }
  s.slot = slot;
  s.phase = JobPhase::kRunning;
  s.since_ms = clock_.NowMs();
  s.run_start_ms = s.since_ms;
  if (s.first_start_ms < 0) s.first_start_ms = s.since_ms;
  const size_t tenants = a.shared && pool.time_sliced() ? pool.TenantsOf(a.gpus.front()).size() : 1;
  s.stretch_permille = StretchFor(s.pool, a, tenants);
  if (failures_on_) fail_at_ms_[j] = DrawFailure(j, a.ticks);
  if (options_.keep_job_outcomes) {
    std::string& nodes = last_nodes_[j];
    nodes.clear();
    int32_t last = -1;
    std::vector<int32_t> ids;
    for (int32_t g : a.gpus) ids.push_back(g / pool.spec().gpus_per_node);
    std::sort(ids.begin(), ids.end());
    for (int32_t id : ids) {
      if (id == last) continue;
      if (!nodes.empty()) nodes += ';';
      nodes += std::to_string(id);
      last = id;
    }
  }
  PlanEnd(j);
  AddActive(j, s.pool, a.ticks, +1);
  if (tenants == 2) RestretchTenants(s.pool, a.gpus.front());
  return true;
}

void Engine::CloseRun(JobIndex j) {
  JobState& s = st_[j];
  const int64_t elapsed = clock_.NowMs() - s.since_ms;
  const int64_t done = std::min(s.remaining_ms, elapsed * 1000 / s.stretch_permille);
  s.remaining_ms -= done;
  s.tick_ms += elapsed * allocs_[static_cast<size_t>(s.slot)].ticks;
  by_end_[static_cast<size_t>(s.pool)].erase({s.end_ms, j});
  ++s.epoch;
}

void Engine::RestretchTenants(int pool, int32_t gpu) {
  const auto& tenants = pools_[static_cast<size_t>(pool)].TenantsOf(gpu);
  for (JobIndex t : tenants) {
    JobState& s = st_[t];
    const int32_t want = StretchFor(pool, allocs_[static_cast<size_t>(s.slot)], tenants.size());
    if (want == s.stretch_permille) continue;
    CloseRun(t);
    s.since_ms = clock_.NowMs();
    s.stretch_permille = want;
    PlanEnd(t);
  }
}

void Engine::Release(JobIndex j) {
  JobState& s = st_[j];
  PoolState& pool = pools_[static_cast<size_t>(s.pool)];
  const Allocation a = allocs_[static_cast<size_t>(s.slot)];
  AddActive(j, s.pool, a.ticks, -1);
  pool.Release(j, a);
  free_slots_.push_back(s.slot);
  s.slot = kNoSlot;
  s.since_ms = -1;
  s.run_start_ms = -1;
  if (a.shared && pool.time_sliced() && pool.TenantsOf(a.gpus.front()).size() == 1) {
    RestretchTenants(s.pool, a.gpus.front());
  }
  dirty_[static_cast<size_t>(s.pool)] = 1;
}

int64_t Engine::DrawFailure(JobIndex j, int32_t ticks) {
  const double rate_per_ms =
      options_.failure_rate_per_gpu_hour * static_cast<double>(ticks) / kTicksPerGpu / static_cast<double>(kMsPerHour);
  if (rate_per_ms <= 0) return INT64_MAX;
  // One stream per job and attempt: the draw does not depend on other jobs' fates.
  const uint64_t attempt = static_cast<uint64_t>(restarts_[j]) + static_cast<uint64_t>(st_[j].preemptions) * 65536;
  Rng rng(options_.failure_seed ^ (static_cast<uint64_t>(order_[j]) * 0x9E3779B97F4A7C15ULL) ^ (attempt << 40));
  const double ttf_ms = -std::log(1.0 - rng.Uniform()) / rate_per_ms;
  if (ttf_ms >= static_cast<double>(INT64_MAX / 4)) return INT64_MAX;
  return clock_.NowMs() + std::max<int64_t>(1, static_cast<int64_t>(ttf_ms));
}

void Engine::Fail(JobIndex j) {
  JobState& s = st_[j];
  const int64_t before = s.tick_ms;
  CloseRun(j);
  failed_tick_ms_[j] += s.tick_ms - before;
  s.phase = JobPhase::kFailed;
  s.end_ms = clock_.NowMs();
  policy_.OnStopped(j, s.pool, *this);
  Release(j);
  if (restarts_[j] >= options_.max_restarts) return;
  ++restarts_[j];
  s.remaining_ms = job(j).duration_ms;  // no checkpoint survives a failure
  s.end_ms = -1;
  s.phase = JobPhase::kPending;
  policy_.OnPending(j, s.pool, *this);
}

void Engine::Finish(JobIndex j) {
  JobState& s = st_[j];
  CloseRun(j);
  assert(s.remaining_ms == 0);
  s.phase = JobPhase::kDone;
  if (job(j).failed) {
    // The trace says this run failed at its end: all of its GPU time was failed time.
    s.phase = JobPhase::kFailed;
    failed_tick_ms_[j] = s.tick_ms;
  }
  s.end_ms = clock_.NowMs();
  policy_.OnStopped(j, s.pool, *this);
  Release(j);
}

void Engine::Preempt(JobIndex j) {
  JobState& s = st_[j];
  assert(s.phase == JobPhase::kRunning);
  CloseRun(j);
  ++s.preemptions;
  ++preemptions_;
  s.end_ms = -1;
  s.phase = JobPhase::kPending;
  policy_.OnStopped(j, s.pool, *this);
  Release(j);
  policy_.OnPending(j, s.pool, *this);
}

Result<SimResult> Engine::Run() {
  GPULEDGER_RETURN_IF_ERROR(Validate());
  Prepare();
  const size_t n = jobs_.size();
  size_t next = 0;
  constexpr uint64_t kProgressEvery = 1 << 16;  // events between progress reports
  uint64_t next_progress = kProgressEvery;
  while (next < n || !events_.empty() || !wakeups_.empty()) {
    // Drop stale planned ends so that they do not set the clock.
    while (!events_.empty()) {
      const EndEvent& e = events_.top();
      if (st_[e.job].phase == JobPhase::kRunning && st_[e.job].epoch == e.epoch) break;
      events_.pop();
    }
    int64_t t = INT64_MAX;
    if (!events_.empty()) t = events_.top().t_ms;
    if (next < n) t = std::min(t, job(static_cast<JobIndex>(next)).submit_ms);
    if (!wakeups_.empty()) t = std::min(t, wakeups_.top().first);
    if (t == INT64_MAX) break;
    Advance(t);
    while (!wakeups_.empty() && wakeups_.top().first == t) {
      dirty_[static_cast<size_t>(wakeups_.top().second)] = 1;
      wakeups_.pop();
    }
    // Ends first, so that arrivals at the same instant see the freed capacity.
    while (!events_.empty() && events_.top().t_ms == t) {
      const EndEvent e = events_.top();
      events_.pop();
      if (st_[e.job].phase != JobPhase::kRunning || st_[e.job].epoch != e.epoch) continue;
      if (e.failure) {
        Fail(e.job);
      } else {
        Finish(e.job);
      }
      ++events_done_;
    }
    while (next < n && job(static_cast<JobIndex>(next)).submit_ms == t) {
      const JobIndex j = static_cast<JobIndex>(next++);
      JobState& s = st_[j];
      ++events_done_;
      const SimJob& jb = job(j);
      if (s.pool < 0 || (jb.gpus > 0 && jb.gpus > pools_[static_cast<size_t>(s.pool)].gpus())) {
        s.phase = JobPhase::kUnschedulable;
        continue;
      }
      s.phase = JobPhase::kPending;
      policy_.OnPending(j, s.pool, *this);
      dirty_[static_cast<size_t>(s.pool)] = 1;
    }
    for (size_t p = 0; p < pools_.size(); ++p) {
      if (!dirty_[p]) continue;
      dirty_[p] = 0;
      policy_.Schedule(*this, static_cast<int>(p));
    }
    if (options_.progress && events_done_ >= next_progress) {
      options_.progress(next, n);
      next_progress = events_done_ + kProgressEvery;
    }
  }
  if (options_.progress) options_.progress(n, n);
  return Summarize();
}

SimResult Engine::Summarize() {
  SimResult r;
  r.cluster = cluster_.name;
  r.policy = std::string(policy_.name());
  r.placement = std::string(PlacementModeName(options_.placement));
  r.jobs = jobs_.size();
  r.events = events_done_;
  r.preemptions = preemptions_;
  const SchedulerSpec& sched = cluster_.scheduler;

  r.durations = std::string(policy_.durations());
  std::vector<int64_t> waits, jcts;
  std::vector<double> slowdowns;
  waits.reserve(jobs_.size());
  jcts.reserve(jobs_.size());
  Int128 job_tick_ms = 0, failed_tick_ms = 0;
  size_t unfinished = 0;
  int64_t first_submit = INT64_MAX, last_end = INT64_MIN;
  const size_t nq = env_.queue_names.size();
  std::vector<std::vector<int64_t>> queue_waits(nq), queue_jcts(nq);
  std::vector<std::vector<double>> queue_slowdowns(nq);
  std::vector<Int128> queue_cost(nq, 0), queue_tick_ms(nq, 0), queue_req(nq, 0), queue_granted(nq, 0);
  std::vector<Int128> pool_tick_ms(pools_.size(), 0);
  std::vector<size_t> queue_jobs(nq, 0);
  if (options_.keep_job_outcomes) r.outcomes.assign(jobs_.size(), JobOutcome());
  for (JobIndex j = 0; j < st_.size(); ++j) {
    const JobState& s = st_[j];
    const SimJob& jb = job(j);
    const size_t q = static_cast<size_t>(s.queue);
    ++queue_jobs[q];
    queue_req[q] += jb.RequestTicks();
    first_submit = std::min(first_submit, jb.submit_ms);
    // Every job's share-time counts, finished or not, so that the sum meets the integral.
    job_tick_ms += s.tick_ms;
    if (failures_on_) {
      failed_tick_ms += failed_tick_ms_[j];
      r.restarts += restarts_[j];
    }
    if (s.pool >= 0) {
      pool_tick_ms[static_cast<size_t>(s.pool)] += s.tick_ms;
      queue_tick_ms[q] += s.tick_ms;
      queue_cost[q] += static_cast<Int128>(s.tick_ms) *
                       cluster_.pools[static_cast<size_t>(s.pool)].price_per_gpu_hour.micros();
    }
    JobStatus status = JobStatus::kCompleted;
    if (s.phase == JobPhase::kUnschedulable) {
      ++r.unschedulable;
      status = JobStatus::kUnschedulable;
    } else if (s.phase == JobPhase::kFailed) {
      ++r.failed;
      status = JobStatus::kFailed;
    } else if (s.phase != JobPhase::kDone) {
      if (s.phase == JobPhase::kRunning) ++unfinished;
      ++r.starved;
      status = JobStatus::kStarved;
    }
    if (options_.keep_job_outcomes) {
      JobOutcome& o = r.outcomes[order_[j]];
      o.start_ms = s.first_start_ms;
      o.end_ms = status == JobStatus::kCompleted || status == JobStatus::kFailed ? s.end_ms : -1;
      o.allocated_tick_ms = s.tick_ms;
      o.failed_tick_ms = failures_on_ ? failed_tick_ms_[j] : 0;
      o.preemptions = s.preemptions;
      o.restarts = failures_on_ ? restarts_[j] : 0;
      o.pool = s.pool;
      o.status = status;
      o.nodes = last_nodes_[j];
    }
    if (s.first_start_ms >= 0) {
      const int64_t wait = s.first_start_ms - jb.submit_ms;
      waits.push_back(wait);
      queue_waits[q].push_back(wait);
      // Starved jobs count as not granted, even one that ran and was preempted for good.
      if (wait <= sched.slo_wait_ms && status != JobStatus::kStarved) queue_granted[q] += jb.RequestTicks();
    }
    if (status == JobStatus::kCompleted || status == JobStatus::kFailed) last_end = std::max(last_end, s.end_ms);
    if (status != JobStatus::kCompleted) continue;
    if (s.remaining_ms != 0) ++unfinished;
    ++r.completed;
    const int64_t jct = s.end_ms - jb.submit_ms;
    jcts.push_back(jct);
    queue_jcts[q].push_back(jct);
    const double slowdown = static_cast<double>(jct) / static_cast<double>(jb.duration_ms);
    slowdowns.push_back(slowdown);
    queue_slowdowns[q].push_back(slowdown);
  }
  r.failed_gpu_hours = TickMsToGpuHours(failed_tick_ms);
  if (r.completed == 0) last_end = first_submit == INT64_MAX ? 0 : first_submit;
  if (first_submit == INT64_MAX) first_submit = 0;
  r.begin_ms = first_submit;
  r.end_ms = last_end;
  r.makespan_ms = last_end - first_submit;
  r.wait = PercentilesOf(waits);
  r.completion = PercentilesOf(jcts);
  r.slowdown = RatioPercentilesOf(slowdowns);
  r.allocated_tick_ms = job_tick_ms;
  r.gpu_hours = TickMsToGpuHours(job_tick_ms);

  int64_t capacity_ticks = 0;
  for (const auto& p : pools_) capacity_ticks += p.capacity_ticks();
  const double capacity_tick_ms = static_cast<double>(capacity_ticks) * static_cast<double>(std::max<int64_t>(r.makespan_ms, 1));
  r.allocated_ratio = static_cast<double>(job_tick_ms) / capacity_tick_ms;
  if (any_activity_) {
    double active = 0;
    for (const auto& bins : ts_.active_tick_ms) {
      for (double v : bins) active += v;
    }
    r.active_ratio = active / capacity_tick_ms;
  }

  // Money: exact per pool, rounded once for the total and apportioned to the rows.
  std::vector<CostNumerator> pool_cost;
  for (size_t p = 0; p < pools_.size(); ++p) {
    pool_cost.push_back(pool_tick_ms[p] * cluster_.pools[p].price_per_gpu_hour.micros());
  }
  Int128 total_cost = 0;
  for (auto c : pool_cost) total_cost += c;
  r.cost = RoundCost(total_cost);
  const std::vector<Money> pool_money = ApportionCosts(pool_cost);
  for (size_t p = 0; p < pools_.size(); ++p) {
    PoolSummary ps;
    ps.name = cluster_.pools[p].name;
    ps.gpus = pools_[p].gpus();
    ps.gpu_hours = TickMsToGpuHours(pool_tick_ms[p]);
    ps.allocated_ratio = static_cast<double>(pool_tick_ms[p]) /
                         (static_cast<double>(pools_[p].capacity_ticks()) * static_cast<double>(std::max<int64_t>(r.makespan_ms, 1)));
    ps.cost = pool_money[p];
    r.pools.push_back(std::move(ps));
  }
  const std::vector<Money> queue_money = ApportionCosts(queue_cost);
  for (size_t q = 0; q < nq; ++q) {
    QueueSummary qs;
    qs.name = env_.queue_names[q];
    qs.jobs = queue_jobs[q];
    qs.wait = PercentilesOf(queue_waits[q]);
    qs.completion = PercentilesOf(queue_jcts[q]);
    qs.slowdown = RatioPercentilesOf(queue_slowdowns[q]);
    qs.gpu_hours = TickMsToGpuHours(queue_tick_ms[q]);
    qs.cost = queue_money[q];
    qs.slo_granted_ratio = queue_req[q] == 0 ? 1.0 : static_cast<double>(queue_granted[q]) / static_cast<double>(queue_req[q]);
    qs.slo_met = qs.slo_granted_ratio >= sched.slo_target_ratio;
    qs.slo_wait_ms = sched.slo_wait_ms;
    qs.slo_target_ratio = sched.slo_target_ratio;
    r.queues.push_back(std::move(qs));
  }
  std::sort(r.queues.begin(), r.queues.end(), [](const QueueSummary& a, const QueueSummary& b) { return a.name < b.name; });

  // Conservation: the per-job sums against the engine's own integral over time.
  if (job_tick_ms != integral_tick_ms_) {
    r.conservation = Internal(fmt::format("GPU-seconds not conserved: jobs hold {} tick-ms, the cluster integral {}",
                                          static_cast<double>(job_tick_ms), static_cast<double>(integral_tick_ms_)));
  } else if (!capacity_violation_.empty()) {
    r.conservation = Internal("allocation above capacity: " + capacity_violation_);
  } else if (unfinished > 0) {
    r.conservation = Internal(fmt::format("{} jobs still running at the end or finished with work left", unfinished));
  }
  // Time series bins all the same length.
  size_t bins = 0;
  for (const auto& b : ts_.allocated_tick_ms) bins = std::max(bins, b.size());
  for (size_t p = 0; p < pools_.size(); ++p) {
    ts_.allocated_tick_ms[p].resize(bins, 0);
    ts_.active_tick_ms[p].resize(bins, 0.0);
  }
  if (!any_activity_) ts_.active_tick_ms.clear();
  r.timeseries = std::move(ts_);
  return r;
}

}  // namespace

std::string_view JobStatusName(JobStatus s) {
  switch (s) {
    case JobStatus::kCompleted:
      return "completed";
    case JobStatus::kFailed:
      return "failed";
    case JobStatus::kStarved:
      return "starved";
    case JobStatus::kUnschedulable:
      return "unschedulable";
  }
  return "completed";
}

Result<SimResult> Simulate(const ClusterSpec& cluster, const std::vector<SimJob>& jobs, Policy& policy,
                           const SimOptions& options) {
  if (jobs.size() >= static_cast<size_t>(UINT32_MAX)) return InvalidArgument("too many jobs for one run");
  Engine engine(cluster, jobs, policy, options);
  return engine.Run();
}

Result<SimResult> Simulate(const ClusterSpec& cluster, const std::vector<SimJob>& jobs,
                           std::string_view policy_name, const SimOptions& options) {
  GPULEDGER_ASSIGN_OR_RETURN(std::unique_ptr<Policy> policy, MakePolicy(policy_name, cluster.scheduler));
  return Simulate(cluster, jobs, *policy, options);
}

}  // namespace gpuledger::sim
