// The native batch format, version 1: one JSON document per batch (docs/batch-format.md).
// Agents write it, the server's ingest and `gpuledger import` read it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/status.h"

namespace gpuledger::wire {

inline constexpr int kBatchVersion = 1;

// Limits that keep one batch bounded; a batch over them is rejected whole.
struct BatchLimits {
  size_t max_samples = 1'000'000;
  size_t max_devices = 100'000;
  size_t max_jobs = 100'000;
  size_t max_allocations = 100'000;
  size_t max_processes_per_sample = 1'024;
  size_t max_string_bytes = kMaxBatchStringBytes;  // core/batch.h
};

// The in-memory batch (gpuledger::Batch) is a core type: core/batch.h.
using gpuledger::Batch;

// Parses one v1 batch document. On failure the status names the batch id (when it
// could be read) and the JSON path of the offending field, e.g.
//   "batch n7-42: samples[3].sm_active: must be a number within 0..1".
// Unknown fields are rejected (a misspelt field would otherwise be silently lost).
// The returned batch is syntactically valid; ValidateBatch adds the semantic checks.
// Its content_digest is Fnv1a64(WriteBatch(batch)): over the parsed content, so the same
// batch re-serialized (whitespace, key order, 0.50 for 0.5) has the same digest.
Result<Batch> ParseBatch(std::string_view json, const BatchLimits& limits = {});

// Semantic checks of a parsed batch: gpuledger::ValidateBatch in core/batch.h.
using gpuledger::ValidateBatch;

// Writes a batch as a v1 document (compact JSON). ParseBatch(WriteBatch(b)) == b.
std::string WriteBatch(const Batch& batch);

// FNV-1a 64-bit hash of `bytes`.
uint64_t Fnv1a64(std::string_view bytes);

}  // namespace gpuledger::wire
