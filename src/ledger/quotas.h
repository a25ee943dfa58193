// Quotas and budgets, judged: each quota's GPU-hours and money to date in its period, the
// burn, and the projection to the period's end with the basis it came from. The CLI
// (`gpuledger quota status`), the server's API (/api/v1/quotas), the dashboard and the
// alerts (objectives::QuotaAlerts) render or send these; none of them judges a quota.
//
// Rule. The figures run to the anchor: the end of the data (Ledger::Data, never after
// now) floored to a whole UTC hour. Two calls a second apart give the same figures; they
// change when another whole hour of data has arrived. A quota is judged over the period
// (its month or quarter) the anchor's last hour falls in, so that after a month ends and
// before the next has data, the month just ended shows its final burn (never "0% of 0").
//
// The projection extends the trailing rate: the GPU-hours and money of the quota's owner
// over the last QuotaOptions::trailing_ms of data before the anchor (reaching back into
// the previous period when the period is young, and starting no earlier than the data),
// spread over the time left in the period. Under QuotaOptions::min_basis_ms of data there
// is no projection, and the basis says so. Money is priced hour by hour by the price valid
// then (Ledger::Usage), so a price change inside the period or the basis is exact.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/currency.h"
#include "core/money.h"
#include "core/quota.h"
#include "core/time.h"
#include "ledger/ledger.h"

namespace gpuledger::ledger {

struct QuotaOptions {
  int64_t trailing_ms = 7 * kMsPerDay;  // the rate's window
  int64_t min_basis_ms = kMsPerDay;     // less data than this: no projection
};

// What a quota's owner used over some time: its jobs' active and allocated-idle time on
// the devices the quota counts (of its pool and model, when set), and their direct cost.
struct QuotaUse {
  int64_t gpu_ticks_ms = 0;  // GPU-milliseconds x kShareScale
  Money cost;
  double gpu_hours() const;
};

struct QuotaStatus {
  QuotaSpec spec;
  std::string period_label;  // "2026-11", "2026-Q4"
  TimeRange period;
  TimeRange to_date;  // from the period's start to the anchor (empty before it starts)
  double elapsed = 0;  // to_date's share of the period
  QuotaUse used;
  // used / quota, for the kinds the quota has.
  std::optional<double> gpu_hours_burn;
  std::optional<double> budget_burn;
  // At the trailing rate, to the period's end (money rounded half up); none when there is
  // too little data, and equal to `used` once the period is over.
  std::optional<double> projected_gpu_hours;
  std::optional<Money> projected_cost;
  TimeRange basis;          // the window the rate came from; empty when none was used
  std::string basis_text;   // for people: "trailing 7d rate (FROM to TO)", or why none
  // The thresholds of spec.alert_at the larger burn has reached, ascending.
  std::vector<double> crossed;
  // A quota kind is projected past its quota (and not already past it).
  bool projected_to_exceed = false;
  // The larger of the burns.
  double burn() const;
};

struct QuotaReport {
  int64_t anchor_ms = 0;  // the whole hour of data the figures run to; 0: no data yet
  Currency currency;      // of every amount (LedgerOptions::currency)
  std::vector<QuotaStatus> quotas;  // in the order given, those `scope` may see
};

// Judges `quotas`; `now_ms` only picks the period while there is no data at all. A team quota is seen by a scope that may see its team; a project
// quota, whose jobs may belong to several teams, only by a scope of all teams. With
// `period` ("2026-11", "2026-Q4"), only the quotas of that kind of period are judged, over
// that period, up to the anchor. Fails when the ledger cannot be read, or on a bad period.
Result<QuotaReport> JudgeQuotas(Ledger& ledger, const std::vector<QuotaSpec>& quotas, const Scope& scope,
                                int64_t now_ms, const std::string& period = "", const QuotaOptions& options = {});

}  // namespace gpuledger::ledger

namespace gpuledger::ledger {

// What Slurm should enforce for the hard quotas: an account's GrpTRESMins=gres/gpu=N.
struct SlurmLimit {
  std::string account;      // the team's name: its Slurm account
  int64_t gpu_minutes = 0;  // GPU-hours x 60
  std::string source;       // the quota's FILE:LINE
};

// The hard team GPU-hour quotas, as Slurm account limits, by account. A quota narrowed by
// pool or model, a project's, or a quarterly one beside a monthly one of the same team is
// not expressible as one account limit: each is left out with the reason in `skipped`.
std::vector<SlurmLimit> SlurmLimits(const std::vector<QuotaSpec>& quotas, std::vector<std::string>* skipped);

// How an account's limit in Slurm stands against the hard quota that names it.
enum class SlurmLimitState : uint8_t {
  kInForce,    // Slurm enforces the quota's GPU-minutes
  kDiffers,    // Slurm enforces another number (changed by hand, or an older quota's)
  kNotPushed,  // Slurm has no gres/gpu limit on the account
  kUnmanaged,  // Slurm limits an account that no hard quota names
};
std::string_view SlurmLimitStateName(SlurmLimitState s);  // "in_force", "differs", "not_pushed", "unmanaged"

// One account's limit: the quotas' and Slurm's.
struct SlurmAccountLimit {
  std::string account;
  std::optional<int64_t> want_gpu_minutes;  // none: no hard quota names the account
  std::optional<int64_t> have_gpu_minutes;  // none: Slurm has no gres/gpu limit on it
  std::string source;                       // the quota's FILE:LINE; empty when none names it
  SlurmLimitState state = SlurmLimitState::kInForce;
  // Anything but in force: what `quota slurm` exits 2 for and --push would mend (but an
  // unmanaged account, which no quota speaks for, is left as it is).
  bool drift() const { return state != SlurmLimitState::kInForce; }
};

// Reconciles the quotas' limits with Slurm's: every account of `want`, then every account
// `enforced` limits that `want` does not name, by account, each with its state.
// `enforced`: account -> gres/gpu GPU-minutes as read back from Slurm (accounts without a
// limit absent). `scope`: only the accounts (team names) it may see.
std::vector<SlurmAccountLimit> ReconcileSlurmLimits(const std::vector<SlurmLimit>& want,
                                                    const std::map<std::string, int64_t>& enforced,
                                                    const Scope& scope = Scope::All());
// Whether any of `limits` is not in force: `quota slurm` exits 2, the API says "drift".
bool HasSlurmDrift(const std::vector<SlurmAccountLimit>& limits);

}  // namespace gpuledger::ledger

namespace gpuledger::ledger {

// What Kueue should enforce for a team's GPU-hour quota: a ClusterQueue (kueue.x-k8s.io
// v1beta1) covering nvidia.com/gpu. A quota is GPU-hours over a period; a ClusterQueue
// limits GPUs held at once, so the nominal quota is the quota spread evenly over the
// period's hours, rounded up. A hard quota may not borrow (borrowingLimit 0); a soft one
// may borrow as much again from its cohort's idle quota.
struct KueueQueue {
  std::string team;
  std::string name;    // "gpuledger-nlp"
  std::string cohort;  // every team's queue shares one: "gpuledger"
  std::string flavor;  // the quota's GPU model or pool, DNS-1123 ("nvidia-h200"); else "default-flavor"
  int64_t nominal_gpus = 0;
  int64_t borrowing_limit_gpus = 0;
  std::string source;  // the quota's FILE:LINE
};

// A ClusterQueue per team with a GPU-hour quota, by team, sized over the team's quota's
// period that contains `at_ms`. A project's quota, a team name that is no DNS-1123 label,
// and a team's second GPU-hour quota are left out with the reason in `skipped`.
std::vector<KueueQueue> KueueQueues(const std::vector<QuotaSpec>& quotas, int64_t at_ms,
                                    std::vector<std::string>* skipped);

}  // namespace gpuledger::ledger
