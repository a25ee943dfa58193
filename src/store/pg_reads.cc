#include "store/pg_reads.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/serving.h"
#include "store/serving_chunk.h"
#include "store/minute_blob.h"
#include "store/pg_util.h"
#include "store/rollup_days.h"
#include "store/sample_chunk.h"

namespace gpuledger::store::pg {
namespace {

Status Corrupt(std::string_view table, std::string_view key, std::string_view why) {
  return Internal(fmt::format("store: {} row {} is corrupt: {}", table, key, why));
}

// The ranges' devices, first and last instants, as three arrays ($1, $2, $3); with
// `bounds`, also the first of the firsts and the last of the lasts ($4, $5), which let
// the planner leave out the partitions no range reaches (kBounded).
Params RangeArrays(std::span<const DeviceRange> ranges, bool from_hour, bool bounds = false) {
  std::vector<int64_t> dev, lo, hi;
  for (const DeviceRange& r : ranges) {
    dev.push_back(r.device_id);
    lo.push_back(from_hour ? FloorTo(r.range.begin_ms, kMsPerHour) : r.range.begin_ms);
    hi.push_back(r.range.end_ms);
  }
  Params p;
  p.AddArray(dev).AddArray(lo).AddArray(hi);
  if (bounds) p.Add(*std::min_element(lo.begin(), lo.end())).Add(*std::max_element(hi.begin(), hi.end()));
  return p;
}

constexpr const char* kRanges =
    "unnest($1::bigint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS r(dev, lo, hi, i)";
// Closes a LATERAL subquery that reads one range of a partitioned table: OFFSET 0 keeps
// the planner from flattening it into a join with the ranges, which it would plan as a
// hash of every row of every partition, for want of knowing how short the ranges are.
// Kept apart, each range is an index lookup in the partitions its times reach.
constexpr const char* kEachRange = "OFFSET 0";
// With RangeArrays' bounds, the time column `{0}` within them all: a constant the planner
// prunes the partitions by before it plans (a 35-day store planned every partition's
// index for each read, 1.3 ms of a read of one device's hour).
constexpr const char* kBounded = "AND {0} >= $4 AND {0} <= $5";

}  // namespace

Status ForEachDayMinutes(const Rows& q,
                         const std::function<Status(int64_t day_ms, int64_t device_id, std::string_view value)>& fn) {
  std::vector<DayMinutesRow> parts;
  for (int i = 0; i < q.rows();) {
    const int64_t day = q.Int(i, 0), device = q.Int(i, 1);
    parts.clear();
    for (; i < q.rows() && q.Int(i, 0) == day && q.Int(i, 1) == device; ++i) {
      parts.push_back({static_cast<int>(q.Int(i, 2)), q.Bytes(i, 3)});
    }
    if (parts.size() == 1 && parts[0].hour == -1) {  // a folded day: the value as stored
      GPULEDGER_RETURN_IF_ERROR(fn(day, device, parts[0].minutes));
      continue;
    }
    Result<std::string> value = FoldDayMinutes(parts);
    if (!value.ok()) {
      return Corrupt("rollup_day_minutes", fmt::format("of device {} on {}", device, FormatTime(day)),
                     value.status().message());
    }
    GPULEDGER_RETURN_IF_ERROR(fn(day, device, *value));
  }
  return Status::Ok();
}

Result<std::vector<DeviceRecord>> Reads::ListDevices() {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT id, uuid, node, model, memory_mib, pool, capacity_type, parent_id, share_num,"
                       " share_den, mig_profile, sample_interval_ms, in_service_ms, last_sample_ms"
                       " FROM devices ORDER BY id",
                       "listing devices"));
  std::vector<DeviceRecord> out;
  std::unordered_map<int64_t, std::string> uuid_of;
  for (int i = 0; i < q.rows(); ++i) {
    DeviceRecord r;
    r.id = q.Int(i, 0);
    r.device.uuid = q.Text(i, 1);
    r.device.node = q.Text(i, 2);
    r.device.model = q.Text(i, 3);
    r.device.memory_mib = q.Int(i, 4);
    r.device.pool = q.Text(i, 5);
    auto type = ParseCapacityType(q.Text(i, 6));
    if (!type.ok()) return Corrupt("devices", r.device.uuid, type.status().message());
    r.device.capacity_type = *type;
    r.parent_id = q.Int(i, 7);
    r.device.share = Share{static_cast<int32_t>(q.Int(i, 8)), static_cast<int32_t>(q.Int(i, 9))};
    r.device.mig_profile = q.Text(i, 10);
    r.device.sample_interval_ms = q.Int(i, 11);
    r.in_service_ms = q.Int(i, 12);
    r.last_sample_ms = q.Int(i, 13);
    uuid_of[r.id] = r.device.uuid;
    out.push_back(std::move(r));
  }
  for (DeviceRecord& r : out) {
    if (r.parent_id == 0) continue;
    auto parent = uuid_of.find(r.parent_id);
    if (parent == uuid_of.end()) return Corrupt("devices", r.device.uuid, "its parent device is missing");
    r.device.parent_uuid = parent->second;
  }
  return out;
}

Result<std::vector<JobRecord>> Reads::ListJobs() {
  std::optional<int64_t> version;
  return ReadJobs(version);
}

Result<std::shared_ptr<const std::vector<JobRecord>>> Reads::SharedJobs() {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows v, c_.Query("SELECT version FROM catalog_versions WHERE name = 'jobs'", "reading the jobs' version"));
  std::optional<int64_t> now = v.rows() == 1 ? v.OptInt(0, 0) : std::nullopt;
  return SharedJobsThrough(*jobs_, now, [&](std::optional<int64_t>& version) { return ReadJobs(version); });
}

Result<std::vector<JobRecord>> Reads::ReadJobs(std::optional<int64_t>& version) {
  // The version of the jobs read (store/job_list_cache.h), in the same statement.
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT id, job_key, team, project, experiment, user_name, kind, pool, priority,"
                       " requested_gpus, requested_mig_profile, submit_ms, start_ms, end_ms, model_parameters,"
                       " model_layers, model_hidden, model_sequence, model_dtype, labels, annotations,"
                       " (SELECT version FROM catalog_versions WHERE name = 'jobs') FROM jobs ORDER BY id",
                       "listing jobs"));
  std::vector<JobRecord> out;
  out.reserve(static_cast<size_t>(q.rows()));
  version = q.rows() > 0 ? q.OptInt(0, 21) : std::nullopt;
  for (int i = 0; i < q.rows(); ++i) {
    JobRecord r;
    r.id = q.Int(i, 0);
    Job& j = r.job;
    j.id = q.Text(i, 1);
    j.team = q.Text(i, 2);
    j.project = q.Text(i, 3);
    j.experiment = q.Text(i, 4);
    j.user = q.Text(i, 5);
    auto kind = ParseJobKind(q.Text(i, 6));
    if (!kind.ok()) return Corrupt("jobs", j.id, kind.status().message());
    j.kind = *kind;
    j.pool = q.Text(i, 7);
    j.priority = static_cast<int32_t>(q.Int(i, 8));
    j.requested_gpus = static_cast<int32_t>(q.Int(i, 9));
    j.requested_mig_profile = q.Text(i, 10);
    j.submit_ms = q.OptInt(i, 11);
    j.start_ms = q.OptInt(i, 12);
    j.end_ms = q.OptInt(i, 13);
    j.model_parameters = q.OptDouble(i, 14);
    j.model_layers = q.Int(i, 15);
    j.model_hidden = q.Int(i, 16);
    j.model_sequence = q.Int(i, 17);
    j.model_dtype = q.Text(i, 18);
    GPULEDGER_RETURN_IF_ERROR(DecodeJobMetadata(q.OptText(i, 19), q.OptText(i, 20), j));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<std::vector<AllocationRecord>>> Reads::AllocationsOf(std::span<const DeviceRange> ranges) {
  std::vector<std::vector<AllocationRecord>> out(ranges.size());
  if (ranges.empty()) return out;
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query(fmt::format("SELECT r.i, a.device_id, a.job_id, a.from_ms, a.to_ms FROM {}"
                                   " JOIN allocations a ON a.device_id = r.dev AND a.from_ms < r.hi"
                                   " AND (a.to_ms IS NULL OR a.to_ms > r.lo) ORDER BY r.i, a.from_ms, a.job_id",
                                   kRanges),
                       RangeArrays(ranges, false), "reading allocations"));
  for (int i = 0; i < q.rows(); ++i) {
    out[static_cast<size_t>(q.Int(i, 0) - 1)].push_back({q.Int(i, 1), q.Int(i, 2), q.Int(i, 3), q.OptInt(i, 4)});
  }
  return out;
}

Result<std::vector<AllocationRecord>> Reads::AllocationsOverlapping(const TimeRange& range) {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT device_id, job_id, from_ms, to_ms FROM allocations WHERE from_ms < $1"
                       " AND (to_ms IS NULL OR to_ms > $2) ORDER BY device_id, from_ms, job_id",
                       Params().Add(range.end_ms).Add(range.begin_ms), "reading allocations"));
  std::vector<AllocationRecord> out;
  for (int i = 0; i < q.rows(); ++i) out.push_back({q.Int(i, 0), q.Int(i, 1), q.Int(i, 2), q.OptInt(i, 3)});
  return out;
}

Result<Rows> Reads::ServingChunksOf(int64_t job_id, const TimeRange& range, bool gauges,
                                    std::vector<ServingChunkRow>& out) {
  // The chunks from the hour of range.begin on: one of an earlier hour ends before it.
  // For the gauges, only each chunk's first bytes (store/serving_chunk.h).
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query(fmt::format("SELECT engine, model, first_ms, {} FROM serving_chunks WHERE job_id = $1"
                                   " AND first_ms >= $2 AND first_ms <= $3",
                                   gauges ? "substring(data from 1 for gauges_end::int)" : "data"),
                       Params().Add(job_id).Add(ServingChunkHour(range.begin_ms)).Add(range.end_ms),
                       "reading serving chunks"));
  out.reserve(static_cast<size_t>(q.rows()));
  for (int i = 0; i < q.rows(); ++i) out.push_back({q.Bytes(i, 0), q.Bytes(i, 1), q.Int(i, 2), q.Bytes(i, 3)});
  return q;
}

Result<std::vector<ServingSnapshot>> Reads::ServingOf(int64_t job_id, const TimeRange& range) {
  std::vector<ServingChunkRow> rows;
  GPULEDGER_ASSIGN_OR_RETURN(Rows held, ServingChunksOf(job_id, range, /*gauges=*/false, rows));
  return ServingOfChunks(job_id, rows, range);
}

Result<std::vector<ServingGauges>> Reads::ServingGaugesOf(int64_t job_id, const TimeRange& range) {
  std::vector<ServingChunkRow> rows;
  GPULEDGER_ASSIGN_OR_RETURN(Rows held, ServingChunksOf(job_id, range, /*gauges=*/true, rows));
  return ServingGaugesOfChunks(job_id, rows, range);
}

Result<std::vector<JobChange>> Reads::JobChangesOf(int64_t job_id) {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT at_ms, batch_id, sender, field, old_value, new_value FROM job_changes WHERE job_id=$1"
                       " ORDER BY at_ms, id",
                       Params().Add(job_id), "reading a job's changes"));
  std::vector<JobChange> out;
  for (int i = 0; i < q.rows(); ++i) {
    out.push_back({q.Int(i, 0), q.Text(i, 1), q.Text(i, 2), q.Text(i, 3), q.Text(i, 4), q.Text(i, 5)});
  }
  return out;
}

Result<std::vector<ClosedPeriodRecord>> Reads::ClosedPeriods() {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT month, begin_ms, end_ms, window_begin_ms, window_end_ms, closed_at_ms, closed_by"
                       " FROM closed_periods ORDER BY month",
                       "reading the closed periods"));
  std::vector<ClosedPeriodRecord> out;
  for (int i = 0; i < q.rows(); ++i) {
    out.push_back({q.Text(i, 0), {q.Int(i, 1), q.Int(i, 2)}, {q.Int(i, 3), q.Int(i, 4)}, q.Int(i, 5), q.Text(i, 6)});
  }
  return out;
}

Result<std::vector<FrozenLine>> Reads::FrozenLines() {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT month, for_month, team, project, capacity, gpu_hours, active_gpu_hours, idle_gpu_hours,"
                       " unpriced_gpu_hours, direct_micros, input_stall_micros, checkpoint_stall_micros,"
                       " held_idle_micros, other_idle_micros FROM frozen_lines ORDER BY month, id",
                       "reading the frozen chargeback lines"));
  static_assert(kIdleCauseCount == 4);
  std::vector<FrozenLine> out;
  for (int i = 0; i < q.rows(); ++i) {
    FrozenLine l{q.Text(i, 0), q.Text(i, 1), q.Text(i, 2), q.Text(i, 3), q.Text(i, 4)};
    l.gpu_hours = q.Double(i, 5);
    l.active_gpu_hours = q.Double(i, 6);
    l.idle_gpu_hours = q.Double(i, 7);
    l.unpriced_gpu_hours = q.Double(i, 8);
    l.direct_cost = Money::FromMicros(q.Int(i, 9));
    for (int c = 0; c < 4; ++c) l.idle_cost_by_cause[static_cast<size_t>(c)] = Money::FromMicros(q.Int(i, 10 + c));
    out.push_back(std::move(l));
  }
  return out;
}

Result<std::vector<Progress>> Reads::ProgressOf(int64_t job_id, const TimeRange& range) {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT t_ms, interval_ms, tokens, model_flops FROM progress WHERE job_id=$1 AND t_ms > $2"
                       " AND t_ms - interval_ms < $3 ORDER BY t_ms",
                       Params().Add(job_id).Add(range.begin_ms).Add(range.end_ms), "reading progress"));
  std::vector<Progress> out;
  for (int i = 0; i < q.rows(); ++i) {
    Progress p;
    p.t_ms = q.Int(i, 0);
    p.interval_ms = q.Int(i, 1);
    p.tokens = q.OptDouble(i, 2);
    p.model_flops = q.OptDouble(i, 3);
    out.push_back(p);
  }
  return out;
}

Result<EncodedChunks> Reads::EncodedChunksOf(std::span<const DeviceRange> ranges) {
  EncodedChunks out;
  if (ranges.empty()) return out;
  // A chunk lies within one hour: those starting from the hour of the range's begin on.
  // Range by range, through the index (see kEachRange): as a join, 256 short ranges were
  // planned as a hash of every chunk of every partition (220 ms, where this takes 6).
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query(fmt::format("SELECT r.i, c.first_ms, c.data FROM {} CROSS JOIN LATERAL"
                                   " (SELECT first_ms, data FROM sample_chunks"
                                   " WHERE device_id = r.dev AND first_ms >= r.lo AND first_ms <= r.hi {} {}) c"
                                   " ORDER BY r.i, c.first_ms",
                                   kRanges, fmt::format(kBounded, "first_ms"), kEachRange),
                       RangeArrays(ranges, true, true), "reading samples"));
  for (int i = 0; i < q.rows(); ++i) {
    const int64_t at = q.Int(i, 0) - 1;
    if (at < 0 || static_cast<size_t>(at) >= ranges.size()) {
      return Corrupt("sample_chunks", fmt::format("of range {}", at + 1), "no such range was asked for");
    }
    out.Add(static_cast<size_t>(at), q.Int(i, 1), q.Bytes(i, 2));
  }
  return out;
}

Result<std::vector<std::vector<Sample>>> Reads::SamplesOf(std::span<const DeviceRange> ranges) {
  GPULEDGER_ASSIGN_OR_RETURN(EncodedChunks chunks, EncodedChunksOf(ranges));
  GPULEDGER_ASSIGN_OR_RETURN(auto out, DecodeSamplesOf(ranges, chunks));
  if (ranges.empty()) return out;
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows p, c_.Query(fmt::format("SELECT r.i, p.t_ms, p.pid, p.job_key, p.fb_used_mib, p.sm_share FROM {}"
                                   " CROSS JOIN LATERAL (SELECT t_ms, pid, job_key, fb_used_mib, sm_share"
                                   " FROM process_samples WHERE device_id = r.dev AND t_ms >= r.lo AND t_ms <= r.hi {} {}) p"
                                   " ORDER BY r.i, p.t_ms, p.pid",
                                   kRanges, fmt::format(kBounded, "t_ms"), kEachRange),
                       RangeArrays(ranges, false, true), "reading process samples"));
  size_t cursor = 0, cursor_of = SIZE_MAX;
  for (int i = 0; i < p.rows(); ++i) {
    const size_t at = static_cast<size_t>(p.Int(i, 0) - 1);
    if (at != cursor_of) {
      cursor_of = at;
      cursor = 0;
    }
    std::vector<Sample>& samples = out[at];
    int64_t t = p.Int(i, 1);
    while (cursor < samples.size() && samples[cursor].t_ms < t) ++cursor;
    if (cursor == samples.size() || samples[cursor].t_ms != t) continue;  // its sample was pruned
    auto memory = p.OptDouble(i, 4);
    if (!memory) {
      return Corrupt("process_samples",
                     fmt::format("of device {} at {} pid {}", ranges[at].device_id, FormatTime(t), p.Int(i, 2)),
                     "fb_used_mib is null");
    }
    samples[cursor].processes.push_back(ProcessSample{p.Int(i, 2), p.Text(i, 3), *memory, p.OptDouble(i, 5)});
  }
  return out;
}

Result<std::unordered_map<int64_t, Sample>> Reads::LatestSamples() {
  // The chunk that holds each device's latest sample (a chunk lies within one hour),
  // looked up device by device (kEachRange): as a join, the planner hashed every chunk of
  // every partition (300 ms at 1,000 GPUs) to find one per device.
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query(fmt::format("SELECT d.id, c.first_ms, c.data, d.last_sample_ms FROM devices d CROSS JOIN LATERAL"
                                   " (SELECT first_ms, data FROM sample_chunks WHERE device_id = d.id"
                                   " AND first_ms >= d.last_sample_ms - d.last_sample_ms % 3600000"
                                   " AND first_ms <= d.last_sample_ms AND last_ms >= d.last_sample_ms {}) c"
                                   " WHERE d.last_sample_ms > 0",
                                   kEachRange),
                       "reading the latest samples"));
  std::unordered_map<int64_t, Sample> out;
  std::vector<Sample> decoded;
  for (int i = 0; i < q.rows(); ++i) {
    int64_t device = q.Int(i, 0), first = q.Int(i, 1), last = q.Int(i, 3);
    decoded.clear();
    if (!DecodeChunk(q.Bytes(i, 2), first, last, last, decoded)) {
      return Corrupt("sample_chunks", fmt::format("of device {} at {}", device, FormatTime(first)),
                     "the chunk does not decode");
    }
    if (!decoded.empty()) out[device] = std::move(decoded.back());
  }
  return out;
}

namespace {
std::vector<DirtyHour> DirtyRows(const Rows& q) {
  std::vector<DirtyHour> out;
  for (int i = 0; i < q.rows(); ++i) out.push_back({q.Int(i, 0), q.Int(i, 1), q.Int(i, 2)});
  return out;
}
}  // namespace

Result<std::vector<DirtyHour>> Reads::DirtyHours(size_t limit) {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT device_id, hour_ms, generation FROM dirty_hours WHERE generation >= 0"
                       " ORDER BY hour_ms, device_id LIMIT $1",
                       Params().Add(static_cast<int64_t>(limit)), "reading dirty hours"));
  return DirtyRows(q);
}

Result<std::vector<DirtyHour>> Reads::DirtyHoursIn(const TimeRange& hours) {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT device_id, hour_ms, generation FROM dirty_hours WHERE hour_ms >= $1 AND hour_ms < $2"
                       " AND generation >= 0"
                       " ORDER BY device_id, hour_ms",
                       Params().Add(hours.begin_ms).Add(hours.end_ms), "reading dirty hours"));
  return DirtyRows(q);
}

Result<std::vector<std::pair<int64_t, int64_t>>> Reads::DayVersions(const TimeRange& days) {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT day_ms, version FROM rollup_day_versions WHERE day_ms >= $1 AND day_ms < $2 ORDER BY day_ms",
                       Params().Add(days.begin_ms).Add(days.end_ms), "reading day versions"));
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(static_cast<size_t>(q.rows()));
  for (int i = 0; i < q.rows(); ++i) out.emplace_back(q.Int(i, 0), q.Int(i, 1));
  return out;
}

Status Reads::ReadDay(int64_t day_ms, std::optional<int64_t>& version, const std::function<void(const DayRow&)>& fn) {
  // The version with the rows, in one statement: the rows are those of that version even
  // outside a snapshot's transaction (the writer's connection).
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT v.version, r.device_id, r.job_id, r.active_ms, r.idle_ms, r.unallocated_ms,"
                       " r.unavailable_ms, r.unmonitored_ms, r.coarse_ms, r.input_stall_ms, r.checkpoint_stall_ms,"
                       " r.held_idle_ms, r.hour_rows FROM rollup_day r"
                       " LEFT JOIN rollup_day_versions v ON v.day_ms = r.day_ms WHERE r.day_ms = $1",
                       Params().Add(day_ms), "reading day rollups"));
  DayRow d;
  for (int i = 0; i < q.rows(); ++i) {
    if (q.IsNull(i, 0)) {
      version.reset();
    } else {
      version = q.Int(i, 0);
    }
    d.sum.device_id = q.Int(i, 1);
    d.sum.job_id = q.Int(i, 2);
    ReadRollupFigures(q, i, 3, d.sum);
    d.hour_rows = q.Int(i, 12);
    fn(d);
  }
  return Status::Ok();
}

Status Reads::ReadDayHours(const TimeRange& days, const DayHoursFn& fn) {
  GPULEDGER_ASSIGN_OR_RETURN(Rows q, c_.Query("SELECT day_ms, device_id, hours FROM rollup_day_hours"
                                              " WHERE day_ms >= $1 AND day_ms < $2",
                                              Params().Add(days.begin_ms).Add(days.end_ms), "reading day hours"));
  for (int i = 0; i < q.rows(); ++i) GPULEDGER_RETURN_IF_ERROR(fn(q.Int(i, 0), q.Int(i, 1), q.Bytes(i, 2)));
  return Status::Ok();
}

Status Reads::ReadDirtyDayHours(const TimeRange& hours, const DayHoursFn& fn) {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT d.hour_ms, d.device_id, r.hours FROM dirty_hours d JOIN rollup_day_hours r"
                       " ON r.day_ms = d.hour_ms - ((d.hour_ms % 86400000) + 86400000) % 86400000"
                       " AND r.device_id = d.device_id WHERE d.hour_ms >= $1 AND d.hour_ms < $2 AND d.generation >= 0",
                       Params().Add(hours.begin_ms).Add(hours.end_ms), "reading the day hours of dirty hours"));
  for (int i = 0; i < q.rows(); ++i) GPULEDGER_RETURN_IF_ERROR(fn(q.Int(i, 0), q.Int(i, 1), q.Bytes(i, 2)));
  return Status::Ok();
}

Result<std::vector<RollupSum>> Reads::SumHourRollups(const TimeRange& hours) {
  return SumHourRollupsThroughCache(*this, *days_, hours, /*settled=*/false);
}
Result<std::vector<RollupSum>> Reads::SumSettledHourRollups(const TimeRange& hours) {
  return SumHourRollupsThroughCache(*this, *days_, hours, /*settled=*/true);
}

Status Reads::ScanHourRollups(const TimeRange& hours, const std::function<Status(const RollupRow&)>& fn) {
  // A day per query: the rows of a day cross the wire together, and memory is one day's.
  // Each day from its day-hours rows, a row per device (store/rollup_days.h), and of
  // their rows those in the range.
  for (int64_t day = FloorTo(hours.begin_ms, kMsPerDay); day < hours.end_ms; day += kMsPerDay) {
    GPULEDGER_ASSIGN_OR_RETURN(Rows q, c_.Query("SELECT device_id, hours FROM rollup_day_hours WHERE day_ms = $1"
                                                " ORDER BY device_id",
                                                Params().Add(day), "reading day hours"));
    DayHoursScan scan([&](const RollupRow& r) { return hours.Contains(r.period_ms) ? fn(r) : Status::Ok(); });
    for (int i = 0; i < q.rows(); ++i) GPULEDGER_RETURN_IF_ERROR(scan.Add(day, q.Int(i, 0), q.Bytes(i, 1)));
    GPULEDGER_RETURN_IF_ERROR(scan.Finish());
  }
  return Status::Ok();
}

Status Reads::ScanMinuteRollups(const TimeRange& range, const std::function<void(const RollupRow&)>& fn,
                                bool settled_only) {
  if (range.empty()) return Status::Ok();
  DirtySet dirty;
  if (settled_only) {
    GPULEDGER_ASSIGN_OR_RETURN(auto marks, DirtyHoursIn({FloorTo(range.begin_ms, kMsPerHour), range.end_ms}));
    dirty = DirtySet(marks);
  }
  // Some days per query, as many as hold about kRowsPerQuery rows by the days read so
  // far (a day first): memory stays some thousands of rows (each up to some 5 KB), and a
  // month of a small fleet is a few statements rather than 31.
  constexpr int64_t kRowsPerQuery = 10'000;
  int64_t days_per_query = 1;
  for (int64_t from = FloorTo(range.begin_ms, kMsPerDay); from < range.end_ms;) {
    const int64_t to = std::min(from + days_per_query * kMsPerDay, FloorTo(range.end_ms - 1, kMsPerDay) + kMsPerDay);
    GPULEDGER_ASSIGN_OR_RETURN(Rows q, c_.Query("SELECT day_ms, device_id, hour, minutes FROM rollup_day_minutes"
                                                " WHERE day_ms >= $1 AND day_ms < $2 ORDER BY day_ms, device_id, hour",
                                                Params().Add(from).Add(to), "reading minute rollups"));
    const int64_t per_day = q.rows() / std::max<int64_t>(1, (to - from) / kMsPerDay);
    days_per_query = std::max<int64_t>(1, kRowsPerQuery / std::max<int64_t>(1, per_day));
    from = to;
    GPULEDGER_RETURN_IF_ERROR(ForEachDayMinutes(q, [&](int64_t day, int64_t device, std::string_view value) {
      if (!value.empty() && !DecodeDayMinutes(value, day, device, range,
                                              [&](int64_t hour) { return dirty.Holds(device, hour); }, fn)) {
        return Corrupt("rollup_day_minutes", fmt::format("of device {} on {}", device, FormatTime(day)),
                       "the minutes are corrupt");
      }
      return Status::Ok();
    }));
  }
  return Status::Ok();
}

Result<PriceBook> Reads::LoadPriceBook() {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT model, pool, capacity_type, micros_per_hour, begin_ms, end_ms FROM prices ORDER BY id",
                       "reading the price book"));
  std::vector<PriceEntry> entries;
  for (int i = 0; i < q.rows(); ++i) {
    PriceEntry e;
    e.model = q.Text(i, 0);
    e.pool = q.Text(i, 1);
    auto type = ParseCapacityType(q.Text(i, 2));
    if (!type.ok()) return Corrupt("prices", fmt::format("{}/{}", e.model, e.pool), type.status().message());
    e.capacity_type = *type;
    e.per_gpu_hour = Money::FromMicros(q.Int(i, 3));
    e.valid = {q.Int(i, 4), q.Int(i, 5)};
    entries.push_back(std::move(e));
  }
  return PriceBook::Create(std::move(entries));
}

Result<StoreStats> Reads::Stats() {
  GPULEDGER_ASSIGN_OR_RETURN(
      Rows q, c_.Query("SELECT (SELECT count(*) FROM batch_ids) +"
                       " (SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM batch_ranges)::bigint,"
                       " (SELECT count(*) FROM devices),"
                       " (SELECT count(*) FROM jobs), s.n, s.rows, (SELECT count(*) FROM dirty_hours WHERE generation >= 0),"
                       " pg_database_size(current_database())"
                       " FROM (SELECT coalesce(sum(n), 0)::bigint, count(*) FROM sample_chunks) AS s(n, rows)",
                       "reading the store's figures"));
  StoreStats s;
  s.batches = q.Int(0, 0);
  s.devices = q.Int(0, 1);
  s.jobs = q.Int(0, 2);
  s.samples = q.Int(0, 3);
  s.sample_rows = q.Int(0, 4);
  s.dirty_hours = q.Int(0, 5);
  s.bytes = q.Int(0, 6);
  return s;
}

}  // namespace gpuledger::store::pg
