#include "kube/fake_api_server.h"

#include <httplib.h>

#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace gpuledger::kube::testing {

std::string ObjectJson(const ObjectMeta& meta, const std::string& phase, bool deleting) {
  nlohmann::json m = {{"name", meta.name}, {"uid", meta.uid}, {"resourceVersion", "1"}};
  if (deleting) m["deletionTimestamp"] = "2026-11-23T00:00:00Z";
  if (!meta.ns.empty()) m["namespace"] = meta.ns;
  if (!meta.labels.empty()) m["labels"] = meta.labels;
  if (!meta.annotations.empty()) m["annotations"] = meta.annotations;
  if (!meta.owners.empty()) {
    nlohmann::json owners = nlohmann::json::array();
    for (const OwnerReference& o : meta.owners) {
      owners.push_back({{"apiVersion", "v1"}, {"kind", o.kind}, {"name", o.name}, {"uid", "owner-" + o.name},
                        {"controller", o.controller}, {"blockOwnerDeletion", true}});
    }
    m["ownerReferences"] = owners;
  }
  nlohmann::json doc = {{"apiVersion", "v1"}, {"kind", meta.ns.empty() ? "Namespace" : "Pod"}, {"metadata", m}};
  if (!meta.ns.empty()) {
    doc["spec"] = {{"containers", nlohmann::json::array({{{"name", "main"}, {"image", "trainer:1"}}})}};
    doc["status"] = {{"phase", phase.empty() ? "Running" : phase}};
  } else {
    doc["status"] = {{"phase", "Active"}};
  }
  return doc.dump();
}

namespace {

std::string StatusJson(int code, const std::string& reason, const std::string& message) {
  return nlohmann::json{{"apiVersion", "v1"}, {"kind", "Status"},  {"status", "Failure"},
                        {"message", message}, {"reason", reason}, {"code", code}}
      .dump();
}

}  // namespace

struct FakeApiServer::Impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
  std::string token;
  mutable std::mutex mu;
  std::map<std::string, std::string> pods;        // "<ns>/<name>" -> JSON
  std::map<std::string, std::string> namespaces;  // name -> JSON
  bool forbid_namespaces = false;
  bool down = false;
  int requests = 0;
  std::vector<std::string> list_requests;

  // The pods of `ns` after the continue token, `limit` of them at most (0: all), as a PodList.
  void List(const httplib::Request& req, httplib::Response& res, const std::string& ns) {
    {
      std::lock_guard lock(mu);
      list_requests.push_back(req.path + (req.params.empty() ? "" : "?" + QueryOf(req)));
    }
    Answer(req, res, false, "", [&]() {
      size_t limit = req.has_param("limit") ? std::stoul(req.get_param_value("limit")) : 0;
      std::string after = req.has_param("continue") ? req.get_param_value("continue") : "";
      if (!after.empty() && !after.starts_with("after:")) return std::string();  // not ours: 410 below
      std::string prefix = ns + "/", last = after.empty() ? "" : prefix + after.substr(6);
      nlohmann::json items = nlohmann::json::array();
      std::string next;
      for (auto it = pods.lower_bound(prefix); it != pods.end() && it->first.starts_with(prefix); ++it) {
        if (!last.empty() && it->first <= last) continue;
        if (limit > 0 && items.size() == limit) {
          next = "after:" + items.back()["metadata"]["name"].get<std::string>();
          break;
        }
        items.push_back(nlohmann::json::parse(it->second));
      }
      nlohmann::json meta = {{"resourceVersion", "7"}};
      if (!next.empty()) meta["continue"] = next;
      return nlohmann::json{{"apiVersion", "v1"}, {"kind", "PodList"}, {"metadata", meta}, {"items", items}}.dump();
    });
  }

  static std::string QueryOf(const httplib::Request& req) {
    std::string q;
    for (const auto& p : req.params) q += (q.empty() ? "" : "&") + p.first + "=" + p.second;
    return q;
  }

  // Answers from `table` under `key` (or what `list` makes, when given: empty for a 410),
  // after the checks every request gets.
  void Answer(const httplib::Request& req, httplib::Response& res, bool is_namespace, const std::string& key,
              const std::function<std::string()>& list = nullptr) {
    std::lock_guard lock(mu);
    ++requests;
    if (down) {
      res.status = 503;
      res.set_content(StatusJson(503, "ServiceUnavailable", "down"), "application/json");
      return;
    }
    if (req.get_header_value("Authorization") != "Bearer " + token) {
      res.status = 401;
      res.set_content(StatusJson(401, "Unauthorized", "Unauthorized"), "application/json");
      return;
    }
    if (is_namespace && forbid_namespaces) {
      res.status = 403;
      res.set_content(StatusJson(403, "Forbidden", "namespaces is forbidden"), "application/json");
      return;
    }
    if (list) {
      std::string body = list();
      if (body.empty()) {
        res.status = 410;
        res.set_content(StatusJson(410, "Expired", "the continue token is not valid"), "application/json");
        return;
      }
      res.set_content(body, "application/json");
      return;
    }
    const auto& table = is_namespace ? namespaces : pods;
    auto it = table.find(key);
    if (it == table.end()) {
      res.status = 404;
      res.set_content(StatusJson(404, "NotFound", key + " not found"), "application/json");
      return;
    }
    res.set_content(it->second, "application/json");
  }
};

FakeApiServer::FakeApiServer() : impl_(std::make_unique<Impl>()) {}

FakeApiServer::~FakeApiServer() {
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<FakeApiServer>> FakeApiServer::Start(std::string token) {
  std::unique_ptr<FakeApiServer> s(new FakeApiServer());
  Impl* impl = s->impl_.get();
  impl->token = std::move(token);
  impl->server.Get(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
                   [impl](const httplib::Request& req, httplib::Response& res) {
                     impl->Answer(req, res, false, fmt::format("{}/{}", req.matches[1].str(), req.matches[2].str()));
                   });
  impl->server.Get(R"(/api/v1/namespaces/([^/]+)/pods)", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->List(req, res, req.matches[1].str());
  });
  impl->server.Get(R"(/api/v1/namespaces/([^/]+))", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Answer(req, res, true, req.matches[1].str());
  });
  impl->port = impl->server.bind_to_any_port("127.0.0.1");
  if (impl->port <= 0) return Unavailable("fake API server: cannot bind 127.0.0.1");
  impl->thread = std::thread([impl] { impl->server.listen_after_bind(); });
  // httplib's stop() before its loop runs would be lost; wait until it listens.
  for (int i = 0; i < 2'000 && !impl->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

void FakeApiServer::AddPod(const ObjectMeta& pod) {
  std::lock_guard lock(impl_->mu);
  impl_->pods[pod.ns + "/" + pod.name] = ObjectJson(pod);
}

void FakeApiServer::AddPod(const ObjectMeta& pod, const std::string& phase, bool deleting) {
  std::lock_guard lock(impl_->mu);
  impl_->pods[pod.ns + "/" + pod.name] = ObjectJson(pod, phase, deleting);
}

std::vector<std::string> FakeApiServer::list_requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->list_requests;
}

void FakeApiServer::RemovePod(const std::string& ns, const std::string& name) {
  std::lock_guard lock(impl_->mu);
  impl_->pods.erase(ns + "/" + name);
}

void FakeApiServer::AddNamespace(const ObjectMeta& ns) {
  std::lock_guard lock(impl_->mu);
  ObjectMeta m = ns;
  m.ns.clear();
  impl_->namespaces[m.name] = ObjectJson(m);
}

void FakeApiServer::ForbidNamespaces(bool forbid) {
  std::lock_guard lock(impl_->mu);
  impl_->forbid_namespaces = forbid;
}

void FakeApiServer::SetDown(bool down) {
  std::lock_guard lock(impl_->mu);
  impl_->down = down;
}

int FakeApiServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requests;
}

std::string FakeApiServer::url() const { return fmt::format("http://127.0.0.1:{}", impl_->port); }

}  // namespace gpuledger::kube::testing
