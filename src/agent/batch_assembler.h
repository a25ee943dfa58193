// Turns collections into v1 batches: per collection one sample per device (processes
// carrying their job ids), the jobs seen, and allocation events that open when a job
// starts holding a device and close when it stops. Open allocations are remembered in
// a state file so that a restarted agent continues them instead of opening twins.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/status.h"

namespace gpuledger::agent {

// A job holding a device at one collection (a process of it runs there, or a mapping
// source allocates the device to it).
struct Holding {
  std::string device_uuid;
  Job job;
};

struct AssemblerOptions {
  std::string node;
  // Unique per agent run (with the node): batch ids are "<node>-<instance>-<sequence>".
  std::string instance;
  // Where open allocations are kept across restarts; empty: not kept.
  std::string state_file;
};

class BatchAssembler {
 public:
  // `inventory` is sent in every batch. Loads open allocations from the state file
  // when there is one (a missing file is an empty state; a malformed one an error).
  static Result<BatchAssembler> Create(AssemblerOptions options, std::vector<Device> inventory);

  // Adds one collection at `t_ms`, whose samples cover (span_start_ms, t_ms]. Healthy
  // samples without an activity figure are dropped (the format refuses them) and
  // counted. A (device, job) pair held now but not before opens an allocation from
  // span_start_ms; one held before but not now closes at t_ms.
  void Add(int64_t t_ms, int64_t span_start_ms, std::vector<Sample> samples,
           const std::vector<Holding>& holdings);

  // The batch of everything added since the last Take, with the next sequence number;
  // nullopt when nothing was added. The caller persists the state (SaveState) after.
  std::optional<Batch> Take();

  // Closes every open allocation at `t_ms` (the agent is stopping for good).
  void CloseAll(int64_t t_ms);

  size_t open_allocations() const { return open_.size(); }
  int64_t samples_dropped() const { return samples_dropped_; }
  uint64_t sequence() const { return sequence_; }
  // Persists the open allocations to the state file (no-op without one).
  Status SaveState() const;

 private:
  BatchAssembler(AssemblerOptions options, std::vector<Device> inventory)
      : options_(std::move(options)), inventory_(std::move(inventory)) {}
  Status LoadState();

  AssemblerOptions options_;
  std::vector<Device> inventory_;
  // (device, job) -> from_ms of its open allocation.
  std::map<std::pair<std::string, std::string>, int64_t> open_;
  std::map<std::string, Job> jobs_;  // latest metadata of every job seen in this batch
  std::vector<Allocation> allocations_;
  std::vector<Sample> samples_;
  uint64_t sequence_ = 0;
  int64_t samples_dropped_ = 0;
};

}  // namespace gpuledger::agent
