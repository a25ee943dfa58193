#include <fmt/format.h>

#include <charconv>
#include <sstream>

#include "actuators/actuators.h"

namespace gpuledger::actuators {

Status PushSlurmLimit(const CommandRunner& run, const ledger::SlurmLimit& limit, const std::string& sacctmgr) {
  if (limit.account.empty() || limit.account.find_first_of(" \t\n=,'\"") != std::string::npos) {
    return InvalidArgument(fmt::format("account \"{}\": not a Slurm account name", limit.account));
  }
  auto out = run({sacctmgr, "-i", "modify", "account", "name=" + limit.account, "set",
                  fmt::format("GrpTRESMins=gres/gpu={}", limit.gpu_minutes)});
  if (!out.ok()) return out.status().WithContext(fmt::format("account {}", limit.account));
  return Status::Ok();
}

Result<std::map<std::string, int64_t>> ReadSlurmLimits(const CommandRunner& run, const std::string& sacctmgr) {
  GPULEDGER_ASSIGN_OR_RETURN(std::string text,
                             run({sacctmgr, "-n", "-P", "show", "assoc", "format=Account,User,GrpTRESMins"}));
  std::map<std::string, int64_t> out;
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, '|');) f.push_back(x);
    if (line.back() == '|') f.push_back("");
    if (f.size() != 3) {
      return InvalidArgument(fmt::format("sacctmgr show assoc line {}: \"{}\": want Account|User|GrpTRESMins", n, line));
    }
    if (!f[1].empty()) continue;  // a user's association: the limit is the account's
    std::istringstream tres(f[2]);
    for (std::string item; std::getline(tres, item, ',');) {
      constexpr std::string_view kGpu = "gres/gpu=";
      if (!item.starts_with(kGpu)) continue;
      int64_t minutes = 0;
      const char* begin = item.data() + kGpu.size();
      auto [ptr, ec] = std::from_chars(begin, item.data() + item.size(), minutes);
      if (ec != std::errc() || ptr != item.data() + item.size()) {
        return InvalidArgument(fmt::format("sacctmgr show assoc line {}: \"{}\": not a number of minutes", n, item));
      }
      out[f[0]] = minutes;
    }
  }
  return out;
}

Result<std::vector<ledger::SlurmAccountLimit>> SyncSlurmLimits(const CommandRunner& run,
                                                               const std::vector<ledger::SlurmLimit>& want, bool push,
                                                               const std::string& sacctmgr, const ledger::Scope& scope,
                                                               std::vector<ledger::SlurmLimit>* pushed) {
  GPULEDGER_ASSIGN_OR_RETURN(auto enforced, ReadSlurmLimits(run, sacctmgr));
  std::vector<ledger::SlurmAccountLimit> limits = ledger::ReconcileSlurmLimits(want, enforced, scope);
  if (!push) return limits;
  for (const ledger::SlurmAccountLimit& a : limits) {
    if (!a.drift() || !a.want_gpu_minutes) continue;
    ledger::SlurmLimit limit{a.account, *a.want_gpu_minutes, a.source};
    GPULEDGER_RETURN_IF_ERROR(PushSlurmLimit(run, limit, sacctmgr));
    if (pushed != nullptr) pushed->push_back(std::move(limit));
  }
  GPULEDGER_ASSIGN_OR_RETURN(enforced, ReadSlurmLimits(run, sacctmgr));
  return ledger::ReconcileSlurmLimits(want, enforced, scope);
}

}  // namespace gpuledger::actuators
