#include "agent/attribution.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <fmt/format.h>

#include "agent/test_util.h"

namespace gpuledger::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Child;
using testing::TempDir;
using testing::EnvironText;
using testing::WriteFile;

TEST(CgroupTest, FindsSlurmJobs) {
  EXPECT_EQ(SlurmJobFromCgroup("4:memory:/slurm/uid_1000/job_4242/step_0/task_0\n"), "4242");
  EXPECT_EQ(SlurmJobFromCgroup("0::/system.slice/slurmstepd.scope/job_17/step_batch/user/task_0\n"), "17");
  EXPECT_EQ(SlurmJobFromCgroup("0::/user.slice/job_x/\n"), std::nullopt);
  EXPECT_EQ(SlurmJobFromCgroup("0::/user.slice/user-1000.slice/session-3.scope\n"), std::nullopt);
  EXPECT_EQ(SlurmJobFromCgroup("0::/a/job_12abc\n"), std::nullopt);
}

TEST(CgroupTest, FindsKubernetesPods) {
  // cgroupfs driver (v1)
  EXPECT_EQ(PodUidFromCgroup("11:memory:/kubepods/burstable/pod0f5c9c2e-4d6b-4c7a-9a43-2b8a2f6d1e11/"
                             "8d3b0c6f4b1e\n"),
            "0f5c9c2e-4d6b-4c7a-9a43-2b8a2f6d1e11");
  // systemd driver (v2): dashes in the UID become underscores
  EXPECT_EQ(PodUidFromCgroup("0::/kubepods.slice/kubepods-besteffort.slice/"
                             "kubepods-besteffort-pod6e2a1b7c_90d3_4f21_8b55_0c1d2e3f4a5b.slice/"
                             "cri-containerd-4a5b.scope\n"),
            "6e2a1b7c-90d3-4f21-8b55-0c1d2e3f4a5b");
  EXPECT_EQ(PodUidFromCgroup("0::/system.slice/docker-podabc.scope\n"), std::nullopt);
}

TEST(EnvironmentTest, ExplicitVariablesMakeAJob) {
  Environment env{{"GPULEDGER_JOB", "train-7"}, {"GPULEDGER_TEAM", "nlp"}, {"GPULEDGER_PROJECT", "llm"},
                  {"GPULEDGER_EXPERIMENT", "sweep-3"}, {"GPULEDGER_KIND", "training"}};
  auto job = JobFromEnvironment(env);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->id, "train-7");
  EXPECT_EQ(job->team, "nlp");
  EXPECT_EQ(job->project, "llm");
  EXPECT_EQ(job->experiment, "sweep-3");
  EXPECT_EQ(job->kind, JobKind::kTraining);
  EXPECT_FALSE(JobFromEnvironment({{"GPULEDGER_TEAM", "nlp"}}));
  EXPECT_FALSE(JobFromEnvironment({{"GPULEDGER_JOB", ""}}));
}

TEST(MappingFileTest, LoadsAndNamesErrors) {
  TempDir dir;
  WriteFile(dir / "map.toml", R"([[device]]
uuid = "GPU-1"
job = "serving-a"
team = "search"
kind = "serving"

[[device]]
gpu = 2
gpu_instance = 5
job = "notebooks"
)");
  auto m = LoadMappingFile(dir / "map.toml");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].uuid, "GPU-1");
  EXPECT_EQ((*m)[0].job.kind, JobKind::kServing);
  EXPECT_EQ((*m)[1].gpu_index, 2);
  EXPECT_EQ((*m)[1].gpu_instance_id, 5u);

  WriteFile(dir / "bad.toml", "[[device]]\nuuid = \"GPU-1\"\njob = \"x\"\ncolour = \"red\"\n");
  auto bad = LoadMappingFile(dir / "bad.toml");
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.toml:4: device.colour: unknown key"));
  WriteFile(dir / "nojob.toml", "[[device]]\ngpu = 1\n");
  EXPECT_THAT(LoadMappingFile(dir / "nojob.toml").status().message(), HasSubstr("nojob.toml:1: device: job is required"));
}

TEST(HpcJobMappingTest, ReadsDcgmExporterFormat) {
  TempDir dir;
  WriteFile(dir / "hpc/0", "1001\n");
  WriteFile(dir / "hpc/1", "  1002 \n\n1003\n");
  WriteFile(dir / "hpc/2.3", "2001\n");
  WriteFile(dir / "hpc/README", "not a gpu\n");
  WriteFile(dir / "hpc/4", "");
  auto m = ReadHpcJobMapping(dir / "hpc");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->size(), 3u);
  EXPECT_THAT(m->at("1"), ElementsAre("1002", "1003"));
  EXPECT_THAT(m->at("2.3"), ElementsAre("2001"));
  auto none = ReadHpcJobMapping(dir / "missing");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

class FakeSlurm final : public SlurmResolver {
 public:
  Result<SlurmJobInfo> Lookup(const std::string& id) override {
    ++lookups;
    if (id != "4242") return NotFound("unknown job " + id);
    return SlurmJobInfo{"4242", "bert-ft", "nlp", "priya", "gpu-a", "RUNNING", 2};
  }
  int lookups = 0;
};

// A fake /proc with one process per attribution source.
struct FakeNode {
  TempDir dir;
  FakeSlurm slurm;
  std::unique_ptr<Attributor> attributor;

  FakeNode() {
    WriteFile(dir / "proc/10/environ", EnvironText({"GPULEDGER_JOB=env-job", "GPULEDGER_TEAM=vision", "SLURM_JOB_ID=4242"}));
    WriteFile(dir / "proc/10/cgroup", "0::/slurm/job_4242/step_0\n");
    WriteFile(dir / "proc/11/environ", EnvironText({"PATH=/bin", "SLURM_JOB_ID=4242"}));
    WriteFile(dir / "proc/12/environ", EnvironText({"PATH=/bin"}));
    WriteFile(dir / "proc/12/cgroup", "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n");
    WriteFile(dir / "proc/13/environ", EnvironText({"GPULEDGER_PROJECT=override"}));
    WriteFile(dir / "proc/13/cgroup",
              "0::/kubepods.slice/kubepods-burstable.slice/"
              "kubepods-burstable-pod6e2a1b7c_90d3_4f21_8b55_0c1d2e3f4a5b.slice/cri-containerd-1.scope\n");
    WriteFile(dir / "proc/14/environ", EnvironText({"PATH=/bin"}));
    WriteFile(dir / "proc/14/cgroup", "0::/user.slice\n");
    WriteFile(dir / "map.toml", "[[device]]\nuuid = \"GPU-mapped\"\njob = \"static-job\"\nteam = \"search\"\n");
    WriteFile(dir / "hpc/3", "777\n");
    WriteFile(dir / "hpc/0.9", "888\n");
    attributor = std::make_unique<Attributor>(
        Attributor::Options{dir / "proc", dir / "map.toml", dir / "hpc"}, &slurm);
    Status st = attributor->Refresh();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
};

TEST(AttributorTest, AppliesSourcesInOrder) {
  FakeNode node;
  Attributor& a = *node.attributor;
  DeviceRef gpu0{"GPU-0", 0, std::nullopt};

  Attribution env = a.ForProcess(10, gpu0);  // environment wins over its Slurm job
  EXPECT_EQ(env.source, AttributionSource::kEnvironment);
  EXPECT_EQ(env.job.id, "env-job");
  EXPECT_EQ(env.job.team, "vision");

  Attribution slurm_env = a.ForProcess(11, gpu0);  // SLURM_JOB_ID, enriched by Slurm
  EXPECT_EQ(slurm_env.source, AttributionSource::kSlurm);
  EXPECT_EQ(slurm_env.job.id, "4242");
  EXPECT_EQ(slurm_env.job.team, "nlp");
  EXPECT_EQ(slurm_env.job.user, "priya");
  EXPECT_EQ(slurm_env.job.pool, "gpu-a");
  EXPECT_EQ(slurm_env.job.experiment, "bert-ft");
  EXPECT_EQ(slurm_env.job.requested_gpus, 2);

  Attribution slurm_cg = a.ForProcess(12, gpu0);  // job_<id> in the cgroup path
  EXPECT_EQ(slurm_cg.source, AttributionSource::kSlurm);
  EXPECT_EQ(slurm_cg.job.id, "4242");

  Attribution k8s = a.ForProcess(13, gpu0);
  EXPECT_EQ(k8s.source, AttributionSource::kKubernetes);
  EXPECT_EQ(k8s.job.id, "k8s/6e2a1b7c-90d3-4f21-8b55-0c1d2e3f4a5b");
  EXPECT_EQ(k8s.job.project, "override");  // explicit variables refine any source

  Attribution none = a.ForProcess(14, gpu0);
  EXPECT_EQ(none.source, AttributionSource::kNone);
  EXPECT_FALSE(none.attributed());

  Attribution mapped = a.ForProcess(14, {"GPU-mapped", 1, std::nullopt});
  EXPECT_EQ(mapped.source, AttributionSource::kMappingFile);
  EXPECT_EQ(mapped.job.id, "static-job");
  EXPECT_EQ(mapped.job.team, "search");

  Attribution hpc = a.ForProcess(14, {"GPU-3", 3, std::nullopt});
  EXPECT_EQ(hpc.source, AttributionSource::kHpcJobMap);
  EXPECT_EQ(hpc.job.id, "hpc/777");
  Attribution hpc_mig = a.ForProcess(14, {"MIG-x", 0, 9u});
  EXPECT_EQ(hpc_mig.job.id, "hpc/888");

  Attribution gone = a.ForProcess(99, gpu0);  // exited before we looked: unattributed
  EXPECT_FALSE(gone.attributed());
}

TEST(AttributorTest, MappingSourcesHoldDevicesAndFollowTheirFiles) {
  FakeNode node;
  Attributor& a = *node.attributor;
  auto holders = a.DeviceHolders({"GPU-3", 3, std::nullopt});
  ASSERT_EQ(holders.size(), 1u);
  EXPECT_EQ(holders[0].job.id, "hpc/777");
  EXPECT_TRUE(a.DeviceHolders({"GPU-0", 0, std::nullopt}).empty());

  // The job ends: its file goes away, and so does the holding.
  std::filesystem::remove(node.dir / "hpc/3");
  ASSERT_TRUE(a.Refresh().ok());
  EXPECT_TRUE(a.DeviceHolders({"GPU-3", 3, std::nullopt}).empty());

  // A broken edit of the mapping file keeps the last good contents and says why.
  WriteFile(node.dir / "map.toml", "[[device]]\nuuid = 3\n");
  // Make sure the modification time differs from the first write.
  std::filesystem::last_write_time(node.dir / "map.toml",
                                   std::filesystem::file_time_type::clock::now() + std::chrono::seconds(5));
  Status st = a.Refresh();
  EXPECT_THAT(st.message(), HasSubstr("map.toml:2: uuid: want a string"));
  EXPECT_EQ(a.DeviceHolders({"GPU-mapped", 1, std::nullopt}).at(0).job.id, "static-job");
}

TEST(AttributorTest, CachesPerProcessUntilItEnds) {
  FakeNode node;
  Attributor& a = *node.attributor;
  DeviceRef gpu0{"GPU-0", 0, std::nullopt};
  EXPECT_EQ(a.ForProcess(11, gpu0).job.id, "4242");
  // The environment of a running process does not change; a new one on a reused pid does.
  WriteFile(node.dir / "proc/11/environ", EnvironText({"GPULEDGER_JOB=reused"}));
  EXPECT_EQ(a.ForProcess(11, gpu0).job.id, "4242");
  a.EndCycle({});
  EXPECT_EQ(a.ForProcess(11, gpu0).job.id, "reused");
}

TEST(AttributorTest, RealProcessTreeSpawnedByTheTest) {
  // Children with the variables set, read through the real /proc.
  Child explicit_child({"PATH=/bin", "GPULEDGER_JOB=real-1", "GPULEDGER_TEAM=infra", "GPULEDGER_KIND=notebook"});
  Child slurm_child({"PATH=/bin", "SLURM_JOB_ID=31337"});
  Child plain_child({"PATH=/bin"});
  Attributor a(Attributor::Options{}, nullptr);
  ASSERT_TRUE(a.Refresh().ok());
  DeviceRef gpu{"GPU-0", 0, std::nullopt};
  Attribution e = a.ForProcess(static_cast<uint32_t>(explicit_child.pid()), gpu);
  EXPECT_EQ(e.source, AttributionSource::kEnvironment);
  EXPECT_EQ(e.job.id, "real-1");
  EXPECT_EQ(e.job.team, "infra");
  EXPECT_EQ(e.job.kind, JobKind::kNotebook);
  Attribution s = a.ForProcess(static_cast<uint32_t>(slurm_child.pid()), gpu);
  EXPECT_EQ(s.source, AttributionSource::kSlurm);
  EXPECT_EQ(s.job.id, "31337");
  Attribution p = a.ForProcess(static_cast<uint32_t>(plain_child.pid()), gpu);
  // This machine's own cgroup may name a Slurm job or a pod; the plain child is
  // unattributed only where it does not.
  std::ifstream cg("/proc/self/cgroup");
  std::string own((std::istreambuf_iterator<char>(cg)), std::istreambuf_iterator<char>());
  if (!SlurmJobFromCgroup(own) && !PodUidFromCgroup(own)) {
    EXPECT_EQ(p.source, AttributionSource::kNone);
  }
}

// Moves `pid` into a new cgroup whose path ends in job_<id>, in the first cgroup
// hierarchy this machine lets us write to; returns the folder made, or "".
std::string MoveIntoJobCgroup(pid_t pid, const std::string& job) {
  for (const char* root : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/freezer",
                           "/sys/fs/cgroup"}) {
    std::string base = fmt::format("{}/gpuledger-test-{}", root, ::getpid());
    std::string dir = base + "/job_" + job;
    std::error_code ec;
    if (!std::filesystem::create_directories(dir, ec) || ec) continue;
    std::ofstream procs(dir + "/cgroup.procs");
    procs << pid;
    procs.close();
    if (procs) return dir;
    std::filesystem::remove(dir, ec);
    std::filesystem::remove(base, ec);
  }
  return "";
}

TEST(AttributorTest, RealCgroupNamesTheSlurmJob) {
  Child child({"PATH=/bin"});
  std::string dir = MoveIntoJobCgroup(child.pid(), "5150");
  if (dir.empty()) GTEST_SKIP() << "no writable cgroup hierarchy here (needs root and a cgroupfs mount)";
  Attributor a(Attributor::Options{}, nullptr);
  Attribution s = a.ForProcess(static_cast<uint32_t>(child.pid()), {"GPU-0", 0, std::nullopt});
  EXPECT_EQ(s.source, AttributionSource::kSlurm);
  EXPECT_EQ(s.job.id, "5150");
  // Move the child back out so the cgroup can be removed.
  std::string root = std::filesystem::path(dir).parent_path().parent_path().string();
  {
    std::ofstream back(root + "/cgroup.procs");
    back << child.pid();
  }
  std::error_code ec;
  std::filesystem::remove(dir, ec);
  std::filesystem::remove(std::filesystem::path(dir).parent_path(), ec);
}

}  // namespace
}  // namespace gpuledger::agent
