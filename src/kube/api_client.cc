#include "kube/api_client.h"

#include <httplib.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpuledger::kube {

namespace {

Result<std::map<std::string, std::string>> StringMap(const nlohmann::json& meta, const char* key) {
  std::map<std::string, std::string> out;
  auto it = meta.find(key);
  if (it == meta.end() || it->is_null()) return out;
  if (!it->is_object()) return InvalidArgument(fmt::format("metadata.{}: want an object", key));
  for (auto& [k, v] : it->items()) {
    if (!v.is_string()) return InvalidArgument(fmt::format("metadata.{}.{}: want a string", key, k));
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

Result<ObjectMeta> ParseObjectMeta(std::string_view json) {
  nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return InvalidArgument("not JSON");
  if (!doc.is_object()) return InvalidArgument("$: want an object");
  auto meta = doc.find("metadata");
  if (meta == doc.end() || !meta->is_object()) return InvalidArgument("metadata: missing or not an object");
  ObjectMeta m;
  m.name = StringAt(*meta, "name");
  if (m.name.empty()) return InvalidArgument("metadata.name: missing");
  m.ns = StringAt(*meta, "namespace");
  m.uid = StringAt(*meta, "uid");
  GPULEDGER_ASSIGN_OR_RETURN(m.labels, StringMap(*meta, "labels"));
  GPULEDGER_ASSIGN_OR_RETURN(m.annotations, StringMap(*meta, "annotations"));
  if (auto owners = meta->find("ownerReferences"); owners != meta->end() && !owners->is_null()) {
    if (!owners->is_array()) return InvalidArgument("metadata.ownerReferences: want an array");
    for (size_t i = 0; i < owners->size(); ++i) {
      const nlohmann::json& o = (*owners)[i];
      if (!o.is_object()) return InvalidArgument(fmt::format("metadata.ownerReferences[{}]: want an object", i));
      OwnerReference r{StringAt(o, "kind"), StringAt(o, "name"), false};
      if (auto c = o.find("controller"); c != o.end() && c->is_boolean()) r.controller = c->get<bool>();
      if (r.kind.empty() || r.name.empty()) {
        return InvalidArgument(fmt::format("metadata.ownerReferences[{}]: want kind and name", i));
      }
      m.owners.push_back(std::move(r));
    }
  }
  return m;
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

Result<ObjectMeta> ApiClient::Get(const std::string& path) {
  httplib::Headers headers{{"Accept", "application/json"}};
  if (!impl_->options.token_file.empty()) {
    std::ifstream in(impl_->options.token_file);
    if (!in) return FailedPrecondition(fmt::format("API server token {}: cannot read", impl_->options.token_file));
    std::stringstream ss;
    ss << in.rdbuf();
    std::string token = ss.str();
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
    headers.emplace("Authorization", "Bearer " + token);
  }
  auto res = impl_->client->Get(path, headers);
  if (!res) return Unavailable(fmt::format("GET {}{}: {}", impl_->options.url, path, httplib::to_string(res.error())));
  if (res->status == 404) return NotFound(fmt::format("GET {}: not found", path));
  if (res->status == 401 || res->status == 403) {
    return FailedPrecondition(fmt::format("GET {}: HTTP {} (the service account's RBAC)", path, res->status));
  }
  if (res->status != 200) return Unavailable(fmt::format("GET {}: HTTP {}", path, res->status));
  auto meta = ParseObjectMeta(res->body);
  if (!meta.ok()) return meta.status().WithContext(fmt::format("GET {}", path));
  return meta;
}

Result<ObjectMeta> ApiClient::GetPod(const std::string& ns, const std::string& name) {
  return Get(fmt::format("/api/v1/namespaces/{}/pods/{}", Segment(ns), Segment(name)));
}

Result<ObjectMeta> ApiClient::GetNamespace(const std::string& name) {
  return Get(fmt::format("/api/v1/namespaces/{}", Segment(name)));
}

}  // namespace gpuledger::kube
