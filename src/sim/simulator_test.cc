#include "sim/simulator.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "core/testing/missing_component.h"
#include "sim/pool_state.h"

namespace gpuledger::sim {
namespace {

SimJob Job(std::string id, int64_t submit_s, int64_t duration_s, int32_t gpus, std::string queue = "q") {
  SimJob j;
  j.id = std::move(id);
  j.submit_ms = submit_s * 1000;
  j.duration_ms = duration_s * 1000;
  j.gpus = gpus;
  j.queue = std::move(queue);
  return j;
}

// A cluster with every sharing mode and topology slowdowns, for the property tests.
ClusterSpec MixedCluster(double slowdown, bool strict_locality = false) {
  ClusterSpec c;
  c.name = "mixed";
  c.scheduler.min_runtime_ms = 5 * 60 * 1000;
  c.scheduler.timeseries_step_ms = 30 * 60 * 1000;
  PoolSpec train;
  train.name = "train";
  train.nodes = 6;
  train.gpus_per_node = 4;
  train.nodes_per_nvlink_domain = 2;
  train.nodes_per_rack = 4;
  train.price_per_gpu_hour = Money::FromMicros(2'500'000);
  train.cross_node_slowdown = slowdown;
  train.cross_domain_slowdown = 2 * slowdown;
  train.cross_rack_slowdown = 3 * slowdown;
  train.queues = {"q0", "q1"};
  train.strict_locality = strict_locality;
  PoolSpec mig;
  mig.name = "mig";
  mig.nodes = 2;
  mig.gpus_per_node = 2;
  mig.sharing = Sharing::kMig;
  mig.mig_layout = {3, 2, 1, 1};
  mig.price_per_gpu_hour = Money::FromMicros(1'000'000);
  mig.queues = {"q2"};
  PoolSpec ts;
  ts.name = "ts";
  ts.nodes = 2;
  ts.gpus_per_node = 2;
  ts.sharing = Sharing::kTimeSlicing;
  ts.timeslice_slowdown = slowdown;
  ts.price_per_gpu_hour = Money::FromMicros(1'500'000);
  ts.queues = {"q3"};
  c.pools = {train, mig, ts};
  QueueSpec q0;
  q0.name = "q0";
  q0.guaranteed_gpus = 16;
  QueueSpec q1;
  q1.name = "q1";
  q1.guaranteed_gpus = 8;
  c.queues = {q0, q1};
  return c;
}

std::vector<SimJob> RandomJobs(uint64_t seed, size_t n) {
  SyntheticSpec spec;
  spec.jobs = n;
  spec.mean_interarrival_ms = 60 * 1000;
  spec.min_duration_ms = 30 * 1000;
  spec.max_duration_ms = 6 * 3600 * 1000LL;
  spec.max_gpus = 16;
  spec.fractional_ratio = 0.3;
  spec.queues = 5;  // q4 matches no pool: unschedulable
  spec.priorities = 3;
  Trace t = SyntheticTrace(spec, seed);
  Rng rng(seed ^ 0xABCDEF);
  for (auto& j : t.jobs) {
    if (rng.Uniform() < 0.5) j.activity_ratio = static_cast<float>(rng.Uniform());
  }
  return t.jobs;
}

struct PropertyCase {
  std::string policy;
  PlacementMode placement;
};

class ConservationTest : public ::testing::TestWithParam<PropertyCase> {};

// GPU-seconds are conserved for every policy: each job's share x time is counted once,
// the jobs' sum equals the cluster's integral and its time series, every schedulable
// job ran all its work, and no job ran faster than its duration.
TEST_P(ConservationTest, GpuSecondsAreCountedExactlyOnce) {
  int64_t preemptions = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const double slowdown = seed % 2 == 0 ? 0.0 : 0.25;
    const ClusterSpec cluster = MixedCluster(slowdown, seed % 3 == 0);
    const std::vector<SimJob> jobs = RandomJobs(seed, 400);
    SimOptions options;
    options.placement = GetParam().placement;
    auto r = Simulate(cluster, jobs, GetParam().policy, options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->conservation.ok()) << "seed " << seed << ": " << r->conservation.ToString();
    EXPECT_EQ(r->completed + r->unschedulable, jobs.size());
    EXPECT_GT(r->unschedulable, 0U);  // queue q4 has no pool
    CostNumerator sum = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobOutcome& o = r->outcomes[i];
      if (o.start_ms < 0) continue;
      sum += o.allocated_tick_ms;
      const int32_t ticks = AllocatedTicksFor(cluster.pools[static_cast<size_t>(o.pool)], jobs[i]);
      ASSERT_GE(o.start_ms, jobs[i].submit_ms);
      ASSERT_GE(o.end_ms - o.start_ms, jobs[i].duration_ms) << jobs[i].id;
      // Without slowdown or preemption a job holds one share (at least what it asked;
      // under MIG maybe a larger free slice) for exactly its duration.
      if (slowdown == 0.0 && o.preemptions == 0) {
        ASSERT_EQ(o.allocated_tick_ms % jobs[i].duration_ms, 0) << jobs[i].id;
        const int64_t held = o.allocated_tick_ms / jobs[i].duration_ms;
        ASSERT_GE(held, ticks) << jobs[i].id;
        ASSERT_LE(held, jobs[i].is_fractional() ? kTicksPerGpu : ticks) << jobs[i].id;
        ASSERT_EQ(o.end_ms - o.start_ms, jobs[i].duration_ms) << jobs[i].id;
      } else {
        ASSERT_GE(o.allocated_tick_ms, static_cast<int64_t>(ticks) * jobs[i].duration_ms) << jobs[i].id;
      }
    }
    EXPECT_EQ(sum, r->allocated_tick_ms);
    CostNumerator series = 0;
    for (const auto& pool : r->timeseries.allocated_tick_ms) {
      for (int64_t v : pool) series += v;
    }
    EXPECT_EQ(series, r->allocated_tick_ms);
    EXPECT_LE(r->allocated_ratio, 1.0);
    ASSERT_TRUE(r->active_ratio.has_value());
    EXPECT_LE(*r->active_ratio, r->allocated_ratio);
    // Pool and queue money add up to the total exactly.
    Money pools, queues;
    for (const auto& p : r->pools) pools += p.cost;
    for (const auto& q : r->queues) queues += q.cost;
    EXPECT_EQ(pools, r->cost);
    EXPECT_EQ(queues, r->cost);
    preemptions += r->preemptions;
  }
  // The preempting policies did preempt, so the checks above covered resumed jobs.
  if (GetParam().policy == "priority" || GetParam().policy == "fair-share" || GetParam().policy == "las") {
    EXPECT_GT(preemptions, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryPolicy, ConservationTest,
    ::testing::Values(PropertyCase{"fifo", PlacementMode::kTopology}, PropertyCase{"fifo", PlacementMode::kSpread},
                      PropertyCase{"firstfit", PlacementMode::kTopology}, PropertyCase{"srtf", PlacementMode::kTopology},
                      PropertyCase{"sjf:queue-mean", PlacementMode::kTopology},
                      PropertyCase{"priority", PlacementMode::kTopology}, PropertyCase{"sjf", PlacementMode::kTopology},
                      PropertyCase{"fair-share", PlacementMode::kTopology},
                      PropertyCase{"fair-share", PlacementMode::kSpread},
                      PropertyCase{"backfill", PlacementMode::kTopology},
                      PropertyCase{"backfill", PlacementMode::kSpread}, PropertyCase{"las", PlacementMode::kTopology}),
    [](const ::testing::TestParamInfo<PropertyCase>& param) {
      std::string n = param.param.policy + "_" + std::string(PlacementModeName(param.param.placement));
      for (char& ch : n) {
        if (ch == '-' || ch == ':') ch = '_';
      }
      return n;
    });

TEST(SimulatorTest, IsDeterministic) {
  const ClusterSpec cluster = MixedCluster(0.25);
  const std::vector<SimJob> jobs = RandomJobs(99, 500);
  for (const auto& policy : PolicyNames()) {
    auto a = Simulate(cluster, jobs, policy, SimOptions());
    auto b = Simulate(cluster, jobs, policy, SimOptions());
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->outcomes.size(), b->outcomes.size());
    for (size_t i = 0; i < a->outcomes.size(); ++i) {
      ASSERT_EQ(a->outcomes[i].start_ms, b->outcomes[i].start_ms) << policy;
      ASSERT_EQ(a->outcomes[i].end_ms, b->outcomes[i].end_ms) << policy;
      ASSERT_EQ(a->outcomes[i].allocated_tick_ms, b->outcomes[i].allocated_tick_ms) << policy;
    }
    EXPECT_EQ(a->cost, b->cost);
    EXPECT_EQ(a->allocated_ratio, b->allocated_ratio);
  }
}

TEST(SimulatorTest, PoliciesPreemptOnlyWhereTheyMay) {
  const ClusterSpec cluster = MixedCluster(0.0);
  const std::vector<SimJob> jobs = RandomJobs(5, 600);
  for (const char* policy : {"fifo", "firstfit", "sjf", "sjf:user-mean", "backfill"}) {
    auto r = Simulate(cluster, jobs, policy, SimOptions());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->preemptions, 0) << policy;
  }
}

TEST(SimulatorTest, ShortestJobFirstBeatsFifoOnMeanWait) {
  const ClusterSpec cluster = UniformCluster(2, 4, Money::FromUnits(1));
  SyntheticSpec spec;
  spec.jobs = 2000;
  spec.mean_interarrival_ms = 5 * 60 * 1000;
  spec.max_gpus = 4;
  const Trace t = SyntheticTrace(spec, 3);
  auto fifo = Simulate(cluster, t.jobs, "fifo", SimOptions());
  auto sjf = Simulate(cluster, t.jobs, "sjf", SimOptions());
  auto backfill = Simulate(cluster, t.jobs, "backfill", SimOptions());
  ASSERT_TRUE(fifo.ok() && sjf.ok() && backfill.ok());
  EXPECT_LT(sjf->wait.mean_ms, fifo->wait.mean_ms);
  EXPECT_LE(backfill->wait.mean_ms, fifo->wait.mean_ms);
  // The same work is done whatever the order.
  EXPECT_EQ(fifo->allocated_tick_ms, sjf->allocated_tick_ms);
}

TEST(SimulatorTest, FairShareGivesIdleQueuesTheirShare) {
  // Queue "big" floods the pool first; "small" arrives later. Unconfigured queues split
  // the pool evenly, so "small" reclaims its half instead of waiting for the flood.
  ClusterSpec cluster = UniformCluster(1, 8, Money::FromUnits(1));
  cluster.scheduler.min_runtime_ms = 60 * 1000;
  std::vector<SimJob> jobs;
  for (int i = 0; i < 16; ++i) jobs.push_back(Job("big" + std::to_string(i), 0, 3600, 1, "big"));
  for (int i = 0; i < 4; ++i) jobs.push_back(Job("small" + std::to_string(i), 600, 600, 1, "small"));
  auto fifo = Simulate(cluster, jobs, "fifo", SimOptions());
  auto fair = Simulate(cluster, jobs, "fair-share", SimOptions());
  ASSERT_TRUE(fifo.ok() && fair.ok());
  for (size_t i = 16; i < 20; ++i) {
    EXPECT_EQ(fair->outcomes[i].start_ms, 600'000) << i;
    EXPECT_EQ(fifo->outcomes[i].start_ms, 7'200'000) << i;  // behind two waves of "big"
  }
  EXPECT_EQ(fair->preemptions, 4);
  auto small = std::find_if(fair->queues.begin(), fair->queues.end(), [](const QueueSummary& q) { return q.name == "small"; });
  ASSERT_NE(small, fair->queues.end());
  EXPECT_TRUE(small->slo_met);
}

TEST(SimulatorTest, FairShareServesTheQueueWithLessRecentUsageFirst) {
  // One GPU. "heavy" ran an hour; then "heavy" and "light" each queue a job, heavy's
  // first. FIFO runs heavy's first; fair-share prefers light, whose decayed usage is 0.
  ClusterSpec cluster = UniformCluster(1, 1, Money::FromUnits(1));
  std::vector<SimJob> jobs = {Job("h0", 0, 3600, 1, "heavy"), Job("h1", 100, 60, 1, "heavy"),
                              Job("l1", 200, 60, 1, "light")};
  auto fifo = Simulate(cluster, jobs, "fifo", SimOptions());
  auto fair = Simulate(cluster, jobs, "fair-share", SimOptions());
  ASSERT_TRUE(fifo.ok() && fair.ok());
  EXPECT_EQ(fifo->outcomes[1].start_ms, 3'600'000);
  EXPECT_EQ(fifo->outcomes[2].start_ms, 3'660'000);
  EXPECT_EQ(fair->outcomes[2].start_ms, 3'600'000);
  EXPECT_EQ(fair->outcomes[1].start_ms, 3'660'000);
  EXPECT_EQ(fair->preemptions, 0);  // both queues are over their half-GPU guarantee
}

TEST(SimulatorTest, HierarchicalCeilingLimitsAQueue) {
  ClusterSpec cluster = UniformCluster(1, 8, Money::FromUnits(1));
  QueueSpec org;
  org.name = "org";
  org.max_gpus = 3;
  QueueSpec team;
  team.name = "team";
  team.parent = "org";
  cluster.queues = {org, team};
  std::vector<SimJob> jobs;
  for (int i = 0; i < 4; ++i) jobs.push_back(Job("t" + std::to_string(i), 0, 100, 1, "team"));
  auto r = Simulate(cluster, jobs, "fair-share", SimOptions());
  ASSERT_TRUE(r.ok());
  // The parent's ceiling of 3 GPUs holds the fourth job back although 5 GPUs are free.
  EXPECT_EQ(r->outcomes[3].start_ms, 100'000);
  EXPECT_EQ(r->outcomes[2].start_ms, 0);
  // A job larger than the ceiling can never run: reported as starved, not lost.
  jobs.push_back(Job("wide", 0, 100, 4, "team"));
  r = Simulate(cluster, jobs, "fair-share", SimOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->starved, 1U);
  EXPECT_EQ(r->completed, 4U);
  EXPECT_TRUE(r->conservation.ok()) << r->conservation.ToString();
}

TEST(SimulatorTest, RejectsBrokenClusters) {
  ClusterSpec cluster = UniformCluster(1, 8, Money::FromUnits(1));
  cluster.pools[0].nodes_per_rack = 0;
  auto r = Simulate(cluster, {Job("a", 0, 10, 1)}, "fifo", SimOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pool 'main'"), std::string::npos);
  cluster = UniformCluster(1, 8, Money::FromUnits(1));
  cluster.pools[0].sharing = Sharing::kMig;
  EXPECT_FALSE(Simulate(cluster, {Job("a", 0, 10, 1)}, "fifo", SimOptions()).ok());
}

TEST(SimulatorTest, RejectsMalformedJobs) {
  const ClusterSpec cluster = UniformCluster(1, 8, Money::FromUnits(1));
  std::vector<SimJob> jobs = {Job("ok", 0, 10, 1), Job("bad", 0, 0, 1)};
  auto r = Simulate(cluster, jobs, "fifo", SimOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job 'bad'"), std::string::npos);
  jobs[1] = Job("half", 0, 10, 0);
  r = Simulate(cluster, jobs, "fifo", SimOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job 'half'"), std::string::npos);
  EXPECT_FALSE(Simulate(cluster, jobs, "lottery", SimOptions()).ok());
}

TEST(SimulatorTest, LongRunsGetACoarserTimeSeries) {
  // Ten years at one-hour steps would be 87,600 steps: the step doubles to two hours.
  const ClusterSpec cluster = UniformCluster(1, 8, Money::FromUnits(1));
  std::vector<SimJob> jobs = {Job("first", 0, 7200, 2), Job("last", 10 * 365 * 86400LL, 3600, 1)};
  auto r = Simulate(cluster, jobs, "fifo", SimOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->timeseries.step_ms, 2 * kMsPerHour);
  EXPECT_LE(r->timeseries.bins(), 1U << 16);
  EXPECT_EQ(r->timeseries.allocated_tick_ms[0][0], 2 * kTicksPerGpu * 7'200'000LL);
  CostNumerator sum = 0;
  for (int64_t v : r->timeseries.allocated_tick_ms[0]) sum += v;
  EXPECT_EQ(sum, r->allocated_tick_ms);
  EXPECT_TRUE(r->conservation.ok());
}

TEST(SimulatorTest, EmptyTraceIsAnEmptyResult) {
  auto r = Simulate(UniformCluster(1, 8, Money::FromUnits(1)), {}, "fifo", SimOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->jobs, 0U);
  EXPECT_EQ(r->makespan_ms, 0);
  EXPECT_TRUE(r->conservation.ok());
}

TEST(SimulatorTest, ClockFollowsSimulatedTime) {
  // A policy sees the simulated clock through the ledger's Clock interface.
  class Recording final : public Policy {
   public:
    std::string_view name() const override { return "recording"; }
    void Init(const PolicyEnv&) override {}
    void OnPending(JobIndex j, int, const SchedulerContext&) override { pending_.push_back(j); }
    void OnStopped(JobIndex, int, const SchedulerContext&) override {}
    void Schedule(SchedulerContext& ctx, int) override {
      seen.push_back(ctx.clock().NowMs());
      for (JobIndex j : pending_) EXPECT_TRUE(ctx.TryStart(j));
      pending_.clear();
    }
    std::vector<int64_t> seen;

   private:
    std::vector<JobIndex> pending_;
  } policy;
  std::vector<SimJob> jobs = {Job("a", 5, 10, 1), Job("b", 7, 1, 1)};
  auto r = Simulate(UniformCluster(1, 8, Money::FromUnits(1)), jobs, policy, SimOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(policy.seen, (std::vector<int64_t>{5000, 7000, 8000, 15000}));
}

TEST(SimulatorTest, ReportsProgress) {
  size_t last = 0, calls = 0;
  SimOptions options;
  options.progress = [&](size_t done, size_t total) {
    EXPECT_LE(done, total);
    last = done;
    ++calls;
  };
  auto r = Simulate(UniformCluster(1, 8, Money::FromUnits(1)), RandomJobs(1, 100), "fifo", options);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(calls, 1U);
  EXPECT_EQ(last, 100U);
}

}  // namespace
}  // namespace gpuledger::sim

namespace gpuledger::sim {
namespace {

// The Philly validation of docs/simulator.md, checked for its direction, not its digits.
TEST(PhillyReplayTest, PoliciesOrderAsPublishedReplaysDo) {
  const std::string trace_path = std::string(GPULEDGER_SHARED_DATA_DIR) + "/traces/philly_pollux.csv";
  if (!std::filesystem::exists(trace_path)) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "shared trace absent: " << trace_path;
  }
  auto trace = ReadTraceFile(trace_path, TraceFormat::kPhilly, ReadOptions());
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  auto cluster = LoadClusterFile(std::string(GPULEDGER_SOURCE_DIR) + "/src/sim/testdata/philly_640.toml");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  SimOptions options;
  options.keep_job_outcomes = false;
  std::map<std::string, SimResult> runs;
  for (const char* policy : {"fifo", "sjf", "fair-share", "las"}) {
    auto r = Simulate(*cluster, trace->jobs, policy, options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->conservation.ok()) << policy << ": " << r->conservation.ToString();
    EXPECT_EQ(r->completed, trace->jobs.size());
    EXPECT_NEAR(r->gpu_hours, 978'078.47, 0.01) << policy;  // the trace's own gpu_time
    runs.emplace(policy, std::move(*r));
  }
  options.placement = PlacementMode::kSpread;
  auto spread = Simulate(*cluster, trace->jobs, "fifo", options);
  ASSERT_TRUE(spread.ok());
  // Oracle SJF and fair-share both cut FIFO's mean completion time several times over
  // (Tiresias reports up to 5.5x over its FIFO-like production baseline).
  EXPECT_LT(runs.at("sjf").completion.mean_ms * 3, runs.at("fifo").completion.mean_ms);
  EXPECT_LT(runs.at("fair-share").completion.mean_ms * 3, runs.at("fifo").completion.mean_ms);
  EXPECT_LT(runs.at("sjf").completion.mean_ms, runs.at("fair-share").completion.mean_ms);
  // LAS needs no durations and still beats FIFO by a wide margin, as Tiresias reports.
  EXPECT_LT(runs.at("las").completion.mean_ms * 3, runs.at("fifo").completion.mean_ms);
  // With locality constraints, spreading single-GPU jobs fragments nodes.
  EXPECT_GT(spread->wait.mean_ms, 2 * runs.at("fifo").wait.mean_ms);
}

}  // namespace
}  // namespace gpuledger::sim

namespace gpuledger::sim {
namespace {

// Random failures: each run of a job holding g GPUs fails at g x rate per hour; the
// failed run's work is lost, its GPU time counted as failed, and the job restarts from
// the beginning until it is out of restarts.
TEST(SimulatorTest, RandomFailuresRestartJobsAndCountFailedGpuTime) {
  const ClusterSpec cluster = UniformCluster(2, 4, Money::FromUnits(1));
  std::vector<SimJob> jobs;
  for (int i = 0; i < 40; ++i) jobs.push_back(Job("j" + std::to_string(i), i * 60, 3600, 1 + i % 4));
  SimOptions o;
  o.failure_rate_per_gpu_hour = 0.3;
  o.max_restarts = 2;
  auto a = Simulate(cluster, jobs, "fifo", o);
  auto b = Simulate(cluster, jobs, "fifo", o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->conservation.ok()) << a->conservation.ToString();
  EXPECT_GT(a->restarts, 0);
  EXPECT_GT(a->failed, 0U);  // some ran out of restarts
  EXPECT_EQ(a->completed + a->failed, jobs.size());
  EXPECT_GT(a->failed_gpu_hours, 0.0);
  EXPECT_LT(a->failed_gpu_hours, a->gpu_hours);
  int64_t restarts = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobOutcome& out = a->outcomes[i];
    restarts += out.restarts;
    EXPECT_LE(out.restarts, 2);
    if (out.status == JobStatus::kFailed) {
      EXPECT_EQ(out.restarts, 2) << jobs[i].id;
    }
    // A job that failed and restarted held its GPUs longer than its duration.
    if (out.status == JobStatus::kCompleted && out.restarts > 0) {
      EXPECT_GT(out.allocated_tick_ms, jobs[i].RequestTicks() * jobs[i].duration_ms);
      EXPECT_EQ(out.allocated_tick_ms - out.failed_tick_ms, jobs[i].RequestTicks() * jobs[i].duration_ms);
    }
    // Seeded per job and attempt: the same run twice is the same.
    EXPECT_EQ(out.end_ms, b->outcomes[i].end_ms);
  }
  EXPECT_EQ(restarts, a->restarts);
  // Without a rate nothing fails.
  auto none = Simulate(cluster, jobs, "fifo", SimOptions());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->restarts, 0);
  EXPECT_EQ(none->failed_gpu_hours, 0.0);
}

}  // namespace
}  // namespace gpuledger::sim
