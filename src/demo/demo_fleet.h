// A simulated fleet for `gpuledger demo`: 43 nodes (or copies of them, DemoOptions::gpus) of 8 GPUs in training, serving and
// dev pools (one dev node split into MIG slices), and a week of realistic work: gang
// training jobs with input stalls and checkpoint gaps, diurnal and bursty serving,
// notebooks that get forgotten, batch jobs, a GPU that fails and an agent that goes
// down; and on 11 more training nodes the cases the advice is for (a 64-GPU sweep that
// needs 8, an input-bound fine-tune, checkpoint-heavy pretraining, an over-replicated
// serving deployment, a batch job holding GPUs with nothing running). Deterministic for a
// seed and a start time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/goals.h"
#include "core/price_book.h"
#include "core/time.h"

namespace gpuledger::demo {

struct DemoOptions {
  uint64_t seed = 42;
  int64_t start_ms = 0;                // must be a whole hour
  int64_t duration_ms = 7 * kMsPerDay;
  int64_t sample_interval_ms = kMsPerMinute;
  // At least this many GPUs (MIG slices not counted): the 43-node cluster (344 GPUs) is
  // copied as many times as that takes, each copy drawn with the next seed and named with a
  // prefix ("c2-trn-01", job "c2-104233"); the first keeps today's names. 0: one cluster.
  // The same teams, prices and targets for all: a larger company, not more of them.
  int64_t gpus = 0;
};

// One unit of work the fleet runs, with what the simulation knows about it.
struct DemoJob {
  Job job;
  std::vector<std::string> devices;  // uuids it holds
  int64_t from_ms = 0;
  int64_t to_ms = 0;
};

// The default start of a demo span of `duration_ms` ending before `now_ms`: the Monday
// 00:00 UTC that starts the last complete ISO week, moved back by whole weeks when the
// span is longer than a week. The same seed gives the same output all week long.
int64_t DefaultStart(int64_t now_ms, int64_t duration_ms);

class DemoFleet {
 public:
  // REQUIRES: options.start_ms is a whole hour; duration is a positive number of hours.
  explicit DemoFleet(const DemoOptions& options);
  ~DemoFleet();
  DemoFleet(const DemoFleet&) = delete;
  DemoFleet& operator=(const DemoFleet&) = delete;

  // The price book of the fleet (per GPU-hour, by model).
  PriceBook Prices() const;
  // The targets and monthly budgets the demo's config would hold: the fleet at 60%,
  // serving (which keeps headroom) at 40%, dev at 30%; a budget for every team.
  Goals FleetGoals() const;
  const std::vector<Device>& devices() const;
  const std::vector<DemoJob>& jobs() const;

  // The batches that agents would have sent for [cursor, until_ms): one per node per
  // `span_ms`, in time order (cluster by cluster when there are copies), each with the node's inventory, the jobs and allocations
  // that start or end in it (a job's end only once it has ended: an unfinished job has
  // none), and its samples. Advances the cursor by whole spans; returns nothing past the
  // end of the simulated span. The span is an hour for a store filled at once; the live
  // feed sends one per sample interval, so that the latest sample is never older than the
  // staleness limit (3 intervals) between two sends. REQUIRES: span_ms divides an hour and
  // is a multiple of the sample interval.
  std::vector<Batch> Advance(int64_t until_ms, int64_t span_ms = kMsPerHour);
  int64_t cursor_ms() const;
  int64_t end_ms() const;
  int clusters() const;  // copies of the 43-node cluster (DemoOptions::gpus)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuledger::demo
