#include "ledger/objective_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "ledger/store_access.h"

namespace gpuledger::ledger {

namespace {

// The dimension a scope's rows are keyed by; the fleet's figures are a report's total.
Dimension DimensionOf(const ObjectiveScope& scope) {
  switch (scope.of) {
    case ObjectiveScope::Of::kTeam: return Dimension::kTeam;
    case ObjectiveScope::Of::kKind: return Dimension::kKind;
    case ObjectiveScope::Of::kFleet:
    case ObjectiveScope::Of::kPool: break;
  }
  return Dimension::kPool;
}

}  // namespace

Result<UsageRow> ScopeUsage(Ledger& ledger, const ObjectiveScope& scope, const TimeRange& window) {
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport report, ledger.Usage(window, {DimensionOf(scope)}));
  if (scope.of == ObjectiveScope::Of::kFleet) return report.total;
  for (const UsageRow& row : report.rows) {
    if (row.key.size() == 1 && row.key[0] == scope.name) return row;
  }
  UsageRow empty;
  empty.key = {scope.name};
  return empty;
}

Result<std::vector<ScopeHour>> ScopeHours(Ledger& ledger, const ObjectiveScope& scope, const TimeRange& window) {
  bool fleet = scope.of == ObjectiveScope::Of::kFleet;
  std::vector<Dimension> by = fleet ? std::vector{Dimension::kHour} : std::vector{DimensionOf(scope), Dimension::kHour};
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport report, ledger.Usage(window, by));
  std::map<int64_t, UsageRow> hours;
  for (UsageRow& row : report.rows) {
    if (!fleet && row.key[0] != scope.name) continue;
    const std::string& hour_key = row.key.back();
    GPULEDGER_ASSIGN_OR_RETURN(int64_t hour, ParseTime(hour_key));
    row.key = {hour_key};
    hours[hour].Add(row);
    hours[hour].key = row.key;
  }
  std::vector<ScopeHour> out;
  out.reserve(hours.size());
  for (auto& [hour, row] : hours) out.push_back({hour, std::move(row)});
  return out;
}

Result<std::vector<HeldJob>> HeldJobs(Ledger& ledger, int64_t at_ms, int64_t look_back_ms) {
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, internal_StoreOf(ledger).Snapshot());
  store::StoreSnapshot& store = *snap;
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<store::DeviceRecord> devices, store.ListDevices());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, store.SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<store::AllocationRecord> allocations,
                             store.AllocationsOverlapping({at_ms, at_ms + 1}));
  GPULEDGER_ASSIGN_OR_RETURN(PriceBook book, store.LoadPriceBook());
  std::unordered_map<int64_t, const store::DeviceRecord*> device_by_id;
  for (const auto& d : devices) device_by_id[d.id] = &d;
  std::unordered_map<int64_t, const Job*> job_by_id;
  for (const auto& j : jobs) job_by_id[j.id] = &j.job;

  // One entry per job, and the device ranges whose samples are the evidence.
  std::map<std::string, HeldJob> held;
  std::vector<store::DeviceRange> ranges;
  std::vector<HeldJob*> range_job;
  std::map<std::string, CostNumerator> price_numerators;
  for (const store::AllocationRecord& a : allocations) {
    if (a.from_ms > at_ms || (a.to_ms && *a.to_ms <= at_ms)) continue;
    auto d = device_by_id.find(a.device_id);
    auto j = job_by_id.find(a.job_id);
    if (d == device_by_id.end() || j == job_by_id.end()) {
      return Internal(fmt::format("allocation of device {} to job {}: names no stored device or job", a.device_id,
                                  a.job_id));
    }
    const Device& dev = d->second->device;
    HeldJob& h = held[j->second->id];
    if (h.devices.empty()) {
      h.job = *j->second;
      h.held_since_ms = a.from_ms;
    }
    h.devices.push_back(dev.uuid);
    h.held_since_ms = std::min(h.held_since_ms, a.from_ms);
    h.gpus += static_cast<double>(dev.share.ticks()) / static_cast<double>(kShareScale);
    if (auto price = book.PriceAt(dev.model, dev.pool, dev.capacity_type, at_ms)) {
      price_numerators[h.job.id] += CostOf(kMsPerHour, dev.share.ticks(), *price);
    }
    ranges.push_back({a.device_id, {std::max(at_ms - look_back_ms, a.from_ms), at_ms}});
    range_job.push_back(&h);
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto samples, store.ActivityOf(ranges));
  std::map<HeldJob*, bool> seen_device;
  for (size_t i = 0; i < ranges.size(); ++i) {
    HeldJob& h = *range_job[i];
    int64_t newest = samples[i].empty() ? 0 : samples[i].back().t_ms;
    h.evidence_until_ms = seen_device[&h] ? std::min(h.evidence_until_ms, newest) : newest;
    seen_device[&h] = true;
    for (const store::ActivitySample& s : samples[i]) {
      ++h.samples;
      bool no_process = s.process_count && *s.process_count == 0;
      double activity = no_process ? 0.0 : s.activity.value_or(0.0);
      h.max_activity = std::max(h.max_activity, activity);
    }
  }
  std::vector<HeldJob> out;
  out.reserve(held.size());
  for (auto& [id, h] : held) {
    h.price_per_hour = RoundCost(price_numerators[id]);
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace gpuledger::ledger
