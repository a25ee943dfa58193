#include "objectives/quota_alerts.h"

#include <fmt/format.h>

namespace gpuledger::objectives {

std::vector<QuotaAlert> QuotaAlerts(const ledger::QuotaReport& report) {
  std::vector<QuotaAlert> out;
  for (const ledger::QuotaStatus& s : report.quotas) {
    bool hard = s.spec.mode == QuotaMode::kHard;
    if (!s.crossed.empty()) {
      double t = s.crossed.back();
      out.push_back({&s, fmt::format("{:g}%", t * 100), hard && t >= 1});
    }
    if (s.projected_to_exceed) out.push_back({&s, "projected", hard});
  }
  return out;
}

}  // namespace gpuledger::objectives
