// Test-only: a naive reference model of the ledger, for the property tests. It reads the
// batches a fleet sent and, for every millisecond of every device, decides on its own
// which bucket and which job that millisecond belongs to, from the rules as the docs
// state them (docs/ARCHITECTURE.md "Attribute" and "Usage", DESIGN.md's buckets,
// docs/batch-format.md's staleness limit):
//
//   - A device is in service from the first thing it reported (its earliest sample or
//     allocation) on; before that it has no capacity at all.
//   - A millisecond t is covered by the first sample after it (at s_i > t, with s_{i-1}
//     <= t) when s_i - s_{i-1} is at most the staleness limit (the override, else 3x the
//     device's sampling interval, at most 5 minutes; 5 minutes when unknown). Otherwise
//     it is unmonitored: before the first sample, after the last, inside a long gap.
//   - Covered by an unhealthy or lost sample: unavailable.
//   - Held by no allocation ([from, to), open while to is unset): unallocated.
//   - Held: active for the activity ratio of it (SM activity, else GPU utilization, else
//     0), the rest allocated_idle. The ratio is applied to the sample's whole span and
//     rounded at each millisecond's end, so the n-th millisecond after the previous
//     sample is active when round(n x ratio) > round((n - 1) x ratio): any cut of the
//     span adds up to the same total.
//   - Several jobs holding a device at once (sharing without MIG) split its active time
//     by the SM share of their processes in the covering sample and its idle time by
//     their memory; evenly when none of them reports the figure.
//   - Capacity: a GPU is kShareScale ticks; a MIG slice its share of its parent; a MIG
//     parent what its slices leave (its unpartitioned remainder), attributed from its own
//     samples and allocations.
//   - Cost: each device-millisecond at the price book's price for the device at that
//     instant, exact (CostNumerator).
//
// Nothing here calls or mirrors ledger::Attribute: it walks time one millisecond at a
// time, which is slow and obviously right, so fleets must be tiny (a few devices, a few
// hours). Idle causes are not modelled. The ledger splits shared time into whole
// milliseconds by largest remainder per stretch, the model in exact fractions: per job,
// the two may differ by less than a millisecond per shared stretch (shared_segments).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/money.h"
#include "core/price_book.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger::reference {

// Everything the batches said about one device.
struct DeviceHistory {
  Device device;
  std::vector<Sample> samples;  // by time
  std::vector<Allocation> allocations;
  std::optional<int64_t> in_service_ms;  // empty: it never reported anything
  int64_t share_ticks = 0;               // its capacity, of kShareScale
  int64_t staleness_ms = 0;
};

// One device's time in one window.
struct DeviceUsage {
  std::array<int64_t, kBucketCount> ms{};  // exact
  // By job id (kNoJob for time held by no job); shared time in fractions of a ms.
  std::map<std::string, std::array<double, kBucketCount>> by_job;
  // Stretches (one sample, one minute, one set of jobs) in which several jobs split the
  // time; each may be rounded by the ledger by less than a millisecond per job and bucket.
  int64_t shared_segments = 0;
  std::array<CostNumerator, kBucketCount> cost{};  // exact; unpriced time adds nothing

  DeviceUsage& operator-=(const DeviceUsage& o) {
    for (size_t b = 0; b < kBucketCount; ++b) {
      ms[b] -= o.ms[b];
      cost[b] -= o.cost[b];
    }
    for (const auto& [job, v] : o.by_job) {
      for (size_t b = 0; b < kBucketCount; ++b) by_job[job][b] -= v[b];
    }
    shared_segments -= o.shared_segments;
    return *this;
  }
};

class Model {
 public:
  Model(std::span<const Batch> batches, const PriceBook& book, int64_t staleness_override_ms = 0)
      : book_(book) {
    for (const Batch& b : batches) {
      for (const Device& d : b.devices) devices_[d.uuid].device = d;
      for (const Allocation& a : b.allocations) devices_[a.device_uuid].allocations.push_back(a);
      for (const Sample& s : b.samples) devices_[s.device_uuid].samples.push_back(s);
    }
    std::map<std::string, int64_t> sliced;  // parent uuid -> ticks its slices take
    for (auto& [uuid, h] : devices_) {
      std::sort(h.samples.begin(), h.samples.end(),
                [](const Sample& x, const Sample& y) { return x.t_ms < y.t_ms; });
      for (const Sample& s : h.samples) Seen(h, s.t_ms);
      for (const Allocation& a : h.allocations) Seen(h, a.from_ms);
      if (h.device.is_mig()) {
        h.share_ticks = kShareScale * h.device.share.num / h.device.share.den;
        sliced[h.device.parent_uuid] += h.share_ticks;
      }
      int64_t interval = h.device.sample_interval_ms;
      h.staleness_ms = staleness_override_ms > 0 ? staleness_override_ms
                       : interval > 0            ? std::min(3 * interval, 5 * kMsPerMinute)
                                                 : 5 * kMsPerMinute;
    }
    for (auto& [uuid, h] : devices_) {
      if (!h.device.is_mig()) h.share_ticks = kShareScale - sliced[uuid];
    }
    for (const PriceEntry& e : book_.entries()) {
      price_edges_.insert(e.valid.begin_ms);
      price_edges_.insert(e.valid.end_ms);
    }
  }

  const std::map<std::string, DeviceHistory>& devices() const { return devices_; }

  // Each window's usage, by device uuid: one walk over every millisecond of each device
  // from its first window's start to its last window's end.
  std::vector<std::map<std::string, DeviceUsage>> Usage(std::span<const TimeRange> windows) const {
    std::set<int64_t> edges;
    for (const TimeRange& w : windows) {
      edges.insert(w.begin_ms);
      edges.insert(w.end_ms);
    }
    std::vector<std::map<std::string, DeviceUsage>> out(windows.size());
    for (const auto& [uuid, h] : devices_) {
      std::map<int64_t, DeviceUsage> at = Walk(h, edges);  // usage from the start to each edge
      for (size_t i = 0; i < windows.size(); ++i) {
        DeviceUsage u = at.at(windows[i].end_ms);
        u -= at.at(windows[i].begin_ms);
        out[i][uuid] = u;
      }
    }
    return out;
  }

  // Capacity in service during `w`, in GPU-milliseconds x kShareScale.
  int64_t InServiceTicks(const TimeRange& w) const {
    int64_t total = 0;
    for (const auto& [uuid, h] : devices_) {
      if (!h.in_service_ms) continue;
      int64_t from = std::max(w.begin_ms, *h.in_service_ms);
      if (from < w.end_ms) total += (w.end_ms - from) * h.share_ticks;
    }
    return total;
  }

  // What the capacity in service during `w` cost, exactly, however it was used.
  CostNumerator FleetCost(const TimeRange& w) const {
    CostNumerator total = 0;
    for (const auto& [uuid, h] : devices_) {
      if (!h.in_service_ms) continue;
      for (int64_t t = std::max(w.begin_ms, *h.in_service_ms); t < w.end_ms;) {
        int64_t end = std::min(w.end_ms, NextPriceEdge(t));
        if (auto price = PriceOf(h, t)) total += CostOf(end - t, h.share_ticks, *price);
        t = end;
      }
    }
    return total;
  }

 private:
  static void Seen(DeviceHistory& h, int64_t t) {
    h.in_service_ms = h.in_service_ms ? std::min(*h.in_service_ms, t) : t;
  }

  std::optional<Money> PriceOf(const DeviceHistory& h, int64_t t) const {
    return book_.PriceAt(h.device.model, h.device.pool, h.device.capacity_type, t);
  }
  // The first instant after t at which some price starts or ends.
  int64_t NextPriceEdge(int64_t t) const {
    auto it = price_edges_.upper_bound(t);
    return it == price_edges_.end() ? kForever : *it;
  }

  std::map<int64_t, DeviceUsage> Walk(const DeviceHistory& h,
                                      const std::set<int64_t>& edges) const {
    // Jobs by index: 0 is "no job", then the jobs of the device's allocations.
    std::vector<std::string> names = {std::string(kNoJob)};
    auto index_of = [&](const std::string& job) {
      return static_cast<size_t>(std::find(names.begin(), names.end(), job) - names.begin());
    };
    std::vector<size_t> held_by;  // per allocation, its job's index
    for (const Allocation& a : h.allocations) {
      if (index_of(a.job_id) == names.size()) names.push_back(a.job_id);
      held_by.push_back(index_of(a.job_id));
    }
    std::vector<std::array<double, kBucketCount>> by_job(names.size());
    DeviceUsage sum;
    std::map<int64_t, DeviceUsage> at;
    auto snapshot = [&](int64_t edge) {
      DeviceUsage& u = at[edge];
      u = sum;
      for (size_t j = 0; j < names.size(); ++j) u.by_job[names[j]] = by_job[j];
    };

    auto edge = edges.begin();
    const int64_t last = edges.empty() ? 0 : *edges.rbegin();
    const std::vector<Sample>& s = h.samples;
    size_t next = 0;  // the first sample after t
    std::optional<Money> price;
    int64_t price_until = 0;
    std::vector<size_t> jobs, segment_jobs;
    bool in_segment = false;
    size_t segment_sample = 0;
    int64_t segment_minute = 0;
    int64_t first =
        h.in_service_ms ? std::max(*h.in_service_ms, edges.empty() ? 0 : *edges.begin()) : last;
    for (int64_t t = first; t < last; ++t) {
      while (edge != edges.end() && *edge <= t) snapshot(*edge++);
      while (next < s.size() && s[next].t_ms <= t) ++next;
      if (t >= price_until) {
        price = PriceOf(h, t);
        price_until = NextPriceEdge(t);
      }
      // One millisecond in bucket b, held by the jobs in `jobs` (none: "no job").
      auto count = [&](Bucket b) {
        size_t k = static_cast<size_t>(b);
        sum.ms[k] += 1;
        if (price) sum.cost[k] += CostOf(1, h.share_ticks, *price);
      };
      bool covered =
          next >= 1 && next < s.size() && s[next].t_ms - s[next - 1].t_ms <= h.staleness_ms;
      const Sample* cover = covered ? &s[next] : nullptr;
      jobs.clear();
      if (cover != nullptr && IsAvailable(cover->health)) {
        for (size_t i = 0; i < h.allocations.size(); ++i) {
          const Allocation& a = h.allocations[i];
          bool holds = a.from_ms <= t && (!a.to_ms || t < *a.to_ms);
          if (holds && std::find(jobs.begin(), jobs.end(), held_by[i]) == jobs.end())
            jobs.push_back(held_by[i]);
        }
      }
      if (jobs.size() < 2) in_segment = false;
      if (cover == nullptr || !IsAvailable(cover->health) || jobs.empty()) {
        Bucket b = cover == nullptr              ? Bucket::kUnmonitored
                   : !IsAvailable(cover->health) ? Bucket::kUnavailable
                                                 : Bucket::kUnallocated;
        count(b);
        by_job[0][static_cast<size_t>(b)] += 1;
        continue;
      }
      double ratio = std::clamp(
          cover->sm_active ? *cover->sm_active : cover->gpu_util.value_or(0.0), 0.0, 1.0);
      int64_t n = t - s[next - 1].t_ms + 1;  // this is the n-th millisecond of the span
      auto rounded = [&](int64_t m) { return std::llround(static_cast<double>(m) * ratio); };
      bool active = rounded(n) > rounded(n - 1);
      Bucket bucket = active ? Bucket::kActive : Bucket::kAllocatedIdle;
      size_t k = static_cast<size_t>(bucket);
      count(bucket);
      if (jobs.size() == 1) {
        by_job[jobs[0]][k] += 1;
        continue;
      }
      std::sort(jobs.begin(), jobs.end());
      int64_t minute = FloorTo(t, kMsPerMinute);
      if (!in_segment || segment_sample != next || segment_minute != minute ||
          segment_jobs != jobs) {
        ++sum.shared_segments;
        in_segment = true;
        segment_sample = next;
        segment_minute = minute;
        segment_jobs = jobs;
      }
      // Active time by SM share, idle time by memory, of each job's processes.
      std::vector<double> weight(jobs.size(), 0.0);
      double total = 0;
      for (const ProcessSample& p : cover->processes) {
        auto it = std::find(jobs.begin(), jobs.end(), index_of(p.job_id));
        if (it == jobs.end()) continue;
        double w = active ? p.sm_share.value_or(0.0) : p.fb_used_mib;
        weight[static_cast<size_t>(it - jobs.begin())] += w;
        total += w;
      }
      for (size_t j = 0; j < jobs.size(); ++j) {
        by_job[jobs[j]][k] +=
            total > 0 ? weight[j] / total : 1.0 / static_cast<double>(jobs.size());
      }
    }
    while (edge != edges.end()) snapshot(*edge++);
    return at;
  }

  PriceBook book_;
  std::map<std::string, DeviceHistory> devices_;
  std::set<int64_t> price_edges_;
};

}  // namespace gpuledger::ledger::reference
