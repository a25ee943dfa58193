#include "ledger/attribution.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace gpuledger::ledger {
namespace {

// Emits `ms` of one bucket over [from, to), cut at minute boundaries.
void EmitByMinute(int64_t from, int64_t to, int64_t job_id, Bucket bucket, bool coarse,
                  const std::function<void(const Piece&)>& sink) {
  while (from < to) {
    int64_t minute = FloorTo(from, kMsPerMinute);
    int64_t end = std::min(to, minute + kMsPerMinute);
    sink(Piece{minute, job_id, bucket, end - from, coarse});
    from = end;
  }
}

// Splits one covered piece [from, to) (inside one minute, one allocation set) held by
// `jobs` among them. Active time is F(to) - F(from) with F(x) = round(ratio x (x -
// anchor)), anchor being the start of the sample's coverage: the pieces telescope, so
// however a sample's span is cut (by minutes, hours, windows) its active time adds up
// to the same total.
void AttributeHeld(int64_t minute, int64_t from, int64_t to, int64_t anchor, const Sample& s,
                   const std::vector<int64_t>& jobs, const DeviceTimeline& t,
                   const std::function<void(const Piece&)>& sink) {
  double ratio = std::clamp(s.ActivityRatio().value_or(0.0), 0.0, 1.0);
  bool coarse = !s.sm_active.has_value();
  auto f = [&](int64_t x) {
    return static_cast<int64_t>(std::llround(static_cast<double>(x - anchor) * ratio));
  };
  int64_t len = to - from;
  int64_t active = std::clamp<int64_t>(f(to) - f(from), 0, len);
  int64_t idle = len - active;
  if (jobs.size() == 1) {
    if (active) sink(Piece{minute, jobs[0], Bucket::kActive, active, coarse});
    if (idle) sink(Piece{minute, jobs[0], Bucket::kAllocatedIdle, idle, coarse});
    return;
  }
  std::vector<double> sm(jobs.size(), 0.0), mem(jobs.size(), 0.0);
  for (const ProcessSample& p : s.processes) {
    int64_t id = t.job_id_of ? t.job_id_of(p.job_id) : 0;
    auto it = std::find(jobs.begin(), jobs.end(), id);
    if (it == jobs.end()) continue;  // an unattributed process: its share is not a job's
    size_t k = static_cast<size_t>(it - jobs.begin());
    sm[k] += p.sm_share.value_or(0.0);
    mem[k] += p.fb_used_mib;
  }
  std::vector<int64_t> active_split = ApportionInteger(active, sm);
  std::vector<int64_t> idle_split = ApportionInteger(idle, mem);
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (active_split[k]) sink(Piece{minute, jobs[k], Bucket::kActive, active_split[k], coarse});
    if (idle_split[k]) sink(Piece{minute, jobs[k], Bucket::kAllocatedIdle, idle_split[k], coarse});
  }
}

// Attributes [from, to), covered by sample `s` whose coverage starts at `anchor`.
void AttributeCovered(int64_t from, int64_t to, int64_t anchor, const Sample& s,
                      const DeviceTimeline& t,
                      const std::function<void(const Piece&)>& sink) {
  if (!IsAvailable(s.health)) {
    EmitByMinute(from, to, 0, Bucket::kUnavailable, false, sink);
    return;
  }
  // Cut points: minute boundaries and allocation edges inside [from, to).
  std::vector<int64_t> cuts;
  for (const auto& a : t.allocations) {
    if (a.from_ms > from && a.from_ms < to) cuts.push_back(a.from_ms);
    if (a.to_ms && *a.to_ms > from && *a.to_ms < to) cuts.push_back(*a.to_ms);
  }
  for (int64_t m = FloorTo(from, kMsPerMinute) + kMsPerMinute; m < to; m += kMsPerMinute) {
    cuts.push_back(m);
  }
  cuts.push_back(to);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());

  std::vector<int64_t> jobs;
  int64_t cursor = from;
  for (int64_t cut : cuts) {
    jobs.clear();
    for (const auto& a : t.allocations) {
      if (a.from_ms <= cursor && (!a.to_ms || *a.to_ms > cursor) &&
          std::find(jobs.begin(), jobs.end(), a.job_id) == jobs.end()) {
        jobs.push_back(a.job_id);
      }
    }
    int64_t minute = FloorTo(cursor, kMsPerMinute);
    if (jobs.empty()) {
      sink(Piece{minute, 0, Bucket::kUnallocated, cut - cursor, false});
    } else {
      AttributeHeld(minute, cursor, cut, anchor, s, jobs, t, sink);
    }
    cursor = cut;
  }
}

}  // namespace

int64_t StalenessLimitMs(const Device& d, int64_t override_ms) {
  if (override_ms > 0) return override_ms;
  if (d.sample_interval_ms > 0) return std::min(3 * d.sample_interval_ms, store::kMaxStalenessMs);
  return store::kMaxStalenessMs;
}

void Attribute(const DeviceTimeline& t, const std::function<void(const Piece&)>& sink) {
  // Start at the last sample at or before the span's start minus the limit.
  std::span<const Sample> samples = t.samples;
  auto first = std::lower_bound(samples.begin(), samples.end(), t.span.begin_ms - t.staleness_ms,
                                [](const Sample& s, int64_t v) { return s.t_ms < v; });
  size_t start = static_cast<size_t>(first - samples.begin());
  int64_t cursor = t.span.begin_ms;
  for (size_t i = start > 0 ? start : 1; i < samples.size() && cursor < t.span.end_ms; ++i) {
    int64_t prev = samples[i - 1].t_ms, cur = samples[i].t_ms;
    if (cur <= cursor || cur - prev > t.staleness_ms) continue;
    int64_t from = std::max(prev, cursor);
    int64_t to = std::min(cur, t.span.end_ms);
    if (from >= to) continue;
    if (from > cursor) EmitByMinute(cursor, from, 0, Bucket::kUnmonitored, false, sink);
    AttributeCovered(from, to, prev, samples[i], t, sink);
    cursor = to;
  }
  if (cursor < t.span.end_ms) {
    EmitByMinute(cursor, t.span.end_ms, 0, Bucket::kUnmonitored, false, sink);
  }
}

}  // namespace gpuledger::ledger
