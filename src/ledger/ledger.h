// The ledger: ingest into a Store, keep its rollups current, and answer usage and
// chargeback questions with the conservation law intact.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/mutex.h"
#include "core/money.h"
#include "core/price_book.h"
#include "core/time.h"
#include "store/store.h"

namespace gpuledger::ledger {

struct LedgerOptions {
  // A fixed staleness limit for every device; 0 = per device (3x its interval, <= 5 min).
  int64_t staleness_override_ms = 0;
  // Samples later than now + this are refused (a sender's clock is wrong).
  int64_t max_future_skew_ms = 10 * kMsPerMinute;
  // A device whose latest sample is this much older than the fleet's latest is retired:
  // its time after the hour of its last sample is no capacity (neither unmonitored nor
  // anything else). A shorter silence is unmonitored time, an outage to see.
  int64_t retire_after_ms = 7 * kMsPerDay;
  // Raw samples older than this are pruned by ApplyRetention ([ledger] raw_retention);
  // 0: kept for good. Rollups stay either way.
  int64_t raw_retention_ms = 0;
  // The price book's one currency ([prices] in the config; core/currency.h): carried by
  // Prices() and by every report priced with the book. The store keeps the entries only.
  Currency currency;
};

// What a usage table is grouped by.
// kHour groups by the hour a GPU-millisecond falls in (its key is the hour's RFC 3339
// start): the time series of a window, adding up to the same totals as without it.
enum class Dimension {
  kTeam, kProject, kExperiment, kUser, kKind, kJob, kPool, kNode, kModel, kDevice, kHour
};
Result<Dimension> ParseDimension(std::string_view text);
std::string_view DimensionName(Dimension d);
// "team,project" -> {kTeam, kProject}.
Result<std::vector<Dimension>> ParseDimensions(std::string_view text);
// A job's attribute (team ... job), as against the device's (pool, node, model, device, hour).
constexpr bool IsJobDimension(Dimension d) { return d <= Dimension::kJob; }

// The label of rows for time held by no job, when grouping by a job's attribute.
inline constexpr std::string_view kNoJob = "(no job)";

struct UsageRow {
  std::vector<std::string> key;  // one value per dimension
  // The row of time held by no job, when the report is grouped by a job dimension. Its job
  // parts read kNoJob for people, but code tells it apart by this flag, never by the
  // string, so no name a batch carries can pass for it.
  bool no_job = false;
  // Capacity in GPU-milliseconds x kShareScale (a MIG slice counts its share), by bucket.
  std::array<int64_t, kBucketCount> gpu_ticks_ms{};
  std::array<Money, kBucketCount> cost{};
  int64_t coarse_ticks_ms = 0;  // allocated time whose activity came from gpu_util
  int64_t unpriced_ticks_ms = 0;
  // allocated_idle split by estimated cause; each adds up to its bucket exactly.
  std::array<int64_t, kIdleCauseCount> idle_cause_ticks_ms{};
  std::array<Money, kIdleCauseCount> idle_cause_cost{};
  double idle_cause_gpu_hours(IdleCause c) const;

  // Adds `row`'s figures (not its key): a group of rows summed, to the micro-unit.
  void Add(const UsageRow& row);

  int64_t total_ticks_ms() const;
  double gpu_hours(Bucket b) const;
  double total_gpu_hours() const;
  Money total_cost() const;
  // active / capacity; 0 for an empty row.
  double effective_utilization() const;
  // active / (active + allocated_idle); 0 when nothing was allocated.
  double allocated_efficiency() const;
  // "sm_active", "gpu_util" or "mixed": which figure the activity came from.
  std::string_view activity_source() const;
};

// Capacity that had no price in the price book: it costs 0 in every figure, and every
// output says so, naming what lacks a price.
struct UnpricedCapacity {
  std::string model;
  std::string pool;
  CapacityType capacity_type = CapacityType::kOnDemand;
  int64_t gpu_ticks_ms = 0;  // GPU-milliseconds x kShareScale, all buckets
  double gpu_hours() const;
};

struct UsageReport {
  // The window the figures cover: the one asked for, ending where the data ends (the
  // fleet's latest sample, and never after now). Empty when the data ends before it.
  TimeRange window;
  TimeRange requested;  // the window asked for
  std::vector<Dimension> by;
  std::vector<UsageRow> rows;  // by descending total cost, then key
  UsageRow total;              // the fleet: the sum of the rows, to the micro-unit
  std::vector<UnpricedCapacity> unpriced;  // by model, pool and capacity type; empty if all priced
  Currency currency;                       // of every cost above (LedgerOptions::currency)
  // Per-device conservation: every device's buckets sum to its time in service in the
  // window. Checked on every report; a failure is a bug and is reported as kInternal.
};

struct ChargebackLine {
  std::string team;
  std::string project;
  double gpu_hours = 0;
  double active_gpu_hours = 0;
  double idle_gpu_hours = 0;
  Money direct_cost;       // active + allocated_idle
  Money shared_idle_cost;  // with --share-idle: this line's share of unused capacity
  std::array<Money, kIdleCauseCount> idle_cost_by_cause{};  // allocated_idle, by cause
  double unpriced_gpu_hours = 0;  // of gpu_hours, those with no price (costing 0)
  // A line of capacity held by no job (its team reads "(unallocated)" ... for people).
  std::optional<Bucket> capacity;
  // A correction to this closed month ("2026-11"): what changed of its figures since it
  // was frozen (late samples, a job's new team, a new price), booked in the first open
  // month. Empty for the period's own charges.
  std::string correction_for;
  Money total_cost() const { return direct_cost + shared_idle_cost; }
};

// A billing period (a calendar month, UTC) that was closed: its chargeback is frozen.
struct ClosedPeriod {
  std::string month;  // "2026-11"
  TimeRange range;
  int64_t closed_at_ms = 0;
  std::string closed_by;
};

struct ChargebackReport {
  TimeRange period;
  bool share_idle = false;
  std::vector<ChargebackLine> lines;  // teams' lines, then capacity lines, then corrections
  Money total;                        // the sum of the lines: the fleet's cost, and corrections
  std::vector<UnpricedCapacity> unpriced;  // what had no price (and so cost 0)
  Currency currency;                       // of every cost above (LedgerOptions::currency)
  // Set when `period` is a closed month: the lines are as frozen then.
  std::optional<ClosedPeriod> closed;
  // Closed months the period overlaps without being one of them: its figures are live,
  // and differ from those months' frozen chargebacks by what changed since.
  std::vector<std::string> overlaps_closed;
};

// One source of waste, in money: a job's idle time, a pool's unallocated capacity, a
// failed GPU, a node whose agent went silent.
struct WasteItem {
  std::string what;   // "nlp / llm-pretrain: training jobs held GPUs idle"
  Bucket bucket = Bucket::kAllocatedIdle;
  double gpu_hours = 0;
  Money cost;
  // For allocated_idle: the cost by estimated cause (docs/idle-causes.md), adding up to
  // `cost`; zero otherwise.
  std::array<Money, kIdleCauseCount> idle_cause_cost{};
};

// The fleet's buckets over one step of a timeline, in GPU-milliseconds x kShareScale.
struct TimelinePoint {
  int64_t begin_ms = 0;
  std::array<int64_t, kBucketCount> gpu_ticks_ms{};
};

// What the store holds: from the first device's entry into service to the data's end.
struct DataSpan {
  int64_t first_ms = 0;  // 0: nothing in service yet
  int64_t end_ms = 0;    // the fleet's latest sample, never after now; 0: no sample yet
};

// Whose figures a caller may see: every team's, or only some teams' (a viewer's token).
// Time held by no job is nobody's team: only the fleet's total shows it to a viewer.
struct Scope {
  bool all_teams = true;
  std::set<std::string> teams;  // when !all_teams

  static Scope All() { return {}; }
  static Scope Teams(std::set<std::string> t) { return {false, std::move(t)}; }
  bool MaySee(const std::string& team) const { return all_teams || teams.count(team) > 0; }
};

// What holds a device now, and how it is doing: the answer to "which GPUs are idle right
// now, and who holds them?".
enum class DeviceState { kActive, kAllocatedIdle, kUnallocated, kUnavailable, kUnmonitored };
std::string_view DeviceStateName(DeviceState s);  // "active", "allocated_idle", ...

struct Holder {
  Job job;
  int64_t since_ms = 0;
};

// How far back FleetNow looks for the start of an idle spell: a device idle for longer
// reads as idle since this long ago (and its idle cost as this long's).
inline constexpr int64_t kIdleLookBackMs = 7 * kMsPerDay;

struct DeviceNow {
  store::DeviceRecord record;
  std::optional<Sample> last;   // the device's latest sample, if any
  std::vector<Holder> holders;  // the jobs holding it now, by allocation start
  DeviceState state = DeviceState::kUnmonitored;
  int64_t staleness_limit_ms = 0;  // a latest sample older than this is unmonitored
  // Where it sits: a GPU's position among its node's GPUs in the order they entered the
  // store (agents declare them in NVML index order), from 0; a MIG slice has its parent's
  // index and `slice_index`, its position among the parent's slices.
  int32_t gpu_index = 0;
  std::optional<int32_t> slice_index;
  // For allocated_idle and unallocated: since when it has been so (allocated idle: since
  // the first sample after its last active one, or since its holder took it; unallocated:
  // since its last allocation ended, or since it entered service), at most
  // kIdleLookBackMs before now. Empty in the other states.
  std::optional<int64_t> idle_since_ms;
  bool idle_since_clipped = false;  // idle for longer than the look-back
  // The price of that idle time so far: its GPU-hours (the slice's share) at the price
  // book's prices, hour by hour, rounded once to the micro-unit. Zero when not idle, or
  // when no price applies (idle_priced false).
  Money idle_cost;
  bool idle_priced = true;
};

// One allocation of a job, with the device's uuid.
struct JobAllocation {
  std::string device_uuid;
  int64_t from_ms = 0;
  std::optional<int64_t> to_ms;
};

// The ledger: the only front door to the data.
//
// Thread-safety contract. Every method may be called from any thread, concurrently:
//  - Queries (Usage, Chargeback, TopWaste, Timeline, FleetNow, Jobs, Devices, ...,
//    and the analyses in mfu.h, serving.h and rightsizing.h) each read one store
//    snapshot (store::StoreSnapshot): they lock nothing of the ledger, never wait for a
//    group commit or a rollup refresh, and see the state of one committed moment. Rollup
//    hours still dirty in that snapshot are attributed from its samples, so an answer
//    never depends on whether the refresh has run.
//  - The writer path (Ingest, BeginIngestGroup, RefreshRollups, SetPrices, ApplyRetention)
//    is serialized by the store's writer lock; RefreshRollups also holds refresh_mu_, so
//    one refresh runs at a time, and a batch committed while it runs leaves its hours
//    dirty for the next one (the store's generation check).
// The ledger has no other mutable state.
// A group commit of batches through the ledger (Ledger::BeginIngestGroup): each batch is
// planned (ledger/ingest_plan.h) and applied under its own savepoint of one store
// transaction, with store::BatchGroup's outcomes, errors and REQUIRES.
class IngestGroup {
 public:
  virtual ~IngestGroup() = default;
  // `sender`: who sent the batch (the nodes it may report for; the job-change history).
  virtual Result<store::ApplyOutcome> Apply(const Batch& batch, const BatchSender& sender) = 0;
  Result<store::ApplyOutcome> Apply(const Batch& batch) { return Apply(batch, BatchSender{}); }
  virtual Status Commit() = 0;
};

class UsageRead;

class Ledger {
 public:
  Ledger(std::unique_ptr<store::Store> store, const Clock& clock, LedgerOptions options = {});
  ~Ledger();

  // Validates and applies one batch, whole or not at all (see Store::ApplyBatch). A sender
  // bound to nodes that reports for another gets kPermissionDenied naming the device or job.
  Result<store::ApplyOutcome> Ingest(const Batch& batch, const BatchSender& sender = {});

  // The checks Ingest makes of a batch alone (ValidateBatch with the ledger's clock and
  // skew limit): for callers that validate on their own thread, outside any group.
  Status Validate(const Batch& batch) const;

  // A group commit (IngestGroup) of the ledger's store: batches applied in it are
  // durable together when it commits. REQUIRES of each batch: Validate passed. Holds the
  // store's writer until committed or destroyed; queries go on meanwhile.
  Result<std::unique_ptr<IngestGroup>> BeginIngestGroup();

  // Where the data begins and ends (see UsageReport::window).
  Result<DataSpan> Data();

  // Recomputes every dirty rollup hour. Returns how many device-hours it rebuilt.
  Result<int64_t> RefreshRollups();

  // Buckets, GPU-hours and cost for `window`, grouped by `by`. Whole hours inside the
  // window are read from hour rollups; partial hours at its edges are attributed from
  // raw samples the same way, so the result does not depend on the window's alignment.
  Result<UsageReport> Usage(const TimeRange& window, const std::vector<Dimension>& by);
  // The same figures with the rows in no particular order (the total and every row as
  // above): for a caller that regroups the rows (a series, a heatmap), which would pay
  // for sorting 190,000 rows of a week's heatmap by cost only to put them in cells.
  enum class RowOrder { kByCost, kUnordered };
  Result<UsageReport> Usage(const TimeRange& window, const std::vector<Dimension>& by, RowOrder order);

  // One read of `window` (a snapshot of the store, and the window's usage in it) that
  // answers Usage for any grouping but by hour, the chargeback, the waste and the advice
  // of that window (UsageRead::By, and the overloads taking a UsageRead): what a report
  // with several tables of one window reads once instead of once a table, every table
  // from the same committed moment.
  Result<UsageRead> ReadUsage(const TimeRange& window);

  // Cost per team and project over `period`. Capacity held by no job is its own lines
  // ("(unallocated)", "(unavailable)", "(unmonitored)"), or with share_idle spread over
  // the teams' lines in proportion to their direct cost.
  //
  // Billing periods. A closed month's chargeback is frozen: asked for that month, it
  // answers as it did when closed, whatever arrives later. What changed since (late
  // samples, a job re-teamed, a new price) is booked as correction lines in the first open
  // month after the latest closed one (ChargebackLine::correction_for), to the micro-unit:
  // a month's frozen lines plus every correction booked for it equal its live figures.
  Result<ChargebackReport> Chargeback(const TimeRange& period, bool share_idle);
  // The same for the period `read` was read for (UsageRead::requested), its live figures
  // from `read`.
  Result<ChargebackReport> Chargeback(const UsageRead& read, bool share_idle);

  // Closes `month` ("2026-11"), freezing its chargeback as it stands, corrections to
  // earlier closed months included. The month must be over and later than every closed
  // one (months close in order). `by`: who closed it (a token's name; "local").
  Result<ClosedPeriod> ClosePeriod(std::string_view month, const std::string& by);
  Result<std::vector<ClosedPeriod>> ClosedPeriods();

  // Usage as `scope` may see it: the rows of its teams only (grouped by `by`, ordered as
  // Usage orders them), and the fleet's total. With Scope::All(), Usage itself.
  Result<UsageReport> ScopedUsage(const TimeRange& window, const std::vector<Dimension>& by, const Scope& scope);

  // The `limit` largest sources of waste over `window`, by money: per team, project
  // and kind of job their allocated_idle time, per pool its unallocated, per device its
  // unavailable and per node its unmonitored time.
  Result<std::vector<WasteItem>> TopWaste(const TimeRange& window, size_t limit);
  // The same over the window `read` was read for.
  Result<std::vector<WasteItem>> TopWaste(const UsageRead& read, size_t limit);

  // The fleet's (or one pool's) buckets per `step_ms` over `window`, from the minute
  // rollups; time in service that no rollup covers is unmonitored, as in Usage.
  // REQUIRES: window and step are whole minutes.
  Result<std::vector<TimelinePoint>> Timeline(const TimeRange& window, int64_t step_ms,
                                              const std::string& pool = "");

  // Every device and slice at `now_ms`: its latest sample, its holders, its state (a
  // latest sample older than the device's staleness limit is unmonitored), its index on
  // its node, and for an idle one since when and at what cost so far. One read of the
  // fleet, plus one read of samples per allocated-idle device (back to its last active
  // sample, at most kIdleLookBackMs) and one of allocations per unallocated one. Ordered
  // by descending idle cost, then node, GPU index and slice index.
  Result<std::vector<DeviceNow>> FleetNow(int64_t now_ms);

  // The inventory and the jobs, as stored.
  Result<std::vector<store::DeviceRecord>> Devices();
  Result<std::vector<Job>> Jobs();
  // How many jobs overlap `window`, and how many teams, projects ... they have
  // (store::JobCounts): a query's size, without reading every job.
  Result<store::JobCounts> CountJobs(const TimeRange& window);
  // The allocations of the job `job_id` (its key), by start; empty for an unknown job.
  Result<std::vector<JobAllocation>> AllocationsOf(const std::string& job_id);
  // What batches changed of the job `job_id`'s metadata, with who sent them and when,
  // oldest first; empty for an unknown job or one never changed.
  Result<std::vector<store::JobChange>> JobChanges(const std::string& job_id);
  // The allocations open at `at_ms`, as (device uuid, job key, from), for a restarted
  // ingestor to continue from.
  Result<std::vector<std::pair<JobAllocation, std::string>>> OpenAllocations(int64_t at_ms);

  // The store's price book, in the ledger's currency (LedgerOptions::currency).
  Result<PriceBook> Prices();
  // Replaces the price book. Prices are read at query time, so no rollup changes.
  Status SetPrices(const PriceBook& book);
  // Deletes the raw samples older than the clock's now less the options' raw_retention_ms
  // (Store::PruneSamples; rollups stay); nothing when that is 0. Returns samples deleted.
  Result<int64_t> ApplyRetention();
  // Lays out again up to `limit` days of raw samples that are over (Store::SettleDays):
  // those that ended kSettleAfterMs or more ago and hold no dirty hour. Returns the days.
  static constexpr int64_t kSettleAfterMs = 2 * kMsPerHour;
  Result<std::vector<int64_t>> SettleDays(size_t limit);
  // The store's integrity (store::Store::Check).
  Result<store::StoreCheck> CheckStore(bool full);
  Result<store::StoreStats> Stats();

  const LedgerOptions& options() const { return options_; }

 private:
  friend store::Store& internal_StoreOf(Ledger&);  // ledger/store_access.h
  friend Result<UsageReport> internal_UsageOn(Ledger&, store::StoreReads&, const TimeRange&,
                                              const std::vector<Dimension>&);
  // Usage on `reads` (a snapshot the caller holds).
  Result<UsageReport> UsageOn(store::StoreReads& reads, const TimeRange& window, const std::vector<Dimension>& by,
                              RowOrder order = RowOrder::kByCost);
  // Reads `window`'s usage from `reads` into `into`: its fleet and its atoms (ledger.cc's
  // Accumulator), an atom per hour when `hourly`, their costs rounded.
  Status ReadAtoms(store::StoreReads& reads, const TimeRange& window, bool hourly, UsageRead& into);
  // Chargeback of `period`, its live figures from `read` when one is given (read for it).
  Result<ChargebackReport> ChargebackOf(const TimeRange& period, bool share_idle, const UsageRead* read);
  // The period's own chargeback from its live figures (capacity as its own lines), read
  // anew or taken from `read`.
  Result<ChargebackReport> LiveChargeback(const TimeRange& period, const UsageRead* read);
  // The open-month view: live lines, and corrections to every closed month when `period`
  // is the first month after the latest closed one.
  Result<ChargebackReport> OpenChargeback(const TimeRange& period, const std::vector<store::ClosedPeriodRecord>& closed,
                                          const std::vector<store::FrozenLine>& frozen, const UsageRead* read);
  std::unique_ptr<store::Store> store_;
  const Clock& clock_;
  LedgerOptions options_;
  Mutex refresh_mu_;  // one refresh at a time (the writer lock serializes its writes)

 public:
  class RankedJobsCache;  // ledger.cc: the jobs' ranks, made once per job list

 private:
  std::unique_ptr<RankedJobsCache> ranked_jobs_;
};

// One window's usage as read once (Ledger::ReadUsage): its snapshot of the store, its
// fleet, and its atoms (each device's time per job and price over the window, costs
// rounded), which every grouping sums. Grouped any way, it answers what Ledger::Usage
// answers on the same snapshot, to the micro-unit. Movable; By may be called from several
// threads at once, and the analyses that take a UsageRead read its snapshot, one at a time.
class UsageRead {
 public:
  UsageRead(UsageRead&&) noexcept;
  UsageRead& operator=(UsageRead&&) noexcept;
  ~UsageRead();

  // The window asked for.
  const TimeRange& requested() const;
  // The figures grouped by `by`: any dimensions but kHour (an hour's atoms are finer than
  // the window's; Ledger::Usage groups by hour). kInvalidArgument for kHour or none.
  Result<UsageReport> By(const std::vector<Dimension>& by, Ledger::RowOrder order = Ledger::RowOrder::kByCost) const;

 private:
  friend class Ledger;
  friend store::StoreSnapshot& internal_SnapshotOf(const UsageRead&);  // ledger/store_access.h
  struct State;  // ledger.cc
  UsageRead();
  std::unique_ptr<State> state_;
};

// "--window 30d": `length_ms` of whole hours ending where the data ends: at the current
// hour's start, or at the end of the hour of the fleet's latest sample when the data
// ended earlier (Usage then cuts the window at that sample). data_end_ms 0: no data, now.
TimeRange TrailingWindow(int64_t now_ms, int64_t data_end_ms, int64_t length_ms);

}  // namespace gpuledger::ledger
