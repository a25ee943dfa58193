// A batch: the unit of ingest. Applied whole or not at all, identified by its id, so
// that a retry never double-charges. Its text form is wire/batch.h's v1 format.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.h"
#include "core/serving.h"
#include "core/status.h"

namespace gpuledger {

struct Batch {
  int version = 1;  // of the text format it came in
  std::string batch_id;
  std::string source;  // the node or process that sent it
  std::vector<Device> devices;
  std::vector<Job> jobs;
  std::vector<Allocation> allocations;
  std::vector<Sample> samples;
  std::vector<Progress> progress;
  // Serving engines' own figures, per serving job (from the agent's scrapes).
  std::vector<ServingSnapshot> serving;
  // FNV-1a 64 of the document's bytes when parsed from text (0 otherwise): a batch id
  // reused for different content is told apart from an honest retry.
  uint64_t content_digest = 0;
};

// Who sends a batch: the job-change history names it. A sender bound to nodes (an agent's
// token, docs/server.md "Tokens") may report only devices on those nodes, and declare only
// jobs that its batch places there (by an allocation or a process on one of its devices).
struct BatchSender {
  std::string name = "local";      // a token's name; "local" for the CLI's own imports
  std::vector<std::string> nodes;  // node names, '*' matching any run of characters; empty: any node
  bool bound() const { return !nodes.empty(); }
  bool MayReportFor(std::string_view node) const;
};

// Why a job's label or annotation `key` = `value` would be refused (ValidateBatch), or "":
// "a key contains a control character", "longer than 256 bytes (300 bytes)" (the value).
std::string JobMetadataEntryError(std::string_view key, std::string_view value);

// An entry's place in a refusal, appended to its map's path: `["team"]` (`"` and `\`
// escaped), so that `jobs[3].labels["a.b/c"]` reads unambiguously.
std::string JobMetadataKeyPath(std::string_view key);

// The longest string a batch may carry (an id, a name, a label), in bytes.
inline constexpr size_t kMaxBatchStringBytes = 256;
// The most labels a job may carry, and the most annotations (Job::labels, ::annotations).
inline constexpr size_t kMaxJobMetadataEntries = 32;
// The most bytes a job's labels and annotations may take together (keys and values).
inline constexpr size_t kMaxJobMetadataBytes = 8 * 1024;

// Checks what a batch can check alone, whether it was parsed from text or built in
// memory (the dcgm-exporter mapping, scrapes, the demo): ids present (the batch's, each
// device's uuid, job's id, allocation's device and job, sample's device, progress
// report's job), ratios within 0..1 (sm_active, sm_occupancy, tensor_active,
// dram_active, gpu_util, a process's sm_share), no NaN, infinite or negative figure,
// valid MIG shares, gap profiles that fit their interval, per-device sample times
// strictly increasing (time going backwards is an error), samples no later than now_ms
// + max_future_skew_ms, allocations with from < to and both no later than now_ms +
// max_future_skew_ms, devices referenced by samples or allocations either declared in
// the batch or left for the store to resolve. Healthy samples must carry sm_active or
// gpu_util. Every string (ids, names, labels) is at most kMaxBatchStringBytes and free of
// control characters and not in parentheses (the ledger's own keys: "(no job)",
// "(unset)", ...), as the v1 format requires, so that a batch mapped from
// remote-write or a scrape obeys the native path's rules. A refusal is kInvalidArgument
// naming the batch and the field as the v1 format spells it: "batch n7-42: samples[3].sm_active:
// must be within 0..1, not 1.5". A job's labels and annotations: at most
// kMaxJobMetadataEntries of each, kMaxJobMetadataBytes together, every key non-empty and
// every key and value following the string rules (JobMetadataEntryError); a refusal names
// the entry, `jobs[3].labels["team"]` (a bad key is not quoted: it may be huge).
Status ValidateBatch(const Batch& batch, int64_t now_ms, int64_t max_future_skew_ms = 10 * 60'000);

}  // namespace gpuledger
