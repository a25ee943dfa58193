#include "store/sqlite_reads.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <unordered_map>

#include "core/serving.h"
#include "store/batch_ids.h"
#include "store/day_cache.h"
#include "store/minute_blob.h"
#include "store/rollup_days.h"
#include "store/sample_chunk.h"
#include "store/serving_chunk.h"
#include "store/sqlite_util.h"

namespace gpuledger::store::sqlite {
namespace {

// A stored row that does not read back: an error naming the table and the row's key.
Status Corrupt(std::string_view table, std::string_view key, std::string_view why) {
  return Internal(fmt::format("store: {} row {} is corrupt: {}", table, key, why));
}

}  // namespace

Reads::~Reads() = default;

Result<std::unique_ptr<Reads>> Reads::Create(sqlite3* db, std::shared_ptr<DayRowCache> days,
                                             std::shared_ptr<JobListCache> jobs) {
  std::unique_ptr<Reads> r(new Reads(db, std::move(days), std::move(jobs)));
  GPULEDGER_RETURN_IF_ERROR(r->Prepare());
  return r;
}

Stmt& Reads::S(Id id) { return stmts_[id]->Reset(); }

Status Reads::Prepare() {
  const std::pair<Id, std::string> sql[] = {
      {kListDevices,
       "SELECT id, uuid, node, model, memory_mib, pool, capacity_type, parent_id, share_num,"
       " share_den, mig_profile, sample_interval_ms, in_service_ms, last_sample_ms"
       " FROM devices ORDER BY id"},
      {kListJobs,
       "SELECT id, job_key, team, project, experiment, user_name, kind, pool, priority,"
       " requested_gpus, requested_mig_profile, submit_ms, start_ms, end_ms, model_parameters,"
       " model_layers, model_hidden, model_sequence, model_dtype, labels, annotations,"
       // The version of the jobs read (store/job_list_cache.h), in the same statement.
       " (SELECT version FROM catalog_versions WHERE name = 'jobs') FROM jobs ORDER BY id"},
      {kJobsVersion, "SELECT version FROM catalog_versions WHERE name = 'jobs'"},
      // A job's chunks that may hold snapshots from ?2 to ?3: the first from the hour of ?2.
      {kServingChunksOf,
       "SELECT engine, model, first_ms, data FROM serving_chunks WHERE job_id=?1 AND first_ms >= ?2 AND first_ms <= ?3"},
      // Their first sections alone (store/serving_chunk.h), for the gauges.
      {kServingGaugeChunksOf,
       "SELECT engine, model, first_ms, substr(data, 1, gauges_end) FROM serving_chunks WHERE job_id=?1"
       " AND first_ms >= ?2 AND first_ms <= ?3"},
      {kProgressOf,
       "SELECT t_ms, interval_ms, tokens, model_flops FROM progress WHERE job_id=?1 AND t_ms > ?2"
       " AND t_ms - interval_ms < ?3 ORDER BY t_ms"},
      {kClosedPeriods,
       "SELECT month, begin_ms, end_ms, window_begin_ms, window_end_ms, closed_at_ms, closed_by"
       " FROM closed_periods ORDER BY month"},
      {kFrozenLines,
       "SELECT month, for_month, team, project, capacity, gpu_hours, active_gpu_hours, idle_gpu_hours,"
       " unpriced_gpu_hours, direct_micros, input_stall_micros, checkpoint_stall_micros, held_idle_micros,"
       " other_idle_micros FROM frozen_lines ORDER BY month, rowid"},
      {kJobChangesOf,
       "SELECT at_ms, batch_id, sender, field, old_value, new_value FROM job_changes WHERE job_id=?1"
       " ORDER BY at_ms, rowid"},
      {kAllocationsOfDevice,
       "SELECT device_id, job_id, from_ms, to_ms FROM allocations WHERE device_id=?1"
       " AND from_ms < ?2 AND (to_ms IS NULL OR to_ms > ?3) ORDER BY from_ms, job_id"},
      {kAllocationsOverlapping,
       "SELECT device_id, job_id, from_ms, to_ms FROM allocations WHERE from_ms < ?1"
       " AND (to_ms IS NULL OR to_ms > ?2) ORDER BY device_id, from_ms, job_id"},
      // A chunk lies within one hour: those starting from the hour of ?2 on.
      {kSamplesOfDevice,
       "SELECT first_ms, data FROM sample_chunks WHERE device_id=?1 AND first_ms >= ?2"
       " AND first_ms <= ?3 ORDER BY first_ms"},
      {kProcessesOfDevice,
       "SELECT t_ms, pid, job_key, fb_used_mib, sm_share FROM process_samples"
       " WHERE device_id=?1 AND t_ms >= ?2 AND t_ms <= ?3 ORDER BY t_ms, pid"},
      {kDirtyHours, "SELECT device_id, hour_ms, generation FROM dirty_hours LIMIT ?1"},
      // The chunk that holds each device's latest sample (a chunk lies within one hour).
      // CROSS JOIN keeps this order: from each device to its chunks by the index. Left to
      // itself SQLite scanned every chunk of the store (all 31 days of a 1,000-GPU store,
      // 330 ms, for one chunk per device).
      {kLatestSamples,
       "SELECT c.device_id, c.first_ms, c.data, d.last_sample_ms FROM devices d CROSS JOIN sample_chunks c"
       " ON c.device_id = d.id AND c.first_ms >= d.last_sample_ms - d.last_sample_ms % 3600000"
       " AND c.first_ms <= d.last_sample_ms AND c.last_ms >= d.last_sample_ms"
       " WHERE d.last_sample_ms > 0"},
      {kScanDayHours,
       "SELECT day_ms, device_id, hours FROM rollup_day_hours WHERE day_ms >= ?1 AND day_ms < ?2"
       " ORDER BY day_ms, device_id"},
      {kDirtyHoursIn,
       "SELECT device_id, hour_ms, generation FROM dirty_hours WHERE hour_ms >= ?1 AND hour_ms < ?2"
       " ORDER BY device_id, hour_ms"},
      // Each dirty mark's device-day hours, by key. CROSS JOIN keeps this order: from each
      // mark of the range to the one row of its device-day.
      {kDirtyDayHours,
       "SELECT d.hour_ms, d.device_id, r.hours FROM dirty_hours d CROSS JOIN rollup_day_hours r"
       " ON r.day_ms = d.hour_ms - ((d.hour_ms % 86400000) + 86400000) % 86400000 AND r.device_id = d.device_id"
       " WHERE d.hour_ms >= ?1 AND d.hour_ms < ?2"},
      {kDayVersions, "SELECT day_ms, version FROM rollup_day_versions WHERE day_ms >= ?1 AND day_ms < ?2 ORDER BY day_ms"},
      {kReadDay,
       "SELECT v.version, r.device_id, r.job_id, r.active_ms, r.idle_ms, r.unallocated_ms, r.unavailable_ms,"
       " r.unmonitored_ms, r.coarse_ms, r.input_stall_ms, r.checkpoint_stall_ms, r.held_idle_ms, r.hour_rows"
       " FROM rollup_day r LEFT JOIN rollup_day_versions v ON v.day_ms = r.day_ms WHERE r.day_ms = ?1"},
      {kScanDayMinutes,
       "SELECT day_ms, device_id, minutes FROM rollup_day_minutes WHERE day_ms >= ?1 AND day_ms < ?2"
       " ORDER BY day_ms, device_id"},
      {kLoadPrices,
       "SELECT model, pool, capacity_type, micros_per_hour, begin_ms, end_ms FROM prices ORDER BY id"},
  };
  stmts_.resize(kCount);
  for (const auto& [id, text] : sql) {
    stmts_[id] = std::make_unique<Stmt>();
    GPULEDGER_RETURN_IF_ERROR(stmts_[id]->Prepare(db_, text));
  }
  return Status::Ok();
}

Result<std::vector<DeviceRecord>> Reads::ListDevices() {
  Stmt& q = S(kListDevices);
  std::vector<DeviceRecord> out;
  std::unordered_map<int64_t, std::string> uuid_of;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "devices", [&]() -> Status {
    DeviceRecord r;
    r.id = q.Int(0);
    r.device.uuid = q.Text(1);
    r.device.node = q.Text(2);
    r.device.model = q.Text(3);
    r.device.memory_mib = q.Int(4);
    r.device.pool = q.Text(5);
    auto type = ParseCapacityType(q.Text(6));
    if (!type.ok()) return Corrupt("devices", r.device.uuid, type.status().message());
    r.device.capacity_type = *type;
    r.parent_id = q.Int(7);
    r.device.share = Share{static_cast<int32_t>(q.Int(8)), static_cast<int32_t>(q.Int(9))};
    r.device.mig_profile = q.Text(10);
    r.device.sample_interval_ms = q.Int(11);
    r.in_service_ms = q.Int(12);
    r.last_sample_ms = q.Int(13);
    uuid_of[r.id] = r.device.uuid;
    out.push_back(std::move(r));
    return Status::Ok();
  }));
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
  Stmt& v = S(kJobsVersion);
  std::optional<int64_t> now;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, v, "catalog_versions", [&]() -> Status {
    now = v.OptInt(0);
    return Status::Ok();
  }));
  return SharedJobsThrough(*jobs_, now, [&](std::optional<int64_t>& version) { return ReadJobs(version); });
}

Result<std::vector<JobRecord>> Reads::ReadJobs(std::optional<int64_t>& version) {
  Stmt& q = S(kListJobs);
  std::vector<JobRecord> out;
  version.reset();
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "jobs", [&]() -> Status {
    version = q.OptInt(21);
    JobRecord r;
    r.id = q.Int(0);
    Job& j = r.job;
    j.id = q.Text(1);
    j.team = q.Text(2);
    j.project = q.Text(3);
    j.experiment = q.Text(4);
    j.user = q.Text(5);
    auto kind = ParseJobKind(q.Text(6));
    if (!kind.ok()) return Corrupt("jobs", j.id, kind.status().message());
    j.kind = *kind;
    j.pool = q.Text(7);
    j.priority = static_cast<int32_t>(q.Int(8));
    j.requested_gpus = static_cast<int32_t>(q.Int(9));
    j.requested_mig_profile = q.Text(10);
    j.submit_ms = q.OptInt(11);
    j.start_ms = q.OptInt(12);
    j.end_ms = q.OptInt(13);
    j.model_parameters = q.OptDouble(14);
    j.model_layers = q.Int(15);
    j.model_hidden = q.Int(16);
    j.model_sequence = q.Int(17);
    j.model_dtype = q.Text(18);
    GPULEDGER_RETURN_IF_ERROR(DecodeJobMetadata(q.OptText(19), q.OptText(20), j));
    out.push_back(std::move(r));
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<AllocationRecord>> Reads::ReadAllocations(Stmt& q) {
  std::vector<AllocationRecord> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "allocations", [&] {
    out.push_back({q.Int(0), q.Int(1), q.Int(2), q.OptInt(3)});
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<std::vector<AllocationRecord>>> Reads::AllocationsOf(std::span<const DeviceRange> ranges) {
  // In-process SQLite pays no round trip per statement: one indexed read per entry.
  std::vector<std::vector<AllocationRecord>> out;
  out.reserve(ranges.size());
  for (const DeviceRange& r : ranges) {
    Stmt& q = S(kAllocationsOfDevice);
    q.Bind(1, r.device_id).Bind(2, r.range.end_ms).Bind(3, r.range.begin_ms);
    GPULEDGER_ASSIGN_OR_RETURN(auto allocs, ReadAllocations(q));
    out.push_back(std::move(allocs));
  }
  return out;
}

Result<std::vector<AllocationRecord>> Reads::AllocationsOverlapping(const TimeRange& range) {
  Stmt& q = S(kAllocationsOverlapping);
  q.Bind(1, range.end_ms).Bind(2, range.begin_ms);
  return ReadAllocations(q);
}

Result<std::vector<ServingSnapshot>> Reads::ServingOf(int64_t job_id, const TimeRange& range) {
  ServingChunksRead read;
  GPULEDGER_RETURN_IF_ERROR(ReadServingChunks(kServingChunksOf, job_id, range, read));
  return ServingOfChunks(job_id, read.rows, range);
}

Result<std::vector<ServingGauges>> Reads::ServingGaugesOf(int64_t job_id, const TimeRange& range) {
  ServingChunksRead read;
  GPULEDGER_RETURN_IF_ERROR(ReadServingChunks(kServingGaugeChunksOf, job_id, range, read));
  return ServingGaugesOfChunks(job_id, read.rows, range);
}

Status Reads::ReadServingChunks(Id statement, int64_t job_id, const TimeRange& range, ServingChunksRead& out) {
  Stmt& q = S(statement);
  q.Bind(1, job_id).Bind(2, ServingChunkHour(range.begin_ms)).Bind(3, range.end_ms);
  std::vector<int64_t> first;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "serving_chunks", [&] {
    first.push_back(q.Int(2));
    out.held.emplace_back(q.Text(0));
    out.held.emplace_back(q.Text(1));
    out.held.emplace_back(q.Blob(3));
    return Status::Ok();
  }));
  for (size_t i = 0; i < first.size(); ++i) {
    out.rows.push_back({out.held[3 * i], out.held[3 * i + 1], first[i], out.held[3 * i + 2]});
  }
  return Status::Ok();
}

Result<std::vector<JobChange>> Reads::JobChangesOf(int64_t job_id) {
  Stmt& q = S(kJobChangesOf);
  q.Bind(1, job_id);
  std::vector<JobChange> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "job_changes", [&] {
    out.push_back({q.Int(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4), q.Text(5)});
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<ClosedPeriodRecord>> Reads::ClosedPeriods() {
  Stmt& q = S(kClosedPeriods);
  std::vector<ClosedPeriodRecord> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "closed_periods", [&] {
    out.push_back({q.Text(0), {q.Int(1), q.Int(2)}, {q.Int(3), q.Int(4)}, q.Int(5), q.Text(6)});
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<FrozenLine>> Reads::FrozenLines() {
  Stmt& q = S(kFrozenLines);
  std::vector<FrozenLine> out;
  static_assert(kIdleCauseCount == 4);
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "frozen_lines", [&] {
    FrozenLine l{q.Text(0), q.Text(1), q.Text(2), q.Text(3), q.Text(4)};
    l.gpu_hours = q.Double(5);
    l.active_gpu_hours = q.Double(6);
    l.idle_gpu_hours = q.Double(7);
    l.unpriced_gpu_hours = q.Double(8);
    l.direct_cost = Money::FromMicros(q.Int(9));
    for (int c = 0; c < 4; ++c) l.idle_cost_by_cause[static_cast<size_t>(c)] = Money::FromMicros(q.Int(10 + c));
    out.push_back(std::move(l));
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<Progress>> Reads::ProgressOf(int64_t job_id, const TimeRange& range) {
  Stmt& q = S(kProgressOf);
  q.Bind(1, job_id).Bind(2, range.begin_ms).Bind(3, range.end_ms);
  std::vector<Progress> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "progress", [&] {
    Progress p;
    p.t_ms = q.Int(0);
    p.interval_ms = q.Int(1);
    p.tokens = q.OptDouble(2);
    p.model_flops = q.OptDouble(3);
    out.push_back(p);
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<std::vector<Sample>>> Reads::SamplesOf(std::span<const DeviceRange> ranges) {
  GPULEDGER_ASSIGN_OR_RETURN(EncodedChunks chunks, EncodedChunksOf(ranges));
  GPULEDGER_ASSIGN_OR_RETURN(auto out, DecodeSamplesOf(ranges, chunks));
  for (size_t i = 0; i < ranges.size(); ++i) {
    GPULEDGER_RETURN_IF_ERROR(AddProcesses(ranges[i].device_id, ranges[i].range, out[i]));
  }
  return out;
}

Result<EncodedChunks> Reads::EncodedChunksOf(std::span<const DeviceRange> ranges) {
  EncodedChunks out;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const DeviceRange& r = ranges[i];
    Stmt& q = S(kSamplesOfDevice);
    q.Bind(1, r.device_id).Bind(2, FloorTo(r.range.begin_ms, kMsPerHour)).Bind(3, r.range.end_ms);
    GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "sample_chunks", [&]() -> Status {
      out.Add(i, q.Int(0), q.Blob(1));
      return Status::Ok();
    }));
  }
  return out;
}

Status Reads::AddProcesses(int64_t device_id, const TimeRange& range, std::vector<Sample>& out) {
  Stmt& p = S(kProcessesOfDevice);
  p.Bind(1, device_id).Bind(2, range.begin_ms).Bind(3, range.end_ms);
  size_t i = 0;
  return ForEach(db_, p, "process_samples", [&]() -> Status {
    int64_t t = p.Int(0);
    while (i < out.size() && out[i].t_ms < t) ++i;
    if (i == out.size() || out[i].t_ms != t) return Status::Ok();  // its sample was pruned
    auto memory = p.OptDouble(3);
    if (!memory) {
      return Corrupt("process_samples", fmt::format("of device {} at {} pid {}", device_id, FormatTime(t), p.Int(1)),
                     "fb_used_mib is null");
    }
    out[i].processes.push_back(ProcessSample{p.Int(1), p.Text(2), *memory, p.OptDouble(4)});
    return Status::Ok();
  });
}

Result<std::unordered_map<int64_t, Sample>> Reads::LatestSamples() {
  Stmt& q = S(kLatestSamples);
  std::unordered_map<int64_t, Sample> out;
  std::vector<Sample> decoded;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "sample_chunks", [&]() -> Status {
    int64_t device = q.Int(0), first = q.Int(1), last = q.Int(3);
    decoded.clear();
    if (!DecodeChunk(q.Blob(2), first, last, last, decoded)) {
      return Corrupt("sample_chunks", fmt::format("of device {} at {}", device, FormatTime(first)),
                     "the chunk does not decode");
    }
    if (!decoded.empty()) out[device] = std::move(decoded.back());
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<DirtyHour>> Reads::DirtyHours(size_t limit) {
  Stmt& q = S(kDirtyHours);
  q.Bind(1, static_cast<int64_t>(limit));
  std::vector<DirtyHour> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "dirty_hours", [&] {
    out.push_back({q.Int(0), q.Int(1), q.Int(2)});
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<DirtyHour>> Reads::DirtyHoursIn(const TimeRange& hours) {
  Stmt& q = S(kDirtyHoursIn);
  q.Bind(1, hours.begin_ms).Bind(2, hours.end_ms);
  std::vector<DirtyHour> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "dirty_hours", [&] {
    out.push_back({q.Int(0), q.Int(1), q.Int(2)});
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<std::pair<int64_t, int64_t>>> Reads::DayVersions(const TimeRange& days) {
  Stmt& q = S(kDayVersions);
  q.Bind(1, days.begin_ms).Bind(2, days.end_ms);
  std::vector<std::pair<int64_t, int64_t>> out;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "rollup_day_versions", [&]() -> Status {
    out.emplace_back(q.Int(0), q.Int(1));
    return Status::Ok();
  }));
  return out;
}

Status Reads::ReadDay(int64_t day_ms, std::optional<int64_t>& version, const std::function<void(const DayRow&)>& fn) {
  Stmt& q = S(kReadDay);
  q.Bind(1, day_ms);
  // Column 0 is the version, where HourRowAt reads the hour: its columns after it are
  // the day row's.
  RollupRow r;
  DayRow d;
  return ForEach(db_, q, "rollup_day", [&]() -> Status {
    sqlite3_stmt* st = q.get();
    if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
      version.reset();
    } else {
      version = sqlite3_column_int64(st, 0);
    }
    HourRowAt(q, r);
    d.sum = RollupSum{r.device_id, r.job_id, r.ms, r.coarse_ms, r.idle_causes};
    d.hour_rows = sqlite3_column_int64(st, 12);
    fn(d);
    return Status::Ok();
  });
}

Status Reads::ReadDayHours(const TimeRange& days, const DayHoursFn& fn) {
  Stmt& q = S(kScanDayHours);
  q.Bind(1, days.begin_ms).Bind(2, days.end_ms);
  return ForEach(db_, q, "rollup_day_hours", [&] { return fn(q.Int(0), q.Int(1), q.Blob(2)); });
}

Status Reads::ReadDirtyDayHours(const TimeRange& hours, const DayHoursFn& fn) {
  Stmt& q = S(kDirtyDayHours);
  q.Bind(1, hours.begin_ms).Bind(2, hours.end_ms);
  return ForEach(db_, q, "rollup_day_hours", [&] { return fn(q.Int(0), q.Int(1), q.Blob(2)); });
}

Result<std::vector<RollupSum>> Reads::SumHourRollups(const TimeRange& hours) {
  return SumHourRollupsThroughCache(*this, *days_, hours, /*settled=*/false);
}

Result<std::vector<RollupSum>> Reads::SumSettledHourRollups(const TimeRange& hours) {
  return SumHourRollupsThroughCache(*this, *days_, hours, /*settled=*/true);
}

Status Reads::ScanHourRollups(const TimeRange& hours, const std::function<Status(const RollupRow&)>& fn) {
  // The day hours of the days the range touches, a row per device and day, and of their
  // rows those in the range.
  if (hours.empty()) return Status::Ok();
  DayHoursScan days([&](const RollupRow& r) { return hours.Contains(r.period_ms) ? fn(r) : Status::Ok(); });
  Stmt& q = S(kScanDayHours);
  q.Bind(1, FloorTo(hours.begin_ms, kMsPerDay)).Bind(2, hours.end_ms);
  GPULEDGER_RETURN_IF_ERROR(
      ForEach(db_, q, "rollup_day_hours", [&]() -> Status { return days.Add(q.Int(0), q.Int(1), q.Blob(2)); }));
  return days.Finish();
}

Status Reads::ScanMinuteRollups(const TimeRange& range, const std::function<void(const RollupRow&)>& fn,
                                bool settled_only) {
  if (range.empty()) return Status::Ok();
  DirtySet dirty;
  if (settled_only) {
    GPULEDGER_ASSIGN_OR_RETURN(auto marks, DirtyHoursIn({FloorTo(range.begin_ms, kMsPerHour), range.end_ms}));
    dirty = DirtySet(marks);
  }
  Stmt& q = S(kScanDayMinutes);
  q.Bind(1, FloorTo(range.begin_ms, kMsPerDay)).Bind(2, range.end_ms);
  return ForEach(db_, q, "rollup_day_minutes", [&]() -> Status {
    const int64_t day = q.Int(0), device = q.Int(1);
    if (!DecodeDayMinutes(q.Blob(2), day, device, range,
                          [&](int64_t hour) { return dirty.Holds(device, hour); }, fn)) {
      return Corrupt("rollup_day_minutes", fmt::format("of device {} on {}", device, FormatTime(day)),
                     "the minutes are corrupt");
    }
    return Status::Ok();
  });
}

Result<PriceBook> Reads::LoadPriceBook() {
  Stmt& q = S(kLoadPrices);
  std::vector<PriceEntry> entries;
  GPULEDGER_RETURN_IF_ERROR(ForEach(db_, q, "prices", [&]() -> Status {
    PriceEntry e;
    e.model = q.Text(0);
    e.pool = q.Text(1);
    auto type = ParseCapacityType(q.Text(2));
    if (!type.ok()) return Corrupt("prices", fmt::format("{}/{}", e.model, e.pool), type.status().message());
    e.capacity_type = *type;
    e.per_gpu_hour = Money::FromMicros(q.Int(3));
    e.valid = {q.Int(4), q.Int(5)};
    entries.push_back(std::move(e));
    return Status::Ok();
  }));
  return PriceBook::Create(std::move(entries));
}

Result<StoreStats> Reads::Stats() {
  StoreStats s;
  auto count = [&](const char* sql, int64_t& out) -> Status {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, sql));
    int rc = q.Step();
    if (rc != SQLITE_ROW) return Error(db_, rc, sql);
    out = q.Int(0);
    return Status::Ok();
  };
  GPULEDGER_RETURN_IF_ERROR(count(kCountBatchesSql, s.batches));
  GPULEDGER_RETURN_IF_ERROR(count("SELECT count(*) FROM devices", s.devices));
  GPULEDGER_RETURN_IF_ERROR(count("SELECT count(*) FROM jobs", s.jobs));
  {
    Stmt q;
    GPULEDGER_RETURN_IF_ERROR(q.Prepare(db_, "SELECT coalesce(sum(n), 0), count(*) FROM sample_chunks"));
    if (int rc = q.Step(); rc != SQLITE_ROW) return Error(db_, rc, "counting samples");
    s.samples = q.Int(0);
    s.sample_rows = q.Int(1);
  }
  GPULEDGER_RETURN_IF_ERROR(count("SELECT count(*) FROM dirty_hours", s.dirty_hours));
  GPULEDGER_RETURN_IF_ERROR(
      count("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()", s.bytes));
  return s;
}

}  // namespace gpuledger::store::sqlite
