// GET /api/v1/quotas: the config's quotas judged by the ledger (ledger/quotas.h),
// rendered as the CLI's `quota status --format json` renders them (report/quota_format.h).
#include <nlohmann/json.hpp>

#include "ledger/quotas.h"
#include "report/quota_format.h"
#include "server/api.h"

namespace gpuledger::server {

HttpReply QuotasReply(const QueryContext& q, const QueryParams& params) {
  static const std::vector<QuotaSpec> kNone;
  auto r = ledger::JudgeQuotas(q.ledger, q.quotas ? *q.quotas : kNone, ScopeOf(q.who), q.now_ms,
                               Param(params, "period"));
  if (!r.ok()) return ErrorReply(r.status().WithContext("period"));
  return {200, "application/json", report::QuotasJson(*r).dump(1) + "\n"};
}

}  // namespace gpuledger::server
