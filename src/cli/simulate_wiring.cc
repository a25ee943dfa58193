// `gpuledger simulate --from-ledger` and `gpuledger whatif`: the ledger's recorded
// workload (ledger/workload.h) handed to the simulator. Wiring only.
#include "cli/commands.h"
#include "ledger/workload.h"
#include "server/whatif_api.h"
#include "sim/simulate_command.h"
#include "sim/whatif.h"

namespace gpuledger::cli {
namespace {

// What the ledger recorded over the last `window_ms`.
Result<Workload> Recorded(const CommonOptions& common, int64_t window_ms) {
  SystemClock clock;
  GPULEDGER_ASSIGN_OR_RETURN(auto ledger, OpenLedger(common, clock));
  GPULEDGER_ASSIGN_OR_RETURN(ledger::DataSpan data, ledger->Data());
  return ledger::RecordedWorkload(*ledger, ledger::TrailingWindow(clock.NowMs(), data.end_ms, window_ms));
}

}  // namespace

WhatIfReplay WhatIfReplayWithDefaults() {
  return [](const Workload& w) -> Result<std::string> {
    GPULEDGER_ASSIGN_OR_RETURN(sim::WhatIfReport report, sim::WhatIf(w, sim::WhatIfOptions()));
    return sim::RenderWhatIfJson(report);
  };
}

std::shared_ptr<server::WhatIfService> WhatIfForServer() {
  return std::make_shared<server::WhatIfService>(WhatIfReplayWithDefaults());
}

void AddSimulateCommand(CLI::App& app, CommonOptions& common) {
  auto loader = [&common](int64_t window_ms) { return Recorded(common, window_ms); };
  sim::AddSimulateCommand(app, loader);
  AddCommonOptions(*app.get_subcommand("simulate"), common);
  sim::AddWhatIfCommand(app, loader);
  AddCommonOptions(*app.get_subcommand("whatif"), common);
}

}  // namespace gpuledger::cli
