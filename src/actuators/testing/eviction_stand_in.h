// A stand-in for the Kubernetes API server in tests of the eviction actuator: Debian ships
// no kube-apiserver, so it implements only the documented contract the actuator uses: the
// pod list of a namespace (GET /api/v1/namespaces/NS/pods: a PodList whose items carry
// their metadata (labels, annotations, ownerReferences, a deletionTimestamp when
// terminating), spec.containers and status.phase; all in one page, which the API allows
// whatever the `limit`), the namespace (GET /api/v1/namespaces/NS, its labels and
// annotations, or 404), and the pod's eviction subresource (POST .../pods/NAME/eviction
// with a policy/v1 Eviction), answering 201 when evicted (the pod is gone), 429 when a
// PodDisruptionBudget refuses, 404 for an unknown pod, 400 for a body that is no Eviction
// of that pod, and whatever other status it is told (a 500). On 127.0.0.1, a free port.
// Header-only: for test binaries that link cpp-httplib and nlohmann-json.
#pragma once

#include <httplib.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/testing/http_server.h"
#include "kube/api_client.h"

namespace gpuledger::actuators::testing {

class StandInApiServer {
 public:
  StandInApiServer() = default;
  void Routes(httplib::Server& http) {
    http.Get(R"(/api/v1/namespaces/([^/]+)/pods)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      ++list_requests_;
      if (list_status_ != 200) {
        res.status = list_status_;
        res.set_content(R"({"kind":"Status","reason":"InternalError"})", "application/json");
        return;
      }
      nlohmann::json items = nlohmann::json::array();
      for (const auto& entry : pods_) {
        if (entry.first.first == req.matches[1].str()) items.push_back(PodJson(entry.second));
      }
      res.set_content(nlohmann::json{{"apiVersion", "v1"}, {"kind", "PodList"}, {"metadata", {{"resourceVersion", "1"}}},
                                     {"items", items}}
                          .dump(),
                      "application/json");
    });
    http.Get(R"(/api/v1/namespaces/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      ++namespace_requests_;
      auto it = namespaces_.find(req.matches[1].str());
      if (it == namespaces_.end()) {
        res.status = namespace_status_ == 200 ? 404 : namespace_status_;
        return;
      }
      if (namespace_status_ != 200) {
        res.status = namespace_status_;
        return;
      }
      res.set_content(nlohmann::json{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", MetaJson(it->second)}}.dump(),
                      "application/json");
    });
    http.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction)",
               [this](const httplib::Request& req, httplib::Response& res) {
                 std::lock_guard lock(mu_);
                 ++eviction_requests_;
                 auth_ = req.get_header_value("Authorization");
                 nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
                 bool valid = !body.is_discarded() && body.value("apiVersion", "") == "policy/v1" &&
                              body.value("kind", "") == "Eviction" &&
                              body["metadata"].value("name", "") == req.matches[2].str() &&
                              body["metadata"].value("namespace", "") == req.matches[1].str();
                 if (!valid) {
                   res.status = 400;
                   return;
                 }
                 auto it = pods_.find({req.matches[1].str(), req.matches[2].str()});
                 if (it == pods_.end()) {
                   res.status = 404;
                   res.set_content(R"({"kind":"Status","reason":"NotFound"})", "application/json");
                   return;
                 }
                 res.status = it->second.status;
                 if (it->second.status == 201) {
                   evicted_.insert(it->first.first + "/" + it->first.second);
                   pods_.erase(it);
                 } else if (it->second.status == 429) {
                   res.set_content(R"({"kind":"Status","reason":"TooManyRequests","message":"Cannot evict pod as it )"
                                   R"(would violate the pod's disruption budget."})",
                                   "application/json");
                 }
               });
  }
  // A pod whose eviction is answered with `status` (again: its answer changes), with no
  // labels, annotations or owners, Running. Adding it again keeps its metadata.
  void AddPod(const std::string& ns, const std::string& name, int status) {
    std::lock_guard lock(mu_);
    auto it = pods_.find({ns, name});
    if (it != pods_.end()) {
      it->second.status = status;
      return;
    }
    Pod pod;
    pod.meta.name = name;
    pod.meta.ns = ns;
    pod.status = status;
    pods_[{ns, name}] = std::move(pod);
  }
  // A pod with its metadata (meta.ns its namespace), its status.phase, and a
  // deletionTimestamp when `deleting`; its eviction answered with `status`.
  void AddPod(const kube::ObjectMeta& meta, int status, const std::string& phase = "Running", bool deleting = false,
              std::vector<std::string> containers = {"main"}) {
    std::lock_guard lock(mu_);
    pods_[{meta.ns, meta.name}] = Pod{meta, status, phase, deleting, std::move(containers)};
  }
  // A namespace GET /api/v1/namespaces/NAME answers (meta.name its name).
  void AddNamespace(const kube::ObjectMeta& meta) {
    std::lock_guard lock(mu_);
    namespaces_[meta.name] = meta;
  }
  // The pod list answers `status` (a 500) while it is not 200.
  void FailPodLists(int status) {
    std::lock_guard lock(mu_);
    list_status_ = status;
  }
  // Namespaces answer `status` (403: the RBAC grants pods only) while it is not 200.
  void FailNamespaces(int status) {
    std::lock_guard lock(mu_);
    namespace_status_ = status;
  }
  std::string url() const { return server_.url(); }
  std::set<std::string> evicted() {
    std::lock_guard lock(mu_);
    return evicted_;
  }
  // Evictions asked for so far, answered or not.
  int eviction_requests() {
    std::lock_guard lock(mu_);
    return eviction_requests_;
  }
  int list_requests() {
    std::lock_guard lock(mu_);
    return list_requests_;
  }
  int namespace_requests() {
    std::lock_guard lock(mu_);
    return namespace_requests_;
  }
  std::string auth() {
    std::lock_guard lock(mu_);
    return auth_;
  }

 private:
  struct Pod {
    kube::ObjectMeta meta;
    int status = 201;
    std::string phase = "Running";
    bool deleting = false;
    std::vector<std::string> containers{"main"};
  };

  static nlohmann::json MetaJson(const kube::ObjectMeta& m) {
    nlohmann::json j = {{"name", m.name}, {"uid", m.uid.empty() ? "uid-" + m.name : m.uid}};
    if (!m.ns.empty()) j["namespace"] = m.ns;
    if (!m.labels.empty()) j["labels"] = m.labels;
    if (!m.annotations.empty()) j["annotations"] = m.annotations;
    if (!m.owners.empty()) {
      nlohmann::json owners = nlohmann::json::array();
      for (const kube::OwnerReference& o : m.owners) {
        owners.push_back({{"apiVersion", "apps/v1"}, {"kind", o.kind}, {"name", o.name}, {"uid", "uid-" + o.name},
                          {"controller", o.controller}});
      }
      j["ownerReferences"] = owners;
    }
    return j;
  }

  static nlohmann::json PodJson(const Pod& p) {
    nlohmann::json meta = MetaJson(p.meta);
    if (p.deleting) meta["deletionTimestamp"] = "2026-11-23T00:00:00Z";
    nlohmann::json containers = nlohmann::json::array();
    for (const std::string& c : p.containers) containers.push_back({{"name", c}, {"image", "worker:1"}});
    return {{"metadata", meta}, {"spec", {{"containers", containers}}}, {"status", {{"phase", p.phase}}}};
  }

  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Pod> pods_;
  std::map<std::string, kube::ObjectMeta> namespaces_;
  std::set<std::string> evicted_;
  std::string auth_;
  int eviction_requests_ = 0, list_requests_ = 0, namespace_requests_ = 0;
  int list_status_ = 200, namespace_status_ = 200;
  test_env::LoopbackHttpServer server_{[this](httplib::Server& http) { Routes(http); }};
};

}  // namespace gpuledger::actuators::testing
