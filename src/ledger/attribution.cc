#include "ledger/attribution.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

namespace gpuledger::ledger {
namespace {

// What the samples around each sample say about why its idle time was idle.
struct SampleCause {
  bool held = false;        // no process, or inside a long stretch without work
  bool checkpoint = false;  // inside a recurring stretch of one to fifteen minutes
};

std::vector<SampleCause> ClassifySamples(const DeviceTimeline& t) {
  const auto& s = t.samples;
  const IdleCauseRules& rules = t.idle_rules;
  std::vector<SampleCause> out(s.size());
  struct Run {
    size_t first, last;
    int64_t begin_ms, end_ms;
  };
  std::vector<Run> runs;
  auto idle = [&](const Sample& x) {
    return IsAvailable(x.health) && x.ActivityRatio().value_or(0.0) <= rules.idle_activity;
  };
  for (size_t i = 0; i < s.size();) {
    if (!idle(s[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < s.size() && idle(s[j + 1]) && s[j + 1].t_ms - s[j].t_ms <= t.staleness_ms) ++j;
    bool covered_before = i > 0 && s[i].t_ms - s[i - 1].t_ms <= t.staleness_ms;
    runs.push_back({i, j, covered_before ? s[i - 1].t_ms : s[i].t_ms, s[j].t_ms});
    i = j + 1;
  }
  auto checkpoint_sized = [&](const Run& r) {
    int64_t len = r.end_ms - r.begin_ms;
    return len >= rules.checkpoint_min_ms && len < rules.held_idle_ms;
  };
  for (size_t k = 0; k < runs.size(); ++k) {
    const Run& r = runs[k];
    bool held = r.end_ms - r.begin_ms >= rules.held_idle_ms;
    bool recurring = false;
    if (!held && checkpoint_sized(r)) {
      for (size_t m = 0; m < runs.size() && !recurring; ++m) {
        recurring = m != k && checkpoint_sized(runs[m]) &&
                    std::llabs(runs[m].begin_ms - r.begin_ms) <= rules.checkpoint_peer_ms;
      }
    }
    for (size_t i = r.first; i <= r.last; ++i) {
      out[i].held = held;
      out[i].checkpoint = recurring;
    }
  }
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i].process_count && *s[i].process_count == 0) out[i].held = true;
  }
  return out;
}

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
                   SampleCause why, const std::vector<int64_t>& jobs, const DeviceTimeline& t,
                   const std::function<void(const Piece&)>& sink) {
  double ratio = std::clamp(s.ActivityRatio().value_or(0.0), 0.0, 1.0);
  bool coarse = !s.sm_active.has_value();
  auto f = [&](int64_t x) {
    return static_cast<int64_t>(std::llround(static_cast<double>(x - anchor) * ratio));
  };
  int64_t len = to - from;
  int64_t active = std::clamp<int64_t>(f(to) - f(from), 0, len);
  int64_t idle = len - active;
  // The idle part's causes: a held or checkpoint stretch is all of one cause; a working
  // sample's idle is input stall for the share its short gaps explain, the rest other.
  auto emit_idle = [&](int64_t job, int64_t ms) {
    if (ms == 0) return;
    if (why.held || why.checkpoint) {
      sink(Piece{minute, job, Bucket::kAllocatedIdle, ms, coarse,
                 why.held ? IdleCause::kHeldIdle : IdleCause::kCheckpointStall});
      return;
    }
    int64_t input = 0;
    if (s.gaps && s.gaps->interval_ms > 0) {
      double expected_idle = (1.0 - ratio) * static_cast<double>(s.gaps->interval_ms);
      double share = expected_idle > 0
                         ? std::min(1.0, static_cast<double>(s.gaps->short_idle_ms) / expected_idle)
                         : 0.0;
      input = std::clamp<int64_t>(std::llround(static_cast<double>(ms) * share), 0, ms);
    }
    if (input) sink(Piece{minute, job, Bucket::kAllocatedIdle, input, coarse, IdleCause::kInputStall});
    if (ms - input) {
      sink(Piece{minute, job, Bucket::kAllocatedIdle, ms - input, coarse, IdleCause::kOther});
    }
  };
  if (jobs.size() == 1) {
    if (active) sink(Piece{minute, jobs[0], Bucket::kActive, active, coarse});
    emit_idle(jobs[0], idle);
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
    emit_idle(jobs[k], idle_split[k]);
  }
}

// Attributes [from, to), covered by sample `s` whose coverage starts at `anchor`.
void AttributeCovered(int64_t from, int64_t to, int64_t anchor, const Sample& s, SampleCause why,
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
      AttributeHeld(minute, cursor, cut, anchor, s, why, jobs, t, sink);
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
  std::vector<SampleCause> causes = ClassifySamples(t);
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
    AttributeCovered(from, to, prev, samples[i], causes[i], t, sink);
    cursor = to;
  }
  if (cursor < t.span.end_ms) {
    EmitByMinute(cursor, t.span.end_ms, 0, Bucket::kUnmonitored, false, sink);
  }
}

}  // namespace gpuledger::ledger
