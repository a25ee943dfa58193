// Scheduling policies: each a small class behind one interface. The engine owns the
// cluster and the clock; a policy owns its pending queues and decides, at each instant
// something changed in a pool, which pending jobs to start and which running jobs to
// preempt, through the SchedulerContext.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "sim/cluster.h"
#include "sim/trace.h"

namespace gpuledger::sim {

// A job's position in the simulator's submit-ordered job list: a smaller index was
// submitted earlier (ties by file order), so FIFO order is index order.
using JobIndex = uint32_t;

// What the engine offers a policy during Schedule. Only valid during that call.
class SchedulerContext {
 public:
  virtual ~SchedulerContext() = default;
  // The simulated clock; the same interface the ledger reads.
  virtual const Clock& clock() const = 0;
  int64_t NowMs() const { return clock().NowMs(); }

  virtual const SimJob& job(JobIndex j) const = 0;
  virtual int32_t queue_of(JobIndex j) const = 0;  // index into PolicyEnv::queue_names
  // Work left, in ms of run time without slowdown (the oracle a bound may use), as of
  // the job's last start or stop; constant while it runs.
  virtual int64_t RemainingMs(JobIndex j) const = 0;
  // The same at this instant: a running job's work done in its current run is taken off.
  virtual int64_t WorkLeftNowMs(JobIndex j) const = 0;
  // When the current run of a running job began, and the share it holds in ticks.
  // Both stay valid during OnStopped.
  virtual int64_t RunningSinceMs(JobIndex j) const = 0;
  virtual int32_t AllocatedTicks(JobIndex j) const = 0;

  // Places and starts a pending job of `pool` now. True if it started (the policy then
  // drops it from its queue); false, changing nothing, if it does not fit now.
  virtual bool TryStart(JobIndex j) = 0;
  // Stops a running job and gives its capacity back; its work so far is kept
  // (checkpointed) and the policy gets it back through OnPending. REQUIRES: running.
  virtual void Preempt(JobIndex j) = 0;
  // Asks for another Schedule of `pool` at `t_ms` even if nothing else happens then
  // (e.g. when a preemption victim reaches its minimum runtime).
  virtual void WakeAt(int pool, int64_t t_ms) = 0;

  virtual int32_t FreeWholeGpus(int pool) const = 0;
  // Whole GPUs a running job would give back if it stopped (0 for a shared slice).
  virtual int32_t WholeGpusHeld(JobIndex j) const = 0;
  // Running jobs of a pool by expected end (oracle), earliest first.
  virtual const std::set<std::pair<int64_t, JobIndex>>& RunningByEnd(int pool) const = 0;
};

// What a policy learns once, before the run.
struct PolicyEnv {
  const ClusterSpec* cluster = nullptr;
  std::vector<std::string> queue_names;          // interned job queues
  std::vector<std::vector<int32_t>> pool_queues;  // per pool: the queues whose jobs go there
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string_view name() const = 0;
  // What the policy knows of job durations: "oracle" (the trace's own), an estimate
  // ("user-mean", "queue-mean"), or empty when it uses none.
  virtual std::string_view durations() const { return {}; }
  virtual void Init(const PolicyEnv& env) = 0;
  // A job of `pool` becomes pending: on arrival, or after it was preempted.
  virtual void OnPending(JobIndex j, int pool, const SchedulerContext& ctx) = 0;
  // A job stopped running: it finished (RemainingMs is then 0), or it was preempted or
  // failed and will restart (then OnPending follows), or it failed for good.
  virtual void OnStopped(JobIndex j, int pool, const SchedulerContext& ctx) = 0;
  // Starts what should start in `pool` now. Called after every instant at which the
  // pool changed (arrivals, ends); may call TryStart and Preempt any number of times.
  virtual void Schedule(SchedulerContext& ctx, int pool) = 0;
};

// Makes a policy by name: "fifo", "firstfit", "priority", "sjf", "srtf", "fair-share",
// "backfill" (alias "gang"), "las". sjf and srtf take `spec.duration_estimate`, or the
// estimate named after a colon ("sjf:queue-mean", "srtf:oracle"). Fails naming the
// unknown name and listing the known ones.
Result<std::unique_ptr<Policy>> MakePolicy(std::string_view name, const SchedulerSpec& spec);
std::vector<std::string> PolicyNames();

}  // namespace gpuledger::sim
