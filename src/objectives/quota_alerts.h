// Quota and budget alerts (docs/quotas.md): what fires for judged quotas
// (ledger::JudgeQuotas), in the objectives' terms, so that the server's objectives loop
// sends them through the same tracker and sinks as the burn-rate alerts.
//
// Rule. A quota fires one alert for the highest of its thresholds (QuotaSpec::alert_at:
// 50%, 80%, 100% by default) its burn has reached in its period, and one more while it
// is projected to exceed (and is not past it yet). The identity (quota, owner, period,
// threshold) is stable while it fires; when the burn reaches the next threshold the
// lower alert resolves and the higher one fires. A new period starts with none.
#pragma once

#include <string>
#include <vector>

#include "ledger/quotas.h"

namespace gpuledger::objectives {

struct QuotaAlert {
  const ledger::QuotaStatus* quota = nullptr;  // into the report it came from
  std::string threshold;  // "80%", or "projected" for projected to exceed
  bool page = false;      // a hard quota's 100% and a projected hard overrun page; the rest are tickets
};

// The alerts firing for `report`, in its quota order. REQUIRES: `report` outlives them.
std::vector<QuotaAlert> QuotaAlerts(const ledger::QuotaReport& report);

}  // namespace gpuledger::objectives
