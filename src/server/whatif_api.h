// GET /api/v1/whatif?days=14 (admin): `gpuledger whatif`'s answer for the ledger's last N
// days of recorded jobs (ledger/workload.h replayed by the simulator, src/sim): separate
// or merged pools, MIG slices, other policies, a smaller or larger fleet, each in money,
// utilization and waiting, with its assumptions. The server does not link the simulator:
// the CLI injects it (ServerOptions::what_if). Internal to the server library.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <tuple>

#include "core/mutex.h"
#include "core/status.h"
#include "core/workload.h"
#include "server/api.h"

namespace gpuledger::server {

// The bounds of one what-if (docs/server.md "Limits").
inline constexpr int64_t kMaxWhatIfDays = 30;
inline constexpr int64_t kDefaultWhatIfDays = 14;
inline constexpr size_t kMaxWhatIfJobs = 20'000;  // recorded jobs one replay takes

// Answers what-ifs one at a time, and keeps the latest answer per window for as long as
// the data has not moved on: a dashboard refreshing every 30 seconds replays nothing
// again. Thread-safe: any request thread may call Reply; while one replay runs, another
// request for a different window is refused (503), not queued, so what-ifs cannot tie
// up the server's threads.
class WhatIfService {
 public:
  // `answer` replays a recorded workload and returns the what-if document (JSON text,
  // sim::RenderWhatIfJson); it may take seconds.
  using Answer = std::function<Result<std::string>(const Workload&)>;
  explicit WhatIfService(Answer answer) : answer_(std::move(answer)) {}

  HttpReply Reply(const QueryContext& q, const QueryParams& params);
  // Replays `w` once (no cache): the what-if document, or kUnavailable while another
  // replay runs and kResourceExhausted past kMaxWhatIfJobs jobs. For the monthly report.
  Result<std::string> Replay(const Workload& w);

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t>;  // window begin, window end, data end

  Answer answer_;
  std::mutex run_mu_;  // held (try_lock) for the length of one replay
  Mutex cache_mu_;
  Key cached_key_ GUARDED_BY(cache_mu_) = {-1, -1, -1};
  std::string cached_ GUARDED_BY(cache_mu_);  // the latest answer, for cached_key_
};

// GET /api/v1/whatif: 501 when the server was started without a what-if service.
HttpReply WhatIfReply(const QueryContext& q, const QueryParams& params, WhatIfService* service);

}  // namespace gpuledger::server
