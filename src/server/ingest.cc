#include "server/ingest.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>

#include "server/metrics.h"
#include "wire/batch.h"

namespace gpuledger::server {
namespace {

constexpr size_t kMaxIgnoredFamilies = 256;

Status TooLarge(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }

}  // namespace

Result<std::string> Gunzip(std::string_view compressed, size_t max_bytes) {
  z_stream zs{};
  // 15 + 32: a gzip or zlib header, detected automatically.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Internal("gzip: inflateInit2 failed");
  std::string out;
  char buf[64 * 1024];
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      std::string why = zs.msg ? zs.msg : (rc == Z_BUF_ERROR ? "truncated stream" : "corrupt stream");
      inflateEnd(&zs);
      return InvalidArgument(fmt::format("gzip body: {}", why));
    }
    out.append(buf, sizeof buf - zs.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&zs);
      return TooLarge(fmt::format("gzip body inflates to more than {} bytes", max_bytes));
    }
    if (rc == Z_OK && zs.avail_in == 0 && zs.avail_out != 0) {
      inflateEnd(&zs);
      return InvalidArgument("gzip body: truncated stream");
    }
  }
  inflateEnd(&zs);
  return out;
}

Status CheckBatchAge(const Batch& batch, int64_t min_t_ms) {
  auto old = [&](const std::string& where, int64_t t) {
    return InvalidArgument(fmt::format("batch {}: {}: {} is older than the server accepts (before {})",
                                       batch.batch_id, where, FormatTime(t), FormatTime(min_t_ms)));
  };
  for (size_t i = 0; i < batch.samples.size(); ++i) {
    if (batch.samples[i].t_ms < min_t_ms) return old(fmt::format("samples[{}].t", i), batch.samples[i].t_ms);
  }
  // An allocation's start puts its device in service: one from long ago would turn the
  // whole span since into unmonitored time.
  for (size_t i = 0; i < batch.allocations.size(); ++i) {
    if (batch.allocations[i].from_ms < min_t_ms) {
      return old(fmt::format("allocations[{}].from", i), batch.allocations[i].from_ms);
    }
  }
  return Status::Ok();
}

Result<Batch> DecodeNativeBatch(std::string_view body, const IngestLimits& limits, int64_t now_ms) {
  if (body.size() > limits.max_body_bytes) {
    return TooLarge(fmt::format("body of {} bytes is over the limit of {}", body.size(), limits.max_body_bytes));
  }
  std::string inflated;
  if (body.size() >= 2 && static_cast<unsigned char>(body[0]) == 0x1f &&
      static_cast<unsigned char>(body[1]) == 0x8b) {
    GPULEDGER_ASSIGN_OR_RETURN(inflated, Gunzip(body, limits.max_body_bytes));
    body = inflated;
  }
  // The format's own limits apply while parsing (a batch over them is malformed); the
  // server's, usually lower, after.
  GPULEDGER_ASSIGN_OR_RETURN(Batch batch, wire::ParseBatch(body));
  if (batch.samples.size() > limits.max_samples_per_batch) {
    return TooLarge(fmt::format("batch {}: {} samples is over the limit of {} per batch",
                                batch.batch_id, batch.samples.size(), limits.max_samples_per_batch));
  }
  GPULEDGER_RETURN_IF_ERROR(CheckBatchAge(batch, now_ms - limits.max_sample_age_ms));
  return batch;
}

bool IsMappedJobId(std::string_view job_id) {
  return job_id.starts_with("k8s/") || job_id.starts_with("hpc/");
}

Result<std::unique_ptr<DcgmIngestor>> DcgmIngestor::Create(DcgmIngestOptions options, ApplyFn apply,
                                                           MetricsRegistry* metrics) {
  GPULEDGER_ASSIGN_OR_RETURN(prometheus::DcgmMapper mapper,
                             prometheus::DcgmMapper::Create(options.mapping));
  return std::unique_ptr<DcgmIngestor>(
      new DcgmIngestor(std::move(options), std::move(mapper), std::move(apply), metrics));
}

DcgmIngestor::DcgmIngestor(DcgmIngestOptions options, prometheus::DcgmMapper mapper, ApplyFn apply,
                           MetricsRegistry* metrics)
    : options_(std::move(options)), mapper_(std::move(mapper)), apply_(std::move(apply)), metrics_(metrics) {}

Status DcgmIngestor::Recover(store::Store& store, int64_t now_ms) {
  GPULEDGER_ASSIGN_OR_RETURN(auto devices, store.ListDevices());
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, store.ListJobs());
  GPULEDGER_ASSIGN_OR_RETURN(auto allocs, store.AllocationsOverlapping({now_ms, kForever}));
  std::unordered_map<int64_t, const store::DeviceRecord*> dev_by_id;
  std::unordered_map<int64_t, const Job*> job_by_id;
  for (const auto& d : devices) dev_by_id[d.id] = &d;
  for (const auto& j : jobs) job_by_id[j.id] = &j.job;
  std::lock_guard lock(mu_);
  for (const auto& d : devices) {
    state_.last_sample_ms[d.device.uuid] = d.last_sample_ms;
    if (d.device.sample_interval_ms > 0) state_.interval_ms[d.device.uuid] = d.device.sample_interval_ms;
  }
  for (const auto& a : allocs) {
    if (a.to_ms) continue;
    auto d = dev_by_id.find(a.device_id);
    auto j = job_by_id.find(a.job_id);
    if (d == dev_by_id.end() || j == job_by_id.end() || !IsMappedJobId(j->second->id)) continue;
    Hold& h = state_.open[{d->second->device.uuid, j->second->id}];
    h.from_ms = a.from_ms;
    h.last_seen_ms = std::max(a.from_ms, d->second->last_sample_ms);
  }
  return Status::Ok();
}

size_t DcgmIngestor::CloseHolds(State& state, Batch& batch,
                                const std::function<bool(const HoldKey&, const Hold&)>& should_close) const {
  size_t closed = 0;
  for (auto it = state.open.begin(); it != state.open.end();) {
    if (!should_close(it->first, it->second)) {
      ++it;
      continue;
    }
    Allocation a;
    a.device_uuid = it->first.first;
    a.job_id = it->first.second;
    a.from_ms = it->second.from_ms;
    a.to_ms = std::max(it->second.last_seen_ms, it->second.from_ms + 1);
    batch.allocations.push_back(std::move(a));
    it = state.open.erase(it);
    ++closed;
  }
  return closed;
}

Result<DcgmIngestResult> DcgmIngestor::Apply(const prometheus::DcgmBatch& mapped,
                                             const std::string& batch_id, uint64_t digest,
                                             std::string_view path) {
  std::lock_guard lock(mu_);
  State next = state_;
  Batch batch;
  batch.batch_id = batch_id;
  batch.source = std::string(path);
  batch.content_digest = digest;
  DcgmIngestResult result;
  result.batch_id = batch_id;

  for (Device d : mapped.devices) {
    if (d.pool.empty()) d.pool = options_.pool;
    d.capacity_type = options_.capacity_type;
    if (d.sample_interval_ms > 0) next.interval_ms[d.uuid] = d.sample_interval_ms;
    batch.devices.push_back(std::move(d));
  }
  batch.jobs = mapped.jobs;

  int64_t no_activity = 0, already_stored = 0;
  std::unordered_map<std::string, int64_t> latest;  // per device, the latest instant in this request
  for (size_t i = 0; i < mapped.samples.size(); ++i) {
    Sample s = mapped.samples[i];
    const prometheus::SampleExtras& x = mapped.extras[i];
    // The graphics engine's activity is the next-best figure where neither SM activity
    // nor the coarse utilization was exported; it is recorded as coarse.
    if (!s.sm_active && !s.gpu_util && x.gr_engine_active) s.gpu_util = x.gr_engine_active;
    int64_t& last = next.last_sample_ms[s.device_uuid];
    auto& l = latest[s.device_uuid];
    l = std::max(l, s.t_ms);
    if (s.t_ms <= last) {
      ++already_stored;
      continue;
    }
    if (IsAvailable(s.health) && !s.sm_active && !s.gpu_util) {
      ++no_activity;
      continue;
    }
    last = s.t_ms;
    batch.samples.push_back(std::move(s));
  }

  // Holds: open an allocation at a job's first sighting on a device, keep it open while
  // it is seen. A sample at t covers the span since the device's previous sample, so the
  // allocation starts one interval before the first sighting.
  for (const prometheus::JobHold& h : mapped.holds) {
    auto [it, inserted] = next.open.try_emplace({h.device_uuid, h.job_id});
    if (inserted) {
      auto iv = next.interval_ms.find(h.device_uuid);
      it->second.from_ms = h.t_ms - (iv == next.interval_ms.end() ? 0 : iv->second);
      it->second.last_seen_ms = h.t_ms;
      batch.allocations.push_back({h.device_uuid, h.job_id, it->second.from_ms, std::nullopt});
      ++result.allocations_opened;
    } else {
      it->second.last_seen_ms = std::max(it->second.last_seen_ms, h.t_ms);
    }
  }
  // Close holds whose device reported in this request without the job for long enough.
  result.allocations_closed = CloseHolds(next, batch, [&](const HoldKey& k, const Hold& h) {
    auto l = latest.find(k.first);
    return l != latest.end() && l->second - h.last_seen_ms >= options_.hold_timeout_ms;
  });

  if (batch.samples.empty() && batch.allocations.empty() && batch.devices.empty() && batch.jobs.empty()) {
    CountDropped(mapped, path, no_activity, already_stored);
    return result;
  }
  GPULEDGER_ASSIGN_OR_RETURN(store::ApplyOutcome outcome, apply_(batch));
  if (outcome == store::ApplyOutcome::kDuplicate) {
    // A retry of a request applied before: its effects, state included, are in place.
    result.duplicate = true;
    return result;
  }
  CountDropped(mapped, path, no_activity, already_stored);
  result.applied = true;
  result.samples = batch.samples.size();
  state_ = std::move(next);
  return result;
}

void DcgmIngestor::CountDropped(const prometheus::DcgmBatch& mapped, std::string_view path,
                                int64_t no_activity, int64_t already_stored) {
  std::string p(path);
  if (metrics_) {
    for (const auto& [family, points] : mapped.ignored_families) {
      // Family names come from senders: their number in /metrics is bounded.
      bool known = ignored_seen_.count(family) > 0;
      if (!known && ignored_seen_.size() < kMaxIgnoredFamilies) {
        ignored_seen_.insert(family);
        known = true;
      }
      metrics_->Add(MetricId::kIgnoredPoints, {known ? family : std::string("(other)")},
                    static_cast<double>(points));
    }
    if (no_activity) metrics_->Add(MetricId::kDroppedSamples, {p, "no_activity"}, static_cast<double>(no_activity));
    if (already_stored) {
      metrics_->Add(MetricId::kDroppedSamples, {p, "already_stored"}, static_cast<double>(already_stored));
    }
    if (int64_t n = mapped.stale_points + mapped.blank_points) {
      metrics_->Add(MetricId::kDroppedSamples, {p, "stale_or_blank"}, static_cast<double>(n));
    }
  }
}

Result<size_t> DcgmIngestor::Sweep(int64_t now_ms) {
  std::lock_guard lock(mu_);
  State next = state_;
  Batch batch;
  size_t closed = CloseHolds(next, batch, [&](const HoldKey&, const Hold& h) {
    return now_ms - h.last_seen_ms >= options_.hold_timeout_ms;
  });
  if (closed == 0) return size_t{0};
  // The id names what it closes, so a sweep retried after a crash is recognised.
  std::string ids;
  for (const Allocation& a : batch.allocations) ids += fmt::format("{}|{}|{};", a.device_uuid, a.job_id, a.from_ms);
  uint64_t digest = wire::Fnv1a64(ids);
  batch.batch_id = fmt::format("sweep-{:016x}", digest);
  batch.source = "server";
  batch.content_digest = digest;
  GPULEDGER_ASSIGN_OR_RETURN(store::ApplyOutcome outcome, apply_(batch));
  (void)outcome;  // applied or already applied: either way the holds are closed
  state_ = std::move(next);
  return closed;
}

}  // namespace gpuledger::server
