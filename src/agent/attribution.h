// Process -> job attribution on a node. For each process NVML lists, in this order:
//   1. explicit variables in its environment: GPULEDGER_JOB (with GPULEDGER_TEAM,
//      GPULEDGER_PROJECT, GPULEDGER_EXPERIMENT, GPULEDGER_KIND, GPULEDGER_USER,
//      GPULEDGER_POOL);
//   2. Slurm: SLURM_JOB_ID in the environment, or a `job_<id>` component of its cgroup
//      path; enriched with account, user, partition and name from Slurm (slurm.h);
//   3. Kubernetes: the pod UID in its cgroup path; with the kubelet's PodResources
//      listing (kube/pod_directory.h) the job the pod rules make of the pod holding the
//      device ("k8s/<namespace>/<job>"), else "k8s/<pod uid>";
//   4. the static mapping file: a device (or MIG instance) -> job table;
//   5. dcgm-exporter's HPC job-mapping folder: files named `<gpu index>` or
//      `<gpu index>.<GPU instance id>` listing job ids, one per line (job "hpc/<id>").
// GPULEDGER_TEAM & co. set on a process also override what a later source says about
// its job. A process that matches nothing is unattributed (empty job id), never dropped.
// The mapping file, the HPC folder and the kubelet's listing also hold devices by
// themselves: a device they name is allocated to that job while they name it, with or
// without processes (a pod holding a GPU idle).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "agent/proc_reader.h"
#include "agent/slurm.h"
#include "core/model.h"
#include "core/status.h"
#include "kube/pod_directory.h"

namespace gpuledger::agent {

enum class AttributionSource : uint8_t { kNone, kEnvironment, kSlurm, kKubernetes, kMappingFile, kHpcJobMap };
// "none", "environment", "slurm", "kubernetes", "mapping_file", "hpc_job_map".
std::string_view AttributionSourceName(AttributionSource source);

struct Attribution {
  AttributionSource source = AttributionSource::kNone;
  Job job;  // job.id empty when unattributed
  bool attributed() const { return !job.id.empty(); }
};

// Where a process runs, as the mapping sources name devices.
struct DeviceRef {
  std::string uuid;      // the GPU's, or the MIG instance's
  int gpu_index = 0;     // NVML index of the physical GPU
  std::optional<uint32_t> gpu_instance_id;  // MIG instances only
  std::string parent_uuid;                  // MIG instances only: the GPU's UUID
};

// The Slurm job id in a cgroup file's text: a path component "job_<digits>" (cgroup v1
// `/slurm/uid_1000/job_42/step_0`, v2 `/system.slice/slurmstepd.scope/job_42/step_0`).
std::optional<std::string> SlurmJobFromCgroup(std::string_view cgroup_text);
// The pod UID in a cgroup file's text, dashes restored: cgroupfs driver
// `/kubepods/burstable/pod<uid>/<ctr>`, systemd driver
// `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid with _>.slice/...`.
std::optional<std::string> PodUidFromCgroup(std::string_view cgroup_text);

// The explicit variables: a job when GPULEDGER_JOB is set and valid.
std::optional<Job> JobFromEnvironment(const Environment& env);
// Applies GPULEDGER_TEAM/PROJECT/EXPERIMENT/KIND/USER/POOL over `job`.
void OverlayEnvironment(const Environment& env, Job& job);

// One entry of the static mapping file.
struct MappingEntry {
  std::string uuid;                    // match by device uuid, or
  std::optional<int> gpu_index;        // by GPU index (and GI id for a MIG instance)
  std::optional<uint32_t> gpu_instance_id;
  Job job;
};

// Reads the static mapping file (TOML):
//   [[device]]
//   uuid = "GPU-..."        # or: gpu = 0 (and gpu_instance = 3 for a MIG instance)
//   job = "inference-pool"  # required
//   team = "search"         # optional: project, experiment, user, kind, pool
// Errors name the file, line and key.
Result<std::vector<MappingEntry>> LoadMappingFile(const std::string& path);

// Reads the HPC job-mapping folder: file name -> job ids listed in it (blank lines and
// surrounding blanks ignored). Files whose name is not `<n>` or `<n>.<m>` are ignored.
// A missing folder is an empty map (no jobs run); unreadable files are skipped.
Result<std::unordered_map<std::string, std::vector<std::string>>> ReadHpcJobMapping(
    const std::string& dir);

class Attributor {
 public:
  struct Options {
    std::string proc_root = "/proc";
    std::string mapping_file;          // empty: none
    std::string hpc_job_mapping_dir;   // empty: none
  };
  // `slurm` may be null (no Slurm on this node), and `pods` (no Kubernetes). REQUIRES:
  // both outlive the attributor.
  Attributor(Options options, SlurmResolver* slurm, kube::PodDirectory* pods = nullptr);

  // Re-reads the mapping file (when its modification time changed), the HPC folder and
  // the kubelet's listing (at `now_ms`). Call once per collection, before ForProcess. A
  // bad mapping file keeps the last good contents and returns the error; so does a
  // kubelet that does not answer (kube::PodDirectory::Refresh).
  Status Refresh(int64_t now_ms = 0);

  // Attributes one process running on `device`. Processes' environment and cgroup are
  // read once per pid and cached until EndCycle forgets the pid.
  Attribution ForProcess(uint32_t pid, const DeviceRef& device);

  // Jobs that hold `device` through the mapping file, the HPC folder or the kubelet,
  // whatever runs; each job once.
  std::vector<Attribution> DeviceHolders(const DeviceRef& device) const;

  // The containers the kubelet lists on `device` (empty without Kubernetes).
  std::vector<const kube::PodHolder*> PodHolders(const DeviceRef& device) const;

  // Forgets cached pids that are not in `alive` (a pid reused later is read afresh).
  void EndCycle(const std::unordered_set<uint32_t>& alive);

  const ProcReader& proc() const { return proc_; }

 private:
  struct ProcInfo {
    Environment env;
    std::optional<std::string> slurm_job;
    std::optional<std::string> pod_uid;
    bool readable = true;
  };
  const ProcInfo& Process(uint32_t pid);
  std::optional<Job> MappingJob(const DeviceRef& device) const;
  std::vector<std::string> HpcJobs(const DeviceRef& device) const;
  Job SlurmJob(const std::string& id);
  Job PodJob(const std::string& pod_uid, const DeviceRef& device) const;

  Options options_;
  ProcReader proc_;
  SlurmResolver* slurm_;
  kube::PodDirectory* pods_;
  std::unordered_map<uint32_t, ProcInfo> procs_;
  std::vector<MappingEntry> mapping_;
  int64_t mapping_mtime_ns_ = -1;
  // This collection's job of each pod (by UID) whose process ForProcess attributed:
  // the pod's holdings take it, so that GPULEDGER_* variables set in the pod hold its
  // devices too, and a job never appears with two versions of its metadata.
  std::unordered_map<std::string, Job> pod_jobs_;
  std::unordered_map<std::string, std::vector<std::string>> hpc_;
};

}  // namespace gpuledger::agent
