// `gpuledger simulate --from-ledger`: the ledger's recorded jobs as a workload.
#include <map>

#include "cli/commands.h"
#include "ledger/store_access.h"  // until the ledger builds the workload (issue 16)
#include "sim/simulate_command.h"

namespace gpuledger::cli {
namespace {

// Jobs that started in the last `window_ms`, with what the allocations tell when the
// scheduler's records are silent: how many GPUs the job held and when.
Result<std::vector<Job>> RecordedJobs(const CommonOptions& common, int64_t window_ms) {
  SystemClock clock;
  GPULEDGER_ASSIGN_OR_RETURN(auto ledger, OpenLedger(common, clock));
  TimeRange window{clock.NowMs() - window_ms, clock.NowMs()};
  GPULEDGER_ASSIGN_OR_RETURN(auto jobs, ledger::internal_StoreOf(*ledger).ListJobs());
  GPULEDGER_ASSIGN_OR_RETURN(auto allocations, ledger::internal_StoreOf(*ledger).AllocationsOverlapping(window));
  struct Held {
    int64_t from = INT64_MAX, to = 0;
    std::map<int64_t, bool> devices;
    bool open = false;
  };
  std::map<int64_t, Held> held;
  for (const auto& a : allocations) {
    Held& h = held[a.job_id];
    h.from = std::min(h.from, a.from_ms);
    h.to = std::max(h.to, a.to_ms.value_or(window.end_ms));
    h.open |= !a.to_ms;
    h.devices[a.device_id] = true;
  }
  std::vector<Job> out;
  for (auto& r : jobs) {
    auto it = held.find(r.id);
    if (it == held.end()) continue;
    Job j = r.job;
    const Held& h = it->second;
    if (j.requested_gpus == 0 && j.requested_mig_profile.empty()) {
      j.requested_gpus = static_cast<int32_t>(h.devices.size());
    }
    if (!j.start_ms) j.start_ms = h.from;
    if (!j.submit_ms) j.submit_ms = j.start_ms;
    if (!j.end_ms) j.end_ms = h.to;
    if (*j.start_ms < window.begin_ms) continue;  // started before the window
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, CommonOptions& common) {
  sim::AddSimulateCommand(app, [&common](int64_t window_ms) { return RecordedJobs(common, window_ms); });
  AddCommonOptions(*app.get_subcommand("simulate"), common);
}

}  // namespace gpuledger::cli
