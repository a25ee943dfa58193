// Batches the store tests apply (both the contract suite and the PostgreSQL store's own).
#pragma once

#include <optional>
#include <string>

#include "core/batch.h"

namespace gpuledger::store::testing_batches {

// A batch on its own node: device GPU-<node>, job j-<node>, `n` samples a minute apart
// from `t0`.
inline Batch OnNode(const std::string& id, const std::string& node, int64_t t0, int n = 3) {
  Batch b;
  b.batch_id = id;
  b.source = node;
  b.devices.push_back(Device{.uuid = "GPU-" + node, .node = node, .model = "NVIDIA H100", .pool = "p"});
  b.jobs.push_back(Job{.id = "j-" + node, .team = "t"});
  b.allocations.push_back(Allocation{"GPU-" + node, "j-" + node, t0, std::nullopt});
  for (int i = 0; i < n; ++i) {
    Sample s;
    s.device_uuid = "GPU-" + node;
    s.t_ms = t0 + i * kMsPerMinute;
    s.sm_active = 0.25;
    b.samples.push_back(s);
  }
  return b;
}

}  // namespace gpuledger::store::testing_batches
