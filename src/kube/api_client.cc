#include "kube/api_client.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpuledger::kube {

namespace {

// `path` is where `meta` sits in the document ("metadata", "items[3].metadata").
Result<std::map<std::string, std::string>> StringMap(const nlohmann::json& meta, const std::string& path,
                                                     const char* key) {
  std::map<std::string, std::string> out;
  auto it = meta.find(key);
  if (it == meta.end() || it->is_null()) return out;
  if (!it->is_object()) return InvalidArgument(fmt::format("{}.{}: want an object", path, key));
  for (auto& [k, v] : it->items()) {
    if (!v.is_string()) return InvalidArgument(fmt::format("{}.{}.{}: want a string", path, key, k));
    out[k] = v.get<std::string>();
  }
  return out;
}

std::string StringAt(const nlohmann::json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "%2F"-style escaping of one path segment (names are DNS labels, but be safe).
std::string Segment(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

namespace {

// The object's `metadata` (`meta`, at `path` in the document).
Result<ObjectMeta> MetaAt(const nlohmann::json& meta, const std::string& path) {
  if (!meta.is_object()) return InvalidArgument(fmt::format("{}: missing or not an object", path));
  ObjectMeta m;
  m.name = StringAt(meta, "name");
  if (m.name.empty()) return InvalidArgument(fmt::format("{}.name: missing", path));
  m.ns = StringAt(meta, "namespace");
  m.uid = StringAt(meta, "uid");
  GPULEDGER_ASSIGN_OR_RETURN(m.labels, StringMap(meta, path, "labels"));
  GPULEDGER_ASSIGN_OR_RETURN(m.annotations, StringMap(meta, path, "annotations"));
  if (auto owners = meta.find("ownerReferences"); owners != meta.end() && !owners->is_null()) {
    if (!owners->is_array()) return InvalidArgument(fmt::format("{}.ownerReferences: want an array", path));
    for (size_t i = 0; i < owners->size(); ++i) {
      const nlohmann::json& o = (*owners)[i];
      if (!o.is_object()) return InvalidArgument(fmt::format("{}.ownerReferences[{}]: want an object", path, i));
      OwnerReference r{StringAt(o, "kind"), StringAt(o, "name"), false};
      if (auto c = o.find("controller"); c != o.end() && c->is_boolean()) r.controller = c->get<bool>();
      if (r.kind.empty() || r.name.empty()) {
        return InvalidArgument(fmt::format("{}.ownerReferences[{}]: want kind and name", path, i));
      }
      m.owners.push_back(std::move(r));
    }
  }
  return m;
}

// An object member of `obj`, or null when absent; fails naming `path` when it is there
// and no object.
Result<const nlohmann::json*> ObjectAt(const nlohmann::json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return static_cast<const nlohmann::json*>(nullptr);
  if (!it->is_object()) return InvalidArgument(fmt::format("{}: want an object", path));
  return &*it;
}

}  // namespace

Result<ObjectMeta> ParseObjectMeta(std::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("not JSON");
  if (!doc.is_object()) return InvalidArgument("$: want an object");
  auto meta = doc.find("metadata");
  if (meta == doc.end()) return InvalidArgument("metadata: missing or not an object");
  return MetaAt(*meta, "metadata");
}

Result<PodListPage> ParsePodList(std::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("not JSON");
  if (!doc.is_object()) return InvalidArgument("$: want an object");
  PodListPage page;
  GPULEDGER_ASSIGN_OR_RETURN(const nlohmann::json* list_meta, ObjectAt(doc, "metadata", "metadata"));
  if (list_meta != nullptr) page.continue_token = StringAt(*list_meta, "continue");
  auto items = doc.find("items");
  // An empty list may come as "items": null.
  if (items == doc.end() || items->is_null()) return page;
  if (!items->is_array()) return InvalidArgument("items: want an array");
  for (size_t i = 0; i < items->size(); ++i) {
    const nlohmann::json& item = (*items)[i];
    std::string at = fmt::format("items[{}]", i);
    if (!item.is_object()) return InvalidArgument(fmt::format("{}: want an object", at));
    auto meta = item.find("metadata");
    if (meta == item.end()) return InvalidArgument(fmt::format("{}.metadata: missing or not an object", at));
    PodListItem pod;
    GPULEDGER_ASSIGN_OR_RETURN(pod.meta, MetaAt(*meta, at + ".metadata"));
    if (auto ts = meta->find("deletionTimestamp"); ts != meta->end() && !ts->is_null()) pod.deleting = true;
    GPULEDGER_ASSIGN_OR_RETURN(const nlohmann::json* status, ObjectAt(item, "status", at + ".status"));
    if (status != nullptr) pod.phase = StringAt(*status, "phase");
    GPULEDGER_ASSIGN_OR_RETURN(const nlohmann::json* spec, ObjectAt(item, "spec", at + ".spec"));
    if (spec != nullptr) {
      if (auto cs = spec->find("containers"); cs != spec->end() && !cs->is_null()) {
        if (!cs->is_array()) return InvalidArgument(fmt::format("{}.spec.containers: want an array", at));
        for (size_t c = 0; c < cs->size(); ++c) {
          std::string name = (*cs)[c].is_object() ? StringAt((*cs)[c], "name") : "";
          if (name.empty()) return InvalidArgument(fmt::format("{}.spec.containers[{}].name: missing", at, c));
          pod.containers.push_back(std::move(name));
        }
      }
    }
    page.items.push_back(std::move(pod));
  }
  return page;
}

std::string InClusterApiUrl() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0') return "";
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  return fmt::format("https://{}:{}", h, port != nullptr && *port != '\0' ? port : "443");
}

struct ApiClient::Impl {
  ApiServerOptions options;
  std::unique_ptr<httplib::Client> client;
};

ApiClient::ApiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiClient::~ApiClient() = default;

Result<std::unique_ptr<ApiClient>> ApiClient::Create(ApiServerOptions options) {
  const std::string& url = options.url;
  if (!url.starts_with("http://") && !url.starts_with("https://")) {
    return InvalidArgument(fmt::format("API server url \"{}\": want http(s)://host[:port]", url));
  }
  auto impl = std::make_unique<Impl>();
  impl->client = std::make_unique<httplib::Client>(url);
  if (!impl->client->is_valid()) return InvalidArgument(fmt::format("API server url \"{}\": not usable", url));
  auto timeout = std::chrono::milliseconds(options.timeout_ms);
  impl->client->set_connection_timeout(timeout);
  impl->client->set_read_timeout(timeout);
  if (url.starts_with("https://") && !options.ca_file.empty()) impl->client->set_ca_cert_path(options.ca_file.c_str());
  impl->options = std::move(options);
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(impl)));
}

Result<std::string> ApiClient::GetBody(const std::string& path) {
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!impl_->options.token_file.empty()) {
    std::ifstream in(impl_->options.token_file);
    if (!in) return FailedPrecondition(fmt::format("API server token {}: cannot read", impl_->options.token_file));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string token = ss.str();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    headers.emplace("Authorization", "Bearer " + token);
  } else if (!impl_->options.token.empty()) {
    headers.emplace("Authorization", "Bearer " + impl_->options.token);
  }
  auto res = impl_->client->Get(path, headers);
  if (!res) return Unavailable(fmt::format("GET {}{}: {}", impl_->options.url, path, httplib::to_string(res.error())));
  if (res->status == 404) return NotFound(fmt::format("GET {}: not found", path));
  if (res->status == 401 || res->status == 403) {
    return FailedPrecondition(fmt::format("GET {}: HTTP {} (the service account's RBAC)", path, res->status));
  }
  if (res->status == 410) {
    return Unavailable(fmt::format("GET {}: HTTP 410 (the list's continue token expired: list again)", path));
  }
  if (res->status != 200) return Unavailable(fmt::format("GET {}: HTTP {}", path, res->status));
  return std::move(res->body);
}

Result<ObjectMeta> ApiClient::Get(const std::string& path) {
  GPULEDGER_ASSIGN_OR_RETURN(std::string body, GetBody(path));
  auto meta = ParseObjectMeta(body);
  if (!meta.ok()) return meta.status().WithContext(fmt::format("GET {}", path));
  return meta;
}

Result<ObjectMeta> ApiClient::GetPod(const std::string& ns, const std::string& name) {
  return Get(fmt::format("/api/v1/namespaces/{}/pods/{}", Segment(ns), Segment(name)));
}

Result<ObjectMeta> ApiClient::GetNamespace(const std::string& name) {
  return Get(fmt::format("/api/v1/namespaces/{}", Segment(name)));
}

Result<std::vector<PodListItem>> ApiClient::ListPods(const std::string& ns) {
  std::vector<PodListItem> out;
  std::string token;
  // A server that kept answering the same continue token would page forever.
  std::set<std::string> seen;
  int64_t limit = std::max<int64_t>(impl_->options.list_limit, 1);
  for (;;) {
    std::string path = fmt::format("/api/v1/namespaces/{}/pods?limit={}", Segment(ns), limit);
    if (!token.empty()) path += "&continue=" + Segment(token);
    GPULEDGER_ASSIGN_OR_RETURN(std::string body, GetBody(path));
    auto page = ParsePodList(body);
    if (!page.ok()) return page.status().WithContext(fmt::format("GET {}", path));
    for (PodListItem& pod : page->items) out.push_back(std::move(pod));
    if (page->continue_token.empty()) return out;
    if (!seen.insert(page->continue_token).second) {
      return Internal(fmt::format("GET {}: the same continue token again", path));
    }
    token = std::move(page->continue_token);
  }
}

}  // namespace gpuledger::kube
