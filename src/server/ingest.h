// Ingest for the server: native batch bodies (gzip or plain v1 JSON), and series from
// Prometheus (remote-write or scrape) mapped by the DCGM mapper into ledger batches,
// with the job holds they show turned into allocations.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/batch.h"
#include "core/model.h"
#include "core/mutex.h"
#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"
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

// Group commit for ingest (docs/server.md, "Ingest and durability"). Requests that
// arrive while a group is being applied and committed wait; then they are applied
// together in one store transaction (ledger::IngestGroup), each batch under its own
// savepoint, and made durable by one commit: one fsync for all of them. A batch that
// fails is refused with its own error and the others are applied; when the commit
// fails, every request of the group gets that error and none is applied. No request is
// answered before its group's commit returned.
//
// Leader/follower, no thread of its own: the first waiting request's thread applies and
// commits the next group while the others sleep, so a lone request on an idle server is
// committed at once. Groups run one at a time, in arrival order. Thread-safe.
class GroupCommitter {
 public:
  // What a ticket sees of its group while it is applied.
  class Group {
   public:
    // Tells groups apart (1, 2, ... in commit order).
    uint64_t id() const { return id_; }
    // Validates `batch` (ValidateBatch, with the committer's validate function) and
    // applies it under its own savepoint (ledger::IngestGroup::Apply).
    // `sender`: who sent it (ledger::IngestGroup::Apply).
    Result<store::ApplyOutcome> Apply(const Batch& batch, const BatchSender& sender = {});
    // Applies a batch the caller validated.
    Result<store::ApplyOutcome> ApplyValidated(const Batch& batch, const BatchSender& sender = {});

   private:
    friend class GroupCommitter;
    Group(GroupCommitter& committer, ledger::IngestGroup& group, uint64_t id)
        : committer_(committer), group_(group), id_(id) {}
    GroupCommitter& committer_;
    ledger::IngestGroup& group_;
    uint64_t id_;
  };

  // One request's part of a group.
  class Ticket {
   public:
    virtual ~Ticket() = default;
    // Called once inside the group, in arrival order, on the leading thread, with the
    // store's writer held: apply what the request brings through `group`.
    // Not called when the group could not be begun.
    virtual void Apply(Group& group) = 0;
    // Called once after the group's commit, before the request's thread wakes: `commit`
    // is Ok when everything Apply() had accepted is durable, else the error that undid
    // the whole group (or that kept it from beginning).
    virtual void Finish(uint64_t group_id, const Status& commit) = 0;
  };

  // Opens a group: a store transaction, and whatever lock keeps queries from seeing
  // part of it (held by the returned group until it is destroyed).
  using BeginFn = std::function<Result<std::unique_ptr<ledger::IngestGroup>>()>;
  // Checks a batch alone before it is applied (the server: ValidateBatch with its clock).
  using ValidateFn = std::function<Status(const Batch&)>;

  struct Stats {
    uint64_t groups = 0;       // groups committed or failed
    uint64_t tickets = 0;      // tickets run in them
    size_t largest_group = 0;  // most tickets in one group
  };

  // A group takes at most `max_group_tickets` waiting requests (the rest wait for the
  // next): a bound on how long one commit holds the store's writer.
  GroupCommitter(BeginFn begin, ValidateFn validate, size_t max_group_tickets = 64);

  // Runs `ticket` in a group; returns once its Finish has run.
  void Run(Ticket& ticket);

  // Validates `batch` on the calling thread (outside any lock), then applies it in a
  // group. The outcome (applied, duplicate, or the batch's own error) is returned once
  // it is durable: what Store::ApplyBatch promises, with the fsync shared.
  Result<store::ApplyOutcome> Apply(const Batch& batch, const BatchSender& sender = {});

  Stats stats() const;
  // Requests waiting for a group (not counting those of the group being applied).
  size_t queued() const;
  // Called with every group's commit status (Ok, or what undid the group), on the thread
  // that ran it, before its requests are told. Set before the first Run.
  void ObserveCommits(std::function<void(const Status&)> observe) { observe_ = std::move(observe); }

 private:
  struct Waiter {
    Ticket* ticket = nullptr;
    bool done = false;
  };
  // Applies and commits `tickets` as group `id`, then finishes them. Called with no
  // lock held, by one thread at a time.
  void RunGroup(const std::vector<Waiter*>& tickets, uint64_t id);

  BeginFn begin_;
  ValidateFn validate_;
  std::function<void(const Status&)> observe_;
  size_t max_group_tickets_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Waiter*> queue_ GUARDED_BY(mu_);
  bool leading_ GUARDED_BY(mu_) = false;  // a thread is running groups
  Stats stats_ GUARDED_BY(mu_);
};

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

// Turns DcgmBatches into ledger batches and applies them through `apply`, or in the
// groups of a GroupCommitter. Keeps, per device, the last instant applied (later points
// for an instant already stored are dropped: the first request to carry an instant
// wins) and, per (device, job), the open allocation made from the job's holds. Only
// allocations of jobs it makes ("k8s/...", "hpc/...") are managed. Thread-safe.
//
// The state a request's batch is built from is the state after every request before it
// was applied, so requests are built one at a time: with `apply`, a request waits for
// the one before to be durable; with a committer, its batch is built inside the group,
// on top of what the requests before it in the same group applied (kept apart until the
// commit: a group that fails leaves the state as it was).
class DcgmIngestor {
 public:
  using ApplyFn = std::function<Result<store::ApplyOutcome>(const Batch&, const BatchSender&)>;

  // Fails when options.mapping is malformed (a bad label rule), naming the rule.
  static Result<std::unique_ptr<DcgmIngestor>> Create(DcgmIngestOptions options, ApplyFn apply,
                                                      MetricsRegistry* metrics);
  // The same, applying through `committer` (which must outlive the ingestor).
  static Result<std::unique_ptr<DcgmIngestor>> Create(DcgmIngestOptions options,
                                                      GroupCommitter& committer,
                                                      MetricsRegistry* metrics);

  // Loads the open allocations and the devices' last sample times from the ledger, so
  // that a restarted server continues where it stopped. REQUIRES: before any Apply.
  Status Recover(ledger::Ledger& ledger, int64_t now_ms);

  // Builds the batch `batch_id` (content digest `digest`) from `mapped` and applies it.
  // The batch is applied whole or not at all; on failure nothing of this ingestor's state
  // changes. `path` ("remote_write", "scrape") labels the metrics.
  // `sender`: who sent it (an agent's token may be bound to nodes: ledger::Ledger::Ingest).
  Result<DcgmIngestResult> Apply(const prometheus::DcgmBatch& mapped, const std::string& batch_id,
                                 uint64_t digest, std::string_view path, const BatchSender& sender = {});

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
  // A batch to apply and the state it leads to.
  struct Plan {
    State next;
    Batch batch;
    bool empty = false;              // nothing to apply
    bool keep_on_duplicate = false;  // a duplicate also leads to `next` (sweeps)
    BatchSender sender;              // who sent what it applies
    DcgmIngestResult result;
    size_t closed = 0;  // sweeps: holds closed
    int64_t no_activity = 0, already_stored = 0;
  };
  using BuildFn = std::function<Plan(const State&)>;
  class PlanTicket;

  DcgmIngestor(DcgmIngestOptions options, prometheus::DcgmMapper mapper, ApplyFn apply,
               GroupCommitter* committer, MetricsRegistry* metrics);
  // Appends closing allocations for holds of `state` that `should_close` selects.
  size_t CloseHolds(State& state, Batch& batch,
                    const std::function<bool(const HoldKey&, const Hold&)>& should_close) const;
  Plan BuildRequest(const State& base, const prometheus::DcgmBatch& mapped,
                    const std::string& batch_id, uint64_t digest, std::string_view path) const;
  // Builds a plan from the current state and applies it (through apply_ or in a group);
  // the state moves to the plan's `next` only once its batch is durable. Returns the
  // plan (without `next`) with result.applied or result.duplicate set, once durable.
  Result<Plan> Run(const BuildFn& build);

  // Counts ignored families and dropped points of a request that was applied.
  void CountDropped(const prometheus::DcgmBatch& mapped, std::string_view path, int64_t no_activity,
                    int64_t already_stored) REQUIRES(mu_);

  DcgmIngestOptions options_;
  prometheus::DcgmMapper mapper_;
  ApplyFn apply_;              // without a committer
  GroupCommitter* committer_;  // or with one
  MetricsRegistry* metrics_;
  Mutex mu_;
  State state_ GUARDED_BY(mu_);  // after every durable batch
  // After the batches applied so far in group `group_` (not yet durable).
  std::optional<State> in_group_ GUARDED_BY(mu_);
  uint64_t group_ GUARDED_BY(mu_) = 0;
  std::set<std::string> ignored_seen_ GUARDED_BY(mu_);  // families counted by name
};

// "k8s/..." and "hpc/...": the jobs the DCGM mapper makes.
bool IsMappedJobId(std::string_view job_id);

}  // namespace gpuledger::server
