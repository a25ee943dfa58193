// Renders judged quotas (ledger/quotas.h) for people (a table) and programs (JSON): the
// CLI's `gpuledger quota status` and the server's /api/v1/quotas print the same figures.
// Rendering only: every figure and every alert state comes from ledger::JudgeQuotas.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "ledger/quotas.h"

namespace gpuledger::report {

// A table: one row per quota (owner, period, kind, mode, used against the quota, burn,
// projection, thresholds crossed), each quota's projection basis under it, the currency
// in the title.
std::string RenderQuotasTable(const ledger::QuotaReport& r);

// {"anchor": RFC 3339 or null, "currency": ..., "quotas": [{"owner", "name", "period",
// "period_start", "period_end", "to_date_end", "elapsed_ratio", "mode", "source",
// "pool", "model", "gpu_hours_quota", "gpu_hours_used", "gpu_hours_burn_ratio",
// "gpu_hours_projected", "budget", "spent", "budget_burn_ratio", "projected_cost",
// "basis": {"text", "from", "to"}, "alert_at", "crossed", "projected_to_exceed"}]}.
// Money as decimal strings of the currency; a figure the quota lacks is null.
nlohmann::json QuotasJson(const ledger::QuotaReport& r);

// A Kueue ClusterQueue (kueue.x-k8s.io/v1beta1) for `q`: metadata.name, spec.cohort,
// spec.namespaceSelector {} (every namespace; narrow it with the team's LocalQueue), one
// resourceGroup covering nvidia.com/gpu with the one flavor's nominalQuota and
// borrowingLimit, as integers.
nlohmann::json KueueClusterQueue(const ledger::KueueQueue& q);
// The queues as one YAML stream ("---" between documents), a comment naming each
// quota's source before it; `kubectl apply -f` reads it.
std::string KueueYaml(const std::vector<ledger::KueueQueue>& queues);

}  // namespace gpuledger::report
