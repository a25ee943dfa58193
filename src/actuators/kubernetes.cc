#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "actuators/actuators.h"

namespace gpuledger::actuators {

namespace {

using nlohmann::json;

Result<std::unique_ptr<httplib::Client>> ClientFor(const KubernetesOptions& o) {
  if (!o.api_server.starts_with("http://") && !o.api_server.starts_with("https://")) {
    return InvalidArgument(fmt::format("API server \"{}\": want an http:// or https:// URL", o.api_server));
  }
  auto client = std::make_unique<httplib::Client>(o.api_server);
  auto seconds = static_cast<time_t>(o.timeout_ms / kMsPerSecond);
  client->set_connection_timeout(seconds);
  client->set_read_timeout(seconds);
  if (!o.token.empty()) client->set_bearer_token_auth(o.token);
  return client;
}

class Kubernetes final : public Actuator {
 public:
  Kubernetes(KubernetesOptions options, std::unique_ptr<httplib::Client> client)
      : options_(std::move(options)), client_(std::move(client)) {}

  Result<std::string> Apply(const objectives::Decision& d) override {
    // The agent's ids are "k8s/NAMESPACE/VALUE" (kube/pod_rules.h); "NAMESPACE/POD" is
    // accepted as it always was.
    std::string_view id = d.job.id;
    if (id.starts_with("k8s/")) id.remove_prefix(4);
    auto slash = id.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == id.size() ||
        id.find('/', slash + 1) != std::string_view::npos) {
      return InvalidArgument(fmt::format("job \"{}\": want k8s/NAMESPACE/POD or NAMESPACE/POD", d.job.id));
    }
    std::string ns(id.substr(0, slash)), pod(id.substr(slash + 1));
    switch (d.action) {
      case InterventionAction::kNotify: return std::string("nothing to run: the alert sinks notify");
      case InterventionAction::kHold:
      case InterventionAction::kReprioritize:
        return FailedPrecondition(fmt::format("pod {}: {} has no Kubernetes verb for a running pod", d.job.id,
                                              InterventionActionName(d.action)));
      case InterventionAction::kStop:
      case InterventionAction::kRequeue: break;
    }
    std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}/eviction", ns, pod);
    json body = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", pod}, {"namespace", ns}}}};
    auto res = client_->Post(path, body.dump(), "application/json");
    if (!res) {
      return Unavailable(fmt::format("POST {}{}: {}", options_.api_server, path, httplib::to_string(res.error())));
    }
    if (res->status == 200 || res->status == 201) return std::string("evicted");
    std::string detail = fmt::format("POST {}{}: HTTP {}: {}", options_.api_server, path, res->status,
                                     res->body.substr(0, 300));
    if (res->status == 429) {
      return Unavailable(detail + " (a PodDisruptionBudget refuses the eviction now: retry later)");
    }
    if (res->status == 404) return NotFound(detail);
    return Internal(detail);
  }

 private:
  KubernetesOptions options_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace

Result<std::unique_ptr<Actuator>> KubernetesActuator(KubernetesOptions options) {
  GPULEDGER_ASSIGN_OR_RETURN(auto client, ClientFor(options));
  return std::unique_ptr<Actuator>(std::make_unique<Kubernetes>(std::move(options), std::move(client)));
}

Result<std::vector<std::string>> ListPods(const KubernetesOptions& options, const std::string& ns) {
  GPULEDGER_ASSIGN_OR_RETURN(auto client, ClientFor(options));
  std::string path = fmt::format("/api/v1/namespaces/{}/pods", ns);
  auto res = client->Get(path);
  if (!res) return Unavailable(fmt::format("GET {}{}: {}", options.api_server, path, httplib::to_string(res.error())));
  if (res->status != 200) {
    return Unavailable(fmt::format("GET {}{}: HTTP {}: {}", options.api_server, path, res->status,
                                   res->body.substr(0, 300)));
  }
  std::vector<std::string> out;
  try {
    json list = json::parse(res->body);
    for (const json& item : list.at("items")) out.push_back(item.at("metadata").at("name").get<std::string>());
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("GET {}{}: not a PodList: {}", options.api_server, path, e.what()));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpuledger::actuators
