#include "core/batch.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "core/time.h"

namespace gpuledger {

Status ValidateBatch(const Batch& b, int64_t now_ms, int64_t max_future_skew_ms) {
  auto bad = [&](std::string where, std::string_view what) {
    return InvalidArgument(fmt::format("batch {}: {}: {}", b.batch_id, where, what));
  };
  std::unordered_set<std::string_view> device_ids;
  for (size_t i = 0; i < b.devices.size(); ++i) {
    if (!device_ids.insert(b.devices[i].uuid).second) {
      return bad(fmt::format("devices[{}].uuid", i), "declared twice in one batch");
    }
  }
  std::unordered_set<std::string_view> job_ids;
  for (size_t i = 0; i < b.jobs.size(); ++i) {
    const Job& j = b.jobs[i];
    if (!job_ids.insert(j.id).second) {
      return bad(fmt::format("jobs[{}].id", i), "declared twice in one batch");
    }
    if (j.start_ms && j.end_ms && *j.end_ms < *j.start_ms) {
      return bad(fmt::format("jobs[{}].end", i), "before its start");
    }
  }
  for (size_t i = 0; i < b.allocations.size(); ++i) {
    const Allocation& a = b.allocations[i];
    if (a.to_ms && *a.to_ms <= a.from_ms) {
      return bad(fmt::format("allocations[{}].to", i), "must be after \"from\"");
    }
    if (a.from_ms > now_ms + max_future_skew_ms) {
      return bad(fmt::format("allocations[{}].from", i),
                 fmt::format("{} is in the future (now {})", FormatTime(a.from_ms), FormatTime(now_ms)));
    }
  }
  for (size_t i = 0; i < b.progress.size(); ++i) {
    const Progress& p = b.progress[i];
    if (!p.tokens && !p.model_flops) {
      return bad(fmt::format("progress[{}]", i), "needs tokens or model_flops");
    }
    if (p.t_ms > now_ms + max_future_skew_ms) {
      return bad(fmt::format("progress[{}].t", i),
                 fmt::format("{} is in the future (now {})", FormatTime(p.t_ms), FormatTime(now_ms)));
    }
  }
  std::unordered_map<std::string_view, int64_t> last_t;
  last_t.reserve(64);
  for (size_t i = 0; i < b.samples.size(); ++i) {
    const Sample& s = b.samples[i];
    auto [it, inserted] = last_t.try_emplace(s.device_uuid, s.t_ms);
    if (!inserted) {
      if (s.t_ms == it->second) {
        return bad(fmt::format("samples[{}].t", i),
                   fmt::format("duplicate sample for device {} at {}", s.device_uuid,
                               FormatTime(s.t_ms)));
      }
      if (s.t_ms < it->second) {
        return bad(fmt::format("samples[{}].t", i),
                   fmt::format("time goes backwards for device {} ({} after {})", s.device_uuid,
                               FormatTime(s.t_ms), FormatTime(it->second)));
      }
      it->second = s.t_ms;
    }
    if (s.t_ms > now_ms + max_future_skew_ms) {
      return bad(fmt::format("samples[{}].t", i),
                 fmt::format("{} is in the future (now {}); is the sender's clock wrong?",
                             FormatTime(s.t_ms), FormatTime(now_ms)));
    }
    if (IsAvailable(s.health) && !s.sm_active && !s.gpu_util) {
      return bad(fmt::format("samples[{}]", i),
                 "a healthy sample needs an activity figure (sm_active or gpu_util)");
    }
    std::unordered_set<int64_t> pids;
    for (size_t k = 0; k < s.processes.size(); ++k) {
      if (!pids.insert(s.processes[k].pid).second) {
        return bad(fmt::format("samples[{}].processes[{}].pid", i, k), "listed twice");
      }
    }
  }
  return Status::Ok();
}

}  // namespace gpuledger
