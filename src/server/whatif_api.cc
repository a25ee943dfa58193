#include "server/whatif_api.h"

#include <fmt/format.h>

#include "ledger/workload.h"
#include "server/query_limits.h"

namespace gpuledger::server {

HttpReply WhatIfService::Reply(const QueryContext& q, const QueryParams& params) {
  auto days = CountParam(params, "days", kDefaultWhatIfDays, 1, kMaxWhatIfDays);
  if (!days.ok()) return ErrorReply(days.status());
  // The last N days of the data (whole hours ending where the data ends), as `gpuledger
  // whatif --window Nd` takes them.
  const TimeRange window = ledger::TrailingWindow(q.now_ms, q.data_end_ms, *days * kMsPerDay);
  const Key key{window.begin_ms, window.end_ms, q.data_end_ms};
  {
    MutexLock lock(cache_mu_);
    if (cached_key_ == key) return {200, "application/json", cached_};
  }
  // Bounded before any work: reading the workload is a usage report by job over the
  // window, and the replay takes at most kMaxWhatIfJobs jobs.
  auto cost = EstimateCost(q, window, {ledger::Dimension::kJob});
  if (!cost.ok()) return ErrorReply(cost.status());
  if (Status st = CheckCost(q, *cost, false); !st.ok()) return ErrorReply(st);
  std::unique_lock run(run_mu_, std::try_to_lock);
  if (!run.owns_lock()) {
    return ErrorReply(Status(StatusCode::kUnavailable,
                             "a what-if replay is running; one runs at a time: ask again in a few seconds"));
  }
  auto workload = ledger::RecordedWorkload(q.ledger, window);
  if (!workload.ok()) return ErrorReply(workload.status());
  if (workload->jobs.size() > kMaxWhatIfJobs) {
    return ErrorReply(Status(StatusCode::kResourceExhausted,
                             fmt::format("{} recorded jobs in the last {} days: a what-if replays at most {}; ask for "
                                         "fewer days",
                                         workload->jobs.size(), *days, kMaxWhatIfJobs)));
  }
  auto body = answer_(*workload);
  if (!body.ok()) return ErrorReply(body.status());
  MutexLock lock(cache_mu_);
  cached_key_ = key;
  cached_ = *body;
  return {200, "application/json", std::move(*body)};
}

Result<std::string> WhatIfService::Replay(const Workload& w) {
  if (w.jobs.size() > kMaxWhatIfJobs) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("{} recorded jobs: a what-if replays at most {}", w.jobs.size(), kMaxWhatIfJobs));
  }
  std::unique_lock run(run_mu_, std::try_to_lock);
  if (!run.owns_lock()) {
    return Status(StatusCode::kUnavailable, "a what-if replay is running; one runs at a time: ask again in a few seconds");
  }
  return answer_(w);
}

HttpReply WhatIfReply(const QueryContext& q, const QueryParams& params, WhatIfService* service) {
  if (service == nullptr) {
    return ErrorReply(501, "not_implemented", "this server was started without the what-if replay");
  }
  return service->Reply(q, params);
}

}  // namespace gpuledger::server
