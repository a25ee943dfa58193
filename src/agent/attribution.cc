#include "agent/attribution.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace gpuledger::agent {
namespace {

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// A UUID spelt with '-' or '_' separators at 8-4-4-4-12; returns it with dashes.
std::optional<std::string> UuidAt(std::string_view s) {
  if (s.size() < 36) return std::nullopt;
  std::string out(s.substr(0, 36));
  for (size_t i = 0; i < 36; ++i) {
    bool sep = i == 8 || i == 13 || i == 18 || i == 23;
    if (sep) {
      if (out[i] != '-' && out[i] != '_') return std::nullopt;
      out[i] = '-';
    } else if (!IsHex(out[i])) {
      return std::nullopt;
    }
  }
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

const std::string* Find(const Environment& env, const char* key) {
  auto it = env.find(key);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

}  // namespace

std::string_view AttributionSourceName(AttributionSource source) {
  switch (source) {
    case AttributionSource::kNone: return "none";
    case AttributionSource::kEnvironment: return "environment";
    case AttributionSource::kSlurm: return "slurm";
    case AttributionSource::kKubernetes: return "kubernetes";
    case AttributionSource::kMappingFile: return "mapping_file";
    case AttributionSource::kHpcJobMap: return "hpc_job_map";
  }
  return "none";
}

std::optional<std::string> SlurmJobFromCgroup(std::string_view text) {
  size_t pos = 0;
  while ((pos = text.find("/job_", pos)) != std::string_view::npos) {
    pos += 5;
    size_t end = pos;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end > pos && (end == text.size() || text[end] == '/' || text[end] == '\n')) {
      return std::string(text.substr(pos, end - pos));
    }
  }
  return std::nullopt;
}

std::optional<std::string> PodUidFromCgroup(std::string_view text) {
  if (text.find("kubepods") == std::string_view::npos) return std::nullopt;
  size_t pos = 0;
  while ((pos = text.find("pod", pos)) != std::string_view::npos) {
    pos += 3;
    if (auto uid = UuidAt(text.substr(pos))) return uid;
  }
  return std::nullopt;
}

void OverlayEnvironment(const Environment& env, Job& job) {
  if (auto* v = Find(env, "GPULEDGER_TEAM")) job.team = *v;
  if (auto* v = Find(env, "GPULEDGER_PROJECT")) job.project = *v;
  if (auto* v = Find(env, "GPULEDGER_EXPERIMENT")) job.experiment = *v;
  if (auto* v = Find(env, "GPULEDGER_USER")) job.user = *v;
  if (auto* v = Find(env, "GPULEDGER_POOL")) job.pool = *v;
  if (auto* v = Find(env, "GPULEDGER_KIND")) {
    if (auto kind = ParseJobKind(*v); kind.ok()) job.kind = *kind;
  }
}

std::optional<Job> JobFromEnvironment(const Environment& env) {
  const std::string* id = Find(env, "GPULEDGER_JOB");
  if (id == nullptr || id->size() > 256) return std::nullopt;
  Job job;
  job.id = *id;
  OverlayEnvironment(env, job);
  return job;
}

Result<std::vector<MappingEntry>> LoadMappingFile(const std::string& path) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return InvalidArgument(fmt::format("{}:{}:{}: {}", path, e.source().begin.line,
                                       e.source().begin.column, e.description()));
  }
  std::vector<MappingEntry> out;
  for (auto&& [key, node] : t) {
    if (key.str() != "device") {
      return InvalidArgument(fmt::format("{}:{}: {}: unknown key (want [[device]] tables)", path,
                                         node.source().begin.line, key.str()));
    }
    const toml::array* arr = node.as_array();
    if (arr == nullptr) return InvalidArgument(fmt::format("{}:{}: use [[device]] tables", path, node.source().begin.line));
    for (const toml::node& item : *arr) {
      const toml::table* d = item.as_table();
      int line = static_cast<int>(item.source().begin.line);
      if (d == nullptr) return InvalidArgument(fmt::format("{}:{}: [[device]] must be a table", path, line));
      MappingEntry e;
      for (auto&& [k, v] : *d) {
        std::string name(k.str());
        int vline = static_cast<int>(v.source().begin.line);
        if (name == "gpu" || name == "gpu_instance") {
          auto n = v.value<int64_t>();
          if (!n || *n < 0 || *n > 4096) {
            return InvalidArgument(fmt::format("{}:{}: {}: want a small non-negative integer", path, vline, name));
          }
          if (name == "gpu") {
            e.gpu_index = static_cast<int>(*n);
          } else {
            e.gpu_instance_id = static_cast<uint32_t>(*n);
          }
          continue;
        }
        auto s = v.value<std::string>();
        if (!s) return InvalidArgument(fmt::format("{}:{}: {}: want a string", path, vline, name));
        if (name == "uuid") {
          e.uuid = *s;
        } else if (name == "job") {
          e.job.id = *s;
        } else if (name == "team") {
          e.job.team = *s;
        } else if (name == "project") {
          e.job.project = *s;
        } else if (name == "experiment") {
          e.job.experiment = *s;
        } else if (name == "user") {
          e.job.user = *s;
        } else if (name == "pool") {
          e.job.pool = *s;
        } else if (name == "kind") {
          auto kind = ParseJobKind(*s);
          if (!kind.ok()) return kind.status().WithContext(fmt::format("{}:{}: kind", path, vline));
          e.job.kind = *kind;
        } else {
          return InvalidArgument(fmt::format("{}:{}: device.{}: unknown key", path, vline, name));
        }
      }
      if (e.job.id.empty()) return InvalidArgument(fmt::format("{}:{}: device: job is required", path, line));
      if (e.uuid.empty() == !e.gpu_index.has_value()) {
        return InvalidArgument(fmt::format("{}:{}: device: give either uuid or gpu", path, line));
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

Result<std::unordered_map<std::string, std::vector<std::string>>> ReadHpcJobMapping(const std::string& dir) {
  std::unordered_map<std::string, std::vector<std::string>> out;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return out;
    return Unavailable(fmt::format("{}: {}", dir, ec.message()));
  }
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    size_t dot = name.find('.');
    bool valid = dot == std::string::npos
                     ? IsDigits(name)
                     : IsDigits(std::string_view(name).substr(0, dot)) &&
                           IsDigits(std::string_view(name).substr(dot + 1));
    if (!valid || !entry.is_regular_file(ec)) continue;
    std::ifstream in(entry.path());
    if (!in) continue;
    std::vector<std::string> jobs;
    std::string line;
    while (std::getline(in, line)) {
      std::string job = Trim(line);
      if (!job.empty() && job.size() <= 200) jobs.push_back(job);
    }
    if (!jobs.empty()) out.emplace(name, std::move(jobs));
  }
  return out;
}

Attributor::Attributor(Options options, SlurmResolver* slurm, kube::PodDirectory* pods)
    : options_(std::move(options)), proc_(options_.proc_root), slurm_(slurm), pods_(pods) {}

Status Attributor::Refresh(int64_t now_ms) {
  Status status;
  pod_jobs_.clear();
  if (pods_ != nullptr) status = pods_->Refresh(now_ms);
  if (!options_.mapping_file.empty()) {
    struct stat st {};
    if (::stat(options_.mapping_file.c_str(), &st) != 0) {
      // A removed file holds nothing.
      mapping_.clear();
      mapping_mtime_ns_ = -1;
    } else {
      int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
      if (mtime != mapping_mtime_ns_) {
        auto loaded = LoadMappingFile(options_.mapping_file);
        if (loaded.ok()) {
          mapping_ = std::move(loaded).value();
          mapping_mtime_ns_ = mtime;
        } else {
          status = loaded.status();
        }
      }
    }
  }
  if (!options_.hpc_job_mapping_dir.empty()) {
    auto hpc = ReadHpcJobMapping(options_.hpc_job_mapping_dir);
    if (hpc.ok()) {
      hpc_ = std::move(hpc).value();
    } else if (status.ok()) {
      status = hpc.status();
    }
  }
  return status;
}

const Attributor::ProcInfo& Attributor::Process(uint32_t pid) {
  auto it = procs_.find(pid);
  // An unreadable process (gone, or just starting) is asked again next time.
  if (it != procs_.end() && it->second.readable) return it->second;
  ProcInfo info;
  auto env = proc_.ReadEnvironment(pid);
  if (env.ok()) {
    info.env = std::move(env).value();
  } else {
    info.readable = false;
  }
  auto cgroup = proc_.ReadCgroup(pid);
  if (cgroup.ok()) {
    info.slurm_job = SlurmJobFromCgroup(*cgroup);
    info.pod_uid = PodUidFromCgroup(*cgroup);
  }
  if (auto* id = Find(info.env, "SLURM_JOB_ID"); id != nullptr && IsDigits(*id)) info.slurm_job = *id;
  return procs_.insert_or_assign(pid, std::move(info)).first->second;
}

Job Attributor::SlurmJob(const std::string& id) {
  Job job;
  job.id = id;
  if (slurm_ == nullptr) return job;
  auto info = slurm_->Lookup(id);
  if (!info.ok()) return job;
  job.team = info->account;
  job.user = info->user;
  job.pool = info->partition;
  job.experiment = info->name;
  job.requested_gpus = info->gpus;
  job.labels = SlurmCommentLabels(info->comment);
  return job;
}

std::optional<Job> Attributor::MappingJob(const DeviceRef& device) const {
  for (const MappingEntry& e : mapping_) {
    bool match = !e.uuid.empty() ? e.uuid == device.uuid
                                 : e.gpu_index == device.gpu_index &&
                                       e.gpu_instance_id == device.gpu_instance_id;
    if (match) return e.job;
  }
  return std::nullopt;
}

std::vector<std::string> Attributor::HpcJobs(const DeviceRef& device) const {
  std::string key = device.gpu_instance_id
                        ? fmt::format("{}.{}", device.gpu_index, *device.gpu_instance_id)
                        : fmt::format("{}", device.gpu_index);
  auto it = hpc_.find(key);
  if (it == hpc_.end()) return {};
  return it->second;
}

Attribution Attributor::ForProcess(uint32_t pid, const DeviceRef& device) {
  const ProcInfo& p = Process(pid);
  Attribution a;
  if (auto job = JobFromEnvironment(p.env)) {
    a.source = AttributionSource::kEnvironment;
    a.job = std::move(*job);
    if (p.pod_uid) pod_jobs_.insert_or_assign(*p.pod_uid, a.job);
    return a;
  }
  if (p.slurm_job) {
    a.source = AttributionSource::kSlurm;
    a.job = SlurmJob(*p.slurm_job);
  } else if (p.pod_uid) {
    a.source = AttributionSource::kKubernetes;
    a.job = PodJob(*p.pod_uid, device);
  } else if (auto job = MappingJob(device)) {
    a.source = AttributionSource::kMappingFile;
    a.job = std::move(*job);
  } else if (auto jobs = HpcJobs(device); !jobs.empty()) {
    a.source = AttributionSource::kHpcJobMap;
    a.job.id = "hpc/" + jobs.front();
  } else {
    return a;
  }
  OverlayEnvironment(p.env, a.job);
  if (p.pod_uid) pod_jobs_.insert_or_assign(*p.pod_uid, a.job);
  return a;
}

std::vector<const kube::PodHolder*> Attributor::PodHolders(const DeviceRef& device) const {
  if (pods_ == nullptr) return {};
  return pods_->Holders(device.uuid, device.parent_uuid, device.gpu_instance_id);
}

Job Attributor::PodJob(const std::string& pod_uid, const DeviceRef& device) const {
  if (pods_ != nullptr) {
    if (const kube::PodHolder* h = pods_->ByUid(pod_uid)) return h->job;
    // Without UIDs (no API server) a device held by one pod only is that pod's; on a
    // shared device the pod cannot be told apart.
    std::vector<const kube::PodHolder*> holders = PodHolders(device);
    bool one_pod = !holders.empty() && std::all_of(holders.begin(), holders.end(), [&](const kube::PodHolder* h) {
      return h->ns == holders[0]->ns && h->pod == holders[0]->pod;
    });
    if (one_pod) return holders[0]->job;
  }
  Job job;
  job.id = "k8s/" + pod_uid;
  return job;
}

std::vector<Attribution> Attributor::DeviceHolders(const DeviceRef& device) const {
  std::vector<Attribution> out;
  auto add = [&](AttributionSource source, Job job) {
    for (const Attribution& a : out) {
      if (a.job.id == job.id) return;
    }
    out.push_back({source, std::move(job)});
  };
  if (auto job = MappingJob(device)) add(AttributionSource::kMappingFile, std::move(*job));
  for (const std::string& id : HpcJobs(device)) {
    Job job;
    job.id = "hpc/" + id;
    add(AttributionSource::kHpcJobMap, std::move(job));
  }
  for (const kube::PodHolder* h : PodHolders(device)) {
    auto seen = h->uid.empty() ? pod_jobs_.end() : pod_jobs_.find(h->uid);
    add(AttributionSource::kKubernetes, seen != pod_jobs_.end() ? seen->second : h->job);
  }
  return out;
}

void Attributor::EndCycle(const std::unordered_set<uint32_t>& alive) {
  std::erase_if(procs_, [&](const auto& kv) { return !alive.contains(kv.first); });
}

}  // namespace gpuledger::agent
