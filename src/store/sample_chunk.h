// How raw samples are stored: packed in chunks. A chunk holds the samples of one device
// within one UTC hour that one batch brought, in time order, so a batch writes one row
// per device-hour instead of one per sample (docs/ARCHITECTURE.md, step 4).
//
// Figures keep the precision they always had in the store: ratios to 1e-4, memory to
// the MiB, power to the tenth of a watt. Each sample is a presence mask, its time as a
// delta from the one before (the first: from the chunk's first time), its health and
// its present figures, all as varints; a minute-sampled GPU takes about 20 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"

namespace gpuledger::store {

// Appends `s` to a chunk's data. `prev_t_ms` is the time of the chunk's previous sample,
// or the chunk's first time for its first sample. REQUIRES: s.t_ms >= prev_t_ms.
void AppendChunkSample(std::string& data, const Sample& s, int64_t prev_t_ms);

// Decodes a chunk whose first sample is at `first_ms`, appending to `out` the samples
// with from_ms <= t <= to_ms (device_uuid and processes left empty). False when the
// data is corrupt (then `out` may hold part of it).
bool DecodeChunk(std::string_view data, int64_t first_ms, int64_t from_ms, int64_t to_ms,
                 std::vector<Sample>& out);

// The times of a chunk's samples, for duplicate checks. False when corrupt.
bool ChunkTimes(std::string_view data, int64_t first_ms, std::vector<int64_t>& out);

}  // namespace gpuledger::store
