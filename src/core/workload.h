// A recorded workload: the jobs a fleet ran, as plain data, with what their GPUs cost.
// The ledger builds it from its records (ledger/workload.h); the simulator's what-if
// replays it (sim/whatif.h). Neither library knows the other: this header is the
// contract between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/money.h"
#include "core/time.h"

namespace gpuledger {

// One job as recorded. Times are ms since the epoch; end > start >= submit.
struct RecordedJob {
  std::string id;
  std::string team;  // "" when the scheduler gave none
  std::string user;
  std::string pool;
  JobKind kind = JobKind::kUnknown;
  int32_t priority = 0;
  // The request: whole GPUs, or a MIG profile ("3g.71gb") instead.
  int32_t gpus = 0;
  std::string mig_profile;
  // The MIG profile right-sizing advises for it (serving and notebook jobs whose peak
  // memory and activity fit one); empty when there is no such advice.
  std::string advised_mig_profile;
  int64_t submit_ms = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  // active / (active + allocated_idle) over what the ledger attributed to it in the
  // window; < 0 when nothing was attributed.
  double activity_ratio = -1;
  // What one GPU-hour of what it held cost: its attributed cost / its allocated
  // GPU-hours; zero when unpriced.
  Money price_per_gpu_hour;
};

// A pool of the recorded fleet: its physical GPUs (a MIG-partitioned GPU counts once).
struct RecordedPool {
  std::string name;
  std::string gpu_model;
  int64_t gpus = 0;
  // The pool's mean price of a GPU-hour over the window (its cost / its GPU-hours).
  Money price_per_gpu_hour;
};

struct Workload {
  TimeRange window;
  std::vector<RecordedJob> jobs;  // by start time
  std::vector<RecordedPool> pools;
  size_t left_out = 0;  // recorded jobs without a start, an end or a request
};

}  // namespace gpuledger
