#include "ledger/ledger.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "ledger/attribution.h"

namespace gpuledger::ledger {
namespace {

constexpr std::string_view kUnset = "(unset)";

struct DimensionInfo {
  Dimension d;
  std::string_view name;
};
constexpr DimensionInfo kDimensions[] = {
    {Dimension::kTeam, "team"},   {Dimension::kProject, "project"},
    {Dimension::kExperiment, "experiment"}, {Dimension::kUser, "user"},
    {Dimension::kKind, "kind"},   {Dimension::kJob, "job"},
    {Dimension::kPool, "pool"},   {Dimension::kNode, "node"},
    {Dimension::kModel, "model"}, {Dimension::kDevice, "device"},
    {Dimension::kHour, "hour"},
};

// Accumulates exact figures per group before money is rounded, once, per report.
struct Cell {
  std::array<int64_t, kBucketCount> ticks_ms{};
  std::array<int64_t, kIdleCauseCount> idle_cause_ticks_ms{};
  std::array<CostNumerator, kBucketCount> cost{};
  int64_t coarse_ticks_ms = 0;
  int64_t unpriced_ticks_ms = 0;
};

// Everything a report needs to know about the fleet, loaded once per query.
class FleetIndex {
 public:
  Status Load(store::Store& s) {
    GPULEDGER_ASSIGN_OR_RETURN(devices_, s.ListDevices());
    GPULEDGER_ASSIGN_OR_RETURN(auto jobs, s.ListJobs());
    GPULEDGER_ASSIGN_OR_RETURN(book_, s.LoadPriceBook());
    std::unordered_map<int64_t, int64_t> child_ticks;
    for (size_t i = 0; i < devices_.size(); ++i) {
      device_index_[devices_[i].id] = i;
      if (devices_[i].parent_id) child_ticks[devices_[i].parent_id] += devices_[i].device.share.ticks();
    }
    ticks_.resize(devices_.size());
    for (size_t i = 0; i < devices_.size(); ++i) {
      const auto& d = devices_[i];
      // A MIG parent keeps the share its slices do not cover: its unpartitioned rest.
      ticks_[i] = d.parent_id ? d.device.share.ticks()
                              : std::max<int64_t>(0, kShareScale - child_ticks[d.id]);
    }
    for (auto& j : jobs) {
      job_key_to_id_[j.job.id] = j.id;
      jobs_.emplace(j.id, std::move(j.job));
    }
    return Status::Ok();
  }

  const std::vector<store::DeviceRecord>& devices() const { return devices_; }
  const store::DeviceRecord* device(int64_t id) const {
    auto it = device_index_.find(id);
    return it == device_index_.end() ? nullptr : &devices_[it->second];
  }
  int64_t ticks(int64_t device_id) const { return ticks_[device_index_.at(device_id)]; }
  const Job* job(int64_t id) const {
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : &it->second;
  }
  int64_t JobIdOf(const std::string& key) const {
    auto it = job_key_to_id_.find(key);
    return it == job_key_to_id_.end() ? 0 : it->second;
  }
  const PriceBook& book() const { return book_; }

  std::optional<Money> PriceAt(const store::DeviceRecord& d, int64_t t_ms) const {
    return book_.PriceAt(d.device.model, d.device.pool, d.device.capacity_type, t_ms);
  }

 private:
  std::vector<store::DeviceRecord> devices_;
  std::unordered_map<int64_t, size_t> device_index_;
  std::vector<int64_t> ticks_;
  std::unordered_map<int64_t, Job> jobs_;
  std::unordered_map<std::string, int64_t> job_key_to_id_;
  PriceBook book_;
};

std::string ValueOr(const std::string& v) { return v.empty() ? std::string(kUnset) : v; }

std::string KeyPart(Dimension d, const store::DeviceRecord& dev, const Job* job,
                    const std::string& hour_key) {
  switch (d) {
    case Dimension::kHour: return hour_key;
    case Dimension::kPool: return ValueOr(dev.device.pool);
    case Dimension::kNode: return ValueOr(dev.device.node);
    case Dimension::kModel: return ValueOr(dev.device.model);
    case Dimension::kDevice: return dev.device.uuid;
    default: break;
  }
  if (job == nullptr) return std::string(kNoJob);
  switch (d) {
    case Dimension::kTeam: return ValueOr(job->team);
    case Dimension::kProject: return ValueOr(job->project);
    case Dimension::kExperiment: return ValueOr(job->experiment);
    case Dimension::kUser: return ValueOr(job->user);
    case Dimension::kKind: return std::string(JobKindName(job->kind));
    case Dimension::kJob: return job->id;
    default: return {};
  }
}

// Collects one report's cells, keyed by group, with a per-device conservation check.
class Accumulator {
 public:
  Accumulator(const FleetIndex& fleet, const std::vector<Dimension>& by) : fleet_(fleet), by_(by) {}

  // Adds `ms` of device time in bucket `b`, of which `coarse_ms` had its activity from
  // gpu_util.
  void Add(const store::DeviceRecord& dev, int64_t job_id, Bucket b, int64_t ms, int64_t coarse_ms,
           const std::optional<Money>& price) {
    if (ms == 0 && coarse_ms == 0) return;
    device_ms_[dev.id] += ms;
    Cell& c = CellFor(dev, job_id);
    int64_t ticks = fleet_.ticks(dev.id);
    c.ticks_ms[static_cast<size_t>(b)] += ms * ticks;
    c.coarse_ticks_ms += coarse_ms * ticks;
    if (price) {
      c.cost[static_cast<size_t>(b)] += CostOf(ms, ticks, *price);
    } else {
      c.unpriced_ticks_ms += ms * ticks;
    }
  }

  // Adds the causes of allocated_idle time already added with Add.
  void AddIdleCauses(const store::DeviceRecord& dev, int64_t job_id,
                     const std::array<int64_t, kIdleCauseCount>& ms) {
    Cell& c = CellFor(dev, job_id);
    int64_t ticks = fleet_.ticks(dev.id);
    for (size_t k = 0; k < kIdleCauseCount; ++k) c.idle_cause_ticks_ms[k] += ms[k] * ticks;
  }

  // The hour the time added next falls in (for Dimension::kHour).
  void set_hour(int64_t hour_ms) {
    hour_key_ = FormatTime(hour_ms);
    last_cell_ = nullptr;
  }

  int64_t device_ms(int64_t device_id) const {
    auto it = device_ms_.find(device_id);
    return it == device_ms_.end() ? 0 : it->second;
  }

  UsageReport Finish(const TimeRange& window) {
    UsageReport report;
    report.window = window;
    report.by = by_;
    std::vector<CostNumerator> exact;
    exact.reserve(cells_.size() * kBucketCount);
    for (auto& [key, cell] : cells_) {
      for (size_t b = 0; b < kBucketCount; ++b) exact.push_back(cell.cost[b]);
    }
    std::vector<Money> rounded = ApportionCosts(exact);
    size_t k = 0;
    for (auto& [key, cell] : cells_) {
      UsageRow row;
      row.key = key;
      row.gpu_ticks_ms = cell.ticks_ms;
      row.coarse_ticks_ms = cell.coarse_ticks_ms;
      row.unpriced_ticks_ms = cell.unpriced_ticks_ms;
      for (size_t b = 0; b < kBucketCount; ++b) row.cost[b] = rounded[k++];
      row.idle_cause_ticks_ms = cell.idle_cause_ticks_ms;
      std::vector<Money> weights;
      for (int64_t t : cell.idle_cause_ticks_ms) weights.push_back(Money::FromMicros(t));
      std::vector<Money> split = SplitMoney(row.cost[static_cast<size_t>(Bucket::kAllocatedIdle)], weights);
      for (size_t c = 0; c < kIdleCauseCount; ++c) {
        row.idle_cause_cost[c] = split[c];
        report.total.idle_cause_ticks_ms[c] += row.idle_cause_ticks_ms[c];
        report.total.idle_cause_cost[c] += split[c];
      }
      for (size_t b = 0; b < kBucketCount; ++b) {
        report.total.gpu_ticks_ms[b] += row.gpu_ticks_ms[b];
        report.total.cost[b] += row.cost[b];
      }
      report.total.coarse_ticks_ms += row.coarse_ticks_ms;
      report.total.unpriced_ticks_ms += row.unpriced_ticks_ms;
      report.rows.push_back(std::move(row));
    }
    std::stable_sort(report.rows.begin(), report.rows.end(), [](const UsageRow& a, const UsageRow& b) {
      if (a.total_cost() != b.total_cost()) return a.total_cost() > b.total_cost();
      if (a.total_ticks_ms() != b.total_ticks_ms()) return a.total_ticks_ms() > b.total_ticks_ms();
      return a.key < b.key;
    });
    report.total.key.assign(by_.size(), "(total)");
    return report;
  }

 private:
  Cell& CellFor(const store::DeviceRecord& dev, int64_t job_id) {
    // A rollup row adds each bucket and its idle causes in turn: look its cell up once.
    if (last_cell_ != nullptr && last_device_ == dev.id && last_job_ == job_id) return *last_cell_;
    const Job* job = job_id ? fleet_.job(job_id) : nullptr;
    key_.clear();
    for (Dimension d : by_) key_.push_back(KeyPart(d, dev, job, hour_key_));
    last_cell_ = &cells_[key_];  // std::map: the reference stays valid
    last_device_ = dev.id;
    last_job_ = job_id;
    return *last_cell_;
  }

  const FleetIndex& fleet_;
  const std::vector<Dimension>& by_;
  std::map<std::vector<std::string>, Cell> cells_;
  std::vector<std::string> key_;
  std::unordered_map<int64_t, int64_t> device_ms_;
  std::string hour_key_;  // the RFC 3339 start of the hour being added
  Cell* last_cell_ = nullptr;
  int64_t last_device_ = 0, last_job_ = 0;
};

int64_t CeilTo(int64_t t, int64_t step) { return -FloorTo(-t, step); }

}  // namespace

Result<Dimension> ParseDimension(std::string_view text) {
  for (const auto& info : kDimensions) {
    if (info.name == text) return info.d;
  }
  return InvalidArgument(fmt::format(
      "cannot group by \"{}\": want team, project, experiment, user, kind, job, pool, node, "
      "model, device or hour",
      text));
}

std::string_view DimensionName(Dimension d) {
  for (const auto& info : kDimensions) {
    if (info.d == d) return info.name;
  }
  return "?";
}

Result<std::vector<Dimension>> ParseDimensions(std::string_view text) {
  std::vector<Dimension> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    GPULEDGER_ASSIGN_OR_RETURN(Dimension d, ParseDimension(text.substr(pos, comma - pos)));
    if (std::find(out.begin(), out.end(), d) != out.end()) {
      return InvalidArgument(fmt::format("grouping \"{}\" names {} twice", text, DimensionName(d)));
    }
    out.push_back(d);
    pos = comma + 1;
  }
  return out;
}

int64_t UsageRow::total_ticks_ms() const {
  int64_t t = 0;
  for (int64_t v : gpu_ticks_ms) t += v;
  return t;
}
double UsageRow::gpu_hours(Bucket b) const {
  return static_cast<double>(gpu_ticks_ms[static_cast<size_t>(b)]) /
         static_cast<double>(kShareScale * kMsPerHour);
}
double UsageRow::idle_cause_gpu_hours(IdleCause c) const {
  return static_cast<double>(idle_cause_ticks_ms[static_cast<size_t>(c)]) /
         static_cast<double>(kShareScale * kMsPerHour);
}
double UsageRow::total_gpu_hours() const {
  return static_cast<double>(total_ticks_ms()) / static_cast<double>(kShareScale * kMsPerHour);
}
Money UsageRow::total_cost() const {
  Money m;
  for (Money c : cost) m += c;
  return m;
}
double UsageRow::effective_utilization() const {
  int64_t total = total_ticks_ms();
  return total ? static_cast<double>(gpu_ticks_ms[0]) / static_cast<double>(total) : 0.0;
}
double UsageRow::allocated_efficiency() const {
  int64_t held = gpu_ticks_ms[0] + gpu_ticks_ms[1];
  return held ? static_cast<double>(gpu_ticks_ms[0]) / static_cast<double>(held) : 0.0;
}
std::string_view UsageRow::activity_source() const {
  int64_t held = gpu_ticks_ms[0] + gpu_ticks_ms[1];
  if (coarse_ticks_ms == 0) return "sm_active";
  if (coarse_ticks_ms >= held) return "gpu_util";
  return "mixed";
}

TimeRange TrailingWindow(int64_t now_ms, int64_t length_ms) {
  int64_t end = FloorTo(now_ms, kMsPerHour);
  return {end - length_ms, end};
}

Ledger::Ledger(std::unique_ptr<store::Store> store, const Clock& clock, LedgerOptions options)
    : store_(std::move(store)), clock_(clock), options_(options) {}

Result<store::ApplyOutcome> Ledger::Ingest(const Batch& batch) {
  GPULEDGER_RETURN_IF_ERROR(
      ValidateBatch(batch, clock_.NowMs(), options_.max_future_skew_ms));
  return store_->ApplyBatch(batch);
}

Result<int64_t> Ledger::RefreshRollups() {
  FleetIndex fleet;
  bool loaded = false;
  int64_t rebuilt = 0;
  for (;;) {
    GPULEDGER_ASSIGN_OR_RETURN(auto dirty, store_->DirtyHours(1024));
    if (dirty.empty()) return rebuilt;
    if (!loaded) {
      GPULEDGER_RETURN_IF_ERROR(fleet.Load(*store_));
      loaded = true;
    }
    // Runs of consecutive dirty hours of one device share one read of its samples.
    std::sort(dirty.begin(), dirty.end(), [](const store::DirtyHour& a, const store::DirtyHour& b) {
      return std::tie(a.device_id, a.hour_ms) < std::tie(b.device_id, b.hour_ms);
    });
    std::vector<store::RollupUpdate> updates;
    updates.reserve(dirty.size());
    for (size_t run = 0; run < dirty.size();) {
      size_t end = run + 1;
      while (end < dirty.size() && dirty[end].device_id == dirty[run].device_id &&
             dirty[end].hour_ms == dirty[end - 1].hour_ms + kMsPerHour && end - run < 48) {
        ++end;
      }
      const store::DeviceRecord* dev = fleet.device(dirty[run].device_id);
      std::vector<Sample> samples;
      std::vector<store::AllocationRecord> allocs;
      int64_t limit = dev ? StalenessLimitMs(dev->device, options_.staleness_override_ms) : 0;
      if (dev != nullptr && dev->in_service_ms > 0) {
        TimeRange hours{dirty[run].hour_ms, dirty[end - 1].hour_ms + kMsPerHour};
        GPULEDGER_ASSIGN_OR_RETURN(
            samples, store_->Samples(dev->id, {hours.begin_ms - limit - store::kIdleContextMs,
                                               hours.end_ms + limit + store::kIdleContextMs}));
        GPULEDGER_ASSIGN_OR_RETURN(allocs, store_->Allocations(dev->id, hours));
      }
      for (size_t k = run; k < end; ++k) {
        const store::DirtyHour& d = dirty[k];
        store::RollupUpdate& u = updates.emplace_back();
        u.dirty = d;
        TimeRange span{std::max(d.hour_ms, dev ? dev->in_service_ms : 0), d.hour_ms + kMsPerHour};
        if (dev == nullptr || dev->in_service_ms == 0 || span.empty()) continue;
        std::map<int64_t, store::RollupRow> by_job, by_minute;
        DeviceTimeline t{span, limit, samples, allocs,
                         [&](const std::string& key) { return fleet.JobIdOf(key); }};
        Attribute(t, [&](const Piece& p) {
          auto& h = by_job[p.job_id];
          h.ms[static_cast<size_t>(p.bucket)] += p.ms;
          if (p.coarse) h.coarse_ms += p.ms;
          if (p.bucket == Bucket::kAllocatedIdle) h.idle_causes[static_cast<size_t>(p.cause)] += p.ms;
          by_minute[p.minute_ms].ms[static_cast<size_t>(p.bucket)] += p.ms;
        });
        for (auto& [job, row] : by_job) {
          row.period_ms = d.hour_ms;
          row.device_id = d.device_id;
          row.job_id = job;
          u.hour_rows.push_back(row);
        }
        for (auto& [minute, row] : by_minute) {
          row.period_ms = minute;
          row.device_id = d.device_id;
          u.minute_rows.push_back(row);
        }
        ++rebuilt;
      }
      run = end;
    }
    GPULEDGER_RETURN_IF_ERROR(store_->WriteRollups(updates));
  }
}

Result<UsageReport> Ledger::Usage(const TimeRange& window, const std::vector<Dimension>& by) {
  if (window.empty()) {
    return InvalidArgument(fmt::format("window [{}, {}) is empty", FormatTime(window.begin_ms),
                                       FormatTime(window.end_ms)));
  }
  if (by.empty()) return InvalidArgument("usage needs at least one dimension to group by");
  GPULEDGER_RETURN_IF_ERROR(RefreshRollups().status());
  FleetIndex fleet;
  GPULEDGER_RETURN_IF_ERROR(fleet.Load(*store_));
  Accumulator acc(fleet, by);

  // Whole hours from the rollups, one price epoch at a time (prices change on hours).
  int64_t first_hour = CeilTo(window.begin_ms, kMsPerHour);
  int64_t last_hour = FloorTo(window.end_ms, kMsPerHour);
  bool hourly = std::find(by.begin(), by.end(), Dimension::kHour) != by.end();
  if (first_hour < last_hour) {
    std::vector<int64_t> epochs = {first_hour, last_hour};
    if (hourly) {
      for (int64_t h = first_hour + kMsPerHour; h < last_hour; h += kMsPerHour) epochs.push_back(h);
    }
    for (const PriceEntry& e : fleet.book().entries()) {
      for (int64_t t : {e.valid.begin_ms, e.valid.end_ms}) {
        if (t > first_hour && t < last_hour) epochs.push_back(t);
      }
    }
    std::sort(epochs.begin(), epochs.end());
    epochs.erase(std::unique(epochs.begin(), epochs.end()), epochs.end());
    for (size_t i = 0; i + 1 < epochs.size(); ++i) {
      TimeRange hours{epochs[i], epochs[i + 1]};
      acc.set_hour(hours.begin_ms);
      GPULEDGER_ASSIGN_OR_RETURN(auto sums, store_->SumHourRollups(hours));
      std::unordered_map<int64_t, int64_t> covered;
      for (const store::RollupSum& s : sums) {
        const store::DeviceRecord* dev = fleet.device(s.device_id);
        if (dev == nullptr) return Internal(fmt::format("rollup of unknown device {}", s.device_id));
        auto price = fleet.PriceAt(*dev, hours.begin_ms);
        for (Bucket b : kAllBuckets) {
          int64_t ms = s.ms[static_cast<size_t>(b)];
          // The row's coarse time is counted once, with its active bucket.
          acc.Add(*dev, s.job_id, b, ms, b == Bucket::kActive ? s.coarse_ms : 0, price);
          covered[s.device_id] += ms;
        }
        acc.AddIdleCauses(*dev, s.job_id, s.idle_causes);
      }
      // Time in service that no rollup covers (no data at all) is unmonitored.
      for (const store::DeviceRecord& dev : fleet.devices()) {
        if (dev.in_service_ms == 0) continue;
        int64_t capacity = hours.Intersect({dev.in_service_ms, kForever}).length_ms();
        int64_t gap = capacity - covered[dev.id];
        if (gap < 0) {
          return Internal(fmt::format("rollups of device {} cover more than its time in service",
                                      dev.device.uuid));
        }
        acc.Add(dev, 0, Bucket::kUnmonitored, gap, 0, fleet.PriceAt(dev, hours.begin_ms));
      }
    }
  }

  // Partial hours at the window's edges, attributed from raw samples.
  std::vector<TimeRange> edges;
  TimeRange head{window.begin_ms, std::min(first_hour, window.end_ms)};
  TimeRange tail{std::max(last_hour, first_hour), window.end_ms};
  if (!head.empty()) edges.push_back(head);
  if (!tail.empty()) edges.push_back(tail);
  for (const TimeRange& edge : edges) {
    acc.set_hour(FloorTo(edge.begin_ms, kMsPerHour));  // an edge lies within one hour
    for (const store::DeviceRecord& dev : fleet.devices()) {
      if (dev.in_service_ms == 0) continue;
      TimeRange span = edge.Intersect({dev.in_service_ms, kForever});
      if (span.empty()) continue;
      int64_t limit = StalenessLimitMs(dev.device, options_.staleness_override_ms);
      GPULEDGER_ASSIGN_OR_RETURN(
          auto samples, store_->Samples(dev.id, {span.begin_ms - limit - store::kIdleContextMs,
                                                 span.end_ms + limit + store::kIdleContextMs}));
      GPULEDGER_ASSIGN_OR_RETURN(auto allocs, store_->Allocations(dev.id, span));
      auto price = fleet.PriceAt(dev, span.begin_ms);
      DeviceTimeline t{span, limit, samples, allocs,
                       [&](const std::string& key) { return fleet.JobIdOf(key); }};
      Attribute(t, [&](const Piece& p) {
        acc.Add(dev, p.job_id, p.bucket, p.ms, p.coarse ? p.ms : 0, price);
        if (p.bucket == Bucket::kAllocatedIdle) {
          std::array<int64_t, kIdleCauseCount> causes{};
          causes[static_cast<size_t>(p.cause)] = p.ms;
          acc.AddIdleCauses(dev, p.job_id, causes);
        }
      });
    }
  }

  // The conservation law, device by device: every millisecond in service, once.
  for (const store::DeviceRecord& dev : fleet.devices()) {
    int64_t expected =
        dev.in_service_ms ? window.Intersect({dev.in_service_ms, kForever}).length_ms() : 0;
    if (acc.device_ms(dev.id) != expected) {
      return Internal(fmt::format("conservation violated for device {}: {} ms attributed, {} ms "
                                  "in service in the window",
                                  dev.device.uuid, acc.device_ms(dev.id), expected));
    }
  }
  return acc.Finish(window);
}

Result<ChargebackReport> Ledger::Chargeback(const TimeRange& period, bool share_idle) {
  GPULEDGER_ASSIGN_OR_RETURN(UsageReport usage,
                             Usage(period, {Dimension::kTeam, Dimension::kProject}));
  ChargebackReport report;
  report.period = period;
  report.share_idle = share_idle;
  report.total = usage.total.total_cost();
  std::array<Money, kBucketCount> unused{};
  std::array<double, kBucketCount> unused_hours{};
  for (const UsageRow& row : usage.rows) {
    if (row.key[0] == kNoJob) {
      for (Bucket b : {Bucket::kUnallocated, Bucket::kUnavailable, Bucket::kUnmonitored}) {
        unused[static_cast<size_t>(b)] += row.cost[static_cast<size_t>(b)];
        unused_hours[static_cast<size_t>(b)] += row.gpu_hours(b);
      }
      continue;
    }
    ChargebackLine line;
    line.team = row.key[0];
    line.project = row.key[1];
    line.active_gpu_hours = row.gpu_hours(Bucket::kActive);
    line.idle_gpu_hours = row.gpu_hours(Bucket::kAllocatedIdle);
    line.gpu_hours = line.active_gpu_hours + line.idle_gpu_hours;
    line.direct_cost = row.cost[0] + row.cost[1];
    line.idle_cost_by_cause = row.idle_cause_cost;
    report.lines.push_back(std::move(line));
  }
  std::sort(report.lines.begin(), report.lines.end(), [](const auto& a, const auto& b) {
    return std::tie(a.team, a.project) < std::tie(b.team, b.project);
  });
  Money unused_total = unused[2] + unused[3] + unused[4];
  std::vector<Money> weights;
  Money direct_total;
  for (const auto& l : report.lines) {
    weights.push_back(l.direct_cost);
    direct_total += l.direct_cost;
  }
  if (share_idle && direct_total > Money()) {
    std::vector<Money> shares = SplitMoney(unused_total, weights);
    for (size_t i = 0; i < report.lines.size(); ++i) report.lines[i].shared_idle_cost = shares[i];
  } else {
    report.share_idle = false;  // nothing was used, so there is nothing to share by
    for (Bucket b : {Bucket::kUnallocated, Bucket::kUnavailable, Bucket::kUnmonitored}) {
      size_t i = static_cast<size_t>(b);
      if (unused[i] == Money() && unused_hours[i] == 0) continue;
      ChargebackLine line;
      line.team = fmt::format("({})", BucketName(b));
      line.gpu_hours = unused_hours[i];
      line.direct_cost = unused[i];
      report.lines.push_back(std::move(line));
    }
  }
  return report;
}

Result<std::vector<TimelinePoint>> Ledger::Timeline(const TimeRange& window, int64_t step_ms,
                                                    const std::string& pool) {
  if (window.empty() || step_ms <= 0 || step_ms % kMsPerMinute != 0 ||
      window.begin_ms % kMsPerMinute != 0 || window.end_ms % kMsPerMinute != 0) {
    return InvalidArgument("a timeline needs a non-empty window and a step of whole minutes");
  }
  GPULEDGER_RETURN_IF_ERROR(RefreshRollups().status());
  FleetIndex fleet;
  GPULEDGER_RETURN_IF_ERROR(fleet.Load(*store_));
  size_t n = static_cast<size_t>((window.length_ms() + step_ms - 1) / step_ms);
  std::vector<TimelinePoint> points(n);
  std::vector<int64_t> covered(n, 0);
  for (size_t i = 0; i < n; ++i) points[i].begin_ms = window.begin_ms + static_cast<int64_t>(i) * step_ms;
  auto wanted = [&](const store::DeviceRecord& d) { return pool.empty() || d.device.pool == pool; };
  GPULEDGER_RETURN_IF_ERROR(store_->ScanMinuteRollups(window, [&](const store::RollupRow& r) {
    const store::DeviceRecord* dev = fleet.device(r.device_id);
    if (dev == nullptr || !wanted(*dev)) return;
    size_t i = static_cast<size_t>((r.period_ms - window.begin_ms) / step_ms);
    int64_t ticks = fleet.ticks(r.device_id);
    for (size_t b = 0; b < kBucketCount; ++b) {
      points[i].gpu_ticks_ms[b] += r.ms[b] * ticks;
      covered[i] += r.ms[b] * ticks;
    }
  }));
  for (size_t i = 0; i < n; ++i) {
    TimeRange step{points[i].begin_ms, std::min(points[i].begin_ms + step_ms, window.end_ms)};
    int64_t capacity = 0;
    for (const store::DeviceRecord& d : fleet.devices()) {
      if (d.in_service_ms == 0 || !wanted(d)) continue;
      capacity += step.Intersect({d.in_service_ms, kForever}).length_ms() * fleet.ticks(d.id);
    }
    points[i].gpu_ticks_ms[static_cast<size_t>(Bucket::kUnmonitored)] +=
        std::max<int64_t>(0, capacity - covered[i]);
  }
  return points;
}

Result<std::vector<WasteItem>> Ledger::TopWaste(const TimeRange& window, size_t limit) {
  std::vector<WasteItem> items;
  auto collect = [&](std::vector<Dimension> by, Bucket bucket, auto&& describe) -> Status {
    GPULEDGER_ASSIGN_OR_RETURN(UsageReport r, Usage(window, by));
    for (const UsageRow& row : r.rows) {
      Money cost = row.cost[static_cast<size_t>(bucket)];
      if (cost == Money() || row.key[0] == kNoJob) continue;
      items.push_back({describe(row.key), bucket, row.gpu_hours(bucket), cost});
      if (bucket == Bucket::kAllocatedIdle) items.back().idle_cause_cost = row.idle_cause_cost;
    }
    return Status::Ok();
  };
  GPULEDGER_RETURN_IF_ERROR(collect(
      {Dimension::kTeam, Dimension::kProject, Dimension::kKind}, Bucket::kAllocatedIdle,
      [](const std::vector<std::string>& k) {
        return fmt::format("{} / {}: {} jobs held GPUs idle", k[0], k[1], k[2]);
      }));
  GPULEDGER_RETURN_IF_ERROR(collect({Dimension::kPool}, Bucket::kUnallocated,
                                    [](const std::vector<std::string>& k) {
                                      return fmt::format("pool {}: capacity nobody held", k[0]);
                                    }));
  GPULEDGER_RETURN_IF_ERROR(collect({Dimension::kDevice, Dimension::kNode}, Bucket::kUnavailable,
                                    [](const std::vector<std::string>& k) {
                                      return fmt::format("GPU {} on {}: down", k[0], k[1]);
                                    }));
  GPULEDGER_RETURN_IF_ERROR(collect({Dimension::kNode}, Bucket::kUnmonitored,
                                    [](const std::vector<std::string>& k) {
                                      return fmt::format("node {}: no telemetry", k[0]);
                                    }));
  std::stable_sort(items.begin(), items.end(),
                   [](const WasteItem& a, const WasteItem& b) { return a.cost > b.cost; });
  if (items.size() > limit) items.resize(limit);
  return items;
}

}  // namespace gpuledger::ledger
