#include "ledger/ingest_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "store/sample_chunk.h"

namespace gpuledger::ledger {
namespace {

Status Bad(const Batch& b, const std::string& where, const std::string& what) {
  return InvalidArgument(fmt::format("batch {}: {}: {}", b.batch_id, where, what));
}

// A sample at an instant the store holds for its device already is refused: the first
// such sample of the chunk is named.
Status CheckStoredInstants(const Batch& b, const store::ChunkPlan& c, std::span<const int64_t> stored) {
  auto mine = c.times.begin();
  for (int64_t t : stored) {
    mine = std::lower_bound(mine, c.times.end(), t);
    if (mine == c.times.end()) break;
    if (*mine == t) {
      size_t i = c.sample_index[static_cast<size_t>(mine - c.times.begin())];
      return Bad(b, fmt::format("samples[{}]", i),
                 fmt::format("a sample of device {} at {} is already stored (by another batch)", c.device_uuid,
                             FormatTime(t)));
    }
  }
  return Status::Ok();
}

// A sender bound to nodes declares only devices on them, and only jobs its batch places on
// them: held by an allocation or running a process on one of its devices.
Status CheckSenderNodes(const Batch& b, const BatchSender& sender) {
  for (size_t i = 0; i < b.devices.size(); ++i) {
    if (!sender.MayReportFor(b.devices[i].node)) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("batch {}: devices[{}].node: {} may not report for node \"{}\"", b.batch_id, i,
                                sender.name, b.devices[i].node));
    }
  }
  std::unordered_set<std::string_view> placed;
  for (const Allocation& a : b.allocations) placed.insert(a.job_id);
  for (const Sample& smp : b.samples) {
    for (const ProcessSample& p : smp.processes) placed.insert(p.job_id);
  }
  for (size_t i = 0; i < b.jobs.size(); ++i) {
    if (!placed.contains(b.jobs[i].id)) {
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("batch {}: jobs[{}]: {} may declare only jobs this batch places on its nodes "
                                "(by an allocation or a process); job {} has neither",
                                b.batch_id, i, sender.name, b.jobs[i].id));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<store::IngestPlan> PlanIngest(const Batch& b, const BatchSender& sender, int64_t now_ms) {
  store::IngestPlan plan;
  plan.batch = &b;
  plan.sender = sender.name;
  plan.now_ms = now_ms;
  if (sender.bound()) {
    GPULEDGER_RETURN_IF_ERROR(CheckSenderNodes(b, sender));
    plan.check_stored_node = [&b, sender](const std::string& where, const std::string& uuid,
                                          const std::string& node) -> Status {
      if (sender.MayReportFor(node)) return Status::Ok();
      return Status(StatusCode::kPermissionDenied,
                    fmt::format("batch {}: {}: {} may not report for device {}, which is on node \"{}\"",
                                b.batch_id, where, sender.name, uuid, node));
    };
  }
  // Devices in the order their samples first appear; per device its chunks by hour.
  std::unordered_map<std::string_view, size_t> device_at;
  // A chunk's data is encoded once all of its samples are known (store/sample_chunk.h).
  struct PendingChunk {
    store::ChunkPlan plan;
    std::optional<store::ChunkEncoder> encoder;
  };
  std::vector<std::map<int64_t, PendingChunk>> chunks_of;
  for (size_t i = 0; i < b.samples.size(); ++i) {
    const Sample& smp = b.samples[i];
    auto [it, fresh] = device_at.try_emplace(smp.device_uuid, plan.sampled.size());
    if (fresh) {
      plan.sampled.push_back({smp.device_uuid, i, smp.t_ms, smp.t_ms, {}});
      chunks_of.emplace_back();
    }
    store::SampledDevice& dev = plan.sampled[it->second];
    PendingChunk& pending = chunks_of[it->second][FloorTo(smp.t_ms, kMsPerHour)];
    store::ChunkPlan& c = pending.plan;
    if (!c.times.empty() && smp.t_ms <= c.last_ms) {
      return Bad(b, fmt::format("samples[{}].t", i),
                 fmt::format("{} is not after device {}'s previous sample in the batch ({})", FormatTime(smp.t_ms),
                             smp.device_uuid, FormatTime(c.last_ms)));
    }
    if (c.times.empty()) {
      c.device_uuid = smp.device_uuid;
      c.hour_ms = FloorTo(smp.t_ms, kMsPerHour);
      c.first_ms = smp.t_ms;
      pending.encoder.emplace(c.first_ms);
    }
    pending.encoder->Add(smp);
    c.last_ms = smp.t_ms;
    c.times.push_back(smp.t_ms);
    c.sample_index.push_back(i);
    c.with_processes = c.with_processes || !smp.processes.empty();
    dev.first_ms = std::min(dev.first_ms, smp.t_ms);
    dev.last_ms = std::max(dev.last_ms, smp.t_ms);
    // The hours from t - reach to t + reach; a device's runs of samples mostly extend the
    // last range.
    TimeRange hours{FloorTo(smp.t_ms - kSampleReachMs, kMsPerHour),
                    FloorTo(smp.t_ms + kSampleReachMs, kMsPerHour) + kMsPerHour};
    if (!dev.dirty_hours.empty() && hours.begin_ms <= dev.dirty_hours.back().end_ms &&
        hours.end_ms >= dev.dirty_hours.back().begin_ms) {
      TimeRange& last = dev.dirty_hours.back();
      last = {std::min(last.begin_ms, hours.begin_ms), std::max(last.end_ms, hours.end_ms)};
    } else {
      dev.dirty_hours.push_back(hours);
    }
  }
  for (store::SampledDevice& dev : plan.sampled) {
    // Times increase per device, so the ranges do too; merge any that touch.
    std::vector<TimeRange> merged;
    for (const TimeRange& r : dev.dirty_hours) {
      if (!merged.empty() && r.begin_ms <= merged.back().end_ms) {
        merged.back().end_ms = std::max(merged.back().end_ms, r.end_ms);
      } else {
        merged.push_back(r);
      }
    }
    dev.dirty_hours = std::move(merged);
  }
  for (auto& by_hour : chunks_of) {
    for (auto& entry : by_hour) {
      entry.second.plan.data = entry.second.encoder->Finish();
      plan.chunks.push_back(std::move(entry.second.plan));
    }
  }
  plan.check_stored_instants = [&b](const store::ChunkPlan& c, std::span<const int64_t> stored) {
    return CheckStoredInstants(b, c, stored);
  };
  // An allocation changes every hour it spans, up to its device's newest sample.
  plan.allocation_dirty_hours = [](const Allocation& a, int64_t newest_sample_ms) {
    int64_t last = std::max(a.to_ms.value_or(a.from_ms), newest_sample_ms);
    return TimeRange{FloorTo(a.from_ms, kMsPerHour), FloorTo(last, kMsPerHour) + kMsPerHour};
  };
  return plan;
}

}  // namespace gpuledger::ledger
