#include "ledger/job_activity.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "ledger/attribution.h"
#include "ledger/store_access.h"

namespace gpuledger::ledger {

Result<JobActivity> JobActivityOf(Ledger& ledger, const std::string& job_id, const TimeRange& window,
                                  int64_t step_ms, int64_t max_device_hours) {
  if (step_ms <= 0 || step_ms % kMsPerMinute != 0) return InvalidArgument("a step is a whole number of minutes");
  GPULEDGER_ASSIGN_OR_RETURN(auto snap, internal_StoreOf(ledger).Snapshot());
  GPULEDGER_ASSIGN_OR_RETURN(auto shared_jobs, snap->SharedJobs());
  const std::vector<store::JobRecord>& jobs = *shared_jobs;
  std::unordered_map<std::string, int64_t> key_to_id;
  for (const auto& j : jobs) key_to_id[j.job.id] = j.id;
  auto found = key_to_id.find(job_id);
  if (found == key_to_id.end()) return NotFound(fmt::format("job \"{}\": no such job", job_id));
  const int64_t id = found->second;

  GPULEDGER_ASSIGN_OR_RETURN(auto devices, snap->ListDevices());
  std::unordered_map<int64_t, const store::DeviceRecord*> by_id;
  std::unordered_map<int64_t, int64_t> child_ticks;
  for (const auto& d : devices) {
    by_id[d.id] = &d;
    if (d.parent_id) child_ticks[d.parent_id] += d.device.share.ticks();
  }
  // A GPU's share as the ledger counts it: a slice its own, a partitioned GPU the rest.
  auto ticks_of = [&](const store::DeviceRecord& d) {
    return d.parent_id ? d.device.share.ticks() : std::max<int64_t>(0, kShareScale - child_ticks[d.id]);
  };

  // The job's spans per device: its allocations within the window and the device's time
  // in service, up to the device's latest sample (nothing after it is measured).
  GPULEDGER_ASSIGN_OR_RETURN(auto allocations, snap->AllocationsOverlapping(window));
  struct Span {
    const store::DeviceRecord* dev;
    TimeRange span;
  };
  std::vector<Span> spans;
  for (const store::AllocationRecord& a : allocations) {
    if (a.job_id != id) continue;
    auto dev = by_id.find(a.device_id);
    if (dev == by_id.end()) return Internal(fmt::format("allocation of unknown device {}", a.device_id));
    TimeRange held{a.from_ms, a.to_ms.value_or(kForever)};
    TimeRange measured{dev->second->in_service_ms, dev->second->last_sample_ms};
    TimeRange span = window.Intersect(held).Intersect(measured);
    if (!span.empty()) spans.push_back({dev->second, span});
  }

  JobActivity out;
  out.requested = window;
  out.window = window;
  out.step_ms = step_ms;
  // The work bound: the job's latest steps whose device-hours fit.
  int64_t held_ms = 0;
  for (const Span& s : spans) held_ms += s.span.length_ms();
  if (held_ms > max_device_hours * kMsPerHour) {
    // Back from the end a step at a time while the spans from there on fit (one step at
    // least, whatever it costs).
    int64_t begin = window.end_ms;
    while (begin - step_ms >= window.begin_ms) {
      int64_t ms = 0;
      for (const Span& s : spans) ms += s.span.Intersect({begin - step_ms, window.end_ms}).length_ms();
      if (ms > max_device_hours * kMsPerHour && begin < window.end_ms) break;
      begin -= step_ms;
    }
    out.window.begin_ms = begin;
    std::vector<Span> kept;
    for (const Span& s : spans) {
      TimeRange span = s.span.Intersect(out.window);
      if (!span.empty()) kept.push_back({s.dev, span});
    }
    spans = std::move(kept);
  }
  const size_t n = static_cast<size_t>((out.window.end_ms - out.window.begin_ms + step_ms - 1) / step_ms);
  for (size_t i = 0; i < n; ++i) out.times_ms.push_back(out.window.begin_ms + static_cast<int64_t>(i) * step_ms);
  out.active_ticks_ms.assign(n, 0);
  out.idle_ticks_ms.assign(n, 0);
  if (spans.empty()) return out;

  // One read of samples and one of allocations for every span, with the context the
  // attribution needs either side (its staleness limit and the idle-cause look-around).
  std::vector<store::DeviceRange> sample_ranges, alloc_ranges;
  for (const Span& s : spans) {
    int64_t reach = StalenessLimitMs(s.dev->device, ledger.options().staleness_override_ms) + store::kIdleContextMs;
    sample_ranges.push_back({s.dev->id, {s.span.begin_ms - reach, s.span.end_ms + reach}});
    alloc_ranges.push_back({s.dev->id, s.span});
    out.device_hours += (s.span.length_ms() + kMsPerHour - 1) / kMsPerHour;
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto samples, snap->SamplesOf(sample_ranges));
  GPULEDGER_ASSIGN_OR_RETURN(auto allocs, snap->AllocationsOf(alloc_ranges));
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    const int64_t ticks = ticks_of(*s.dev);
    DeviceTimeline t{s.span, StalenessLimitMs(s.dev->device, ledger.options().staleness_override_ms), samples[i],
                     allocs[i], [&](const std::string& key) {
                       auto it = key_to_id.find(key);
                       return it == key_to_id.end() ? int64_t{0} : it->second;
                     }};
    Attribute(t, [&](const Piece& p) {
      if (p.job_id != id) return;
      size_t step = static_cast<size_t>((p.minute_ms - out.window.begin_ms) / step_ms);
      if (p.minute_ms < out.window.begin_ms || step >= n) return;  // REQUIRES keeps pieces inside
      if (p.bucket == Bucket::kActive) out.active_ticks_ms[step] += p.ms * ticks;
      if (p.bucket == Bucket::kAllocatedIdle) out.idle_ticks_ms[step] += p.ms * ticks;
    });
  }
  return out;
}

}  // namespace gpuledger::ledger
