// The agent on a Kubernetes node: the stand-in kubelet (PodResources v1 over gRPC) says
// which pod holds which GPU or MIG instance, the stand-in API server gives the pods'
// labels, and the ledger ends up with the pods' jobs, held-idle devices included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "agent/agent.h"
#include "agent/test_server.h"
#include "agent/test_util.h"
#include "kube/fake_api_server.h"
#include "kube/fake_kubelet.h"
#include "ledger/ledger.h"
#include "ledger/store_access.h"
#include "nvml/test_support.h"

namespace gpuledger::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nvml::testing::kScenarioEpochMs;
using nvml::testing::ScenarioClock;
using testing::EnvironText;
using testing::TempDir;
using testing::TestLedgerServer;
using testing::WriteFile;

const std::string kTestdata = GPULEDGER_AGENT_TESTDATA_DIR;
const std::string kGpu1 = "GPU-e1000000-0000-4000-8000-000000000000";
const std::string kGpu2 = "GPU-e2000000-0000-4000-8000-000000000000";
const std::string kMigB = "MIG-e3000000-0000-4000-8000-00000000000b";
const std::string kTrainerUid = "3f1e2d4c-0000-4000-8000-000000000001";
constexpr double kMig4 = 4.0 / 7;

// e2e_hour.toml on a Kubernetes node: pid 5001 (on GPU 0) runs in the pod ml/trainer-0
// (its cgroup says so; no GPULEDGER_* variables), a Kubeflow notebook holds the idle
// MIG instance b, and GPU 1 is time-sliced between two pods.
struct KubeNode {
  TempDir dir;
  ScenarioClock clock;
  std::unique_ptr<nvml::NvmlLibrary> lib;
  std::unique_ptr<TestLedgerServer> server;
  std::unique_ptr<BatchSink> sink;
  std::unique_ptr<kube::testing::FakeKubelet> kubelet;
  std::unique_ptr<kube::testing::FakeApiServer> api;
  std::unique_ptr<Agent> agent;

  explicit KubeNode(bool api_reachable = true, std::vector<std::string> trainer_env = {"PATH=/usr/bin"}) {
    std::string environ_text;
    for (const std::string& v : trainer_env) environ_text += v + '\0';
    WriteFile(dir / "proc/5001/environ", environ_text);
    WriteFile(dir / "proc/5001/cgroup",
              "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f1e2d4c_0000_4000_8000_"
              "000000000001.slice/cri-containerd-4b1d.scope\n");
    WriteFile(dir / "proc/5002/environ", EnvironText({"GPULEDGER_JOB=nb-2", "GPULEDGER_TEAM=research"}));
    WriteFile(dir / "proc/5003/environ", EnvironText({"GPULEDGER_JOB=serve-3", "GPULEDGER_TEAM=search"}));
    auto node = testing::StartScenarioNode(dir.path(), kTestdata + "/e2e_hour.toml", clock);
    if (!node.ok()) {
      ADD_FAILURE() << node.status().ToString();
      return;
    }
    lib = std::move(node->lib);
    server = std::move(node->server);
    sink = std::move(node->sink);

    // Socket paths are short (107 bytes): the kubelet's lives in its own temp folder.
    socket_dir = std::make_unique<TempDir>();
    auto k = kube::testing::FakeKubelet::Start(*socket_dir / "kubelet.sock");
    if (!k.ok()) {
      ADD_FAILURE() << k.status().ToString();
      return;
    }
    kubelet = std::move(k).value();
    kubelet->SetPods({
        {"ml", "trainer-0", "main", "nvidia.com/gpu", kGpu1},
        {"kubeflow-ana", "my-nb-0", "my-nb", "nvidia.com/mig-4g.71gb", kMigB},
        {"a", "x-0", "main", "nvidia.com/gpu", kGpu2 + "::0"},
        {"b", "y-0", "main", "nvidia.com/gpu", kGpu2 + "::1"},
    });
    auto a = kube::testing::FakeApiServer::Start("sa-token");
    if (!a.ok()) {
      ADD_FAILURE() << a.status().ToString();
      return;
    }
    api = std::move(a).value();
    api->AddPod({.name = "trainer-0", .ns = "ml", .uid = kTrainerUid,
                 .labels = {{"team", "vision"}, {"kueue.x-k8s.io/queue-name", "a100-queue"}, {"job-name", "resnet"}},
                 .owners = {{"Job", "resnet", true}}});
    api->AddPod({.name = "my-nb-0", .ns = "kubeflow-ana", .uid = "uid-nb",
                 .labels = {{"notebook-name", "my-nb"}, {"gpuledger.io/exempt", "true"}},
                 .annotations = {{"kubectl.kubernetes.io/last-applied-configuration", std::string(2'000, '{')},
                                 {"gpuledger.io/reason", "demo"}},
                 .owners = {{"StatefulSet", "my-nb", true}}});
    api->AddNamespace({.name = "kubeflow-ana", .annotations = {{"owner", "ana@example.com"}}});
    api->SetDown(!api_reachable);
    WriteFile(dir / "sa/token", "sa-token\n");

    AgentConfig config;
    config.node = "k8s-node";
    config.spool_dir = dir / "spool";
    config.proc_root = dir / "proc";
    config.listen_address = "";
    config.kubernetes.enabled = true;
    config.kubernetes.pod_resources_socket = *socket_dir / "kubelet.sock";
    config.kubernetes.api_server = api->url();
    config.kubernetes.token_file = dir / "sa/token";
    EXPECT_TRUE(FinishAgentConfig(config).ok());
    auto created = Agent::Create(config, AgentEnv{lib.get(), &clock, sink.get(), nullptr});
    if (!created.ok()) {
      ADD_FAILURE() << created.status().ToString();
      return;
    }
    agent = std::move(created).value();
  }
  ~KubeNode() {
    agent.reset();
    if (server) server->Stop();
  }
  bool ok() const { return agent != nullptr; }

  void RunUntil(int64_t end_ms) {
    for (int64_t t = clock.t_ms() + 1'000; t <= end_ms; t += 1'000) {
      clock.Set(t);
      agent->CollectOnce();
      if (t % 10'000 == 0) {
        EXPECT_TRUE(agent->FlushBatch().ok());
        agent->PushOnce();
      }
    }
  }

  std::map<std::string, Job> Jobs() {
    std::map<std::string, Job> out;
    auto jobs = ledger::internal_StoreOf(server->ledger()).ListJobs();
    EXPECT_TRUE(jobs.ok());
    if (jobs.ok()) {
      for (const auto& j : *jobs) out[j.job.id] = j.job;
    }
    return out;
  }

  // GPU-seconds of `job` in `bucket` over the first `minutes`.
  double JobSeconds(const std::string& job, Bucket bucket, int64_t minutes) {
    EXPECT_TRUE(server->ledger().RefreshRollups().ok());
    auto usage = server->ledger().Usage({kScenarioEpochMs, kScenarioEpochMs + minutes * 60'000},
                                        {ledger::Dimension::kJob});
    EXPECT_TRUE(usage.ok());
    if (!usage.ok()) return -1;
    for (const ledger::UsageRow& r : usage->rows) {
      if (r.key.at(0) == job) return r.gpu_hours(bucket) * 3600.0;
    }
    return 0;
  }

  std::unique_ptr<TempDir> socket_dir;
};

TEST(AgentKubernetesTest, PodsBecomeJobsByTheirLabelsAndAHeldIdleMigInstanceIsAllocated) {
  KubeNode node;
  ASSERT_TRUE(node.ok());
  node.RunUntil(10 * 60'000);
  EXPECT_THAT(node.server->errors(), ::testing::IsEmpty());
  std::map<std::string, Job> jobs = node.Jobs();

  // pid 5001: its cgroup's pod UID -> ml/trainer-0 -> the Job that owns it.
  ASSERT_TRUE(jobs.contains("k8s/ml/resnet"));
  EXPECT_EQ(jobs["k8s/ml/resnet"].team, "vision");
  EXPECT_EQ(jobs["k8s/ml/resnet"].project, "a100-queue");
  EXPECT_EQ(jobs["k8s/ml/resnet"].kind, JobKind::kBatch);
  EXPECT_NEAR(node.JobSeconds("k8s/ml/resnet", Bucket::kActive, 10), 600 * 0.6, 6);

  // The notebook runs nothing on its MIG instance: held idle all the same.
  ASSERT_TRUE(jobs.contains("k8s/kubeflow-ana/my-nb"));
  EXPECT_EQ(jobs["k8s/kubeflow-ana/my-nb"].kind, JobKind::kNotebook);
  EXPECT_EQ(jobs["k8s/kubeflow-ana/my-nb"].user, "ana@example.com");
  EXPECT_NEAR(node.JobSeconds("k8s/kubeflow-ana/my-nb", Bucket::kAllocatedIdle, 10), 600 * kMig4, 600 * kMig4 * 0.01);
  // Its gpuledger.io/ label and annotation went with it into the ledger (the default
  // `keep`), for exemptions; kubectl's large annotation did not, nor did the other labels.
  EXPECT_EQ(jobs["k8s/kubeflow-ana/my-nb"].labels, (JobMetadata{{"gpuledger.io/exempt", "true"}}));
  EXPECT_EQ(jobs["k8s/kubeflow-ana/my-nb"].annotations, (JobMetadata{{"gpuledger.io/reason", "demo"}}));
  EXPECT_EQ(jobs["k8s/ml/resnet"].labels, JobMetadata{}) << "a pod with none kept: an empty set";

  // Both pods sharing GPU 1 hold it.
  EXPECT_TRUE(jobs.contains("k8s/a/x-0"));
  EXPECT_TRUE(jobs.contains("k8s/b/y-0"));

  std::string text = *node.agent->MetricsText();
  EXPECT_THAT(text, HasSubstr("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"" + kGpu1 +
                              "\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"k8s-node\","
                              "container=\"main\",namespace=\"ml\",pod=\"trainer-0\"}"));
  // A time-sliced GPU's series name no pod (their labels are empty).
  EXPECT_THAT(text, Not(HasSubstr("pod=\"x-0\"")));
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_pod_resources_up{Hostname=\"k8s-node\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_api_server_up{Hostname=\"k8s-node\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_kubelet_only{Hostname=\"k8s-node\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_pod_devices{Hostname=\"k8s-node\"} 4\n"));
}

TEST(AgentKubernetesTest, WithoutTheApiServerJobsAreThePodsOfTheirNamespacesAndMetricsSaySo) {
  KubeNode node(/*api_reachable=*/false);
  ASSERT_TRUE(node.ok());
  node.RunUntil(2 * 60'000);
  std::map<std::string, Job> jobs = node.Jobs();
  // No UIDs without the API server: GPU 0 has one pod, so pid 5001 is that pod's.
  ASSERT_TRUE(jobs.contains("k8s/ml/trainer-0"));
  EXPECT_EQ(jobs["k8s/ml/trainer-0"].team, "ml");
  EXPECT_NEAR(node.JobSeconds("k8s/ml/trainer-0", Bucket::kActive, 2), 120 * 0.6, 2);
  EXPECT_TRUE(jobs.contains("k8s/kubeflow-ana/my-nb-0"));
  EXPECT_FALSE(jobs["k8s/kubeflow-ana/my-nb-0"].labels.has_value()) << "no API server: nothing said of labels";
  std::string text = *node.agent->MetricsText();
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_api_server_up{Hostname=\"k8s-node\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_kubelet_only{Hostname=\"k8s-node\"} 1\n"));
}

// A pod that names its job itself (GPULEDGER_JOB, GPULEDGER_PROJECT in its containers'
// environment): its process and its holding of the GPU are the one job, with the one
// project, and the pod rules' job for it does not appear.
TEST(AgentKubernetesTest, APodsOwnVariablesNameTheJobThatHoldsItsDevices) {
  KubeNode node(true, {"GPULEDGER_JOB=resnet-sweep-7", "GPULEDGER_PROJECT=sweeps"});
  ASSERT_TRUE(node.ok());
  node.RunUntil(2 * 60'000);
  std::map<std::string, Job> jobs = node.Jobs();
  ASSERT_TRUE(jobs.contains("resnet-sweep-7"));
  EXPECT_EQ(jobs["resnet-sweep-7"].project, "sweeps");
  EXPECT_FALSE(jobs.contains("k8s/ml/resnet"));
  EXPECT_NEAR(node.JobSeconds("resnet-sweep-7", Bucket::kActive, 2), 120 * 0.6, 2);
}

TEST(AgentKubernetesTest, AKubeletSocketThatDisappearsEndsHeldIdleAllocationsOnceStale) {
  KubeNode node;
  ASSERT_TRUE(node.ok());
  node.RunUntil(5 * 60'000);
  node.kubelet->Stop();  // the socket is gone
  node.RunUntil(10 * 60'000);
  std::string text = *node.agent->MetricsText();
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_pod_resources_up{Hostname=\"k8s-node\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("gpuledger_agent_kubernetes_pod_devices{Hostname=\"k8s-node\"} 0\n"));
  // Held through the 60 s a kubelet restart may take, then closed.
  EXPECT_NEAR(node.JobSeconds("k8s/kubeflow-ana/my-nb", Bucket::kAllocatedIdle, 10), 360 * kMig4, 3);

  // The kubelet is back and lists the notebook again: a new allocation opens.
  auto again = kube::testing::FakeKubelet::Start(*node.socket_dir / "kubelet.sock");
  ASSERT_TRUE(again.ok());
  (*again)->SetPods({{"kubeflow-ana", "my-nb-0", "my-nb", "nvidia.com/mig-4g.71gb", kMigB}});
  node.RunUntil(12 * 60'000);
  EXPECT_NEAR(node.JobSeconds("k8s/kubeflow-ana/my-nb", Bucket::kAllocatedIdle, 12), 480 * kMig4, 3);
}

}  // namespace
}  // namespace gpuledger::agent
