#include "sim/whatif.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "sim/policy.h"
#include "sim/report.h"
#include "sim/simulator.h"

namespace gpuledger::sim {
namespace {

// The simulator's jobs and, beside each, the price of one of its GPU-hours.
struct Replayable {
  std::vector<SimJob> jobs;
  std::vector<Money> prices;
  size_t skipped = 0;
};

Replayable ToReplayable(const Workload& w, bool advised_mig) {
  Replayable out;
  out.jobs.reserve(w.jobs.size());
  for (const RecordedJob& r : w.jobs) {
    SimJob j;
    j.id = r.id;
    j.queue = r.team.empty() ? "default" : r.team;
    j.user = r.user;
    j.pool = r.pool;
    j.kind = r.kind;
    j.priority = r.priority;
    j.submit_ms = r.submit_ms;
    j.duration_ms = r.end_ms - r.start_ms;
    if (r.activity_ratio >= 0) j.activity_ratio = static_cast<float>(r.activity_ratio);
    const std::string& profile =
        advised_mig && !r.advised_mig_profile.empty() ? r.advised_mig_profile : r.mig_profile;
    if (!profile.empty()) {
      auto ticks = MigProfileTicks(profile);
      if (!ticks.ok()) {
        ++out.skipped;
        continue;
      }
      j.share_ticks = *ticks;
    } else {
      j.gpus = r.gpus;
    }
    if (j.duration_ms <= 0 || (j.gpus <= 0 && j.share_ticks <= 0)) {
      ++out.skipped;
      continue;
    }
    out.jobs.push_back(std::move(j));
    out.prices.push_back(r.price_per_gpu_hour);
  }
  return out;
}

int32_t NodeSize(int64_t gpus) {
  for (int32_t n : {8, 4, 2}) {
    if (gpus % n == 0) return n;
  }
  return 1;
}

PoolSpec PlainPool(std::string name, int64_t gpus, Money price) {
  PoolSpec p;
  p.name = std::move(name);
  p.gpus_per_node = NodeSize(gpus);
  p.nodes = static_cast<int32_t>(gpus / p.gpus_per_node);
  p.price_per_gpu_hour = price;
  return p;
}

void SetPoolGpus(PoolSpec& p, int64_t gpus) {
  p.gpus_per_node = NodeSize(gpus);
  p.nodes = static_cast<int32_t>(gpus / p.gpus_per_node);
}

double Seconds(double ms) { return ms / 1000.0; }

// Of the GPUs the jobs requested, the share started within slo_wait of submit.
double GrantedRatio(const std::vector<SimJob>& jobs, const SimResult& r, int64_t slo_wait_ms) {
  CostNumerator requested = 0, granted = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    requested += jobs[i].RequestTicks();
    const JobOutcome& o = r.outcomes[i];
    if (o.start_ms >= 0 && o.start_ms - jobs[i].submit_ms <= slo_wait_ms)
      granted += jobs[i].RequestTicks();
  }
  return requested == 0 ? 1.0 : static_cast<double>(granted) / static_cast<double>(requested);
}

Result<SimResult> Replay(const ClusterSpec& cluster, const std::vector<SimJob>& jobs,
                         const std::string& policy, int64_t slo_wait_ms, double slo_target) {
  ClusterSpec c = cluster;
  c.scheduler.slo_wait_ms = slo_wait_ms;
  c.scheduler.slo_target_ratio = slo_target;
  SimOptions so;
  so.keep_job_outcomes = true;
  return Simulate(c, jobs, policy, so);
}

ScenarioFigures Figures(std::string label, const std::string& policy, const ClusterSpec& cluster,
                        const Replayable& work, const SimResult& r, const Workload& w,
                        const WhatIfOptions& o) {
  ScenarioFigures f;
  f.label = std::move(label);
  f.policy = policy;
  f.gpus = cluster.TotalGpus();
  f.span_ms = std::max(w.window.end_ms, r.end_ms) - w.window.begin_ms;
  CostNumerator allocated = 0, tick_ms = 0;
  double active = 0;
  bool any_active = false;
  for (size_t i = 0; i < work.jobs.size(); ++i) {
    const JobOutcome& out = r.outcomes[i];
    allocated += static_cast<CostNumerator>(out.allocated_tick_ms) * work.prices[i].micros();
    tick_ms += out.allocated_tick_ms;
    if (work.jobs[i].activity_ratio >= 0) {
      any_active = true;
      active += static_cast<double>(out.allocated_tick_ms) * work.jobs[i].activity_ratio;
    }
  }
  f.allocated_cost = RoundCost(allocated);
  CostNumerator fleet = 0;
  for (const PoolSpec& p : cluster.pools) {
    fleet += CostOf(w.window.length_ms(), p.gpus() * kShareScale, p.price_per_gpu_hour);
  }
  f.fleet_cost = RoundCost(fleet);
  f.allocated_gpu_hours =
      static_cast<double>(tick_ms) / kShareScale / static_cast<double>(kMsPerHour);
  const double capacity = static_cast<double>(f.gpus) * kShareScale *
                          static_cast<double>(std::max<int64_t>(f.span_ms, 1));
  f.allocated_ratio = static_cast<double>(tick_ms) / capacity;
  if (any_active) f.active_ratio = active / capacity;
  f.wait_mean_s = Seconds(r.wait.mean_ms);
  f.wait_p95_s = Seconds(static_cast<double>(r.wait.p95_ms));
  f.slo_granted_ratio = GrantedRatio(work.jobs, r, o.slo_wait_ms);
  f.slo_met = f.slo_granted_ratio >= o.slo_target_ratio;
  f.slo_wait_ms = o.slo_wait_ms;
  f.slo_target_ratio = o.slo_target_ratio;
  f.completed = r.completed;
  f.jobs = r.jobs;
  for (const QueueSummary& q : r.queues) {
    f.teams.push_back({q.name, q.jobs, Seconds(q.wait.mean_ms),
                       Seconds(static_cast<double>(q.wait.p95_ms)), Seconds(q.completion.mean_ms),
                       Seconds(static_cast<double>(q.completion.p95_ms))});
  }
  return f;
}

std::string Gpus(int64_t n) { return fmt::format("{} GPU{}", n, n == 1 ? "" : "s"); }

std::string SloText(const WhatIfOptions& o) {
  return fmt::format("{:.0f}% of requested GPUs started within {}", o.slo_target_ratio * 100.0,
                     HumanDuration(o.slo_wait_ms));
}

// The smallest fleet, pool by pool, meeting the SLO; the pools that cannot are kept.
struct FleetNeed {
  ClusterSpec cluster;
  bool all_met = true;
};

Result<FleetNeed> SmallestFleet(const ClusterSpec& cluster, const std::vector<SimJob>& jobs,
                                const std::string& policy, const WhatIfOptions& o) {
  FleetNeed need{cluster, true};
  for (size_t p = 0; p < cluster.pools.size(); ++p) {
    GPULEDGER_ASSIGN_OR_RETURN(
        auto gpus,
        SmallestPoolMeetingSlo(cluster, p, jobs, policy, o.slo_wait_ms, o.slo_target_ratio));
    if (gpus) {
      SetPoolGpus(need.cluster.pools[p], *gpus);
    } else {
      need.all_met = false;
    }
  }
  return need;
}

std::string MoneyDelta(Money from, Money to) {
  const Money d = to - from;
  return d < Money() ? fmt::format("{} less", (Money() - d).ToDisplay())
                     : fmt::format("{} more", d.ToDisplay());
}

std::string FleetFinding(const std::string& what, const FleetNeed& base, const FleetNeed& alt,
                         Money base_cost, Money alt_cost, const WhatIfOptions& o) {
  if (!base.all_met || !alt.all_met) {
    return fmt::format("{}: some pool cannot meet the SLO ({}) at any size the search tried", what,
                       SloText(o));
  }
  const int64_t b = base.cluster.TotalGpus(), a = alt.cluster.TotalGpus();
  return fmt::format(
      "{}: the SLO ({}) needs {} instead of {} ({} {}), costing {} instead of {} over the window "
      "({})",
      what, SloText(o), Gpus(a), Gpus(b), Gpus(std::llabs(a - b)), a <= b ? "fewer" : "more",
      alt_cost.ToDisplay(), base_cost.ToDisplay(), MoneyDelta(base_cost, alt_cost));
}

// A fleet's GPUs over the window at their pools' prices.
Money FleetCost(const ClusterSpec& c, int64_t window_ms) {
  CostNumerator fleet = 0;
  for (const PoolSpec& p : c.pools)
    fleet += CostOf(window_ms, p.gpus() * kShareScale, p.price_per_gpu_hour);
  return RoundCost(fleet);
}

std::string WaitFinding(const std::string& what, const ScenarioFigures& base,
                        const ScenarioFigures& alt) {
  return fmt::format(
      "{}: mean wait {} -> {}, p95 wait {} -> {}; allocated utilization {:.1f}% -> {:.1f}%; "
      "allocated cost {} -> {}",
      what, HumanDuration(static_cast<int64_t>(base.wait_mean_s * 1000)),
      HumanDuration(static_cast<int64_t>(alt.wait_mean_s * 1000)),
      HumanDuration(static_cast<int64_t>(base.wait_p95_s * 1000)),
      HumanDuration(static_cast<int64_t>(alt.wait_p95_s * 1000)), base.allocated_ratio * 100,
      alt.allocated_ratio * 100, base.allocated_cost.ToDisplay(), alt.allocated_cost.ToDisplay());
}

struct Context {
  const Workload& w;
  const WhatIfOptions& o;
  ClusterSpec base_cluster;
  Replayable work;
  ScenarioFigures base;
};

// An answer with its question and title, the baseline as its first scenario.
WhatIfAnswer Begin(const Context& c, WhatIfQuestion q, std::string title) {
  WhatIfAnswer a;
  a.question = q;
  a.title = std::move(title);
  a.scenarios.push_back(c.base);
  return a;
}

Result<WhatIfAnswer> AnswerPools(Context& c) {
  WhatIfAnswer a = Begin(c, WhatIfQuestion::kPools, "");
  ClusterSpec alt;
  alt.name = "alt";
  std::vector<SimJob> jobs = c.work.jobs;
  if (c.base_cluster.pools.size() > 1) {
    a.title = fmt::format("Merge the {} pools into one", c.base_cluster.pools.size());
    CostNumerator price_weighted = 0;
    for (const PoolSpec& p : c.base_cluster.pools)
      price_weighted += static_cast<CostNumerator>(p.gpus()) * p.price_per_gpu_hour.micros();
    const int64_t gpus = c.base_cluster.TotalGpus();
    alt.pools.push_back(
        PlainPool("merged", gpus, Money::FromMicros(static_cast<int64_t>(price_weighted / gpus))));
    for (SimJob& j : jobs) j.pool.clear();
    a.assumptions.push_back(
        "merged: one pool of all the GPUs at their capacity-weighted mean price; every job may run "
        "on any GPU");
  } else {
    a.title = "Separate training and serving into their own pools";
    // Split the one pool's GPUs by the GPU time each side asked for.
    const PoolSpec& only = c.base_cluster.pools.front();
    double train = 0, total = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const double held =
          static_cast<double>(jobs[i].RequestTicks()) * static_cast<double>(jobs[i].duration_ms);
      total += held;
      if (jobs[i].kind == JobKind::kTraining || jobs[i].kind == JobKind::kBatch) train += held;
    }
    const int64_t gpus = only.gpus();
    int64_t train_gpus =
        total == 0 ? gpus / 2 : std::llround(train / total * static_cast<double>(gpus));
    train_gpus = std::clamp<int64_t>(train_gpus, 1, std::max<int64_t>(1, gpus - 1));
    PoolSpec t = PlainPool("training", train_gpus, only.price_per_gpu_hour);
    t.kinds = {"training", "batch"};
    PoolSpec s =
        PlainPool("serving", std::max<int64_t>(1, gpus - train_gpus), only.price_per_gpu_hour);
    alt.pools = {t, s};
    for (SimJob& j : jobs) j.pool.clear();
    a.assumptions.push_back(
        fmt::format("separated: {} for training and batch jobs, {} for serving, notebooks and the "
                    "rest, in proportion to the GPU "
                    "time each side asked for",
                    Gpus(t.gpus()), Gpus(s.gpus())));
  }
  GPULEDGER_ASSIGN_OR_RETURN(
      SimResult r, Replay(alt, jobs, c.o.baseline_policy, c.o.slo_wait_ms, c.o.slo_target_ratio));
  Replayable alt_work{jobs, c.work.prices, 0};
  a.scenarios.push_back(Figures(alt.pools.size() == 1 ? "merged" : "separated", c.o.baseline_policy,
                                alt, alt_work, r, c.w, c.o));
  a.findings.push_back(WaitFinding(a.title, a.scenarios[0], a.scenarios[1]));
  GPULEDGER_ASSIGN_OR_RETURN(FleetNeed base_need,
                             SmallestFleet(c.base_cluster, c.work.jobs, c.o.baseline_policy, c.o));
  GPULEDGER_ASSIGN_OR_RETURN(FleetNeed alt_need,
                             SmallestFleet(alt, jobs, c.o.baseline_policy, c.o));
  const int64_t window = c.w.window.length_ms();
  a.findings.push_back(FleetFinding("GPUs needed, recorded layout against " + a.scenarios[1].label,
                                    base_need, alt_need, FleetCost(base_need.cluster, window),
                                    FleetCost(alt_need.cluster, window), c.o));
  return a;
}

Result<WhatIfAnswer> AnswerMig(Context& c) {
  WhatIfAnswer a = Begin(c, WhatIfQuestion::kMig,
                         "Move serving and notebook jobs onto the MIG slices right-sizing advises");
  Replayable mig = ToReplayable(c.w, true);
  size_t moved = 0;
  std::map<int, bool> pools_with_slices;
  ClusterSpec alt = c.base_cluster;
  for (size_t i = 0; i < c.w.jobs.size(); ++i) {
    if (c.w.jobs[i].advised_mig_profile.empty()) continue;
    ++moved;
  }
  for (const SimJob& j : mig.jobs) {
    if (j.is_fractional()) pools_with_slices[alt.RoutePool(j)] = true;
  }
  for (const auto& [p, yes] : pools_with_slices) {
    if (p < 0) continue;
    alt.pools[static_cast<size_t>(p)].sharing = Sharing::kMig;
    alt.pools[static_cast<size_t>(p)].mig_layout = c.o.mig_layout;
  }
  std::string layout;
  for (int32_t s : c.o.mig_layout) layout += fmt::format("{}{}g", layout.empty() ? "" : "+", s);
  a.assumptions.push_back(
      fmt::format("{} jobs have MIG advice; they ask for that slice instead of what they asked "
                  "for; every GPU of a pool that takes "
                  "them is cut {} (re-partitioning is free and instant; a whole-GPU job needs a "
                  "GPU with no slice in use)",
                  moved, layout));
  a.assumptions.push_back(
      "a job on a slice runs as long as it ran on its GPU, and its slice is priced at its share of "
      "the GPU");
  GPULEDGER_ASSIGN_OR_RETURN(SimResult r, Replay(alt, mig.jobs, c.o.baseline_policy,
                                                 c.o.slo_wait_ms, c.o.slo_target_ratio));
  a.scenarios.push_back(Figures("on MIG slices", c.o.baseline_policy, alt, mig, r, c.w, c.o));
  const ScenarioFigures& b = a.scenarios[0];
  const ScenarioFigures& m = a.scenarios[1];
  const double freed_hours = b.allocated_gpu_hours - m.allocated_gpu_hours;
  const double span_h = static_cast<double>(b.span_ms) / static_cast<double>(kMsPerHour);
  a.findings.push_back(
      fmt::format("{} of {} allocated GPU-hours freed ({:.1f} GPUs on average over the window): "
                  "allocated cost {} -> {}, {}",
                  fmt::format("{:.1f}", freed_hours), fmt::format("{:.1f}", b.allocated_gpu_hours),
                  span_h > 0 ? freed_hours / span_h : 0.0, b.allocated_cost.ToDisplay(),
                  m.allocated_cost.ToDisplay(), MoneyDelta(b.allocated_cost, m.allocated_cost)));
  a.findings.push_back(WaitFinding("Waiting on MIG slices", b, m));
  GPULEDGER_ASSIGN_OR_RETURN(FleetNeed base_need,
                             SmallestFleet(c.base_cluster, c.work.jobs, c.o.baseline_policy, c.o));
  GPULEDGER_ASSIGN_OR_RETURN(FleetNeed alt_need,
                             SmallestFleet(alt, mig.jobs, c.o.baseline_policy, c.o));
  a.findings.push_back(FleetFinding("GPUs needed with the slices", base_need, alt_need,
                                    FleetCost(base_need.cluster, c.w.window.length_ms()),
                                    FleetCost(alt_need.cluster, c.w.window.length_ms()), c.o));
  return a;
}

Result<WhatIfAnswer> AnswerPolicy(Context& c) {
  WhatIfAnswer a = Begin(c, WhatIfQuestion::kPolicy,
                         fmt::format("Another policy instead of {}", c.o.baseline_policy));
  for (const std::string& policy : c.o.other_policies) {
    GPULEDGER_ASSIGN_OR_RETURN(SimResult r, Replay(c.base_cluster, c.work.jobs, policy,
                                                   c.o.slo_wait_ms, c.o.slo_target_ratio));
    a.scenarios.push_back(Figures(policy, policy, c.base_cluster, c.work, r, c.w, c.o));
    const ScenarioFigures& s = a.scenarios.back();
    a.findings.push_back(WaitFinding(policy + " against " + c.o.baseline_policy, c.base, s));
    for (const TeamFigures& t : s.teams) {
      auto base_team = std::find_if(c.base.teams.begin(), c.base.teams.end(),
                                    [&](const TeamFigures& x) { return x.team == t.team; });
      if (base_team == c.base.teams.end()) continue;
      a.findings.push_back(
          fmt::format("  team {} under {}: mean wait {} -> {}, mean completion {} -> {}", t.team,
                      policy, HumanDuration(static_cast<int64_t>(base_team->wait_mean_s * 1000)),
                      HumanDuration(static_cast<int64_t>(t.wait_mean_s * 1000)),
                      HumanDuration(static_cast<int64_t>(base_team->completion_mean_s * 1000)),
                      HumanDuration(static_cast<int64_t>(t.completion_mean_s * 1000))));
    }
  }
  a.assumptions.push_back(
      "the same pools and jobs; the team is the fair-share queue, with even guarantees; "
      "a preempted job resumes from where it stopped, at no cost");
  return a;
}

Result<WhatIfAnswer> AnswerFleet(Context& c) {
  WhatIfAnswer a = Begin(c, WhatIfQuestion::kFleet, "A smaller or larger fleet");
  GPULEDGER_ASSIGN_OR_RETURN(FleetNeed need,
                             SmallestFleet(c.base_cluster, c.work.jobs, c.o.baseline_policy, c.o));
  GPULEDGER_ASSIGN_OR_RETURN(SimResult r, Replay(need.cluster, c.work.jobs, c.o.baseline_policy,
                                                 c.o.slo_wait_ms, c.o.slo_target_ratio));
  a.scenarios.push_back(
      Figures("smallest meeting the SLO", c.o.baseline_policy, need.cluster, c.work, r, c.w, c.o));
  const ScenarioFigures& b = a.scenarios[0];
  const ScenarioFigures& s = a.scenarios[1];
  FleetNeed recorded{c.base_cluster, true};
  a.findings.push_back(FleetFinding("Fleet", recorded, need, b.fleet_cost, s.fleet_cost, c.o));
  for (size_t p = 0; p < need.cluster.pools.size(); ++p) {
    a.findings.push_back(
        fmt::format("  pool {}: {} recorded, {} needed", need.cluster.pools[p].name,
                    Gpus(c.base_cluster.pools[p].gpus()), Gpus(need.cluster.pools[p].gpus())));
  }
  a.findings.push_back(WaitFinding("At that size", b, s));
  a.assumptions.push_back(
      "each pool is searched on its own, in whole nodes, for the fewest GPUs at which its jobs "
      "meet "
      "the SLO; the search assumes more GPUs never make the SLO worse");
  return a;
}

}  // namespace

std::vector<SimJob> SimJobsFromWorkload(const Workload& w, bool advised_mig, size_t* skipped) {
  Replayable r = ToReplayable(w, advised_mig);
  if (skipped != nullptr) *skipped = r.skipped;
  return std::move(r.jobs);
}

ClusterSpec ClusterFromWorkload(const Workload& w) {
  ClusterSpec c;
  c.name = "recorded";
  for (const RecordedPool& p : w.pools) {
    if (p.gpus > 0)
      c.pools.push_back(
          PlainPool(p.name.empty() ? "default" : p.name, p.gpus, p.price_per_gpu_hour));
  }
  return c;
}

std::string_view WhatIfQuestionName(WhatIfQuestion q) {
  switch (q) {
    case WhatIfQuestion::kPools:
      return "pools";
    case WhatIfQuestion::kMig:
      return "mig";
    case WhatIfQuestion::kPolicy:
      return "policy";
    case WhatIfQuestion::kFleet:
      return "fleet";
  }
  return "pools";
}

Result<WhatIfQuestion> ParseWhatIfQuestion(std::string_view text) {
  for (WhatIfQuestion q : {WhatIfQuestion::kPools, WhatIfQuestion::kMig, WhatIfQuestion::kPolicy,
                           WhatIfQuestion::kFleet}) {
    if (WhatIfQuestionName(q) == text) return q;
  }
  return InvalidArgument(
      fmt::format("unknown what-if question '{}' (pools, mig, policy, fleet)", text));
}

Result<std::optional<int64_t>> SmallestPoolMeetingSlo(const ClusterSpec& cluster, size_t pool,
                                                      const std::vector<SimJob>& jobs,
                                                      const std::string& policy,
                                                      int64_t slo_wait_ms,
                                                      double slo_target_ratio) {
  ClusterSpec one;
  one.name = cluster.name;
  one.scheduler = cluster.scheduler;
  one.queues = cluster.queues;
  one.pools = {cluster.pools[pool]};
  std::vector<SimJob> mine;
  int64_t widest = 1;
  for (const SimJob& j : jobs) {
    if (cluster.RoutePool(j) != static_cast<int>(pool)) continue;
    mine.push_back(j);
    mine.back().pool = one.pools.front().name;
    widest = std::max<int64_t>(widest, j.gpus);
  }
  const int64_t node = cluster.pools[pool].gpus_per_node;
  auto meets = [&](int64_t nodes) -> Result<bool> {
    one.pools.front().nodes = static_cast<int32_t>(nodes);
    GPULEDGER_ASSIGN_OR_RETURN(SimResult r,
                               Replay(one, mine, policy, slo_wait_ms, slo_target_ratio));
    return GrantedRatio(mine, r, slo_wait_ms) >= slo_target_ratio;
  };
  if (mine.empty()) return std::optional<int64_t>(node);
  int64_t lo =
      std::max<int64_t>(1, (widest + node - 1) / node);  // fewer could not run the widest job
  int64_t hi = std::max<int64_t>(lo, cluster.pools[pool].nodes);
  const int64_t max_nodes = kMaxPoolGpus / node;
  while (true) {
    GPULEDGER_ASSIGN_OR_RETURN(bool ok, meets(hi));
    if (ok) break;
    if (hi >= max_nodes) return std::optional<int64_t>();
    lo = hi + 1;
    hi = std::min(max_nodes, hi * 2);
  }
  while (lo < hi) {  // the smallest of lo..hi that meets it; hi does
    const int64_t mid = lo + (hi - lo) / 2;
    GPULEDGER_ASSIGN_OR_RETURN(bool ok, meets(mid));
    if (ok) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return std::optional<int64_t>(hi * node);
}

Result<WhatIfReport> WhatIf(const Workload& w, const WhatIfOptions& o) {
  WhatIfReport report;
  report.window = w.window;
  Context c{w, o, ClusterFromWorkload(w), ToReplayable(w, false), {}};
  if (c.base_cluster.pools.empty())
    return FailedPrecondition("the ledger records no GPU pool in the window");
  if (c.work.jobs.empty())
    return FailedPrecondition("the ledger records no job that started in the window");
  for (const std::string& p : o.other_policies)
    GPULEDGER_RETURN_IF_ERROR(MakePolicy(p, SchedulerSpec()).status());
  report.jobs = c.work.jobs.size();
  report.left_out = w.left_out + c.work.skipped;
  GPULEDGER_ASSIGN_OR_RETURN(SimResult base, Replay(c.base_cluster, c.work.jobs, o.baseline_policy,
                                                    o.slo_wait_ms, o.slo_target_ratio));
  c.base = Figures(fmt::format("recorded pools, {}", o.baseline_policy), o.baseline_policy,
                   c.base_cluster, c.work, base, w, o);
  report.assumptions = {
      "replayed from what the ledger recorded: each job's requested GPUs (or the GPUs it held), "
      "its real run time "
      "and its measured activity; submitted when it was submitted (or started)",
      fmt::format("the baseline is this replay under {} on the recorded pools, not the recorded "
                  "waits, so that every "
                  "difference comes from the change alone",
                  o.baseline_policy),
      "money: a job's GPU time at what a GPU-hour of it cost in the ledger; a fleet's cost is its "
      "GPUs over the window "
      "at its pool's mean price; no locality, no failures, no preemption cost",
      fmt::format("the availability SLO: {}", SloText(o))};
  for (WhatIfQuestion q : o.questions) {
    Result<WhatIfAnswer> a = InvalidArgument("unreachable");
    switch (q) {
      case WhatIfQuestion::kPools:
        a = AnswerPools(c);
        break;
      case WhatIfQuestion::kMig:
        a = AnswerMig(c);
        break;
      case WhatIfQuestion::kPolicy:
        a = AnswerPolicy(c);
        break;
      case WhatIfQuestion::kFleet:
        a = AnswerFleet(c);
        break;
    }
    if (!a.ok()) return a.status().WithContext(fmt::format("what-if {}", WhatIfQuestionName(q)));
    report.answers.push_back(std::move(*a));
  }
  return report;
}

std::string RenderWhatIfText(const WhatIfReport& r) {
  std::string out = fmt::format("What-if on the ledger's history, {} to {}: {} jobs replayed",
                                FormatTime(r.window.begin_ms), FormatTime(r.window.end_ms), r.jobs);
  if (r.left_out > 0)
    out += fmt::format(" ({} left out: no start, end or readable request)", r.left_out);
  out += "\n";
  for (const WhatIfAnswer& a : r.answers) {
    out += fmt::format("\n== {} ({}) ==\n", a.title, WhatIfQuestionName(a.question));
    std::vector<std::pair<std::string, std::vector<std::string>>> rows;
    auto row = [&](std::string name, auto cell) {
      std::vector<std::string> cells;
      for (const auto& s : a.scenarios) cells.push_back(cell(s));
      rows.emplace_back(std::move(name), std::move(cells));
    };
    row("scenario", [](const ScenarioFigures& s) { return s.label; });
    row("GPUs", [](const ScenarioFigures& s) { return std::to_string(s.gpus); });
    row("fleet cost", [](const ScenarioFigures& s) { return s.fleet_cost.ToDisplay(); });
    row("allocated cost", [](const ScenarioFigures& s) { return s.allocated_cost.ToDisplay(); });
    row("allocated GPU-hours",
        [](const ScenarioFigures& s) { return fmt::format("{:.1f}", s.allocated_gpu_hours); });
    row("allocated utilization",
        [](const ScenarioFigures& s) { return fmt::format("{:.1f}%", s.allocated_ratio * 100); });
    row("active utilization", [](const ScenarioFigures& s) {
      return s.active_ratio ? fmt::format("{:.1f}%", *s.active_ratio * 100) : std::string("-");
    });
    row("wait mean", [](const ScenarioFigures& s) {
      return HumanDuration(static_cast<int64_t>(s.wait_mean_s * 1000));
    });
    row("wait p95", [](const ScenarioFigures& s) {
      return HumanDuration(static_cast<int64_t>(s.wait_p95_s * 1000));
    });
    row(SloLabel(a.scenarios.empty() ? 0 : a.scenarios.front().slo_wait_ms), [](const ScenarioFigures& s) {
      return SloText(s.slo_granted_ratio, s.slo_target_ratio, s.slo_met);
    });
    row("jobs completed",
        [](const ScenarioFigures& s) { return fmt::format("{}/{}", s.completed, s.jobs); });
    size_t name_w = 0;
    std::vector<size_t> widths(a.scenarios.size(), 0);
    for (const auto& [name, cells] : rows) {
      name_w = std::max(name_w, name.size());
      for (size_t i = 0; i < cells.size(); ++i) widths[i] = std::max(widths[i], cells[i].size());
    }
    for (const auto& [name, cells] : rows) {
      out += fmt::format("{:<{}}", name, name_w);
      for (size_t i = 0; i < cells.size(); ++i) out += fmt::format("  {:>{}}", cells[i], widths[i]);
      out += "\n";
    }
    for (const auto& f : a.findings) out += "- " + f + "\n";
    for (const auto& s : a.assumptions) out += "  assuming " + s + "\n";
  }
  out += "\nAssumptions:\n";
  for (const auto& s : r.assumptions) out += "- " + s + "\n";
  return out;
}

std::string RenderWhatIfJson(const WhatIfReport& r) {
  nlohmann::json doc;
  doc["window"] = {{"begin", FormatTime(r.window.begin_ms)}, {"end", FormatTime(r.window.end_ms)}};
  doc["jobs"] = r.jobs;
  doc["left_out"] = r.left_out;
  doc["assumptions"] = r.assumptions;
  doc["answers"] = nlohmann::json::array();
  for (const WhatIfAnswer& a : r.answers) {
    nlohmann::json ja{{"question", WhatIfQuestionName(a.question)},
                      {"title", a.title},
                      {"findings", a.findings},
                      {"assumptions", a.assumptions}};
    ja["scenarios"] = nlohmann::json::array();
    for (const ScenarioFigures& s : a.scenarios) {
      nlohmann::json js{{"label", s.label},
                        {"policy", s.policy},
                        {"gpus", s.gpus},
                        {"span_seconds", static_cast<double>(s.span_ms) / 1000.0},
                        {"fleet_cost", s.fleet_cost.ToString()},
                        {"allocated_cost", s.allocated_cost.ToString()},
                        {"allocated_gpu_hours", s.allocated_gpu_hours},
                        {"allocated_ratio", s.allocated_ratio},
                        {"active_ratio", s.active_ratio ? nlohmann::json(*s.active_ratio)
                                                        : nlohmann::json(nullptr)},
                        {"wait_mean_seconds", s.wait_mean_s},
                        {"wait_p95_seconds", s.wait_p95_s},
                        {"slo_granted_ratio", s.slo_granted_ratio},
                        {"slo_met", s.slo_met},
                        {"slo_wait_seconds", static_cast<double>(s.slo_wait_ms) / 1000.0},
                        {"slo_target_ratio", s.slo_target_ratio},
                        {"completed", s.completed},
                        {"jobs", s.jobs}};
      js["teams"] = nlohmann::json::array();
      for (const TeamFigures& t : s.teams) {
        js["teams"].push_back({{"team", t.team},
                               {"jobs", t.jobs},
                               {"wait_mean_seconds", t.wait_mean_s},
                               {"wait_p95_seconds", t.wait_p95_s},
                               {"completion_mean_seconds", t.completion_mean_s},
                               {"completion_p95_seconds", t.completion_p95_s}});
      }
      ja["scenarios"].push_back(std::move(js));
    }
    doc["answers"].push_back(std::move(ja));
  }
  return doc.dump(2) + "\n";
}

}  // namespace gpuledger::sim
