#include "ledger/workload.h"
#include "ledger/store_access.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "ledger/rightsizing.h"

namespace gpuledger::ledger {
namespace {

// A GPU-hour price from a usage row: its cost over the GPU-hours of `buckets`.
template <typename Buckets>
Money PricePerGpuHour(const UsageRow& row, const Buckets& buckets) {
  int64_t ticks_ms = 0;
  Money cost;
  for (Bucket b : buckets) {
    ticks_ms += row.gpu_ticks_ms[static_cast<size_t>(b)];
    cost += row.cost[static_cast<size_t>(b)];
  }
  if (ticks_ms <= 0) return Money();
  // price = cost / (ticks_ms / (kShareScale x ms per hour)), rounded half up.
  const CostNumerator num = static_cast<CostNumerator>(cost.micros()) * kShareScale * kMsPerHour;
  return Money::FromMicros(static_cast<int64_t>((num + ticks_ms / 2) / ticks_ms));
}

constexpr Bucket kAllocated[] = {Bucket::kActive, Bucket::kAllocatedIdle};

}  // namespace

Result<Workload> RecordedWorkload(Ledger& ledger, const TimeRange& asked) {
  // Every store access of the what-if lives in this function, on one snapshot.
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, internal_StoreOf(ledger).Snapshot());
  store::StoreSnapshot& store = *snap;
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, store.ListDevices());
  // The window shrinks to what the fleet recorded: from its first device in service to
  // its last sample, so that a fleet's cost is not charged for time before it existed.
  TimeRange window = asked;
  int64_t first = INT64_MAX, last = 0;
  for (const auto& d : devices) {
    first = std::min(first, d.in_service_ms);
    last = std::max(last, d.last_sample_ms);
  }
  if (first != INT64_MAX) window.begin_ms = std::max(window.begin_ms, first);
  if (last > 0) window.end_ms = std::min(window.end_ms, last);
  if (window.empty()) window = asked;
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, store.SharedJobs());
  const std::vector<store::JobRecord>& records = *shared_jobs;
  GPULEDGER_ASSIGN_OR_RETURN(auto allocations, store.AllocationsOverlapping(window));
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport by_job, internal_UsageOn(ledger, store, window, {Dimension::kJob}));
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport by_pool, internal_UsageOn(ledger, store, window, {Dimension::kPool}));
  GPULEDGER_ASSIGN_OR_RETURN(auto advice, Recommend(ledger, window));

  Workload w;
  w.window = window;
  // What the allocations say of each job: when it first held a GPU, when it let the
  // last one go, and how many distinct devices it held.
  struct Held {
    int64_t from = INT64_MAX;
    int64_t to = 0;
    std::set<int64_t> devices;
  };
  std::map<int64_t, Held> held;
  for (const auto& a : allocations) {
    Held& h = held[a.job_id];
    h.from = std::min(h.from, a.from_ms);
    h.to = std::max(h.to, a.to_ms.value_or(window.end_ms));
    h.devices.insert(a.device_id);
  }
  std::map<std::string, const UsageRow*> usage_of;
  for (const auto& row : by_job.rows) {
    if (!row.key.empty()) usage_of[row.key.front()] = &row;
  }
  std::map<std::string, std::string> advised;
  for (const auto& r : advice) {
    if (r.kind == RecommendationKind::kMigProfile && !r.mig_profile.empty())
      advised[r.job_id] = r.mig_profile;
  }
  for (const auto& rec : records) {
    auto it = held.find(rec.id);
    if (it == held.end()) continue;  // held nothing in the window
    const Job& job = rec.job;
    const Held& h = it->second;
    RecordedJob j;
    j.id = job.id;
    j.team = job.team;
    j.user = job.user;
    j.pool = job.pool;
    j.kind = job.kind;
    j.priority = job.priority;
    j.gpus = job.requested_gpus;
    j.mig_profile = job.requested_mig_profile;
    if (j.gpus == 0 && j.mig_profile.empty()) j.gpus = static_cast<int32_t>(h.devices.size());
    j.start_ms = job.start_ms.value_or(h.from);
    j.end_ms = job.end_ms.value_or(h.to);
    j.submit_ms = std::min(job.submit_ms.value_or(j.start_ms), j.start_ms);
    if (j.start_ms < window.begin_ms) continue;  // started before the window
    if (j.end_ms <= j.start_ms || (j.gpus <= 0 && j.mig_profile.empty())) {
      ++w.left_out;
      continue;
    }
    if (auto u = usage_of.find(job.id); u != usage_of.end()) {
      const UsageRow& row = *u->second;
      const int64_t active = row.gpu_ticks_ms[static_cast<size_t>(Bucket::kActive)];
      const int64_t allocated =
          active + row.gpu_ticks_ms[static_cast<size_t>(Bucket::kAllocatedIdle)];
      if (allocated > 0)
        j.activity_ratio = static_cast<double>(active) / static_cast<double>(allocated);
      j.price_per_gpu_hour = PricePerGpuHour(row, kAllocated);
    }
    if (auto a = advised.find(job.id); a != advised.end()) j.advised_mig_profile = a->second;
    w.jobs.push_back(std::move(j));
  }
  std::stable_sort(w.jobs.begin(), w.jobs.end(), [](const RecordedJob& a, const RecordedJob& b) {
    return a.start_ms < b.start_ms;
  });

  std::map<std::string, RecordedPool> pools;
  for (const auto& d : devices) {
    if (d.parent_id != 0 || d.in_service_ms >= window.end_ms)
      continue;  // a MIG slice, or not yet there
    RecordedPool& p = pools[d.device.pool];
    p.name = d.device.pool;
    if (p.gpu_model.empty()) p.gpu_model = d.device.model;
    ++p.gpus;
  }
  for (const auto& row : by_pool.rows) {
    if (row.key.empty()) continue;
    auto it = pools.find(row.key.front());
    if (it != pools.end()) it->second.price_per_gpu_hour = PricePerGpuHour(row, kAllBuckets);
  }
  for (auto& [name, p] : pools) w.pools.push_back(std::move(p));
  return w;
}

}  // namespace gpuledger::ledger
