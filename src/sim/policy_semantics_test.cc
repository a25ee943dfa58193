// Every policy on the same small trace, each checked against what docs/simulator.md's
// semantics table says of it: strict or scanning, preemptive or not, what it knows of
// durations. The trace is one pool of fungible GPUs (no locality, no sharing), so "a
// job fits" means "its GPUs are no more than the free ones".
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "sim/policy.h"
#include "sim/simulator.h"

namespace gpuledger::sim {
namespace {

constexpr int32_t kGpus = 4;

SimJob Job(std::string id, int64_t submit_s, int64_t duration_s, int32_t gpus, std::string queue,
           int32_t priority = 0) {
  SimJob j;
  j.id = std::move(id);
  j.submit_ms = submit_s * 1000;
  j.duration_ms = duration_s * 1000;
  j.gpus = gpus;
  j.queue = std::move(queue);
  j.priority = priority;
  return j;
}

// Distinct submit times, a wide job that blocks a strict queue, short and long small
// jobs behind it, a late high-priority job, and two queues.
std::vector<SimJob> Trace() {
  return {Job("a", 0, 100, 2, "qa"),  Job("b", 10, 100, 4, "qa"),   Job("c", 20, 10, 1, "qb"),
          Job("d", 30, 300, 1, "qb"), Job("e", 40, 20, 3, "qb", 1), Job("f", 50, 400, 1, "qa"),
          Job("g", 60, 15, 1, "qb"),  Job("h", 250, 30, 3, "qa"),   Job("i", 260, 5, 1, "qb", 1),
          Job("k", 400, 60, 2, "qb")};
}

ClusterSpec Cluster() {
  ClusterSpec c = UniformCluster(1, kGpus, Money::FromUnits(1));
  c.scheduler.min_runtime_ms = 10 * 1000;
  return c;
}

struct Replay {
  SimResult r;
  const std::vector<SimJob>* jobs;
  const SimJob& job(size_t i) const { return (*jobs)[i]; }
  const JobOutcome& at(size_t i) const { return r.outcomes[i]; }
  // GPUs free at `t` once the instant's starts and ends are done (no preemptions).
  int32_t FreeAt(int64_t t) const {
    int32_t used = 0;
    for (size_t i = 0; i < jobs->size(); ++i) {
      if (at(i).start_ms <= t && t < at(i).end_ms) used += job(i).gpus;
    }
    return kGpus - used;
  }
  // The instants at which anything started, ended or arrived.
  std::vector<int64_t> Instants() const {
    std::vector<int64_t> ts;
    for (size_t i = 0; i < jobs->size(); ++i)
      ts.insert(ts.end(), {job(i).submit_ms, at(i).start_ms, at(i).end_ms});
    std::sort(ts.begin(), ts.end());
    ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
    return ts;
  }
  // Whether job i is pending at t: submitted, not yet started.
  bool PendingAt(size_t i, int64_t t) const { return job(i).submit_ms <= t && t < at(i).start_ms; }
};

class PolicySemanticsTest : public ::testing::Test {
 protected:
  Replay RunPolicy(const std::string& policy) {
    auto r = Simulate(Cluster(), jobs_, policy, SimOptions());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    Replay run{r.ok() ? *r : SimResult(), &jobs_};
    EXPECT_TRUE(run.r.conservation.ok()) << policy << ": " << run.r.conservation.ToString();
    EXPECT_EQ(run.r.completed, jobs_.size()) << policy;
    return run;
  }
  // True if some job started before an earlier-submitted one.
  static bool SomeJobOvertook(const Replay& run) {
    for (size_t i = 0; i < run.jobs->size(); ++i) {
      for (size_t j = i + 1; j < run.jobs->size(); ++j) {
        if (run.at(j).start_ms < run.at(i).start_ms) return true;
      }
    }
    return false;
  }
  std::vector<SimJob> jobs_ = Trace();
};

TEST_F(PolicySemanticsTest, EveryPolicyIsCovered) {
  // A new policy must add its semantics to this file and to docs/simulator.md.
  EXPECT_EQ(PolicyNames(), (std::vector<std::string>{"fifo", "firstfit", "priority", "sjf", "srtf",
                                                     "fair-share", "backfill", "las"}));
}

TEST_F(PolicySemanticsTest, FifoIsStrict) {
  const Replay run = RunPolicy("fifo");
  // No job starts before an earlier-submitted one: the head blocks the queue.
  for (size_t i = 0; i + 1 < jobs_.size(); ++i) {
    EXPECT_LE(run.at(i).start_ms, run.at(i + 1).start_ms)
        << jobs_[i].id << " then " << jobs_[i + 1].id;
  }
  EXPECT_EQ(run.r.preemptions, 0);
  EXPECT_EQ(run.r.durations, "");
}

TEST_F(PolicySemanticsTest, FirstFitScansWithoutReservation) {
  const Replay run = RunPolicy("firstfit");
  // A later small job may start before an earlier one that does not fit...
  EXPECT_TRUE(SomeJobOvertook(run));
  // ...and a job waits only while it does not fit: at every instant it is pending,
  // fewer GPUs are free than it needs.
  for (size_t i = 0; i < jobs_.size(); ++i) {
    for (int64_t t : run.Instants()) {
      if (run.PendingAt(i, t)) {
        EXPECT_LT(run.FreeAt(t), jobs_[i].gpus) << jobs_[i].id << " at " << t;
      }
    }
  }
  EXPECT_EQ(run.r.preemptions, 0);
}

TEST_F(PolicySemanticsTest, BackfillNeverDelaysTheBlockedHead) {
  const Replay fifo = RunPolicy("fifo");
  const Replay run = RunPolicy("backfill");
  // The first job that has to wait (b) holds a reservation: backfilled jobs never start
  // it later than strict FIFO does. Others may pass it.
  EXPECT_EQ(jobs_[1].id, "b");
  EXPECT_GT(fifo.at(1).start_ms, jobs_[1].submit_ms);
  EXPECT_LE(run.at(1).start_ms, fifo.at(1).start_ms);
  EXPECT_TRUE(SomeJobOvertook(run));
  // Unlike firstfit, the long small job d may not start before b: it would end after
  // b's reservation and use a GPU b needs.
  EXPECT_GE(run.at(3).start_ms, run.at(1).start_ms);
  EXPECT_EQ(run.r.preemptions, 0);
  EXPECT_EQ(run.r.durations, "oracle");
}

// Shortest first, scanning: a longer job never starts while a shorter pending one that
// needs no more GPUs waits (that one would have fit too, and comes first).
void ExpectShortestFirst(const Replay& run) {
  for (size_t x = 0; x < run.jobs->size(); ++x) {
    const int64_t t = run.at(x).start_ms;
    for (size_t y = 0; y < run.jobs->size(); ++y) {
      if (y == x || !run.PendingAt(y, t)) continue;
      if (run.job(y).gpus <= run.job(x).gpus) {
        EXPECT_GE(run.job(y).duration_ms, run.job(x).duration_ms)
            << run.job(x).id << " started at " << t << " while shorter " << run.job(y).id
            << " waited";
      }
    }
  }
}

TEST_F(PolicySemanticsTest, SjfStartsShortestFirstWithoutPreempting) {
  const Replay run = RunPolicy("sjf");
  ExpectShortestFirst(run);
  EXPECT_EQ(run.r.preemptions, 0);
  EXPECT_EQ(run.r.durations, "oracle");
}

TEST_F(PolicySemanticsTest, SjfOnEstimatesSaysSoAndKnowsOnlyTheFinished) {
  const Replay run = RunPolicy("sjf:queue-mean");
  EXPECT_EQ(run.r.durations, "queue-mean");
  EXPECT_EQ(run.r.preemptions, 0);
  // On one GPU: x (100 s) runs; y (50 s) and z (10 s) arrive while nothing has finished,
  // so both are estimated at 0 and go in arrival order; the oracle runs z first.
  const std::vector<SimJob> three = {Job("x", 0, 100, 1, "q"), Job("y", 1, 50, 1, "q"),
                                     Job("z", 2, 10, 1, "q")};
  const ClusterSpec one = UniformCluster(1, 1, Money::FromUnits(1));
  auto estimated = Simulate(one, three, "sjf:queue-mean", SimOptions());
  auto oracle = Simulate(one, three, "sjf", SimOptions());
  ASSERT_TRUE(estimated.ok() && oracle.ok());
  EXPECT_EQ(estimated->outcomes[1].start_ms, 100'000);
  EXPECT_EQ(estimated->outcomes[2].start_ms, 150'000);
  EXPECT_EQ(oracle->outcomes[2].start_ms, 100'000);
  EXPECT_EQ(oracle->outcomes[1].start_ms, 110'000);
}

TEST_F(PolicySemanticsTest, SrtfPreemptsForLessWorkLeft) {
  const Replay run = RunPolicy("srtf");
  EXPECT_EQ(run.r.durations, "oracle");
  // The long jobs are preempted for short ones once they have run min_runtime.
  EXPECT_GT(run.r.preemptions, 0);
  const Replay sjf = RunPolicy("sjf");
  EXPECT_LE(run.r.completion.mean_ms, sjf.r.completion.mean_ms);
}

TEST_F(PolicySemanticsTest, PriorityIsStrictByPriorityThenArrival) {
  const Replay run = RunPolicy("priority");
  // No job starts while a job ranked before it (higher priority, or equal and earlier)
  // is pending.
  for (size_t x = 0; x < jobs_.size(); ++x) {
    const int64_t t = run.at(x).start_ms;
    for (size_t y = 0; y < jobs_.size(); ++y) {
      if (y == x || !run.PendingAt(y, t)) continue;
      const bool y_first = jobs_[y].priority > jobs_[x].priority ||
                           (jobs_[y].priority == jobs_[x].priority && y < x);
      EXPECT_FALSE(y_first) << jobs_[x].id << " started at " << t << " before " << jobs_[y].id;
    }
  }
  // e (priority 1) preempts low-priority jobs rather than wait for them.
  EXPECT_GT(run.r.preemptions, 0);
  EXPECT_EQ(run.r.durations, "");
}

TEST_F(PolicySemanticsTest, LasNeedsNoDurationsAndPreemptsTheLongServed) {
  ClusterSpec cluster = Cluster();
  cluster.scheduler.las_thresholds_gpu_ms = {60 * 1000};  // one GPU-minute
  auto r = Simulate(cluster, jobs_, "las", SimOptions());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->durations, "");
  EXPECT_GT(r->preemptions, 0);
  // k arrives at 400 with no service while f (400 s, long served) runs: it starts at once.
  EXPECT_EQ(r->outcomes[9].start_ms, jobs_[9].submit_ms);
}

TEST_F(PolicySemanticsTest, FairShareReclaimsAGuaranteeWithPreemption) {
  const Replay run = RunPolicy("fair-share");
  EXPECT_EQ(run.r.durations, "");
  // qa and qb have 2 GPUs guaranteed each; a queue under its guarantee takes GPUs back
  // from one borrowing beyond its own.
  EXPECT_GT(run.r.preemptions, 0);
}

}  // namespace
}  // namespace gpuledger::sim
