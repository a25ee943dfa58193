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
};

// Attributes every millisecond of `t.span` to exactly one bucket, calling `sink` for
// each piece; the pieces' lengths add up to t.span.length_ms() exactly.
//
// A sample at t covers [previous sample's t, t) when that gap is at most the staleness
// limit; otherwise the gap is unmonitored. Covered time is cut at minute boundaries and
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
