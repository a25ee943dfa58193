#include "ledger/focus_lines.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace gpuledger::ledger {
namespace {

// Where a line's figures sit in a usage row: a bucket, and for allocated_idle a cause.
struct Cell {
  Bucket bucket;
  std::optional<IdleCause> cause;

  int64_t Ticks(const UsageRow& r) const {
    return cause ? r.idle_cause_ticks_ms[static_cast<size_t>(*cause)] : r.gpu_ticks_ms[static_cast<size_t>(bucket)];
  }
  Money Cost(const UsageRow& r) const {
    return cause ? r.idle_cause_cost[static_cast<size_t>(*cause)] : r.cost[static_cast<size_t>(bucket)];
  }
};

std::vector<Cell> Cells() {
  std::vector<Cell> out;
  for (Bucket b : kAllBuckets) {
    if (b != Bucket::kAllocatedIdle) {
      out.push_back({b, std::nullopt});
      continue;
    }
    for (IdleCause c : kAllIdleCauses) out.push_back({b, c});
  }
  return out;
}

// The instants inside `window` where some price book entry begins or ends, with the
// window's edges: the price epochs, in order.
std::vector<int64_t> PriceEpochs(const PriceBook& book, const TimeRange& window) {
  std::set<int64_t> cuts = {window.begin_ms, window.end_ms};
  for (const PriceEntry& e : book.entries()) {
    for (int64_t t : {e.valid.begin_ms, e.valid.end_ms}) {
      if (t > window.begin_ms && t < window.end_ms) cuts.insert(t);
    }
  }
  return {cuts.begin(), cuts.end()};
}

using RowKey = std::pair<std::vector<std::string>, bool>;  // key, no_job

std::string Describe(const Cell& cell, const FocusLine& l) {
  switch (cell.bucket) {
    case Bucket::kActive: return fmt::format("Active time of job {} on {}", l.job->id, l.device_uuid);
    case Bucket::kAllocatedIdle:
      return fmt::format("Idle time ({}) of job {} on {}", IdleCauseName(*cell.cause), l.job->id, l.device_uuid);
    case Bucket::kUnallocated: return fmt::format("Unallocated time of {}, held by no job", l.device_uuid);
    case Bucket::kUnavailable: return fmt::format("Unavailable time of {} (down, lost or drained)", l.device_uuid);
    case Bucket::kUnmonitored: return fmt::format("Unmonitored time of {} (no telemetry)", l.device_uuid);
  }
  return "";
}

// The key a chargeback line and the device lines it sums share.
using LineKey = std::tuple<std::string, std::string, int>;  // team, project, capacity bucket (-1: a team's)
LineKey KeyOf(const ChargebackLine& l) {
  return {l.capacity ? "" : l.team, l.capacity ? "" : l.project, l.capacity ? static_cast<int>(*l.capacity) : -1};
}
LineKey KeyOf(const FocusLine& l) {
  bool capacity = !l.job.has_value();
  return {l.team, l.project, capacity ? static_cast<int>(*l.bucket) : -1};
}

FocusLine Correction(const LineKey& key, Money amount, const std::string& month, const TimeRange& period) {
  FocusLine l;
  l.correction = true;
  l.correction_for = month;
  l.charge_period = period;
  l.team = std::get<0>(key);
  l.project = std::get<1>(key);
  if (std::get<2>(key) >= 0) l.bucket = static_cast<Bucket>(std::get<2>(key));
  l.cost = amount;
  std::string whose = l.bucket ? fmt::format("{} capacity", BucketName(*l.bucket))
                               : fmt::format("{} / {}", l.team, l.project.empty() ? "-" : l.project);
  l.description = fmt::format("Correction of {} for {}", month, whose);
  return l;
}

}  // namespace

int64_t FocusLine::pricing_quantity_micro_hours() const {
  // ticks / (kShareScale x 3,600,000 ms) GPU-hours = ticks / (kShareScale x 3.6) micro-hours.
  const int64_t per_micro_hour_x10 = kShareScale * 36;  // ticks x 10 per micro-GPU-hour
  return (gpu_ticks_ms * 10 + per_micro_hour_x10 / 2) / per_micro_hour_x10;
}

CostNumerator FocusLine::list_cost_pico() const {
  if (!unit_price) return 0;
  return static_cast<CostNumerator>(unit_price->micros()) * pricing_quantity_micro_hours();
}

Result<FocusExport> FocusLines(Ledger& ledger, const TimeRange& month, const Scope& scope) {
  GPULEDGER_ASSIGN_OR_RETURN(ChargebackReport cb, ledger.Chargeback(month, /*share_idle=*/false));
  GPULEDGER_ASSIGN_OR_RETURN(PriceBook book, ledger.Prices());
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, ledger.Devices());
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, ledger.Jobs());
  std::unordered_map<std::string, const Device*> device_of;
  for (const auto& d : devices) device_of[d.device.uuid] = &d.device;
  std::unordered_map<std::string, const Job*> job_of;
  for (const auto& j : jobs) job_of[j.id] = &j;

  const std::vector<Dimension> by = {Dimension::kTeam, Dimension::kProject, Dimension::kJob, Dimension::kDevice};
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport usage, ledger.Usage(month, by));
  FocusExport out;
  out.billing_period = month;
  out.window = usage.window;
  out.currency = usage.currency;
  out.unpriced = cb.unpriced;

  // The month's usage, and its rows per price epoch when a price changes in it.
  std::vector<int64_t> cuts = PriceEpochs(book, usage.window);
  std::vector<TimeRange> epochs;
  std::vector<std::map<RowKey, UsageRow>> parts;
  if (cuts.size() > 2) {
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      GPULEDGER_ASSIGN_OR_RETURN(UsageReport part, ledger.Usage({cuts[i], cuts[i + 1]}, by));
      epochs.push_back(part.window);
      auto& rows = parts.emplace_back();
      for (UsageRow& r : part.rows) rows[{r.key, r.no_job}] = std::move(r);
    }
  }

  const std::vector<Cell> cells = Cells();
  for (const UsageRow& row : usage.rows) {
    if (!row.no_job && !scope.MaySee(row.key[0])) continue;
    if (row.no_job && !scope.all_teams) continue;
    const std::string& uuid = row.key[3];
    auto dev = device_of.find(uuid);
    if (dev == device_of.end()) return Internal(fmt::format("usage of unknown device {}", uuid));
    const Job* job = nullptr;
    if (!row.no_job) {
      auto j = job_of.find(row.key[2]);
      if (j == job_of.end()) return Internal(fmt::format("usage of unknown job {}", row.key[2]));
      job = j->second;
    }
    for (const Cell& cell : cells) {
      const int64_t ticks = cell.Ticks(row);
      const Money cost = cell.Cost(row);
      if (ticks == 0 && cost == Money()) continue;
      // The cell per price epoch: its ticks there, and its month cost split by theirs.
      std::vector<TimeRange> spans = {usage.window};
      std::vector<int64_t> span_ticks = {ticks};
      std::vector<Money> span_cost = {cost};
      if (!parts.empty()) {
        spans = epochs;
        span_ticks.assign(parts.size(), 0);
        std::vector<Money> weights(parts.size());
        for (size_t p = 0; p < parts.size(); ++p) {
          auto it = parts[p].find({row.key, row.no_job});
          if (it == parts[p].end()) continue;
          span_ticks[p] = cell.Ticks(it->second);
          weights[p] = cell.Cost(it->second);
        }
        span_cost = SplitMoney(cost, weights);
        Money split;
        for (Money m : span_cost) split += m;
        if (split != cost) {
          // Every epoch's share rounded to nothing: the month's micro-units go to the
          // first epoch that holds time.
          size_t first = std::find_if(span_ticks.begin(), span_ticks.end(), [](int64_t t) { return t > 0; }) -
                         span_ticks.begin();
          span_cost[std::min(first, span_cost.size() - 1)] += cost - split;
        }
      }
      // Epochs at the same price of this device are one line.
      const Device& d = *dev->second;
      for (size_t p = 1; p < spans.size(); ++p) {
        if (book.EntryAt(d.model, d.pool, d.capacity_type, spans[p - 1].begin_ms) !=
            book.EntryAt(d.model, d.pool, d.capacity_type, spans[p].begin_ms)) {
          continue;
        }
        spans[p].begin_ms = spans[p - 1].begin_ms;
        span_ticks[p] += span_ticks[p - 1];
        span_cost[p] += span_cost[p - 1];
        span_ticks[p - 1] = 0;
        span_cost[p - 1] = Money();
      }
      for (size_t p = 0; p < spans.size(); ++p) {
        if (span_ticks[p] == 0 && span_cost[p] == Money()) continue;
        FocusLine l;
        l.charge_period = spans[p];
        l.device_uuid = uuid;
        l.mig_slice = d.is_mig();
        l.model = d.model;
        l.pool = d.pool;
        l.capacity_type = d.capacity_type;
        l.bucket = cell.bucket;
        l.idle_cause = cell.cause;
        l.gpu_ticks_ms = span_ticks[p];
        l.cost = span_cost[p];
        if (job != nullptr) {
          l.job = *job;
          l.team = row.key[0];
          l.project = row.key[1];
          l.effective_utilization = row.effective_utilization();
        }
        l.sku_id = fmt::format("{}/{}", d.model, CapacityTypeName(d.capacity_type));
        if (const PriceEntry* e = book.EntryAt(d.model, d.pool, d.capacity_type, spans[p].begin_ms)) {
          l.unit_price = e->per_gpu_hour;
          l.sku_price_id = fmt::format("{}/{}/{}@{}", e->model, e->pool, CapacityTypeName(e->capacity_type),
                                       FormatTime(e->valid.begin_ms));
        } else {
          l.unit_price = Money();
          l.unpriced = true;
        }
        l.description = Describe(cell, l);
        out.lines.push_back(std::move(l));
      }
    }
  }
  std::stable_sort(out.lines.begin(), out.lines.end(), [](const FocusLine& a, const FocusLine& b) {
    bool ca = !a.job, cb_ = !b.job;
    return std::tie(ca, a.team, a.project, a.device_uuid) < std::tie(cb_, b.team, b.project, b.device_uuid);
  });

  // Reconciled with the chargeback: its corrections are lines of their own, and where a
  // line's devices do not add up to it (a closed month's frozen figures, or a batch that
  // arrived between the two reads) the difference is a correction.
  std::map<LineKey, Money> detail;
  for (const FocusLine& l : out.lines) detail[KeyOf(l)] += l.cost;
  std::map<LineKey, Money> charged;
  for (const ChargebackLine& l : cb.lines) {
    if (!l.correction_for.empty()) continue;
    charged[KeyOf(l)] += l.total_cost();
  }
  std::set<LineKey> keys;
  for (const auto& [k, m] : detail) keys.insert(k);
  for (const auto& [k, m] : charged) keys.insert(k);
  const std::string this_month = FormatTime(month.begin_ms).substr(0, 7);
  auto visible = [&](const LineKey& k) {
    return std::get<2>(k) >= 0 ? scope.all_teams : scope.MaySee(std::get<0>(k));
  };
  for (const LineKey& k : keys) {
    Money diff = charged[k] - detail[k];
    if (diff != Money() && visible(k)) {
      out.lines.push_back(Correction(k, diff, this_month, usage.window.empty() ? month : usage.window));
    }
  }
  for (const ChargebackLine& l : cb.lines) {
    if (l.correction_for.empty() || !visible(KeyOf(l))) continue;
    auto range = ParseMonth(l.correction_for);
    out.lines.push_back(Correction(KeyOf(l), l.total_cost(), l.correction_for, range.ok() ? *range : month));
  }
  for (const FocusLine& l : out.lines) out.total += l.cost;
  return out;
}

}  // namespace gpuledger::ledger
