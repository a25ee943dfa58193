// What every Store backend shares: the group of batches applied at once, the
// single-device forms of the batch-oriented reads, and the audit log's door.
#include "store/store.h"

#include "store/actions.h"

namespace gpuledger::store {

std::vector<JobChange> DeclaredJobChanges(const Job& stored, const Job& declared) {
  auto number = [](int64_t v) { return v == 0 ? std::string() : std::to_string(v); };
  auto kind = [](JobKind k) { return k == JobKind::kUnknown ? std::string() : std::string(JobKindName(k)); };
  const std::pair<const char*, std::pair<std::string, std::string>> fields[] = {
      {"team", {stored.team, declared.team}},
      {"project", {stored.project, declared.project}},
      {"experiment", {stored.experiment, declared.experiment}},
      {"user", {stored.user, declared.user}},
      {"kind", {std::string(JobKindName(stored.kind)), kind(declared.kind)}},
      {"pool", {stored.pool, declared.pool}},
      {"priority", {std::to_string(stored.priority), number(declared.priority)}},
      {"requested_gpus", {std::to_string(stored.requested_gpus), number(declared.requested_gpus)}},
      {"requested_mig_profile", {stored.requested_mig_profile, declared.requested_mig_profile}},
  };
  std::vector<JobChange> changes;
  for (const auto& [field, values] : fields) {
    if (values.second.empty() || values.second == values.first) continue;
    changes.push_back(JobChange{.field = field, .old_value = values.first, .new_value = values.second});
  }
  return changes;
}

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
