// GET /api/v1/quotas: the config's quotas judged by the ledger (ledger/quotas.h),
// rendered as the CLI's `quota status --format json` renders them (report/quota_format.h).
// GET /api/v1/quotas/drift: the hard quotas' Slurm limits reconciled with Slurm's
// (ledger::ReconcileSlurmLimits), read at most once at a time and reused for 30 s
// (server/slurm_limits_cache.h), rendered.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ledger/quotas.h"
#include "report/quota_format.h"
#include "server/api.h"
#include "server/slurm_limits_cache.h"

namespace gpuledger::server {

HttpReply QuotasReply(const QueryContext& q, const QueryParams& params) {
  static const std::vector<QuotaSpec> kNone;
  auto r = ledger::JudgeQuotas(q.ledger, q.quotas ? *q.quotas : kNone, ScopeOf(q.who), q.now_ms,
                               Param(params, "period"));
  if (!r.ok()) return ErrorReply(r.status().WithContext("period"));
  return {200, "application/json", report::QuotasJson(*r).dump(1) + "\n"};
}

HttpReply QuotaDriftReply(const QueryContext& q, SlurmLimitsCache* slurm, const QueryParams& params) {
  if (slurm == nullptr) {
    return ErrorReply(501, "not_implemented", "this server was started without a Slurm to read limits from");
  }
  std::string refresh = Param(params, "refresh", "0");
  if (refresh != "0" && refresh != "1") {
    return ErrorReply(InvalidArgument(fmt::format("refresh \"{}\": want 0 or 1", refresh.substr(0, 80))));
  }
  // A fresh read on demand is an admin's: a viewer's refresh would defeat the cache.
  if (refresh == "1" && q.who.role != Role::kAdmin) {
    return ErrorReply(Status(StatusCode::kPermissionDenied, "refresh=1: admins only (a viewer gets the cached read)"));
  }
  static const std::vector<QuotaSpec> kNone;
  std::vector<std::string> skipped;
  std::vector<ledger::SlurmLimit> want = ledger::SlurmLimits(q.quotas ? *q.quotas : kNone, &skipped);
  auto reading = slurm->Read(refresh == "1");
  // Whatever failed, it is the server's Slurm, not the request: 503.
  if (!reading.ok()) return ErrorReply(Unavailable(reading.status().WithContext("reading Slurm's limits").message()));
  // The same reconciliation as `gpuledger quota slurm` (actuators::SyncSlurmLimits without
  // a push), over the accounts the caller may see.
  std::vector<ledger::SlurmAccountLimit> limits = ledger::ReconcileSlurmLimits(want, reading->enforced, ScopeOf(q.who));
  auto minutes = [](const std::optional<int64_t>& m) { return m ? nlohmann::json(*m) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["drift"] = ledger::HasSlurmDrift(limits);
  j["read_at"] = FormatTime(reading->read_at_ms);
  j["accounts"] = nlohmann::json::array();
  for (const ledger::SlurmAccountLimit& a : limits) {
    j["accounts"].push_back({{"account", a.account},
                             {"quota_gpu_minutes", minutes(a.want_gpu_minutes)},
                             {"slurm_gpu_minutes", minutes(a.have_gpu_minutes)},
                             {"state", ledger::SlurmLimitStateName(a.state)},
                             {"source", a.source}});
  }
  // Why a quota is not an account limit names other teams' quotas: for admins.
  j["left_out"] = ScopeOf(q.who).all_teams ? nlohmann::json(skipped) : nlohmann::json::array();
  return {200, "application/json", j.dump(1) + "\n"};
}

}  // namespace gpuledger::server
