#include "server/query_limits.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>

#include "server/api.h"
#include "store/store.h"

namespace gpuledger::server {
namespace {

using ledger::Dimension;

bool IsJobDimension(Dimension d) {
  switch (d) {
    case Dimension::kTeam:
    case Dimension::kProject:
    case Dimension::kExperiment:
    case Dimension::kUser:
    case Dimension::kKind:
    case Dimension::kJob:
      return true;
    default:
      return false;
  }
}

// a * b, saturating at INT64_MAX (both non-negative).
int64_t Times(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > INT64_MAX / b ? INT64_MAX : a * b;
}

}  // namespace

const QueryLimits& LimitsOf(const QueryContext& q) {
  static const QueryLimits kDefaults;
  return q.limits != nullptr ? *q.limits : kDefaults;
}

TimeRange DataWindow(const QueryContext& q, const TimeRange& window) {
  if (q.data_first_ms == 0 || q.data_end_ms == 0) return {window.begin_ms, window.begin_ms};
  TimeRange data{FloorTo(q.data_first_ms, kMsPerHour), std::min(q.data_end_ms, q.now_ms)};
  TimeRange clipped = window.Intersect(data);
  if (clipped.empty()) return {window.begin_ms, window.begin_ms};
  return clipped;
}

Result<QueryCost> EstimateCost(const QueryContext& q, const TimeRange& window, const std::vector<Dimension>& dims) {
  QueryCost cost;
  cost.hourly = std::find(dims.begin(), dims.end(), Dimension::kHour) != dims.end();
  if (!window.empty()) {
    cost.hours = (FloorTo(window.end_ms + kMsPerHour - 1, kMsPerHour) - FloorTo(window.begin_ms, kMsPerHour)) / kMsPerHour;
  }
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, q.ledger.Devices());
  cost.devices = static_cast<int64_t>(devices.size());
  bool by_job = std::any_of(dims.begin(), dims.end(), IsJobDimension);
  // The jobs that overlap the window (one that ended before it, or started after it, has
  // no row in it), counted from the store's shared job list (StoreReads::CountJobs).
  store::JobCounts jobs;
  if (by_job) {
    GPULEDGER_ASSIGN_OR_RETURN(jobs, q.ledger.CountJobs(window));
  }
  auto distinct = [](const auto& items, auto&& field) {
    std::set<std::string> seen;
    for (const auto& x : items) seen.insert(field(x));
    return static_cast<int64_t>(seen.size());
  };
  int64_t product = 1;
  for (Dimension d : dims) {
    int64_t n = 1;
    switch (d) {
      case Dimension::kHour: continue;
      case Dimension::kDevice: n = cost.devices; break;
      case Dimension::kNode: n = distinct(devices, [](const store::DeviceRecord& r) { return r.device.node; }); break;
      case Dimension::kModel: n = distinct(devices, [](const store::DeviceRecord& r) { return r.device.model; }); break;
      case Dimension::kPool: n = distinct(devices, [](const store::DeviceRecord& r) { return r.device.pool; }); break;
      // Each job attribute has at most a value per job, and the "(no job)" row.
      case Dimension::kTeam: n = jobs.teams + 1; break;
      case Dimension::kProject: n = jobs.projects + 1; break;
      case Dimension::kExperiment: n = jobs.experiments + 1; break;
      case Dimension::kUser: n = jobs.users + 1; break;
      case Dimension::kKind: n = jobs.kinds + 1; break;
      case Dimension::kJob: n = jobs.jobs + 1; break;
    }
    product = Times(product, std::max<int64_t>(n, 1));
  }
  int64_t by_pair = Times(std::max<int64_t>(cost.devices, 1), by_job ? jobs.jobs + 1 : 1);
  cost.groups = std::min(product, by_pair);
  return cost;
}

Status CheckCost(const QueryContext& q, const QueryCost& cost, bool rows_are_the_answer) {
  const QueryLimits& limits = LimitsOf(q);
  if (cost.hourly && cost.device_hours() > limits.max_device_hours) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("the window holds {} hours of data on {} devices: {} device-hours is over "
                              "the limit of {} device-hours per query (max_device_hours); ask for a "
                              "shorter window",
                              cost.hours, cost.devices, cost.device_hours(), limits.max_device_hours));
  }
  if (rows_are_the_answer && Times(cost.hourly ? cost.hours : 1, cost.groups) > limits.max_rows) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("the answer could hold {} rows: over the limit of {} rows per answer "
                              "(max_rows); ask for a shorter window or fewer dimensions",
                              Times(cost.hourly ? cost.hours : 1, cost.groups), limits.max_rows));
  }
  return Status::Ok();
}

Status ForEachHourlyRow(const QueryContext& q, const TimeRange& window, const std::vector<Dimension>& dims,
                        const QueryCost& cost, const std::function<Status(const ledger::UsageRow&)>& fn) {
  if (window.empty()) return Status::Ok();
  const QueryLimits& limits = LimitsOf(q);
  int64_t chunk_hours = std::max<int64_t>(1, limits.max_rows_in_flight / std::max<int64_t>(cost.groups, 1));
  for (int64_t begin = window.begin_ms; begin < window.end_ms;) {
    // Chunks end on hours, so that no hour is split between two of them.
    int64_t end = std::min(window.end_ms, FloorTo(begin, kMsPerHour) + chunk_hours * kMsPerHour);
    GPULEDGER_ASSIGN_OR_RETURN(ledger::UsageReport r,
                               q.ledger.Usage({begin, end}, dims, ledger::Ledger::RowOrder::kUnordered));
    for (const ledger::UsageRow& row : r.rows) GPULEDGER_RETURN_IF_ERROR(fn(row));
    begin = end;
  }
  return Status::Ok();
}

}  // namespace gpuledger::server
