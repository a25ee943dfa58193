// What every Store backend shares: the group of batches applied at once, the
// single-device forms of the batch-oriented reads, and the audit log's door.
#include "store/store.h"

#include "store/actions.h"

namespace gpuledger::store {

std::vector<Result<ApplyOutcome>> Store::ApplyBatches(std::span<const IngestPlan> plans) {
  std::vector<Result<ApplyOutcome>> out;
  out.reserve(plans.size());
  auto group = BeginBatchGroup();
  if (!group.ok()) {
    for (size_t i = 0; i < plans.size(); ++i) out.emplace_back(group.status());
    return out;
  }
  for (const IngestPlan& p : plans) out.push_back((*group)->Apply(p));
  if (Status st = (*group)->Commit(); !st.ok()) {
    for (auto& r : out) r = st;
  }
  return out;
}

Result<std::vector<Sample>> StoreReads::Samples(int64_t device_id, const TimeRange& range) {
  DeviceRange one{device_id, range};
  GPULEDGER_ASSIGN_OR_RETURN(auto out, SamplesOf({&one, 1}));
  return std::move(out.at(0));
}

Result<std::vector<AllocationRecord>> StoreReads::Allocations(int64_t device_id, const TimeRange& range) {
  DeviceRange one{device_id, range};
  GPULEDGER_ASSIGN_OR_RETURN(auto out, AllocationsOf({&one, 1}));
  return std::move(out.at(0));
}

Result<ActionLog*> ActionLogOf(Store& store) {
  auto* log = dynamic_cast<ActionLog*>(&store);
  if (!log) return FailedPrecondition("this store keeps no audit log of interventions");
  return log;
}

}  // namespace gpuledger::store
