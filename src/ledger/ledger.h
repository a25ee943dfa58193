// The ledger: ingest into a Store, keep its rollups current, and answer usage and
// chargeback questions with the conservation law intact.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
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

// The label of rows for time held by no job, when grouping by a job's attribute.
inline constexpr std::string_view kNoJob = "(no job)";

struct UsageRow {
  std::vector<std::string> key;  // one value per dimension
  // Capacity in GPU-milliseconds x kShareScale (a MIG slice counts its share), by bucket.
  std::array<int64_t, kBucketCount> gpu_ticks_ms{};
  std::array<Money, kBucketCount> cost{};
  int64_t coarse_ticks_ms = 0;  // allocated time whose activity came from gpu_util
  int64_t unpriced_ticks_ms = 0;
  // allocated_idle split by estimated cause; each adds up to its bucket exactly.
  std::array<int64_t, kIdleCauseCount> idle_cause_ticks_ms{};
  std::array<Money, kIdleCauseCount> idle_cause_cost{};
  double idle_cause_gpu_hours(IdleCause c) const;

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

struct UsageReport {
  TimeRange window;
  std::vector<Dimension> by;
  std::vector<UsageRow> rows;  // by descending total cost, then key
  UsageRow total;              // the fleet: the sum of the rows, to the micro-unit
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
  Money total_cost() const { return direct_cost + shared_idle_cost; }
};

struct ChargebackReport {
  TimeRange period;
  bool share_idle = false;
  std::vector<ChargebackLine> lines;  // teams' lines, then capacity lines "(unallocated)" ...
  Money total;                        // the fleet's cost for the period
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

class Ledger {
 public:
  Ledger(std::unique_ptr<store::Store> store, const Clock& clock, LedgerOptions options = {});

  // Validates and applies one batch, whole or not at all (see Store::ApplyBatch).
  Result<store::ApplyOutcome> Ingest(const Batch& batch);

  // Recomputes every dirty rollup hour. Returns how many device-hours it rebuilt.
  Result<int64_t> RefreshRollups();

  // Buckets, GPU-hours and cost for `window`, grouped by `by`. Whole hours inside the
  // window are read from hour rollups; partial hours at its edges are attributed from
  // raw samples the same way, so the result does not depend on the window's alignment.
  Result<UsageReport> Usage(const TimeRange& window, const std::vector<Dimension>& by);

  // Cost per team and project over `period`. Capacity held by no job is its own lines
  // ("(unallocated)", "(unavailable)", "(unmonitored)"), or with share_idle spread over
  // the teams' lines in proportion to their direct cost.
  Result<ChargebackReport> Chargeback(const TimeRange& period, bool share_idle);

  // The `limit` largest sources of waste over `window`, by money: per team, project
  // and kind of job their allocated_idle time, per pool its unallocated, per device its
  // unavailable and per node its unmonitored time.
  Result<std::vector<WasteItem>> TopWaste(const TimeRange& window, size_t limit);

  // The fleet's (or one pool's) buckets per `step_ms` over `window`, from the minute
  // rollups; time in service that no rollup covers is unmonitored, as in Usage.
  // REQUIRES: window and step are whole minutes.
  Result<std::vector<TimelinePoint>> Timeline(const TimeRange& window, int64_t step_ms,
                                              const std::string& pool = "");

  store::Store& store() { return *store_; }

 private:
  std::unique_ptr<store::Store> store_;
  const Clock& clock_;
  LedgerOptions options_;
};

// "--window 30d": the last whole hours up to the current hour's start.
TimeRange TrailingWindow(int64_t now_ms, int64_t length_ms);

}  // namespace gpuledger::ledger
