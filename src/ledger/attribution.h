// Attribution: how the samples and allocations of one device become bucket durations.
// A pure function of its inputs, shared by the rollup builder and by queries whose
// windows cut through an hour, so that both give the same answer to the millisecond.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/time.h"
#include "store/store.h"

namespace gpuledger::ledger {

// One attributed stretch of a device's time, inside one minute.
struct Piece {
  int64_t minute_ms = 0;  // the minute it lies in
  int64_t job_id = 0;     // 0 for unallocated, unavailable and unmonitored time
  Bucket bucket = Bucket::kUnmonitored;
  int64_t ms = 0;
  bool coarse = false;  // the activity ratio came from gpu_util, not sm_active
  IdleCause cause = IdleCause::kOther;  // for allocated_idle pieces
};

// Thresholds of the idle-cause estimate (docs/idle-causes.md).
struct IdleCauseRules {
  double idle_activity = 0.01;             // a sample at or below this did no work
  int64_t held_idle_ms = 15 * kMsPerMinute;  // a stretch this long without work is held idle
  int64_t checkpoint_min_ms = kMsPerMinute;  // shorter idle stretches are not checkpoints
  int64_t checkpoint_peer_ms = kMsPerHour;  // another within this: they recur
};

struct DeviceTimeline {
  // The span to attribute (already clipped to the device's time in service).
  TimeRange span;
  // The staleness limit: a gap between samples longer than this is unmonitored.
  int64_t staleness_ms = 0;
  // Samples by time, including those up to staleness_ms either side of the span (more
  // are allowed).
  std::span<const Sample> samples;
  // Allocations of the device that overlap the span (more are allowed).
  std::span<const store::AllocationRecord> allocations;
  // Maps a process's job key (from the agent) to a job id; 0 if unknown.
  std::function<int64_t(const std::string&)> job_id_of;
  IdleCauseRules idle_rules;
};

// Attributes every millisecond of `t.span` to exactly one bucket, calling `sink` for
// each piece; the pieces' lengths add up to t.span.length_ms() exactly.
//
// A sample at t covers [previous sample's t, t) when that gap is at most the staleness
// limit; otherwise the gap is unmonitored. Allocated-idle pieces carry their estimated
// cause, which looks at samples up to store::kIdleContextMs around them: callers pass
// samples from span.begin - staleness - kIdleContextMs to span.end + staleness +
// kIdleContextMs so that any cut of the timeline gives every piece the same cause. Covered time is cut at minute boundaries and
// allocation boundaries. In each piece: an unavailable health -> unavailable; no
// allocation -> unallocated; else active = length x activity ratio, rounded so that
// pieces of one sample's span add up exactly however the span is cut, the rest
// allocated_idle. Several jobs on one device (sharing without MIG) split active time by
// their processes' SM share and idle time by their memory, by largest remainder; with no
// per-process figures they split evenly.
void Attribute(const DeviceTimeline& t, const std::function<void(const Piece&)>& sink);

// The staleness limit of a device: `override_ms` if set (> 0), else 3x its sampling
// interval, capped at 5 minutes (5 minutes when the interval is unknown).
int64_t StalenessLimitMs(const Device& d, int64_t override_ms);

}  // namespace gpuledger::ledger
