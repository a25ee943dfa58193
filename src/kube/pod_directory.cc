#include "kube/pod_directory.h"

#include <unordered_set>

#include <fmt/format.h>

namespace gpuledger::kube {

PodDirectory::PodDirectory(Options options, std::unique_ptr<ApiClient> api)
    : options_(std::move(options)), client_(options_.socket_path, options_.timeout_ms), api_(std::move(api)) {
  status_.api_configured = api_ != nullptr;
}

PodDirectory::~PodDirectory() = default;

Result<std::unique_ptr<PodDirectory>> PodDirectory::Create(Options options) {
  std::unique_ptr<ApiClient> api;
  if (options.api) {
    options.api->timeout_ms = options.timeout_ms;
    GPULEDGER_ASSIGN_OR_RETURN(api, ApiClient::Create(*options.api));
  }
  return std::unique_ptr<PodDirectory>(new PodDirectory(std::move(options), std::move(api)));
}

void PodDirectory::NoteApi(const Status& st, int64_t now_ms) {
  bool reached = st.ok() || st.code() == StatusCode::kNotFound;
  status_.api_up = reached;
  if (!reached) {
    status_.api_failures += 1;
    status_.last_error = st.message();
    if (st.code() == StatusCode::kUnavailable) api_rest_until_ms_ = now_ms + options_.retry_ms;
  }
}

const ObjectMeta* PodDirectory::PodMeta(const PodDevice& d, int64_t now_ms) {
  if (!api_) return nullptr;
  std::string key = d.ns + "/" + d.pod;
  auto it = pods_.find(key);
  if (it != pods_.end() && (it->second.meta || now_ms - it->second.fetched_ms < options_.retry_ms)) {
    return it->second.meta ? &*it->second.meta : nullptr;
  }
  if (ApiResting(now_ms)) return nullptr;
  CachedMeta& c = pods_[key];
  c.fetched_ms = now_ms;
  auto meta = api_->GetPod(d.ns, d.pod);
  NoteApi(meta.status(), now_ms);
  if (meta.ok()) c.meta = std::move(meta).value();
  return c.meta ? &*c.meta : nullptr;
}

const ObjectMeta* PodDirectory::NamespaceMeta(const std::string& ns, int64_t now_ms) {
  if (!api_) return nullptr;
  auto it = namespaces_.find(ns);
  if (it != namespaces_.end()) {
    int64_t ttl = it->second.meta ? options_.namespace_ttl_ms : options_.retry_ms;
    if (now_ms - it->second.fetched_ms < ttl) return it->second.meta ? &*it->second.meta : nullptr;
  }
  if (ApiResting(now_ms)) return it != namespaces_.end() && it->second.meta ? &*it->second.meta : nullptr;
  CachedMeta& c = namespaces_[ns];
  c.fetched_ms = now_ms;
  auto meta = api_->GetNamespace(ns);
  // Reading namespaces may not be permitted (RBAC): the pod's own metadata still counts.
  if (meta.status().code() != StatusCode::kFailedPrecondition) NoteApi(meta.status(), now_ms);
  c.meta.reset();
  if (meta.ok()) c.meta = std::move(meta).value();
  return c.meta ? &*c.meta : nullptr;
}

void PodDirectory::Rebuild(const std::vector<PodDevice>& devices, int64_t now_ms) {
  holders_.clear();
  by_key_.clear();
  by_uid_.clear();
  std::unordered_set<std::string> listed;
  for (const PodDevice& d : devices) {
    bool gpu = false;
    for (const std::string& p : options_.resource_prefixes) gpu = gpu || d.resource.starts_with(p);
    if (!gpu) continue;
    listed.insert(d.ns + "/" + d.pod);
    PodFacts facts{d.ns, d.pod, d.container, PodMeta(d, now_ms), nullptr};
    facts.namespace_meta = NamespaceMeta(d.ns, now_ms);
    PodHolder h{d.ns, d.pod, d.container, d.resource, d.device_id, "", facts.pod_meta != nullptr,
                ApplyPodRules(options_.rules, facts)};
    if (facts.pod_meta) h.uid = facts.pod_meta->uid;
    by_key_[DeviceKeyOfPluginId(d.device_id)].push_back(holders_.size());
    if (!h.uid.empty()) by_uid_.emplace(h.uid, holders_.size());
    holders_.push_back(std::move(h));
  }
  // Pods that left the listing are forgotten: a pod re-created under the same name is
  // read afresh.
  std::erase_if(pods_, [&](const auto& kv) { return !listed.contains(kv.first); });
  status_.holders = static_cast<int64_t>(holders_.size());
}

Status PodDirectory::Refresh(int64_t now_ms) {
  auto devices = client_.List();
  if (!devices.ok()) {
    status_.pod_resources_up = false;
    status_.list_failures += 1;
    status_.last_error = devices.status().message();
    if (last_good_ms_ < 0 || now_ms - last_good_ms_ >= options_.stale_after_ms) Rebuild({}, now_ms);
    return devices.status();
  }
  status_.pod_resources_up = true;
  last_good_ms_ = now_ms;
  Rebuild(*devices, now_ms);
  return Status::Ok();
}

std::vector<const PodHolder*> PodDirectory::Holders(const std::string& uuid, const std::string& parent_uuid,
                                                    std::optional<uint32_t> gpu_instance_id) const {
  std::vector<const PodHolder*> out;
  auto add = [&](const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return;
    for (size_t i : it->second) out.push_back(&holders_[i]);
  };
  add(uuid);
  if (!parent_uuid.empty() && gpu_instance_id) add(fmt::format("{}/{}", parent_uuid, *gpu_instance_id));
  return out;
}

const PodHolder* PodDirectory::ByUid(const std::string& uid) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? nullptr : &holders_[it->second];
}

}  // namespace gpuledger::kube
