// A stand-in for the Kubernetes API server in tests of the eviction actuator: Debian ships
// no kube-apiserver, so it implements only the documented contract the actuator uses: the
// pod list of a namespace (GET /api/v1/namespaces/NS/pods) and the pod's eviction
// subresource (POST .../pods/NAME/eviction with a policy/v1 Eviction), answering 201 when
// evicted (the pod is gone), 429 when a PodDisruptionBudget refuses, 404 for an unknown pod,
// 400 for a body that is no Eviction of that pod, and whatever other status it is told (a
// 500). On 127.0.0.1, a free port. Header-only: for test binaries that link cpp-httplib
// and nlohmann-json.
#pragma once

#include <httplib.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "core/testing/http_server.h"

namespace gpuledger::actuators::testing {

class StandInApiServer {
 public:
  StandInApiServer() = default;
  void Routes(httplib::Server& http) {
    http.Get(R"(/api/v1/namespaces/([^/]+)/pods)", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      nlohmann::json items = nlohmann::json::array();
      for (const auto& [key, status] : pods_) {
        if (key.first == req.matches[1].str()) items.push_back({{"metadata", {{"name", key.second}}}});
      }
      res.set_content(nlohmann::json{{"apiVersion", "v1"}, {"kind", "PodList"}, {"items", items}}.dump(), "application/json");
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
                 res.status = it->second;
                 if (it->second == 201) {
                   evicted_.insert(it->first.first + "/" + it->first.second);
                   pods_.erase(it);
                 } else if (it->second == 429) {
                   res.set_content(R"({"kind":"Status","reason":"TooManyRequests","message":"Cannot evict pod as it )"
                                   R"(would violate the pod's disruption budget."})",
                                   "application/json");
                 }
               });
  }
  // A pod whose eviction is answered with `status` (again: its answer changes).
  void AddPod(const std::string& ns, const std::string& name, int status) {
    std::lock_guard lock(mu_);
    pods_[{ns, name}] = status;
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
  std::string auth() {
    std::lock_guard lock(mu_);
    return auth_;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, int> pods_;
  std::set<std::string> evicted_;
  std::string auth_;
  int eviction_requests_ = 0;
  test_env::LoopbackHttpServer server_{[this](httplib::Server& http) { Routes(http); }};
};

}  // namespace gpuledger::actuators::testing
