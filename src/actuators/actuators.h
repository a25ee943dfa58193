// Actuators: intervention decisions carried out on a scheduler (docs/objectives.md). The
// decisions are the objectives library's; an actuator only turns one into the scheduler's
// commands and reports what happened. Two: Slurm through its command-line tools (a command
// runner injected, as the agent's Slurm resolver has), and Kubernetes through the API
// server's Eviction API, finding a job's pods by the agent's own pod rules (kube/pod_rules.h;
// cpp-httplib stays inside kubernetes.cc and kube).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "kube/pod_rules.h"
#include "ledger/quotas.h"
#include "objectives/interventions.h"

namespace gpuledger::actuators {

class Actuator {
 public:
  virtual ~Actuator() = default;
  // Carries out `d` (its action on d.job); on success what was done ("held",
  // "priority 1000", ...). Errors name the job and the command or request. A Kubernetes
  // eviction a PodDisruptionBudget refuses is kUnavailable ("retry later").
  virtual Result<std::string> Apply(const objectives::Decision& d) = 0;
};

// Runs argv[0] with the rest as its arguments; its standard output, or an error naming
// the command and its standard error. (The agent's RunCommand, src/agent/slurm.h.)
using CommandRunner = std::function<Result<std::string>(const std::vector<std::string>& argv)>;

struct SlurmOptions {
  std::string scontrol = "scontrol";
  std::string scancel = "scancel";
  // stop: SIGTERM first, then the cancel this long after (the job's chance to checkpoint),
  // on the actuator's own thread: Apply returns once the SIGTERM is sent. 0: cancel at once.
  int64_t term_grace_ms = 30'000;
};

// The job's Slurm id is its ledger id. hold: `scontrol hold ID`; reprioritize:
// `scontrol update JobId=ID Priority=N`; stop: `scancel --signal=TERM ID`, then after the
// grace `scancel ID` (a job already gone counts as stopped) on a thread of the actuator's,
// which logs the cancel's result (event=slurm_cancel) and, when the actuator is destroyed,
// runs the cancels still waiting at once; requeue: `scontrol requeue ID`; notify runs
// nothing (the alert sinks notify).
std::unique_ptr<Actuator> SlurmActuator(CommandRunner run, SlurmOptions options = {});

struct KubernetesOptions {
  std::string api_server;  // "https://10.0.0.1:6443" or "http://127.0.0.1:8001" (kubectl proxy)
  std::string token;       // bearer token; empty: none
  int64_t timeout_ms = 10'000;
  // How the agent names a pod's job ([agent.kubernetes] in the same file): the actuator
  // finds a job's pods by them.
  kube::PodRules rules = kube::PodRules::Defaults();
};

// The job's ledger id is the agent's "k8s/NAMESPACE/JOB" or "NAMESPACE/POD". stop and
// requeue evict the job's pods (POST /api/v1/namespaces/NS/pods/NAME/eviction, a
// policy/v1 Eviction; each pod's controller makes a new one, or the job's operator ends
// it): the pods of NAMESPACE (GET /api/v1/namespaces/NS/pods, every page) whose job by
// `rules` (kube::ApplyPodRules, with the namespace's metadata when the job rules read
// it; a namespace the RBAC hides gives none, as in the agent) is "k8s/NAMESPACE/JOB",
// every one of them (a gang job's stop evicts them all); for the plain NAMESPACE/POD form
// failing any, the pod named POD (never for an agent's id: that pod is another job's).
// Finished pods (Succeeded, Failed) are not evicted; terminating ones (a
// deletionTimestamp) are not asked again and are named in the result. On success
// "evicted 2 pods: a, b" (in the list's order). When a pod's eviction is refused (429 from a
// PodDisruptionBudget) or cannot be sent, Unavailable ("retry later") naming the pods
// evicted and those not: a retry evicts the rest, the evicted ones being gone from the
// list. Another answer (a 500) is Internal, naming the same. No pod of the job or of that
// name: NotFound naming the job and namespace. The list failing is its error (Unavailable
// for a 5xx or no answer), naming its path. hold and reprioritize are refused
// (FailedPrecondition): the API server has no such verb for a running pod. Fails on a URL
// that is not http(s).
Result<std::unique_ptr<Actuator>> KubernetesActuator(KubernetesOptions options);

// The names of the pods of `ns` (GET /api/v1/namespaces/NS/pods), by name, finished and
// terminating ones included.
Result<std::vector<std::string>> ListPods(const KubernetesOptions& options, const std::string& ns);

// Hard quotas pushed into Slurm (docs/quotas.md): the limit is the ledger's
// (ledger::SlurmLimits); this only runs sacctmgr. Slurm enforces it when slurm.conf has
// AccountingStorageTRES=gres/gpu and AccountingStorageEnforce=limits,safe.
//
// `sacctmgr -i modify account name=ACCOUNT set GrpTRESMins=gres/gpu=N`. Fails naming the
// account for a name sacctmgr would read as more than one word, or with the command's error.
Status PushSlurmLimit(const CommandRunner& run, const ledger::SlurmLimit& limit,
                      const std::string& sacctmgr = "sacctmgr");
// What Slurm enforces: account -> its gres/gpu GPU-minutes, from the account associations
// (those with no user) of `sacctmgr -n -P show assoc format=Account,User,GrpTRESMins`.
// Accounts without a gres/gpu limit are absent. Fails naming a line it cannot read.
Result<std::map<std::string, int64_t>> ReadSlurmLimits(const CommandRunner& run,
                                                       const std::string& sacctmgr = "sacctmgr");

// What `gpuledger quota slurm` and GET /api/v1/quotas/drift do (docs/quotas.md): reads
// what Slurm enforces and reconciles it with `want` (ledger::ReconcileSlurmLimits, over
// the accounts `scope` may see). With `push`, first sets the limit of each account whose
// state is not in force and which a quota names (an unmanaged one is left as it is), then
// reads every limit back: the answer is what Slurm enforces afterwards. Each limit set is
// appended to `pushed` when not null. Fails with sacctmgr's error (naming the account
// for a push), having set the limits before it.
Result<std::vector<ledger::SlurmAccountLimit>> SyncSlurmLimits(const CommandRunner& run,
                                                               const std::vector<ledger::SlurmLimit>& want, bool push,
                                                               const std::string& sacctmgr = "sacctmgr",
                                                               const ledger::Scope& scope = ledger::Scope::All(),
                                                               std::vector<ledger::SlurmLimit>* pushed = nullptr);

}  // namespace gpuledger::actuators
