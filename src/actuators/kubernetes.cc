#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "actuators/actuators.h"
#include "kube/api_client.h"

namespace gpuledger::actuators {

namespace {

using nlohmann::json;

Status CheckUrl(const KubernetesOptions& o) {
  if (!o.api_server.starts_with("http://") && !o.api_server.starts_with("https://")) {
    return InvalidArgument(fmt::format("API server \"{}\": want an http:// or https:// URL", o.api_server));
  }
  return Status::Ok();
}

// The pod list and the namespace go through kube's API client (the agent's); the
// eviction, a POST it does not make, through a client of our own.
Result<std::unique_ptr<kube::ApiClient>> ApiClientFor(const KubernetesOptions& o) {
  GPULEDGER_RETURN_IF_ERROR(CheckUrl(o));
  return kube::ApiClient::Create({.url = o.api_server, .timeout_ms = o.timeout_ms, .token = o.token});
}

Result<std::unique_ptr<httplib::Client>> ClientFor(const KubernetesOptions& o) {
  GPULEDGER_RETURN_IF_ERROR(CheckUrl(o));
  auto client = std::make_unique<httplib::Client>(o.api_server);
  auto seconds = static_cast<time_t>(o.timeout_ms / kMsPerSecond);
  client->set_connection_timeout(seconds);
  client->set_read_timeout(seconds);
  if (!o.token.empty()) client->set_bearer_token_auth(o.token);
  return client;
}

bool ReadsNamespace(const std::vector<kube::MetaSource>& sources) {
  return std::any_of(sources.begin(), sources.end(), [](const kube::MetaSource& s) {
    return s.from == kube::MetaFrom::kNamespaceLabel || s.from == kube::MetaFrom::kNamespaceAnnotation;
  });
}

// "2 pods: a, b".
std::string Pods(const std::vector<std::string>& names) {
  return fmt::format("{} pod{}: {}", names.size(), names.size() == 1 ? "" : "s", fmt::join(names, ", "));
}

// One pod's eviction, as it went.
enum class Evicted : uint8_t { kYes, kGone, kRefused, kUnreachable, kFailed };

class Kubernetes final : public Actuator {
 public:
  Kubernetes(KubernetesOptions options, std::unique_ptr<kube::ApiClient> api, std::unique_ptr<httplib::Client> client)
      : options_(std::move(options)), api_(std::move(api)), client_(std::move(client)) {}

  Result<std::string> Apply(const objectives::Decision& d) override {
    // The agent's ids are "k8s/NAMESPACE/VALUE" (kube/pod_rules.h); "NAMESPACE/POD" is
    // accepted as it always was. VALUE is what the job rules gave (a label, a controller's
    // name, the pod's name), which may itself hold a '/' (an annotation's value).
    std::string_view id = d.job.id;
    bool agents = id.starts_with("k8s/");
    if (agents) id.remove_prefix(4);
    auto slash = id.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == id.size()) {
      return InvalidArgument(fmt::format("job \"{}\": want k8s/NAMESPACE/JOB or NAMESPACE/POD", d.job.id));
    }
    std::string ns(id.substr(0, slash)), value(id.substr(slash + 1));
    switch (d.action) {
      case InterventionAction::kNotify: return std::string("nothing to run: the alert sinks notify");
      case InterventionAction::kHold:
      case InterventionAction::kReprioritize:
        return FailedPrecondition(fmt::format("pod {}: {} has no Kubernetes verb for a running pod", d.job.id,
                                              InterventionActionName(d.action)));
      case InterventionAction::kStop:
      case InterventionAction::kRequeue: break;
    }
    GPULEDGER_ASSIGN_OR_RETURN(JobPods pods, PodsOf(d.job.id, ns, value, /*by_name=*/!agents));
    if (pods.live.empty()) {
      if (!pods.deleting.empty()) {
        return fmt::format("nothing to evict: already being deleted: {}", fmt::join(pods.deleting, ", "));
      }
      return NotFound(fmt::format("job {}: no pod of it runs in namespace {} (finished: {})", d.job.id, ns,
                                  fmt::join(pods.finished, ", ")));
    }

    std::vector<std::string> evicted, gone, not_evicted;
    bool refused = false, failed = false;
    for (const std::string& pod : pods.live) {
      std::string detail;
      Evicted how = Evict(ns, pod, detail);
      if (how == Evicted::kYes) {
        evicted.push_back(pod);
      } else if (how == Evicted::kGone) {
        gone.push_back(pod);
      } else {
        not_evicted.push_back(fmt::format("{} ({})", pod, detail));
        refused = refused || how == Evicted::kRefused;
        failed = failed || how == Evicted::kFailed;
      }
    }
    std::string done = evicted.empty() ? "evicted no pod" : "evicted " + Pods(evicted);
    if (!gone.empty()) done += fmt::format("; gone before its eviction: {}", fmt::join(gone, ", "));
    if (!pods.deleting.empty()) done += fmt::format("; already being deleted: {}", fmt::join(pods.deleting, ", "));
    if (not_evicted.empty()) return done;
    std::string message = fmt::format("job {}: {}; not evicted: {}", d.job.id, done, fmt::join(not_evicted, "; "));
    // A pod that failed otherwise is an error to look at; refused or out of reach only, a
    // retry evicts the rest (the evicted ones are gone from the list).
    if (failed) return Internal(message);
    return Unavailable(message + (refused ? " (a PodDisruptionBudget refuses the eviction now: retry later)"
                                          : " (the API server out of reach: retry later)"));
  }

 private:
  struct JobPods {
    std::vector<std::string> live, deleting, finished;  // by name, in the list's order
  };

  // The pods of namespace `ns` whose job by the pod rules is "k8s/NS/VALUE"; failing
  // that, when `by_name` (a job id in the plain NAMESPACE/POD form, which names its pod),
  // the pod named VALUE. An agent's id never falls back to a pod's name: that pod is
  // another job's by the rules (the job's own pods gone, a namesake would be taken).
  // NotFound naming the job and namespace when none is there.
  Result<JobPods> PodsOf(const std::string& job, const std::string& ns, const std::string& value, bool by_name) {
    auto list = api_->ListPods(ns);
    if (!list.ok()) return list.status().WithContext(fmt::format("job {}", job));
    // As the agent: namespace facts only when the job rules read them, and a namespace
    // the RBAC does not let us read (403) gives none. Any other failure could change
    // which pods are the job's, so nothing is evicted.
    std::optional<kube::ObjectMeta> ns_meta;
    if (ReadsNamespace(options_.rules.job)) {
      auto got = api_->GetNamespace(ns);
      if (got.ok()) {
        ns_meta = std::move(got).value();
      } else if (got.status().code() != StatusCode::kFailedPrecondition &&
                 got.status().code() != StatusCode::kNotFound) {
        return got.status().WithContext(fmt::format("job {}", job));
      }
    }
    std::string want = fmt::format("k8s/{}/{}", ns, value);
    auto is_job = [&](const kube::PodListItem& pod) {
      // The agent names a job from the container holding the device: any of the pod's
      // containers giving the id counts (rules reading `container` differ by container).
      std::vector<std::string> containers = pod.containers;
      if (containers.empty()) containers.emplace_back();
      return std::any_of(containers.begin(), containers.end(), [&](const std::string& c) {
        kube::PodFacts facts{ns, pod.meta.name, c, &pod.meta, ns_meta ? &*ns_meta : nullptr};
        return kube::ApplyPodRules(options_.rules, facts).id == want;
      });
    };
    JobPods out;
    auto add = [&out](const kube::PodListItem& pod) {
      if (pod.Finished()) {
        out.finished.push_back(pod.meta.name);
      } else if (pod.deleting) {
        out.deleting.push_back(pod.meta.name);
      } else {
        out.live.push_back(pod.meta.name);
      }
    };
    for (const kube::PodListItem& pod : *list) {
      if (is_job(pod)) add(pod);
    }
    if (by_name && out.live.empty() && out.deleting.empty() && out.finished.empty()) {
      for (const kube::PodListItem& pod : *list) {
        if (pod.meta.name == value) add(pod);
      }
    }
    if (out.live.empty() && out.deleting.empty() && out.finished.empty()) {
      return NotFound(fmt::format("job {}: no pod in namespace {} is this job's by the pod rules{}", job, ns,
                                  by_name ? fmt::format(", nor named {}", value) : ""));
    }
    return out;
  }

  // POST .../pods/POD/eviction; `detail` says why when not evicted.
  Evicted Evict(const std::string& ns, const std::string& pod, std::string& detail) {
    std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}/eviction", ns, pod);
    json body = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", pod}, {"namespace", ns}}}};
    auto res = client_->Post(path, body.dump(), "application/json");
    if (!res) {
      detail = fmt::format("POST {}{}: {}", options_.api_server, path, httplib::to_string(res.error()));
      return Evicted::kUnreachable;
    }
    if (res->status == 200 || res->status == 201) return Evicted::kYes;
    // Listed a moment ago and gone now: what the eviction was for.
    if (res->status == 404) return Evicted::kGone;
    detail = fmt::format("POST {}{}: HTTP {}: {}", options_.api_server, path, res->status, res->body.substr(0, 300));
    return res->status == 429 ? Evicted::kRefused : Evicted::kFailed;
  }

  KubernetesOptions options_;
  std::unique_ptr<kube::ApiClient> api_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace

Result<std::unique_ptr<Actuator>> KubernetesActuator(KubernetesOptions options) {
  GPULEDGER_ASSIGN_OR_RETURN(auto api, ApiClientFor(options));
  GPULEDGER_ASSIGN_OR_RETURN(auto client, ClientFor(options));
  return std::unique_ptr<Actuator>(
      std::make_unique<Kubernetes>(std::move(options), std::move(api), std::move(client)));
}

Result<std::vector<std::string>> ListPods(const KubernetesOptions& options, const std::string& ns) {
  GPULEDGER_ASSIGN_OR_RETURN(auto api, ApiClientFor(options));
  GPULEDGER_ASSIGN_OR_RETURN(std::vector<kube::PodListItem> pods, api->ListPods(ns));
  std::vector<std::string> out;
  for (const kube::PodListItem& p : pods) out.push_back(p.meta.name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpuledger::actuators
