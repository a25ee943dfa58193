// Ingest for the server: native batch bodies (gzip or plain v1 JSON), and series from
// Prometheus (remote-write or scrape) mapped by the DCGM mapper into ledger batches,
// with the job holds they show turned into allocations.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/batch.h"
#include "core/model.h"
#include "core/status.h"
#include "core/time.h"
#include "store/store.h"
#include "wire/prometheus/dcgm_mapping.h"

namespace gpuledger::server {

class MetricsRegistry;

struct IngestLimits {
  // A request body (after decompression for gzip) larger than this is refused (413).
  size_t max_body_bytes = size_t{64} << 20;
  // A batch with more samples than this is refused whole (413).
  size_t max_samples_per_batch = 200'000;
  // Samples older than now - this are refused (a clock far off, or a replay of old data).
  int64_t max_sample_age_ms = 30 * kMsPerDay;
};

// Decodes a native ingest body: v1 batch JSON, or the same gzip-compressed (recognised by
// the gzip magic bytes, whatever the headers said). Checks the limits and that no sample
// or allocation start is older than now_ms - limits.max_sample_age_ms. Errors: kResourceExhausted for a body
// or a batch over a limit, kInvalidArgument naming the batch and JSON path otherwise.
Result<Batch> DecodeNativeBatch(std::string_view body, const IngestLimits& limits, int64_t now_ms);

// Inflates a gzip (or zlib) stream, refusing output over `max_bytes` (kResourceExhausted)
// and corrupt or truncated input (kInvalidArgument).
Result<std::string> Gunzip(std::string_view compressed, size_t max_bytes);

// Fails with kInvalidArgument, naming the field, when a sample or an allocation's start
// is older than min_t_ms.
Status CheckBatchAge(const Batch& batch, int64_t min_t_ms);

struct DcgmIngestOptions {
  prometheus::DcgmMappingConfig mapping;
  // Pool and capacity type given to devices first seen through Prometheus.
  std::string pool;
  CapacityType capacity_type = CapacityType::kOnDemand;
  // A job's allocation of a device is closed when the device has reported this long
  // without the job (or, for a device gone silent, when the clock passes it).
  int64_t hold_timeout_ms = 5 * kMsPerMinute;
};

// What one mapped request did.
struct DcgmIngestResult {
  bool applied = false;    // false: a duplicate, or nothing to apply
  bool duplicate = false;
  std::string batch_id;
  size_t samples = 0;
  size_t allocations_opened = 0;
  size_t allocations_closed = 0;
};

// Turns DcgmBatches into ledger batches and applies them through `apply`. Keeps, per
// device, the last instant applied (later points for an instant already stored are
// dropped: the first request to carry an instant wins) and, per (device, job), the open
// allocation made from the job's holds. Only allocations of jobs it makes ("k8s/...",
// "hpc/...") are managed. Thread-safe: requests are applied one at a time.
class DcgmIngestor {
 public:
  using ApplyFn = std::function<Result<store::ApplyOutcome>(const Batch&)>;

  // Fails when options.mapping is malformed (a bad label rule), naming the rule.
  static Result<std::unique_ptr<DcgmIngestor>> Create(DcgmIngestOptions options, ApplyFn apply,
                                                      MetricsRegistry* metrics);

  // Loads the open allocations and the devices' last sample times from `store`, so that
  // a restarted server continues where it stopped. REQUIRES: before any Apply.
  Status Recover(store::Store& store, int64_t now_ms);

  // Builds the batch `batch_id` (content digest `digest`) from `mapped` and applies it.
  // The batch is applied whole or not at all; on failure nothing of this ingestor's state
  // changes. `path` ("remote_write", "scrape") labels the metrics.
  Result<DcgmIngestResult> Apply(const prometheus::DcgmBatch& mapped, const std::string& batch_id,
                                 uint64_t digest, std::string_view path);

  // Closes the allocations whose device has not shown the job for hold_timeout_ms by
  // `now_ms` (devices gone silent). Applies one batch when there is anything to close.
  Result<size_t> Sweep(int64_t now_ms);

  const prometheus::DcgmMapper& mapper() const { return mapper_; }
  const DcgmIngestOptions& options() const { return options_; }

 private:
  struct Hold {
    int64_t from_ms = 0;
    int64_t last_seen_ms = 0;
  };
  using HoldKey = std::pair<std::string, std::string>;  // device uuid, job id
  struct State {
    std::map<HoldKey, Hold> open;
    std::unordered_map<std::string, int64_t> last_sample_ms;  // per device
    std::unordered_map<std::string, int64_t> interval_ms;     // per device, last known
  };
  DcgmIngestor(DcgmIngestOptions options, prometheus::DcgmMapper mapper, ApplyFn apply,
               MetricsRegistry* metrics);
  // Appends closing allocations for holds of `state` that `should_close` selects.
  size_t CloseHolds(State& state, Batch& batch,
                    const std::function<bool(const HoldKey&, const Hold&)>& should_close) const;

  // Counts ignored families and dropped points of a request that was applied.
  void CountDropped(const prometheus::DcgmBatch& mapped, std::string_view path, int64_t no_activity,
                    int64_t already_stored);

  DcgmIngestOptions options_;
  prometheus::DcgmMapper mapper_;
  ApplyFn apply_;
  MetricsRegistry* metrics_;
  std::mutex mu_;
  State state_;  // GUARDED_BY(mu_)
  std::set<std::string> ignored_seen_;  // GUARDED_BY(mu_): families counted by name
};

// "k8s/..." and "hpc/...": the jobs the DCGM mapper makes.
bool IsMappedJobId(std::string_view job_id);

}  // namespace gpuledger::server
