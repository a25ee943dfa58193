// `gpuledger quota status`: the config's quotas and budgets judged to where the data
// ends (docs/quotas.md). Rendering only: the figures come from ledger::JudgeQuotas.
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "actuators/actuators.h"
#include "agent/slurm.h"
#include "cli/commands.h"
#include "ledger/quotas.h"
#include "report/quota_format.h"
#include "report/usage_format.h"

namespace gpuledger::cli {
namespace {

int QuotaStatus(const CommonOptions& common, const std::string& period, const std::string& format) {
  auto f = report::ParseFormat(format);
  if (!f.ok()) return Fail(f.status().WithContext("--format"));
  if (*f == report::Format::kCsv) return Fail(InvalidArgument("--format: quota status prints table or json"));
  SystemClock clock;
  Config config;
  auto ledger = OpenLedger(common, clock, &config);
  if (!ledger.ok()) return Fail(ledger.status());
  auto r = ledger::JudgeQuotas(**ledger, config.quotas, ledger::Scope::All(), clock.NowMs(), period);
  if (!r.ok()) return Fail(r.status().WithContext(period.empty() ? "quota status" : "--period"));
  std::string out = *f == report::Format::kJson ? report::QuotasJson(*r).dump(2) + "\n" : report::RenderQuotasTable(*r);
  std::fputs(out.c_str(), stdout);
  return 0;
}

// The quotas the config has, for commands that need no ledger.
Result<Config> QuotasConfig(const CommonOptions& common) {
  if (common.config_path.empty()) return FailedPrecondition("--config is required: the quotas are the config's [[quota]]");
  return config::Load(common.config_path);
}

void PrintSkipped(const std::vector<std::string>& skipped) {
  for (const std::string& s : skipped) std::fprintf(stderr, "gpuledger: left out: %s\n", s.c_str());
}

int QuotaKueue(const CommonOptions& common) {
  auto config = QuotasConfig(common);
  if (!config.ok()) return Fail(config.status());
  SystemClock clock;
  std::vector<std::string> skipped;
  auto queues = ledger::KueueQueues(config->quotas, clock.NowMs(), &skipped);
  PrintSkipped(skipped);
  std::fputs(report::KueueYaml(queues).c_str(), stdout);
  return 0;
}

// Each hard quota's Slurm limit against what Slurm enforces; with `push`, sets those that
// differ first and reads them back (actuators::SyncSlurmLimits). Exit 2 on drift.
int QuotaSlurm(const CommonOptions& common, bool push, const std::string& sacctmgr) {
  auto config = QuotasConfig(common);
  if (!config.ok()) return Fail(config.status());
  std::vector<std::string> skipped;
  std::vector<ledger::SlurmLimit> want = ledger::SlurmLimits(config->quotas, &skipped);
  PrintSkipped(skipped);
  actuators::CommandRunner run = [](const std::vector<std::string>& argv) { return agent::RunCommand(argv, 30'000); };
  std::vector<ledger::SlurmLimit> pushed;
  auto limits = actuators::SyncSlurmLimits(run, want, push, sacctmgr, ledger::Scope::All(), &pushed);
  for (const ledger::SlurmLimit& l : pushed) {
    std::printf("set %s GrpTRESMins=gres/gpu=%lld\n", l.account.c_str(), static_cast<long long>(l.gpu_minutes));
  }
  if (!limits.ok()) return Fail(limits.status());
  auto minutes = [](const std::optional<int64_t>& m) { return m ? std::to_string(*m) : std::string("-"); };
  std::printf("%-20s %16s %16s  %s\n", "ACCOUNT", "QUOTA GPU-MIN", "SLURM GPU-MIN", "STATE");
  for (const ledger::SlurmAccountLimit& a : *limits) {
    std::string state = a.drift() ? "DRIFT (" + std::string(ledger::SlurmLimitStateName(a.state)) + ")" : "in force";
    std::printf("%-20s %16s %16s  %s\n", a.account.c_str(), minutes(a.want_gpu_minutes).c_str(),
                minutes(a.have_gpu_minutes).c_str(), state.c_str());
  }
  return ledger::HasSlurmDrift(*limits) ? 2 : 0;
}

}  // namespace

void AddQuotaCommand(CLI::App& app, CommonOptions& common, Commands& out) {
  CLI::App* quota =
      app.add_subcommand("quota", "Quotas and budgets ([[quota]], [budgets]): burn-down, projection, enforcement")
          ->require_subcommand(1);
  struct Opts {
    std::string period, format = "table";
  };
  auto o = std::make_shared<Opts>();
  CLI::App* status = quota->add_subcommand(
      "status", "Each quota's GPU-hours and money to date, burn, projection to the period's end and its basis");
  AddCommonOptions(*status, common);
  status->add_option("--period", o->period,
                     "judge this month (2026-11) or quarter (2026-Q4); default: the period the data ends in");
  status->add_option("--format", o->format, "table or json")->capture_default_str();
  out.push_back({status, [o, &common]() -> int { return QuotaStatus(common, o->period, o->format); }});

  CLI::App* kueue = quota->add_subcommand(
      "kueue", "Kueue ClusterQueue YAML (kueue.x-k8s.io/v1beta1) for the teams' GPU-hour quotas, for kubectl apply -f");
  AddCommonOptions(*kueue, common);
  out.push_back({kueue, [&common]() -> int { return QuotaKueue(common); }});

  struct SlurmOpts {
    bool push = false;
    std::string sacctmgr = "sacctmgr";
  };
  auto so = std::make_shared<SlurmOpts>();
  CLI::App* slurm = quota->add_subcommand(
      "slurm", "The hard quotas as Slurm account limits (GrpTRESMins=gres/gpu) against what Slurm enforces; "
               "exit 2 on drift");
  AddCommonOptions(*slurm, common);
  slurm->add_flag("--push", so->push, "set each differing account's limit with sacctmgr, then read them back");
  slurm->add_option("--sacctmgr", so->sacctmgr, "the sacctmgr to run")->capture_default_str();
  out.push_back({slurm, [so, &common]() -> int { return QuotaSlurm(common, so->push, so->sacctmgr); }});
}

}  // namespace gpuledger::cli
