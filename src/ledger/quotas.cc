#include "ledger/quotas.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace gpuledger::ledger {
namespace {

constexpr size_t kActive = static_cast<size_t>(Bucket::kActive);
constexpr size_t kIdle = static_cast<size_t>(Bucket::kAllocatedIdle);
const std::vector<Dimension> kBy = {Dimension::kTeam, Dimension::kProject, Dimension::kPool, Dimension::kModel};

// What `spec` counts of a report grouped by kBy.
QuotaUse UseOf(const QuotaSpec& spec, const UsageReport& r) {
  QuotaUse use;
  for (const UsageRow& row : r.rows) {
    if (row.no_job) continue;
    const std::string& owner = spec.owner == QuotaSpec::Owner::kTeam ? row.key[0] : row.key[1];
    if (owner != spec.name) continue;
    if (!spec.pool.empty() && row.key[2] != spec.pool) continue;
    if (!spec.model.empty() && row.key[3] != spec.model) continue;
    use.gpu_ticks_ms += row.gpu_ticks_ms[kActive] + row.gpu_ticks_ms[kIdle];
    use.cost += row.cost[kActive] + row.cost[kIdle];
  }
  return use;
}

// `amount` over `over_ms`, scaled to `to_ms`, rounded half up. REQUIRES: over_ms > 0.
int64_t Scale(int64_t amount, int64_t to_ms, int64_t over_ms) {
  CostNumerator num = static_cast<CostNumerator>(amount) * to_ms;
  return static_cast<int64_t>((2 * num + over_ms) / (2 * over_ms));
}

std::string Days(int64_t ms) {
  if (ms % kMsPerDay == 0) return fmt::format("{}d", ms / kMsPerDay);
  return fmt::format("{}h", ms / kMsPerHour);
}

}  // namespace

double QuotaUse::gpu_hours() const {
  return static_cast<double>(gpu_ticks_ms) / static_cast<double>(kMsPerHour * kShareScale);
}

double QuotaStatus::burn() const { return std::max(gpu_hours_burn.value_or(0), budget_burn.value_or(0)); }

Result<QuotaReport> JudgeQuotas(Ledger& ledger, const std::vector<QuotaSpec>& quotas, const Scope& scope,
                                int64_t now_ms, const std::string& period, const QuotaOptions& options) {
  std::optional<std::pair<QuotaPeriod, TimeRange>> asked;
  if (!period.empty()) {
    GPULEDGER_ASSIGN_OR_RETURN(asked, ParseQuotaPeriodLabel(period));
  }
  GPULEDGER_ASSIGN_OR_RETURN(DataSpan data, ledger.Data());
  GPULEDGER_ASSIGN_OR_RETURN(PriceBook book, ledger.Prices());
  QuotaReport report;
  report.currency = book.currency();
  report.anchor_ms = data.end_ms > 0 ? FloorTo(data.end_ms, kMsPerHour) : 0;
  const int64_t data_begin = FloorTo(data.first_ms + kMsPerHour - 1, kMsPerHour);
  // One usage report per window: quotas of one period share theirs.
  std::map<std::pair<int64_t, int64_t>, UsageReport> reports;
  auto usage = [&](const TimeRange& w) -> Result<const UsageReport*> {
    auto key = std::pair{w.begin_ms, w.end_ms};
    auto it = reports.find(key);
    if (it == reports.end()) {
      GPULEDGER_ASSIGN_OR_RETURN(UsageReport r, ledger.Usage(w, kBy));
      it = reports.emplace(key, std::move(r)).first;
    }
    return &it->second;
  };
  for (const QuotaSpec& spec : quotas) {
    if (spec.owner == QuotaSpec::Owner::kTeam ? !scope.MaySee(spec.name) : !scope.all_teams) continue;
    if (asked && asked->first != spec.period) continue;
    QuotaStatus s;
    s.spec = spec;
    s.period = asked ? asked->second
                     : QuotaPeriodContaining(spec.period, report.anchor_ms > 0 ? report.anchor_ms - 1 : now_ms);
    s.period_label = QuotaPeriodLabel(spec.period, s.period);
    s.to_date = {s.period.begin_ms, std::clamp(report.anchor_ms, s.period.begin_ms, s.period.end_ms)};
    s.elapsed = static_cast<double>(s.to_date.length_ms()) / static_cast<double>(s.period.length_ms());
    if (!s.to_date.empty()) {
      GPULEDGER_ASSIGN_OR_RETURN(const UsageReport* r, usage(s.to_date));
      s.used = UseOf(spec, *r);
    }
    if (spec.gpu_hours) s.gpu_hours_burn = s.used.gpu_hours() / static_cast<double>(*spec.gpu_hours);
    if (spec.budget) {
      s.budget_burn = static_cast<double>(s.used.cost.micros()) / static_cast<double>(spec.budget->micros());
    }
    const int64_t left_ms = s.period.end_ms - s.to_date.end_ms;
    // Before the period starts, the rate is the data's latest.
    const int64_t basis_end = std::min(s.to_date.end_ms, report.anchor_ms);
    s.basis = {std::max(basis_end - options.trailing_ms, data_begin), basis_end};
    std::optional<int64_t> projected_ticks;
    if (report.anchor_ms >= s.period.end_ms) {
      s.basis = {};
      s.basis_text = "period over: the final figures";
      projected_ticks = s.used.gpu_ticks_ms;
      s.projected_cost = s.used.cost;
    } else if (report.anchor_ms == 0) {
      s.basis = {};
      s.basis_text = "no projection: no data yet";
    } else if (s.basis.length_ms() < options.min_basis_ms) {
      s.basis_text = fmt::format("no projection: {} of data before {}, under the {} the rate needs",
                                 Days(s.basis.length_ms()), FormatTime(s.to_date.end_ms), Days(options.min_basis_ms));
      s.basis = {};
    } else {
      GPULEDGER_ASSIGN_OR_RETURN(const UsageReport* r, usage(s.basis));
      QuotaUse rate = UseOf(spec, *r);
      const int64_t basis_ms = s.basis.length_ms();
      projected_ticks = s.used.gpu_ticks_ms + Scale(rate.gpu_ticks_ms, left_ms, basis_ms);
      s.projected_cost = s.used.cost + Money::FromMicros(Scale(rate.cost.micros(), left_ms, basis_ms));
      s.basis_text = fmt::format("trailing {} rate ({} to {})", Days(basis_ms), FormatTime(s.basis.begin_ms),
                                 FormatTime(s.basis.end_ms));
    }
    if (projected_ticks) s.projected_gpu_hours = QuotaUse{*projected_ticks, Money()}.gpu_hours();
    for (double t : spec.alert_at) {
      if (s.burn() >= t) s.crossed.push_back(t);
    }
    const int64_t quota_ticks = spec.gpu_hours.value_or(0) * kMsPerHour * kShareScale;
    bool over_hours = spec.gpu_hours && projected_ticks && *projected_ticks > quota_ticks &&
                      s.used.gpu_ticks_ms <= quota_ticks;
    bool over_budget = spec.budget && s.projected_cost && *s.projected_cost > *spec.budget && s.used.cost <= *spec.budget;
    s.projected_to_exceed = report.anchor_ms < s.period.end_ms && (over_hours || over_budget);
    report.quotas.push_back(std::move(s));
  }
  return report;
}

std::vector<SlurmLimit> SlurmLimits(const std::vector<QuotaSpec>& quotas, std::vector<std::string>* skipped) {
  std::map<std::string, SlurmLimit> by_account;
  auto skip = [&](const QuotaSpec& q, const char* why) {
    if (skipped != nullptr) skipped->push_back(fmt::format("{} ({}): {}", q.Label(), q.source, why));
  };
  for (const QuotaSpec& q : quotas) {
    if (q.mode != QuotaMode::kHard || !q.gpu_hours) continue;
    if (q.owner != QuotaSpec::Owner::kTeam) {
      skip(q, "a project is no Slurm account");
    } else if (!q.pool.empty() || !q.model.empty()) {
      skip(q, "an account limit covers every partition and GPU model");
    } else if (by_account.count(q.name) > 0) {
      skip(q, "the account has a hard quota already; Slurm keeps one GrpTRESMins per account");
    } else {
      by_account[q.name] = {q.name, *q.gpu_hours * 60, q.source};
    }
  }
  std::vector<SlurmLimit> out;
  for (auto& [account, limit] : by_account) out.push_back(std::move(limit));
  return out;
}

std::string_view SlurmLimitStateName(SlurmLimitState s) {
  switch (s) {
    case SlurmLimitState::kInForce: return "in_force";
    case SlurmLimitState::kDiffers: return "differs";
    case SlurmLimitState::kNotPushed: return "not_pushed";
    case SlurmLimitState::kUnmanaged: return "unmanaged";
  }
  return "in_force";
}

std::vector<SlurmAccountLimit> ReconcileSlurmLimits(const std::vector<SlurmLimit>& want,
                                                    const std::map<std::string, int64_t>& enforced,
                                                    const Scope& scope) {
  std::map<std::string, SlurmAccountLimit> by_account;
  for (const SlurmLimit& l : want) by_account[l.account] = {l.account, l.gpu_minutes, std::nullopt, l.source};
  for (const auto& [account, minutes] : enforced) {
    auto [it, fresh] = by_account.try_emplace(account, SlurmAccountLimit{account, std::nullopt, std::nullopt, ""});
    it->second.have_gpu_minutes = minutes;
  }
  std::vector<SlurmAccountLimit> out;
  for (auto& [account, a] : by_account) {
    if (!scope.MaySee(account)) continue;
    if (!a.want_gpu_minutes) {
      a.state = SlurmLimitState::kUnmanaged;
    } else if (!a.have_gpu_minutes) {
      a.state = SlurmLimitState::kNotPushed;
    } else {
      a.state = *a.want_gpu_minutes == *a.have_gpu_minutes ? SlurmLimitState::kInForce : SlurmLimitState::kDiffers;
    }
    out.push_back(std::move(a));
  }
  return out;
}

bool HasSlurmDrift(const std::vector<SlurmAccountLimit>& limits) {
  return std::any_of(limits.begin(), limits.end(), [](const SlurmAccountLimit& a) { return a.drift(); });
}

namespace {

// A DNS-1123 label of `text`: lower case, runs of anything but [a-z0-9] as one '-'.
std::string DnsLabel(std::string_view text) {
  std::string out;
  for (char c : text) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9');
    if (ok) {
      out += l;
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

}  // namespace

std::vector<KueueQueue> KueueQueues(const std::vector<QuotaSpec>& quotas, int64_t at_ms,
                                    std::vector<std::string>* skipped) {
  std::map<std::string, KueueQueue> by_team;
  auto skip = [&](const QuotaSpec& q, const std::string& why) {
    if (skipped != nullptr) skipped->push_back(fmt::format("{} ({}): {}", q.Label(), q.source, why));
  };
  for (const QuotaSpec& q : quotas) {
    if (!q.gpu_hours) continue;
    if (q.owner != QuotaSpec::Owner::kTeam) {
      skip(q, "a project has no queue of its own");
      continue;
    }
    if (DnsLabel(q.name) != q.name || q.name.size() > 53) {
      skip(q, "the team's name is not a DNS-1123 label, as a ClusterQueue's name must be");
      continue;
    }
    if (by_team.count(q.name) > 0) {
      skip(q, "the team's queue is sized by its first GPU-hour quota");
      continue;
    }
    const int64_t hours = QuotaPeriodContaining(q.period, at_ms).length_ms() / kMsPerHour;
    KueueQueue k{.team = q.name, .name = "gpuledger-" + q.name, .cohort = "gpuledger", .source = q.source};
    std::string flavor = DnsLabel(!q.model.empty() ? q.model : q.pool);
    k.flavor = flavor.empty() ? "default-flavor" : flavor;
    k.nominal_gpus = (*q.gpu_hours + hours - 1) / hours;
    k.borrowing_limit_gpus = q.mode == QuotaMode::kHard ? 0 : k.nominal_gpus;
    by_team[q.name] = std::move(k);
  }
  std::vector<KueueQueue> out;
  for (auto& [team, k] : by_team) out.push_back(std::move(k));
  return out;
}

}  // namespace gpuledger::ledger
