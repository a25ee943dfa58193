// The scheduling policies behind the Policy interface (see policy.h and
// docs/simulator.md for what each models).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "sim/policy.h"
#include "sim/pool_state.h"

namespace gpuledger::sim {
namespace {

// Whole GPUs a job needs freed before it can start (a sub-GPU job: one).
int32_t WholeNeed(const SimJob& j) { return j.gpus > 0 ? j.gpus : 1; }

// Picks running jobs to preempt so that `need` whole GPUs become free: walks
// `candidates` in order, taking those `eligible` says may go. Returns the victims, or
// nothing if even all eligible candidates would not make room.
template <typename Range, typename Eligible>
std::vector<JobIndex> ChooseVictims(const SchedulerContext& ctx, int pool, int32_t need, const Range& candidates,
                                    Eligible eligible) {
  int32_t freed = ctx.FreeWholeGpus(pool);
  std::vector<JobIndex> victims;
  for (JobIndex v : candidates) {
    if (freed >= need) break;
    if (!eligible(v)) continue;
    const int32_t held = ctx.WholeGpusHeld(v);
    if (held == 0) continue;
    victims.push_back(v);
    freed += held;
  }
  if (freed < need) victims.clear();
  return victims;
}

bool RanLongEnough(const SchedulerContext& ctx, JobIndex j, int64_t min_runtime_ms) {
  return ctx.NowMs() - ctx.RunningSinceMs(j) >= min_runtime_ms;
}

// After a preemption found too few victims: asks to be woken when the first candidate
// still inside its minimum runtime leaves it, since more victims may be enough then.
void WakeWhenEligible(SchedulerContext& ctx, int pool, const std::vector<JobIndex>& candidates,
                      int64_t min_runtime_ms) {
  int64_t earliest = std::numeric_limits<int64_t>::max();
  for (JobIndex v : candidates) {
    if (!RanLongEnough(ctx, v, min_runtime_ms)) earliest = std::min(earliest, ctx.RunningSinceMs(v) + min_runtime_ms);
  }
  if (earliest != std::numeric_limits<int64_t>::max()) ctx.WakeAt(pool, earliest);
}

// Whether each pool shares GPUs (then a job may fit with no whole GPU free).
std::vector<uint8_t> SharedPools(const PolicyEnv& env) {
  std::vector<uint8_t> shared;
  for (const auto& p : env.cluster->pools) shared.push_back(p.sharing != Sharing::kNone);
  return shared;
}

// Walks a pending queue from `it` in its order and starts each job that `admit` allows
// and that fits, calling `started` for it. It passes over jobs that cannot start, and
// stops at the (depth + 1)-th of them, counting the `failures` the caller already met
// (so depth 0 stops at the first job that cannot start: strict order), or when an
// unshared pool has no whole GPU left. `job_of` maps a queue entry to its job.
template <typename Queue, typename JobOf, typename Admit, typename Started>
void StartInOrder(SchedulerContext& ctx, int pool, bool shared, int64_t depth, int64_t failures, Queue& q,
                  typename Queue::iterator it, JobOf job_of, Admit admit, Started started) {
  while (it != q.end() && failures <= depth) {
    const int32_t free = ctx.FreeWholeGpus(pool);
    if (free == 0 && !shared) break;
    const JobIndex j = job_of(*it);
    if (ctx.job(j).gpus <= free && admit(j) && ctx.TryStart(j)) {
      started(j);
      it = q.erase(it);
    } else {
      ++it;
      ++failures;
    }
  }
}

// First in, first out, strictly: the head blocks everything behind it.
class FifoPolicy final : public Policy {
 public:
  std::string_view name() const override { return "fifo"; }
  void Init(const PolicyEnv& env) override { pending_.assign(env.cluster->pools.size(), {}); }
  void OnPending(JobIndex j, int pool, const SchedulerContext&) override { pending_[static_cast<size_t>(pool)].insert(j); }
  void OnStopped(JobIndex, int, const SchedulerContext&) override {}
  void Schedule(SchedulerContext& ctx, int pool) override {
    auto& q = pending_[static_cast<size_t>(pool)];
    while (!q.empty() && ctx.TryStart(*q.begin())) q.erase(q.begin());
  }

 private:
  std::vector<std::set<JobIndex>> pending_;
};

// A policy whose pending jobs wait per pool in arrival order and that learns nothing
// from stops: the base of backfill.
class ArrivalOrderPolicy : public Policy {
 public:
  void Init(const PolicyEnv& env) override {
    pending_.assign(env.cluster->pools.size(), {});
    shared_ = SharedPools(env);
  }
  void OnPending(JobIndex j, int pool, const SchedulerContext&) override { pending_[static_cast<size_t>(pool)].insert(j); }
  void OnStopped(JobIndex, int, const SchedulerContext&) override {}

 protected:
  std::vector<uint8_t> shared_;
  std::vector<std::set<JobIndex>> pending_;
};

// First fit in arrival order, with no reservation: every pending job that fits starts,
// oldest first, however many older jobs cannot start (the PAI simulator's "FIFO").
// Pending jobs are kept by whole-GPU count, so that a pass finds the oldest job no
// larger than the free GPUs without walking a long queue of jobs that cannot start:
// the same order as a scan, since free GPUs only shrink during a pass.
class FirstFitPolicy final : public Policy {
 public:
  std::string_view name() const override { return "firstfit"; }
  void Init(const PolicyEnv& env) override {
    by_size_.assign(env.cluster->pools.size(), {});
    shared_ = SharedPools(env);
  }
  void OnPending(JobIndex j, int pool, const SchedulerContext& ctx) override {
    by_size_[static_cast<size_t>(pool)][ctx.job(j).gpus].insert(j);
  }
  void OnStopped(JobIndex, int, const SchedulerContext&) override {}
  void Schedule(SchedulerContext& ctx, int pool) override {
    auto& buckets = by_size_[static_cast<size_t>(pool)];
    std::set<JobIndex> failed;  // fit by count but not by placement, this pass
    while (true) {
      const int32_t free = ctx.FreeWholeGpus(pool);
      if (free == 0 && !shared_[static_cast<size_t>(pool)]) return;
      JobIndex best = std::numeric_limits<JobIndex>::max();
      auto from = buckets.end();
      for (auto it = buckets.begin(); it != buckets.end() && it->first <= free; ++it) {
        for (JobIndex j : it->second) {
          if (failed.count(j) != 0) continue;
          if (j < best) {
            best = j;
            from = it;
          }
          break;
        }
      }
      if (from == buckets.end()) return;
      if (!ctx.TryStart(best)) {
        failed.insert(best);
        continue;
      }
      from->second.erase(best);
      if (from->second.empty()) buckets.erase(from);
    }
  }

 private:
  std::vector<uint8_t> shared_;
  std::vector<std::map<int32_t, std::set<JobIndex>>> by_size_;  // [pool][gpus]: arrival order
};

// What SJF and SRTF know of a job's run time: the oracle, or the mean run time of the
// jobs of the same user (or queue) that finished before the job became pending; with no
// such job, the mean over all finished jobs; with none at all, 0 (arrival order).
class DurationEstimator {
 public:
  explicit DurationEstimator(DurationEstimate kind) : kind_(kind) {}
  DurationEstimate kind() const { return kind_; }
  // The estimate of a job's whole run time, fixed the first time it is asked.
  int64_t Estimate(JobIndex j, const SchedulerContext& ctx) {
    if (kind_ == DurationEstimate::kOracle) return ctx.job(j).duration_ms;
    if (estimate_.size() <= j) estimate_.resize(static_cast<size_t>(j) + 1, -1);
    if (estimate_[j] < 0) estimate_[j] = MeanFor(Key(j, ctx));
    return estimate_[j];
  }
  // Estimated work left: the estimate less the work done so far, never below 0.
  int64_t Left(JobIndex j, const SchedulerContext& ctx) {
    if (kind_ == DurationEstimate::kOracle) return ctx.WorkLeftNowMs(j);
    const int64_t done = ctx.job(j).duration_ms - ctx.WorkLeftNowMs(j);
    return std::max<int64_t>(0, Estimate(j, ctx) - done);
  }
  // Learns from a job that stopped; only finished jobs teach anything.
  void Stopped(JobIndex j, const SchedulerContext& ctx) {
    if (kind_ == DurationEstimate::kOracle || ctx.RemainingMs(j) != 0) return;
    const int64_t d = ctx.job(j).duration_ms;
    Sum& s = by_key_[Key(j, ctx)];
    s.total_ms += d;
    ++s.count;
    all_.total_ms += d;
    ++all_.count;
  }

 private:
  struct Sum {
    int64_t total_ms = 0;
    int64_t count = 0;
  };
  std::string Key(JobIndex j, const SchedulerContext& ctx) const {
    const SimJob& job = ctx.job(j);
    if (kind_ == DurationEstimate::kUserMean && !job.user.empty()) return "u:" + job.user;
    return "q:" + job.queue;
  }
  int64_t MeanFor(const std::string& key) const {
    auto it = by_key_.find(key);
    const Sum& s = it != by_key_.end() && it->second.count > 0 ? it->second : all_;
    return s.count == 0 ? 0 : s.total_ms / s.count;
  }
  DurationEstimate kind_;
  std::vector<int64_t> estimate_;
  std::map<std::string, Sum> by_key_;
  Sum all_;
};

// Preemptive ranking: the pending job of the lowest rank goes first (FIFO within a
// rank); a head that does not fit preempts running jobs of a higher rank that have run
// at least min_runtime, the highest rank and youngest run first. A subclass says what a
// job's rank is; a running job's rank may change only through Rerank.
class RankPolicy : public Policy {
 public:
  explicit RankPolicy(const SchedulerSpec& spec) : min_runtime_ms_(spec.min_runtime_ms) {}
  void Init(const PolicyEnv& env) override {
    pending_.assign(env.cluster->pools.size(), {});
    running_.assign(env.cluster->pools.size(), {});
  }
  void OnPending(JobIndex j, int pool, const SchedulerContext& ctx) override {
    pending_[static_cast<size_t>(pool)].insert({Rank(j, ctx), j});
  }
  void OnStopped(JobIndex j, int pool, const SchedulerContext& ctx) override {
    running_[static_cast<size_t>(pool)].erase({-RankOf(j), -ctx.RunningSinceMs(j), j});
    Stopped(j, pool, ctx);
  }
  void Schedule(SchedulerContext& ctx, int pool) override {
    BeforeSchedule(ctx, pool);
    auto& q = pending_[static_cast<size_t>(pool)];
    auto& running = running_[static_cast<size_t>(pool)];
    while (!q.empty()) {
      const auto [rank, j] = *q.begin();
      if (!ctx.TryStart(j)) {
        std::vector<JobIndex> order;
        for (const auto& [neg_rank, neg_since, v] : running) {
          if (-neg_rank <= rank) break;
          order.push_back(v);
        }
        const auto victims = ChooseVictims(ctx, pool, WholeNeed(ctx.job(j)), order,
                                           [&](JobIndex v) { return RanLongEnough(ctx, v, min_runtime_ms_); });
        if (victims.empty()) {
          WakeWhenEligible(ctx, pool, order, min_runtime_ms_);
          break;
        }
        for (JobIndex v : victims) ctx.Preempt(v);
        if (!ctx.TryStart(j)) break;
      }
      q.erase(q.begin());
      SetRank(j, rank);
      running.insert({-rank, -ctx.RunningSinceMs(j), j});
      Started(j, pool, ctx);
    }
  }

 protected:
  // The rank of a job that is pending now.
  virtual int64_t Rank(JobIndex j, const SchedulerContext& ctx) const = 0;
  virtual void BeforeSchedule(SchedulerContext& /*ctx*/, int /*pool*/) {}
  virtual void Started(JobIndex /*j*/, int /*pool*/, SchedulerContext& /*ctx*/) {}
  virtual void Stopped(JobIndex /*j*/, int /*pool*/, const SchedulerContext& /*ctx*/) {}
  // Moves a running job to a new rank.
  void Rerank(JobIndex j, int pool, int64_t rank, const SchedulerContext& ctx) {
    auto& running = running_[static_cast<size_t>(pool)];
    running.erase({-RankOf(j), -ctx.RunningSinceMs(j), j});
    SetRank(j, rank);
    running.insert({-rank, -ctx.RunningSinceMs(j), j});
  }
  int64_t RankOf(JobIndex j) const { return j < rank_.size() ? rank_[j] : 0; }

 private:
  void SetRank(JobIndex j, int64_t rank) {
    if (rank_.size() <= j) rank_.resize(static_cast<size_t>(j) + 1, 0);
    rank_[j] = rank;
  }
  int64_t min_runtime_ms_;
  std::vector<std::set<std::pair<int64_t, JobIndex>>> pending_;  // (rank, job)
  // Running jobs, highest rank and youngest run first: (-rank, -run start, job).
  std::vector<std::set<std::tuple<int64_t, int64_t, JobIndex>>> running_;
  std::vector<int64_t> rank_;  // the rank each running job is filed under
};

// Strict priority (higher first, FIFO within a priority), preempting lower-priority
// jobs that have run at least min_runtime, lowest priority and youngest first.
class PriorityPolicy final : public RankPolicy {
 public:
  using RankPolicy::RankPolicy;
  std::string_view name() const override { return "priority"; }

 protected:
  int64_t Rank(JobIndex j, const SchedulerContext& ctx) const override { return -ctx.job(j).priority; }
};

// Discretized least attained service, in the manner of Tiresias' 2D-LAS: a job's
// attained service is the GPU-time it has held (GPUs x time, both dimensions); the
// thresholds cut it into queues; a lower queue goes first and preempts higher ones,
// FIFO within a queue. Needs no job durations. A running job is demoted the moment it
// crosses a threshold.
class LasPolicy final : public RankPolicy {
 public:
  explicit LasPolicy(const SchedulerSpec& spec) : RankPolicy(spec), thresholds_(spec.las_thresholds_gpu_ms) {}
  std::string_view name() const override { return "las"; }
  void Init(const PolicyEnv& env) override {
    RankPolicy::Init(env);
    crossings_.assign(env.cluster->pools.size(), {});
  }

 protected:
  int64_t Rank(JobIndex j, const SchedulerContext&) const override { return LevelOf(Attained(j)); }
  void Started(JobIndex j, int pool, SchedulerContext& ctx) override { PlanCrossing(j, pool, ctx); }
  void Stopped(JobIndex j, int, const SchedulerContext& ctx) override {
    Grow(j);
    attained_tick_ms_[j] += (ctx.NowMs() - ctx.RunningSinceMs(j)) * ctx.AllocatedTicks(j);
  }
  void BeforeSchedule(SchedulerContext& ctx, int pool) override {
    auto& heap = crossings_[static_cast<size_t>(pool)];
    while (!heap.empty() && heap.top().t_ms <= ctx.NowMs()) {
      const Crossing c = heap.top();
      heap.pop();
      if (ctx.RunningSinceMs(c.job) != c.run_start_ms) continue;  // that run is over
      const int64_t attained = Attained(c.job) + (ctx.NowMs() - c.run_start_ms) * ctx.AllocatedTicks(c.job);
      Rerank(c.job, pool, LevelOf(attained), ctx);
      PlanCrossing(c.job, pool, ctx);
    }
  }

 private:
  struct Crossing {
    int64_t t_ms;
    JobIndex job;
    int64_t run_start_ms;
    bool operator>(const Crossing& o) const { return t_ms != o.t_ms ? t_ms > o.t_ms : job > o.job; }
  };
  static constexpr int64_t kTicksPerGpuMs = kTicksPerGpu;  // tick-ms in one GPU-ms

  void Grow(JobIndex j) {
    if (attained_tick_ms_.size() <= j) attained_tick_ms_.resize(static_cast<size_t>(j) + 1, 0);
  }
  int64_t Attained(JobIndex j) const { return j < attained_tick_ms_.size() ? attained_tick_ms_[j] : 0; }
  int64_t LevelOf(int64_t attained_tick_ms) const {
    int64_t level = 0;
    for (int64_t t : thresholds_) {
      if (attained_tick_ms >= t * kTicksPerGpuMs) ++level;
    }
    return level;
  }
  // Asks to be woken when running job `j` crosses its next threshold.
  void PlanCrossing(JobIndex j, int pool, SchedulerContext& ctx) {
    const int64_t ticks = ctx.AllocatedTicks(j);
    const int64_t since = ctx.RunningSinceMs(j);
    const int64_t attained = Attained(j) + (ctx.NowMs() - since) * ticks;
    for (int64_t t : thresholds_) {
      const int64_t target = t * kTicksPerGpuMs;
      if (attained < target && ticks > 0) {
        const int64_t at = ctx.NowMs() + (target - attained + ticks - 1) / ticks;
        crossings_[static_cast<size_t>(pool)].push({at, j, since});
        ctx.WakeAt(pool, at);
        return;
      }
    }
  }

  std::vector<int64_t> thresholds_;
  std::vector<int64_t> attained_tick_ms_;  // over finished runs, by job
  std::vector<std::priority_queue<Crossing, std::vector<Crossing>, std::greater<>>> crossings_;
};

// Shortest job first, non-preemptive: every pending job that fits starts, shortest
// (estimated) first, passing over at most backfill_depth jobs after the first that
// cannot start. With the oracle it is a bound on what knowing durations buys, not a
// policy a real scheduler could run.
class SjfPolicy final : public Policy {
 public:
  explicit SjfPolicy(const SchedulerSpec& spec) : depth_(spec.backfill_depth), estimator_(spec.duration_estimate) {}
  std::string_view name() const override { return "sjf"; }
  std::string_view durations() const override { return DurationEstimateName(estimator_.kind()); }
  void Init(const PolicyEnv& env) override {
    pending_.assign(env.cluster->pools.size(), {});
    shared_ = SharedPools(env);
  }
  void OnPending(JobIndex j, int pool, const SchedulerContext& ctx) override {
    pending_[static_cast<size_t>(pool)].insert({estimator_.Left(j, ctx), j});
  }
  void OnStopped(JobIndex j, int, const SchedulerContext& ctx) override { estimator_.Stopped(j, ctx); }
  void Schedule(SchedulerContext& ctx, int pool) override {
    auto& q = pending_[static_cast<size_t>(pool)];
    StartInOrder(
        ctx, pool, shared_[static_cast<size_t>(pool)], depth_, 0, q, q.begin(),
        [](const std::pair<int64_t, JobIndex>& e) { return e.second; }, [](JobIndex) { return true; },
        [](JobIndex) {});
  }

 private:
  int64_t depth_;
  DurationEstimator estimator_;
  std::vector<uint8_t> shared_;
  std::vector<std::set<std::pair<int64_t, JobIndex>>> pending_;
};

// Shortest remaining time first, preemptive: the pending job with the least
// (estimated) work left goes first; a head that does not fit preempts running jobs
// with more work left that have run min_runtime, the most left first. A running job is
// filed under the instant its work left would reach 0 at full speed (run start + work
// left then), so that its work left now is that instant minus now and the order of the
// running jobs never has to be rebuilt; with slowdowns this ranks by full-speed work.
class SrtfPolicy final : public Policy {
 public:
  explicit SrtfPolicy(const SchedulerSpec& spec)
      : min_runtime_ms_(spec.min_runtime_ms), estimator_(spec.duration_estimate) {}
  std::string_view name() const override { return "srtf"; }
  std::string_view durations() const override { return DurationEstimateName(estimator_.kind()); }
  void Init(const PolicyEnv& env) override {
    pending_.assign(env.cluster->pools.size(), {});
    running_.assign(env.cluster->pools.size(), {});
  }
  void OnPending(JobIndex j, int pool, const SchedulerContext& ctx) override {
    pending_[static_cast<size_t>(pool)].insert({estimator_.Left(j, ctx), j});
  }
  void OnStopped(JobIndex j, int pool, const SchedulerContext& ctx) override {
    running_[static_cast<size_t>(pool)].erase({done_at_[j], j});
    estimator_.Stopped(j, ctx);
  }
  void Schedule(SchedulerContext& ctx, int pool) override {
    auto& q = pending_[static_cast<size_t>(pool)];
    auto& running = running_[static_cast<size_t>(pool)];
    while (!q.empty()) {
      const auto [left, j] = *q.begin();
      if (!ctx.TryStart(j)) {
        // Running jobs with more work left than the head, the most first.
        std::vector<JobIndex> order;
        for (auto it = running.rbegin(); it != running.rend() && it->first - ctx.NowMs() > left; ++it) {
          order.push_back(it->second);
        }
        const auto victims = ChooseVictims(ctx, pool, WholeNeed(ctx.job(j)), order,
                                           [&](JobIndex v) { return RanLongEnough(ctx, v, min_runtime_ms_); });
        if (victims.empty()) {
          WakeWhenEligible(ctx, pool, order, min_runtime_ms_);
          return;
        }
        for (JobIndex v : victims) ctx.Preempt(v);
        if (!ctx.TryStart(j)) return;
      }
      q.erase(q.begin());
      if (done_at_.size() <= j) done_at_.resize(static_cast<size_t>(j) + 1, 0);
      done_at_[j] = ctx.NowMs() + left;
      running.insert({done_at_[j], j});
    }
  }

 private:
  int64_t min_runtime_ms_;
  DurationEstimator estimator_;
  std::vector<std::set<std::pair<int64_t, JobIndex>>> pending_;  // (work left, job)
  std::vector<std::set<std::pair<int64_t, JobIndex>>> running_;  // (done at full speed, job)
  std::vector<int64_t> done_at_;                                 // each running job's key
};

// FIFO with gang scheduling and EASY backfill: the head waits for all its GPUs at once
// and gets a reservation at the earliest time enough GPUs will be free (from the
// running jobs' oracle ends); a later job may start now if it fits and either ends
// before that time or uses only GPUs the head will not need.
class BackfillPolicy final : public ArrivalOrderPolicy {
 public:
  explicit BackfillPolicy(const SchedulerSpec& spec) : depth_(spec.backfill_depth) {}
  std::string_view name() const override { return "backfill"; }
  std::string_view durations() const override { return "oracle"; }
  void Schedule(SchedulerContext& ctx, int pool) override {
    auto& q = pending_[static_cast<size_t>(pool)];
    while (!q.empty() && ctx.TryStart(*q.begin())) q.erase(q.begin());
    if (q.empty()) return;
    const JobIndex head = *q.begin();
    const int32_t need = WholeNeed(ctx.job(head));
    // The reservation: walk planned ends until enough whole GPUs would be free.
    int32_t free_then = ctx.FreeWholeGpus(pool);
    int64_t shadow_ms = std::numeric_limits<int64_t>::max();
    for (const auto& [end_ms, j] : ctx.RunningByEnd(pool)) {
      free_then += ctx.WholeGpusHeld(j);
      if (free_then >= need) {
        shadow_ms = end_ms;
        break;
      }
    }
    int32_t extra = free_then >= need ? free_then - need : 0;
    const int64_t now = ctx.NowMs();
    auto ends_in_time = [&](JobIndex j) { return now + ctx.RemainingMs(j) <= shadow_ms; };
    // The head is the first job that cannot start; depth more may be passed over.
    StartInOrder(
        ctx, pool, shared_[static_cast<size_t>(pool)], depth_, 1, q, std::next(q.begin()),
        [](JobIndex j) { return j; },
        [&](JobIndex j) { return ends_in_time(j) || WholeNeed(ctx.job(j)) <= extra; },
        [&](JobIndex j) {
          if (!ends_in_time(j)) extra -= WholeNeed(ctx.job(j));
        });
  }

 private:
  int64_t depth_;
};

class FairSharePolicy final : public Policy {
 public:
  explicit FairSharePolicy(const SchedulerSpec& spec)
      : min_runtime_ms_(spec.min_runtime_ms), half_life_ms_(static_cast<double>(spec.usage_half_life_ms)) {}
  std::string_view name() const override { return "fair-share"; }

  void Init(const PolicyEnv& env) override {
    pool_specs_ = env.cluster->pools;
    trees_.assign(env.cluster->pools.size(), {});
    leaf_of_.assign(env.cluster->pools.size(), {});
    for (size_t p = 0; p < env.cluster->pools.size(); ++p) BuildTree(env, p);
  }
  void OnPending(JobIndex j, int pool, const SchedulerContext& ctx) override {
    Tree& t = trees_[static_cast<size_t>(pool)];
    const int32_t leaf = leaf_of_[static_cast<size_t>(pool)][static_cast<size_t>(ctx.queue_of(j))];
    t.nodes[static_cast<size_t>(leaf)].pending.insert(j);
  }
  void OnStopped(JobIndex j, int pool, const SchedulerContext& ctx) override {
    Tree& t = trees_[static_cast<size_t>(pool)];
    Decay(t, ctx.NowMs());
    const int32_t leaf = leaf_of_[static_cast<size_t>(pool)][static_cast<size_t>(ctx.queue_of(j))];
    t.nodes[static_cast<size_t>(leaf)].running.erase({-ctx.RunningSinceMs(j), j});
    AddAlloc(t, leaf, -ctx.AllocatedTicks(j));
  }
  void Schedule(SchedulerContext& ctx, int pool) override;

 private:
  struct Node {
    std::string name;
    int32_t parent = -1;
    std::vector<int32_t> children;
    int64_t guarantee = 0;  // ticks
    int64_t max = -1;       // ticks; -1: none
    double weight = 1;
    bool borrowing = true;
    int64_t alloc = 0;    // ticks held now
    double usage = 0;     // decayed tick-ms
    bool blocked = false;  // this pass
    std::set<JobIndex> pending;                       // leaves: FIFO
    std::set<std::pair<int64_t, JobIndex>> running;  // leaves: youngest run first
  };
  struct Tree {
    std::vector<Node> nodes;  // [0] is the root
    int64_t last_ms = std::numeric_limits<int64_t>::min();
  };

  void BuildTree(const PolicyEnv& env, size_t pool);
  void Decay(Tree& t, int64_t now);
  static void AddAlloc(Tree& t, int32_t leaf, int64_t ticks) {
    for (int32_t n = leaf; n >= 0; n = t.nodes[static_cast<size_t>(n)].parent) t.nodes[static_cast<size_t>(n)].alloc += ticks;
  }
  // True if the subtree has a leaf with pending jobs not blocked this pass.
  bool Candidate(const Tree& t, int32_t n) const;
  int32_t PickLeaf(const Tree& t) const;
  bool Reclaim(SchedulerContext& ctx, int pool, Tree& t, JobIndex j);

  int64_t min_runtime_ms_;
  double half_life_ms_;
  std::vector<PoolSpec> pool_specs_;
  std::vector<Tree> trees_;
  std::vector<std::vector<int32_t>> leaf_of_;  // [pool][job queue] -> node
};

void FairSharePolicy::BuildTree(const PolicyEnv& env, size_t pool) {
  Tree& t = trees_[pool];
  const ClusterSpec& cluster = *env.cluster;
  const int64_t capacity = cluster.pools[pool].gpus() * kTicksPerGpu;
  Node root;
  root.name = "root";
  root.guarantee = capacity;
  t.nodes.push_back(std::move(root));
  std::map<std::string, int32_t> by_name;
  std::vector<int64_t> configured(1, -1);
  for (const QueueSpec& q : cluster.queues) {
    Node n;
    n.name = q.name;
    n.weight = q.weight;
    n.borrowing = q.borrowing;
    n.max = q.max_gpus < 0 ? -1 : q.max_gpus * kTicksPerGpu;
    by_name[q.name] = static_cast<int32_t>(t.nodes.size());
    configured.push_back(q.guaranteed_gpus < 0 ? -1 : std::min(capacity, q.guaranteed_gpus * kTicksPerGpu));
    t.nodes.push_back(std::move(n));
  }
  for (size_t i = 0; i < cluster.queues.size(); ++i) {
    const std::string& parent = cluster.queues[i].parent;
    t.nodes[i + 1].parent = parent.empty() ? 0 : by_name.at(parent);
  }
  auto& leaf_of = leaf_of_[pool];
  leaf_of.assign(env.queue_names.size(), 0);
  for (int32_t q : env.pool_queues[pool]) {
    const std::string& name = env.queue_names[static_cast<size_t>(q)];
    auto it = by_name.find(name);
    if (it != by_name.end()) {
      leaf_of[static_cast<size_t>(q)] = it->second;
      continue;
    }
    Node n;
    n.name = name;
    n.parent = 0;
    by_name[name] = static_cast<int32_t>(t.nodes.size());
    leaf_of[static_cast<size_t>(q)] = static_cast<int32_t>(t.nodes.size());
    configured.push_back(-1);
    t.nodes.push_back(std::move(n));
  }
  for (size_t i = 1; i < t.nodes.size(); ++i) {
    t.nodes[static_cast<size_t>(t.nodes[i].parent)].children.push_back(static_cast<int32_t>(i));
  }
  // Guarantees top-down (parents precede children in a breadth-first walk).
  std::vector<int32_t> walk{0};
  for (size_t w = 0; w < walk.size(); ++w) {
    Node& parent = t.nodes[static_cast<size_t>(walk[w])];
    int64_t left = parent.guarantee;
    int64_t unset = 0;
    for (int32_t c : parent.children) {
      if (configured[static_cast<size_t>(c)] >= 0) {
        t.nodes[static_cast<size_t>(c)].guarantee = configured[static_cast<size_t>(c)];
        left -= configured[static_cast<size_t>(c)];
      } else {
        ++unset;
      }
    }
    left = std::max<int64_t>(left, 0);
    for (int32_t c : parent.children) {
      if (configured[static_cast<size_t>(c)] < 0) t.nodes[static_cast<size_t>(c)].guarantee = left / unset;
      walk.push_back(c);
    }
  }
}

void FairSharePolicy::Decay(Tree& t, int64_t now) {
  if (t.last_ms == std::numeric_limits<int64_t>::min()) t.last_ms = now;
  if (now <= t.last_ms) return;
  const double dt = static_cast<double>(now - t.last_ms);
  const double f = std::exp2(-dt / half_life_ms_);
  const double integral_scale = half_life_ms_ / std::log(2.0) * (1.0 - f);
  for (Node& n : t.nodes) n.usage = n.usage * f + static_cast<double>(n.alloc) * integral_scale;
  t.last_ms = now;
}

bool FairSharePolicy::Candidate(const Tree& t, int32_t n) const {
  const Node& node = t.nodes[static_cast<size_t>(n)];
  if (node.children.empty()) return !node.blocked && !node.pending.empty();
  return std::any_of(node.children.begin(), node.children.end(), [&](int32_t c) { return Candidate(t, c); });
}

int32_t FairSharePolicy::PickLeaf(const Tree& t) const {
  int32_t at = 0;
  while (!t.nodes[static_cast<size_t>(at)].children.empty()) {
    int32_t best = -1;
    std::tuple<int, double, double, int32_t> best_key;
    for (int32_t c : t.nodes[static_cast<size_t>(at)].children) {
      if (!Candidate(t, c)) continue;
      const Node& n = t.nodes[static_cast<size_t>(c)];
      // Queues under their guarantee first, least filled first; then the borrowers. Ties,
      // and the borrowers, go by decayed usage per weight: recent heavy users wait.
      const bool over = n.alloc >= n.guarantee;
      const double usage = n.usage / n.weight;
      const double share = over ? usage
                                : static_cast<double>(n.alloc) / static_cast<double>(std::max<int64_t>(n.guarantee, 1));
      std::tuple<int, double, double, int32_t> key{over ? 1 : 0, share, usage, c};
      if (best < 0 || key < best_key) {
        best = c;
        best_key = key;
      }
    }
    if (best < 0) return -1;
    at = best;
  }
  return at == 0 ? -1 : at;
}

bool FairSharePolicy::Reclaim(SchedulerContext& ctx, int pool, Tree& t, JobIndex j) {
  // Borrowers: leaves holding more than their guarantee, the most over first.
  std::vector<int32_t> borrowers;
  for (size_t i = 1; i < t.nodes.size(); ++i) {
    const Node& n = t.nodes[i];
    if (n.children.empty() && n.alloc > n.guarantee) borrowers.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(borrowers.begin(), borrowers.end(), [&](int32_t a, int32_t b) {
    const Node& x = t.nodes[static_cast<size_t>(a)];
    const Node& y = t.nodes[static_cast<size_t>(b)];
    return x.alloc - x.guarantee > y.alloc - y.guarantee;
  });
  std::vector<JobIndex> order;
  for (int32_t b : borrowers) {
    for (const auto& [neg_since, v] : t.nodes[static_cast<size_t>(b)].running) order.push_back(v);
  }
  std::map<int32_t, int64_t> spare;
  for (int32_t b : borrowers) spare[b] = t.nodes[static_cast<size_t>(b)].alloc - t.nodes[static_cast<size_t>(b)].guarantee;
  const int32_t self = leaf_of_[static_cast<size_t>(pool)][static_cast<size_t>(ctx.queue_of(j))];
  const auto victims = ChooseVictims(ctx, pool, WholeNeed(ctx.job(j)), order, [&](JobIndex v) {
    const int32_t leaf = leaf_of_[static_cast<size_t>(pool)][static_cast<size_t>(ctx.queue_of(v))];
    if (leaf == self || !RanLongEnough(ctx, v, min_runtime_ms_)) return false;
    int64_t& s = spare[leaf];
    if (s <= 0) return false;
    s -= ctx.AllocatedTicks(v);
    return true;
  });
  if (victims.empty()) {
    WakeWhenEligible(ctx, pool, order, min_runtime_ms_);
    return false;
  }
  for (JobIndex v : victims) ctx.Preempt(v);
  return ctx.TryStart(j);
}

void FairSharePolicy::Schedule(SchedulerContext& ctx, int pool) {
  Tree& t = trees_[static_cast<size_t>(pool)];
  Decay(t, ctx.NowMs());
  for (Node& n : t.nodes) n.blocked = false;
  while (true) {
    const int32_t leaf = PickLeaf(t);
    if (leaf < 0) return;
    Node& node = t.nodes[static_cast<size_t>(leaf)];
    const JobIndex j = *node.pending.begin();
    const int64_t need = AllocatedTicksFor(pool_specs_[static_cast<size_t>(pool)], ctx.job(j));
    bool allowed = true;
    bool within_guarantee = node.alloc + need <= node.guarantee;
    for (int32_t a = leaf; a > 0; a = t.nodes[static_cast<size_t>(a)].parent) {
      const Node& an = t.nodes[static_cast<size_t>(a)];
      if (an.max >= 0 && an.alloc + need > an.max) allowed = false;
      if (!an.borrowing && an.alloc + need > an.guarantee) allowed = false;
    }
    bool started = allowed && ctx.TryStart(j);
    if (!started && allowed && within_guarantee) started = Reclaim(ctx, pool, t, j);
    if (!started) {
      node.blocked = true;
      continue;
    }
    node.pending.erase(node.pending.begin());
    node.running.insert({-ctx.RunningSinceMs(j), j});
    AddAlloc(t, leaf, ctx.AllocatedTicks(j));
  }
}

}  // namespace

std::vector<std::string> PolicyNames() {
  return {"fifo", "firstfit", "priority", "sjf", "srtf", "fair-share", "backfill", "las"};
}

Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const SchedulerSpec& spec) {
  SchedulerSpec with = spec;
  const size_t colon = name.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view base = name.substr(0, colon);
    if (base != "sjf" && base != "srtf") {
      return InvalidArgument(fmt::format("policy '{}': only sjf and srtf take a duration estimate", name));
    }
    GPULEDGER_ASSIGN_OR_RETURN(with.duration_estimate, ParseDurationEstimate(name.substr(colon + 1)));
    name = base;
  }
  if (name == "fifo") return std::unique_ptr<Policy>(new FifoPolicy());
  if (name == "firstfit") return std::unique_ptr<Policy>(new FirstFitPolicy());
  if (name == "priority") return std::unique_ptr<Policy>(new PriorityPolicy(with));
  if (name == "sjf") return std::unique_ptr<Policy>(new SjfPolicy(with));
  if (name == "srtf") return std::unique_ptr<Policy>(new SrtfPolicy(with));
  if (name == "fair-share") return std::unique_ptr<Policy>(new FairSharePolicy(with));
  if (name == "backfill" || name == "gang") return std::unique_ptr<Policy>(new BackfillPolicy(with));
  if (name == "las") return std::unique_ptr<Policy>(new LasPolicy(with));
  return InvalidArgument(
      fmt::format("unknown policy '{}' (fifo, firstfit, priority, sjf, srtf, fair-share, backfill, las)", name));
}

}  // namespace gpuledger::sim
