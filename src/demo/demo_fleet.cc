#include "demo/demo_fleet.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string_view>

namespace gpuledger::demo {
namespace {

constexpr int64_t kOpen = INT64_MAX / 4;

enum class Pattern { kTraining, kServing, kNotebook, kBatch };

struct Node {
  std::string name;
  std::string pool;
  std::vector<size_t> devices;  // indices into the fleet's devices, GPUs then slices
};

struct SimJob {
  DemoJob d;
  Pattern pattern = Pattern::kTraining;
  double base = 0.8;            // activity when working
  double stall = 0.0;           // share of time the input pipeline starves the GPU
  int64_t ckpt_period_ms = 0;   // checkpoint every ...
  int64_t ckpt_len_ms = 0;      // ... for this long, idle
  int64_t active_until_ms = 0;  // notebooks: worked on until then, then forgotten
  double mem_ratio = 0.9;       // share of device memory held
  double mfu_when_busy = 0;     // training: model FLOPs per busy second, over peak
  bool quiet = false;           // serving: no bursts of traffic
  int64_t gone_after_ms = 0;    // batch: its process exits then, the GPUs stay held
};

struct Tenancy {
  int64_t from_ms;
  int64_t to_ms;
  size_t job;
};

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A deterministic uniform [0, 1) from any key.
double Noise(uint64_t a, uint64_t b, uint64_t c) {
  return static_cast<double>(SplitMix(a ^ SplitMix(b ^ SplitMix(c))) >> 11) * 0x1.0p-53;
}

std::string HexId(const char* prefix, uint64_t seed, uint64_t key) {
  uint64_t a = SplitMix(seed ^ key), b = SplitMix(a ^ key);
  return fmt::format("{}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", prefix, a >> 32, (a >> 16) & 0xffff,
                     a & 0xffff, b >> 48, b & 0xffffffffffffULL);
}

struct TeamInfo {
  const char* team;
  std::vector<const char*> projects;
  std::vector<const char*> users;
};

const std::vector<TeamInfo>& Teams() {
  static const std::vector<TeamInfo> kTeams = {
      {"vision", {"detr-v3", "seg-foundation"}, {"ana", "kofi", "mei"}},
      {"nlp", {"llm-pretrain", "rlhf"}, {"lars", "priya", "tomas"}},
      {"speech", {"asr-v4"}, {"ines", "yuki"}},
      {"recsys", {"ranker", "retrieval"}, {"omar", "sofia"}},
      {"platform", {"evals", "infra-bench"}, {"dev", "rui"}},
  };
  return kTeams;
}

}  // namespace

// One 43-node cluster of the fleet, as the demo always was (DemoFleet copies it).
struct Cluster {
  DemoOptions opt;
  std::string prefix;  // before its node names and job ids: "" for the first cluster
  std::mt19937_64 rng;
  std::vector<Device> devices;
  std::vector<std::vector<Tenancy>> tenancies;  // per device, by from
  std::vector<Node> nodes;
  std::vector<SimJob> jobs;
  std::vector<DemoJob> public_jobs;
  size_t failed_device = 0;
  TimeRange failure;
  size_t outage_node = 0;
  TimeRange outage;
  int64_t cursor = 0;
  int64_t end = 0;
  int64_t spans_sent = 0;  // by Advance: each node's batches are numbered from 1
  int next_job_number = 104'200;

  Cluster(const DemoOptions& o, std::string name_prefix) : opt(o), prefix(std::move(name_prefix)), rng(o.seed) {
    cursor = o.start_ms;
    end = o.start_ms + o.duration_ms;
    BuildFleet();
    tenancies.resize(devices.size());
    failed_device = nodes[6].devices[3];
    failure = {o.start_ms + 2 * kMsPerDay + 14 * kMsPerHour, o.start_ms + 3 * kMsPerDay + 10 * kMsPerHour};
    outage_node = 22;
    outage = {o.start_ms + 4 * kMsPerDay + 3 * kMsPerHour,
              o.start_ms + 4 * kMsPerDay + 5 * kMsPerHour + 30 * kMsPerMinute};
    ScheduleServing();
    ScheduleTraining();
    ScheduleDev();
    ScheduleAdviceCases();
    for (auto& t : tenancies) {
      std::sort(t.begin(), t.end(), [](const Tenancy& a, const Tenancy& b) { return a.from_ms < b.from_ms; });
    }
    for (const SimJob& j : jobs) public_jobs.push_back(j.d);
  }

  double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  int64_t UniformInt(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  int64_t RoundMinute(double ms) { return FloorTo(static_cast<int64_t>(ms), kMsPerMinute); }

  void AddNode(const std::string& name, const std::string& pool, const std::string& model,
               int64_t memory_mib, CapacityType type, bool mig) {
    Node n{prefix + name, pool, {}};
    size_t node_no = nodes.size();
    for (int g = 0; g < 8; ++g) {
      Device d;
      d.uuid = HexId("GPU", opt.seed, node_no * 100 + static_cast<uint64_t>(g));
      d.node = n.name;
      d.model = model;
      d.memory_mib = memory_mib;
      d.pool = pool;
      d.capacity_type = type;
      d.sample_interval_ms = opt.sample_interval_ms;
      n.devices.push_back(devices.size());
      devices.push_back(d);
    }
    if (mig) {
      // 3g + 2g + 1g + 1g: the whole GPU partitioned (an H200's 7 compute slices).
      static const std::pair<const char*, Share> kLayout[] = {
          {"3g.71gb", {3, 7}}, {"2g.35gb", {2, 7}}, {"1g.18gb", {1, 7}}, {"1g.18gb", {1, 7}}};
      size_t gpus = n.devices.size();
      for (size_t g = 0; g < gpus; ++g) {
        const Device parent = devices[n.devices[g]];
        for (size_t s = 0; s < 4; ++s) {
          Device m = parent;
          m.uuid = HexId("MIG", opt.seed, node_no * 1000 + g * 10 + s);
          m.parent_uuid = parent.uuid;
          m.share = kLayout[s].second;
          m.mig_profile = kLayout[s].first;
          m.memory_mib = parent.memory_mib * m.share.num / 8;
          n.devices.push_back(devices.size());
          devices.push_back(m);
        }
      }
    }
    nodes.push_back(std::move(n));
  }

  void BuildFleet() {
    for (int i = 1; i <= 20; ++i) {
      AddNode(fmt::format("trn-{:02}", i), "training", "NVIDIA H100 80GB HBM3", 81559,
              CapacityType::kReserved, false);
    }
    for (int i = 1; i <= 6; ++i) {
      AddNode(fmt::format("srv-{:02}", i), "serving", "NVIDIA L40S", 46068, CapacityType::kOnDemand,
              false);
    }
    for (int i = 1; i <= 5; ++i) {
      AddNode(fmt::format("dev-{:02}", i), "dev", "NVIDIA A100-SXM4-80GB", 81920,
              CapacityType::kReserved, false);
    }
    AddNode("dev-06", "dev", "NVIDIA H200", 143771, CapacityType::kReserved, true);
    // The advice cases' training nodes (ScheduleAdviceCases), after the others so that
    // every other node and its GPUs keep their names.
    for (int i = 21; i <= 31; ++i) {
      AddNode(fmt::format("trn-{:02}", i), "training", "NVIDIA H100 80GB HBM3", 81559,
              CapacityType::kReserved, false);
    }
  }

  Job MakeJob(std::string id, const TeamInfo& t, JobKind kind, std::string pool, int gpus) {
    Job j;
    j.id = std::move(id);
    j.team = t.team;
    j.project = t.projects[static_cast<size_t>(UniformInt(0, static_cast<int64_t>(t.projects.size()) - 1))];
    j.user = t.users[static_cast<size_t>(UniformInt(0, static_cast<int64_t>(t.users.size()) - 1))];
    j.kind = kind;
    j.pool = std::move(pool);
    j.requested_gpus = gpus;
    return j;
  }

  void Place(SimJob job, const std::vector<size_t>& devs) {
    size_t idx = jobs.size();
    job.d.job.id = prefix + job.d.job.id;
    for (size_t d : devs) {
      tenancies[d].push_back({job.d.from_ms, job.d.to_ms, idx});
      job.d.devices.push_back(devices[d].uuid);
    }
    job.d.job.start_ms = job.d.from_ms;
    if (job.d.to_ms < kOpen) job.d.job.end_ms = job.d.to_ms;
    jobs.push_back(std::move(job));
  }

  void ScheduleServing() {
    static const char* kModels[] = {"ranker-v7", "retrieval-v3", "llama-chat-70b", "asr-stream",
                                    "vision-embed", "rerank-xl"};
    size_t gpu = 0;
    std::vector<size_t> serving;
    for (size_t n = 20; n < 26; ++n) {
      for (size_t d : nodes[n].devices) serving.push_back(d);
    }
    for (int k = 0; gpu + 4 <= 42; ++k) {
      int gpus = k % 3 == 2 ? 4 : 2;
      const TeamInfo& team = Teams()[k % 2 == 0 ? 3 : static_cast<size_t>(k % 5)];
      SimJob j;
      j.d.job = MakeJob(fmt::format("{}-{}", kModels[k % 6], k), team, JobKind::kServing, "serving", gpus);
      j.pattern = Pattern::kServing;
      j.base = Uniform(0.35, 0.8);
      j.mem_ratio = Uniform(0.5, 0.9);
      j.d.from_ms = opt.start_ms;
      // Two deployments are scaled down mid-week, leaving their GPUs unallocated.
      j.d.to_ms = k == 3 || k == 8 ? opt.start_ms + 5 * kMsPerDay : kOpen;
      std::vector<size_t> devs(serving.begin() + static_cast<long>(gpu),
                               serving.begin() + static_cast<long>(gpu) + gpus);
      gpu += static_cast<size_t>(gpus);
      Place(std::move(j), devs);
    }
  }

  void ScheduleTraining() {
    std::vector<int64_t> free_at(20, opt.start_ms);
    int64_t t = opt.start_ms;
    int64_t last_start = opt.start_ms;
    int backlog = 10;
    const size_t failed_node = 6;
    bool failure_applied = false;
    while (true) {
      if (backlog > 0) {
        --backlog;
      } else {
        t += static_cast<int64_t>(std::exponential_distribution<double>(1.0 / 50.0)(rng) * kMsPerMinute);
      }
      if (t >= end) break;
      double r = Uniform(0, 1);
      int nodes_needed = r < 0.55 ? 1 : r < 0.85 ? 2 : 4;
      int64_t duration = RoundMinute(std::exp(Uniform(std::log(2.0), std::log(30.0))) * kMsPerHour);
      // Strict FIFO: no job starts before the one ahead of it.
      int64_t start = std::max(t, last_start);
      if (!failure_applied && start >= failure.begin_ms) {
        free_at[failed_node] = std::max(free_at[failed_node], failure.end_ms);
        failure_applied = true;
      }
      std::vector<size_t> order(20);
      for (size_t i = 0; i < 20; ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return free_at[a] < free_at[b]; });
      order.resize(static_cast<size_t>(nodes_needed));
      for (size_t n : order) start = std::max(start, free_at[n]);
      if (start >= end) break;
      last_start = start;
      const TeamInfo& team = Teams()[static_cast<size_t>(UniformInt(0, 3))];
      SimJob j;
      j.d.job = MakeJob(std::to_string(next_job_number++), team, JobKind::kTraining, "training",
                        nodes_needed * 8);
      j.d.job.experiment = fmt::format("{}-{}", Uniform(0, 1) < 0.5 ? "sweep" : "run", UniformInt(1, 40));
      j.d.job.submit_ms = t;
      j.pattern = Pattern::kTraining;
      j.base = Uniform(0.78, 0.95);
      j.stall = Uniform(0, 1) < 0.3 ? Uniform(0.25, 0.45) : Uniform(0.02, 0.12);
      j.ckpt_period_ms = (30 + UniformInt(0, 3) * 10) * kMsPerMinute;
      j.ckpt_len_ms = UniformInt(2, 5) * kMsPerMinute;
      // What it trains: a dense decoder of one of a few sizes, in bf16.
      static const struct { double params; int64_t layers, hidden; } kModels[] = {
          {1.3e9, 24, 2048}, {7e9, 32, 4096}, {13e9, 40, 5120}, {34e9, 48, 8192}};
      const auto& m = kModels[static_cast<size_t>(UniformInt(0, 3))];
      j.d.job.model_parameters = m.params;
      j.d.job.model_layers = m.layers;
      j.d.job.model_hidden = m.hidden;
      j.d.job.model_sequence = 4096;
      j.d.job.model_dtype = "bf16";
      j.mfu_when_busy = Uniform(0.45, 0.6);
      j.mem_ratio = Uniform(0.85, 0.97);
      j.d.from_ms = start;
      j.d.to_ms = start + duration;
      // The GPU that fails takes its job down with it.
      bool on_failed = std::find(order.begin(), order.end(), failed_node) != order.end();
      if (on_failed && j.d.from_ms < failure.begin_ms && j.d.to_ms > failure.begin_ms) {
        j.d.to_ms = failure.begin_ms;
        free_at[failed_node] = failure.end_ms;
        failure_applied = true;
      }
      if (j.d.to_ms >= end) j.d.to_ms = kOpen;
      std::vector<size_t> devs;
      for (size_t n : order) {
        if (!(on_failed && n == failed_node && j.d.to_ms == failure.begin_ms)) {
          free_at[n] = std::min(j.d.to_ms, end);
        }
        for (size_t k = 0; k < 8; ++k) devs.push_back(nodes[n].devices[k]);
      }
      Place(std::move(j), devs);
    }
  }

  bool Free(size_t device, int64_t from, int64_t to) const {
    for (const Tenancy& t : tenancies[device]) {
      if (t.from_ms < to && from < t.to_ms) return false;
    }
    return true;
  }

  void ScheduleDev() {
    std::vector<size_t> a100, slices;
    for (size_t n = 26; n < 31; ++n) {
      for (size_t d : nodes[n].devices) a100.push_back(d);
    }
    for (size_t d : nodes[31].devices) {
      if (devices[d].is_mig()) slices.push_back(d);
    }
    int notebook_no = 0, batch_no = 0;
    for (int64_t day = opt.start_ms; day < end; day += kMsPerDay) {
      int64_t weekday = ((day / kMsPerDay) % 7 + 3) % 7;  // 0 = Monday
      bool workday = weekday < 5;
      // Notebooks: opened during working hours; a quarter are forgotten for days.
      int64_t t = day + 8 * kMsPerHour;
      while (workday) {
        t += static_cast<int64_t>(std::exponential_distribution<double>(1.0 / 11.0)(rng) * kMsPerMinute);
        if (t > day + 18 * kMsPerHour || t >= end) break;
        bool forgotten = Uniform(0, 1) < 0.3;
        int64_t len = forgotten ? UniformInt(20, 60) * kMsPerHour : UniformInt(60, 300) * kMsPerMinute;
        int64_t from = RoundMinute(static_cast<double>(t));
        int64_t to = std::min(from + len, kOpen);
        const auto& pool = Uniform(0, 1) < 0.6 ? slices : a100;
        size_t start = static_cast<size_t>(UniformInt(0, static_cast<int64_t>(pool.size()) - 1));
        for (size_t k = 0; k < pool.size(); ++k) {
          size_t d = pool[(start + k) % pool.size()];
          if (!Free(d, from, to)) continue;
          const TeamInfo& team = Teams()[static_cast<size_t>(UniformInt(0, 4))];
          SimJob j;
          j.d.job = MakeJob("", team, JobKind::kNotebook, "dev", devices[d].is_mig() ? 0 : 1);
          j.d.job.id = fmt::format("nb-{}-{}", j.d.job.user, notebook_no++);  // named after its user
          if (devices[d].is_mig()) j.d.job.requested_mig_profile = devices[d].mig_profile;
          j.pattern = Pattern::kNotebook;
          j.base = Uniform(0.15, 0.45);
          j.active_until_ms = from + UniformInt(30, 120) * kMsPerMinute;
          j.mem_ratio = Uniform(0.2, 0.6);
          j.d.from_ms = from;
          j.d.to_ms = to >= end ? kOpen : to;
          Place(std::move(j), {d});
          break;
        }
      }
      // Batch jobs: evaluations and preprocessing, any time of day.
      for (int k = 0; k < 30; ++k) {
        int64_t from = day + RoundMinute(Uniform(0, 1) * kMsPerDay);
        int64_t to = from + UniformInt(30, 180) * kMsPerMinute;
        if (to >= end) continue;
        for (size_t tries = 0; tries < a100.size(); ++tries) {
          size_t d = a100[static_cast<size_t>(UniformInt(0, static_cast<int64_t>(a100.size()) - 1))];
          if (!Free(d, from, to)) continue;
          const TeamInfo& team = Teams()[4];
          SimJob j;
          j.d.job = MakeJob(std::to_string(next_job_number++), team, JobKind::kBatch, "dev", 1);
          j.d.job.experiment = fmt::format("eval-{}", batch_no++);
          j.pattern = Pattern::kBatch;
          j.base = Uniform(0.7, 0.95);
          j.mem_ratio = Uniform(0.3, 0.8);
          j.d.from_ms = from;
          j.d.to_ms = to;
          Place(std::move(j), {d});
          break;
        }
      }
    }
  }

  // The five cases the advice is for (docs/recommendations.md), each where a newcomer
  // finds it: a sweep on 64 GPUs that needs 8, an input-bound fine-tune, a
  // checkpoint-heavy pretraining job, an over-replicated serving deployment and a batch
  // job holding GPUs with nothing running. Fixed figures, no draws from the generator: the
  // rest of the fleet is the same with or without them.
  void ScheduleAdviceCases() {
    auto gpus_of = [&](size_t first_node, size_t nodes_count, size_t from_gpu = 0, size_t count = 8) {
      std::vector<size_t> devs;
      for (size_t n = first_node; n < first_node + nodes_count; ++n) {
        for (size_t g = from_gpu; g < from_gpu + count; ++g) devs.push_back(nodes[n].devices[g]);
      }
      return devs;
    };
    auto case_job = [&](std::string id, const char* team, const char* project, const char* experiment,
                        const char* user, JobKind kind, const char* pool, int gpus, Pattern pattern) {
      SimJob j;
      j.d.job.id = std::move(id);
      j.d.job.team = team;
      j.d.job.project = project;
      j.d.job.experiment = experiment;
      j.d.job.user = user;
      j.d.job.kind = kind;
      j.d.job.pool = pool;
      j.d.job.requested_gpus = gpus;
      j.pattern = pattern;
      j.d.from_ms = opt.start_ms;
      j.d.to_ms = kOpen;
      return j;
    };
    auto training = [&](std::string id, size_t team, const char* project, const char* experiment, int gpus,
                        double params, int64_t layers, int64_t hidden) {
      SimJob j = case_job(std::move(id), Teams()[team].team, project, experiment, Teams()[team].users[0],
                          JobKind::kTraining, "training", gpus, Pattern::kTraining);
      j.d.job.model_parameters = params;
      j.d.job.model_layers = layers;
      j.d.job.model_hidden = hidden;
      j.d.job.model_sequence = 4096;
      j.d.job.model_dtype = "bf16";
      j.mfu_when_busy = 0.5;
      j.mem_ratio = 0.6;
      return j;
    };
    const int64_t day = kMsPerDay;
    const size_t lab = 32;  // trn-21, the first of the cases' nodes
    // A learning-rate sweep: a pilot trial on 8 GPUs for a day, then trials that each hold
    // 64 GPUs at 9% activity for three days, training no faster than the pilot: the
    // scaling is measured, and 8 GPUs a trial would do.
    for (int trial = 0; trial < 3; ++trial) {
      const bool pilot = trial == 0;
      SimJob j = training(fmt::format("lr-sweep-{}", trial + 1), 0, "seg-foundation", "lr-sweep", pilot ? 8 : 64,
                          1.3e9, 24, 2048);
      j.base = pilot ? 0.7344 : 0.0918;
      j.stall = 0.02;
      j.d.from_ms = opt.start_ms + (pilot ? 0 : day + (trial - 1) * 3 * day);
      j.d.to_ms = trial < 2 ? opt.start_ms + (pilot ? day : 4 * day) : kOpen;
      Place(std::move(j), gpus_of(lab, pilot ? 1 : 8));
    }
    // A fine-tune whose data loader starves its 4 GPUs: 45% of their time waiting.
    {
      SimJob j = training("chat-ft-7b", 1, "rlhf", "chat-ft", 4, 7e9, 32, 4096);
      j.base = 0.92;
      j.stall = 0.45;
      Place(std::move(j), gpus_of(lab + 8, 1, 0, 4));
    }
    // Pretraining on 16 GPUs that stops for a 5-minute checkpoint every 30 minutes.
    {
      SimJob j = training("pretrain-13b", 1, "llm-pretrain", "pretrain-13b", 16, 13e9, 40, 5120);
      j.base = 0.9;
      j.stall = 0.03;
      j.ckpt_period_ms = 30 * kMsPerMinute;
      j.ckpt_len_ms = 5 * kMsPerMinute;
      j.mem_ratio = 0.92;
      Place(std::move(j), gpus_of(lab + 9, 2));
    }
    // A batch job whose process exits after two hours on its 4 GPUs; they stay held.
    {
      SimJob j = case_job("preproc-shards", "platform", "evals", "preproc", "rui", JobKind::kBatch, "training", 4,
                          Pattern::kBatch);
      j.base = 0.85;
      j.mem_ratio = 0.5;
      j.d.from_ms = opt.start_ms + day;
      j.gone_after_ms = j.d.from_ms + 2 * kMsPerHour;
      Place(std::move(j), gpus_of(lab + 8, 1, 4, 4));
    }
    // An embedding service on 6 replicas whose steady, light traffic 3 would carry: its
    // queue never fills and its KV cache stays under a third.
    {
      SimJob j = case_job("embed-lite-1", "recsys", "retrieval", "", "sofia", JobKind::kServing, "serving", 6,
                          Pattern::kServing);
      j.quiet = true;
      j.base = 0.25;
      j.mem_ratio = 0.4;
      // srv-06's last 6 GPUs: the serving deployments leave them free.
      std::vector<size_t> devs(nodes[25].devices.begin() + 2, nodes[25].devices.end());
      Place(std::move(j), devs);
    }
  }

  const Tenancy* TenancyAt(size_t device, int64_t t) const {
    for (const Tenancy& x : tenancies[device]) {
      if (x.from_ms <= t && t < x.to_ms) return &x;
      if (x.from_ms > t) break;
    }
    return nullptr;
  }

  // The SM activity of `device` over the interval ending at t.
  double Activity(size_t device, int64_t t, const SimJob** held) const {
    const Tenancy* x = TenancyAt(device, t - 1);
    *held = x ? &jobs[x->job] : nullptr;
    if (x == nullptr) return 0.0;
    const SimJob& j = jobs[x->job];
    double n = Noise(opt.seed, device, static_cast<uint64_t>(t));
    int64_t since = t - j.d.from_ms;
    switch (j.pattern) {
      case Pattern::kTraining: {
        if (j.ckpt_period_ms && since % j.ckpt_period_ms < j.ckpt_len_ms) return 0.01 * n;
        return std::clamp(j.base * (1.0 - j.stall) + (n - 0.5) * 0.06, 0.0, 1.0);
      }
      case Pattern::kServing: {
        double hour = static_cast<double>((t / kMsPerMinute) % (24 * 60)) / 60.0;
        double diurnal = 0.5 + 0.5 * std::sin((hour - 9.0) / 24.0 * 2.0 * M_PI);
        double burst = !j.quiet && Noise(opt.seed + 7, device, static_cast<uint64_t>(t / (20 * kMsPerMinute))) < 0.15
                           ? 0.35
                           : 0.0;
        return std::clamp(0.05 + j.base * diurnal * 0.8 + burst + (n - 0.5) * 0.1, 0.0, 1.0);
      }
      case Pattern::kNotebook:
        if (t > j.active_until_ms) return 0.0;
        return n < 0.4 ? 0.0 : j.base * n;
      case Pattern::kBatch:
        if (j.gone_after_ms && t > j.gone_after_ms) return 0.0;
        return std::clamp(j.base + (n - 0.5) * 0.08, 0.0, 1.0);
    }
    return 0.0;
  }

  Sample MakeSample(size_t device, int64_t t) const {
    Sample s;
    const Device& d = devices[device];
    s.device_uuid = d.uuid;
    s.t_ms = t;
    bool failed = device == failed_device || (devices[device].parent_uuid == devices[failed_device].uuid);
    if (failed && failure.Contains(t - 1)) {
      s.health = Health::kLost;
      return s;
    }
    const SimJob* held = nullptr;
    double a = Activity(device, t, &held);
    s.sm_active = std::round(a * 1000.0) / 1000.0;
    s.sm_occupancy = std::round(a * 0.55 * 1000.0) / 1000.0;
    bool training = held && held->pattern == Pattern::kTraining;
    s.tensor_active = std::round(a * (training ? 0.6 : 0.25) * 1000.0) / 1000.0;
    s.dram_active = std::round(a * 0.4 * 1000.0) / 1000.0;
    s.gpu_util = a > 0.005 ? std::min(1.0, std::round((a * 1.3 + 0.05) * 100.0) / 100.0) : 0.0;
    // What the agent's process list and gap profile would say: training and batch jobs
    // idle in short gaps between bursts when their input pipeline stalls.
    bool gone = held && held->gone_after_ms && t > held->gone_after_ms;
    s.process_count = held && !gone ? 1 : 0;
    if (held && !gone && (held->pattern == Pattern::kTraining || held->pattern == Pattern::kBatch)) {
      auto interval = opt.sample_interval_ms;
      auto idle = static_cast<int64_t>(std::llround((1.0 - a) * static_cast<double>(interval)));
      double stall = held->pattern == Pattern::kTraining ? held->stall * held->base : 0.05;
      auto short_idle = std::min<int64_t>(
          idle, static_cast<int64_t>(std::llround(stall * static_cast<double>(interval))));
      if (a < 0.05) short_idle = 0;  // a checkpoint: one long gap
      s.gaps = IdleGaps{interval, idle, short_idle};
    }
    double mem = held ? held->mem_ratio * static_cast<double>(d.memory_mib) : 450.0;
    s.fb_used_mib = std::round(mem);
    double tdp = d.model == "NVIDIA L40S" ? 350.0 : d.model == "NVIDIA A100-SXM4-80GB" ? 400.0 : 700.0;
    if (!d.is_mig()) s.power_watts = std::round((70.0 + a * (tdp - 70.0)) * 10.0) / 10.0;
    return s;
  }

  std::vector<Batch> Advance(int64_t until, int64_t span) {
    std::vector<Batch> out;
    until = std::min(until, end);
    for (int64_t h = FloorTo(cursor, span); h + span <= until; h += span) {
      ++spans_sent;
      for (size_t n = 0; n < nodes.size(); ++n) out.push_back(NodeSpan(n, h, h + span, spans_sent));
      cursor = h + span;
    }
    return out;
  }

  // Whether the job's first device is on `node`: that node's agent reports the job's own
  // figures (engine scrapes, training progress), once for the whole job.
  // Returns that device's index, or none.
  std::optional<size_t> FirstDeviceOn(const SimJob& j, const Node& node) const {
    if (j.d.devices.empty()) return std::nullopt;
    for (size_t d : node.devices) {
      if (devices[d].uuid == j.d.devices.front()) return d;
    }
    return std::nullopt;
  }

  // Node `node_no`'s batch for [h, h_end), the `seq`th it sends. Its id is an agent's
  // (docs/agent.md): the node, the run (the span's start, seed and sample interval, in
  // place of the agent's start time) and the sequence, so that the store folds a node's
  // older ids into one run as it does an agent's (store/batch_ids.h).
  Batch NodeSpan(size_t node_no, int64_t h, int64_t h_end, int64_t seq) const {
    const Node& node = nodes[node_no];
    Batch b;
    b.batch_id = fmt::format("{}-{:x}.{}.{}-{}", node.name, opt.start_ms, opt.seed, opt.sample_interval_ms / 1000, seq);
    b.source = node.name;
    std::map<size_t, bool> jobs_here;
    for (size_t d : node.devices) {
      b.devices.push_back(devices[d]);
      for (const Tenancy& x : tenancies[d]) {
        bool opens = x.from_ms >= h && x.from_ms < h_end;
        bool closes = x.to_ms >= h && x.to_ms < h_end && x.to_ms < end;
        if (!opens && !closes) continue;
        Allocation a{devices[d].uuid, jobs[x.job].d.job.id, x.from_ms, std::nullopt};
        if (closes) a.to_ms = x.to_ms;
        b.allocations.push_back(a);
        jobs_here[x.job] = true;
      }
    }
    for (const auto& [j, unused] : jobs_here) {
      b.jobs.push_back(jobs[j].d.job);
      // What an agent knows by then: a job still running has no end yet.
      if (b.jobs.back().end_ms && *b.jobs.back().end_ms >= h_end) b.jobs.back().end_ms.reset();
    }
    // Serving deployments' agents scrape their vLLM engine every minute: the minutes
    // that end in (h, h_end], so that a span shorter than a minute (the live feed's)
    // carries the scrape of the minute it ends, and every minute is scraped once.
    for (size_t k = 0; k < jobs.size(); ++k) {
      const SimJob& j = jobs[k];
      std::optional<size_t> first = j.pattern == Pattern::kServing ? FirstDeviceOn(j, node) : std::nullopt;
      if (!first) continue;
      for (int64_t t = FloorTo(h, kMsPerMinute) + kMsPerMinute; t <= h_end; t += kMsPerMinute) {
        if (t <= j.d.from_ms || t > std::min(j.d.to_ms, end)) continue;
        const SimJob* held = nullptr;
        double a = Activity(*first, t, &held);
        ServingSnapshot v;
        v.job_id = j.d.job.id;
        v.t_ms = t;
        v.engine = "vllm";
        std::string_view name = std::string_view(j.d.job.id).substr(prefix.size());
        v.model = std::string(name.substr(0, name.rfind('-')));
        v.requests_waiting = std::round(std::max(0.0, (a - 0.75) * 60.0));
        v.requests_running = std::round(a * 48.0);
        v.kv_cache_usage_ratio = std::min(0.99, std::round(a * 105.0) / 100.0);
        // Counters since the deployment started: its average rate times its age.
        double seconds = static_cast<double>(t - j.d.from_ms) / 1000.0;
        double rate = 2500.0 * j.base * static_cast<double>(j.d.devices.size());
        v.prompt_tokens_total = std::round(seconds * rate * 0.7);
        v.generation_tokens_total = std::round(seconds * rate * 0.3);
        v.preemptions_total = std::floor(seconds / 3600.0 * (j.base > 0.7 ? 4.0 : 0.0));
        double steps = seconds * 20.0;
        v.iteration_tokens = {{16, 64, 256, 1024, INFINITY},
                              {steps * 0.2, steps * 0.5, steps * 0.85, steps, steps},
                              steps * rate / 20.0 / 2.0, steps};
        b.serving.push_back(std::move(v));
      }
    }
    // Training jobs report the tokens they trained, from the node that holds their first
    // GPU: every ten minutes, what their GPUs' busy time at their efficiency amounts to.
    for (size_t k = 0; k < jobs.size(); ++k) {
      const SimJob& j = jobs[k];
      std::optional<size_t> first = j.pattern == Pattern::kTraining ? FirstDeviceOn(j, node) : std::nullopt;
      if (!first) continue;
      double per_token = 6.0 * *j.d.job.model_parameters +
                         12.0 * static_cast<double>(j.d.job.model_layers * j.d.job.model_hidden *
                                                    j.d.job.model_sequence);
      const int64_t step = 10 * kMsPerMinute;
      for (int64_t t = FloorTo(h, step) + step; t <= h_end; t += step) {
        if (t <= j.d.from_ms || t - step < j.d.from_ms || t > std::min(j.d.to_ms, end)) continue;
        // Sampled as the agent samples, or every ten minutes when it samples less often
        // (without a sample in the step its mean would be 0/0).
        const int64_t every = std::min(opt.sample_interval_ms, step);
        double busy = 0;
        for (int64_t x = t - step + every; x <= t; x += every) {
          const SimJob* held = nullptr;
          busy += Activity(*first, x, &held);
        }
        busy /= static_cast<double>(step / every);
        double flops = busy * j.mfu_when_busy * 989.4e12 * static_cast<double>(j.d.devices.size()) *
                       static_cast<double>(step) / 1000.0;
        b.progress.push_back(Progress{j.d.job.id, t, step, std::round(flops / per_token), std::nullopt});
      }
    }
    // Samples at h (first span only, as the baseline), then every interval up to h_end.
    int64_t first = h == opt.start_ms ? h : h + opt.sample_interval_ms;
    for (int64_t t = first; t <= h_end; t += opt.sample_interval_ms) {
      if (node_no == outage_node && outage.Contains(t)) continue;
      for (size_t d : node.devices) b.samples.push_back(MakeSample(d, t));
    }
    return b;
  }
};

int64_t DefaultStart(int64_t now_ms, int64_t duration_ms) {
  // 1970-01-01 was a Thursday: Mondays are 4 days after multiples of a week.
  const int64_t kWeek = 7 * kMsPerDay;
  int64_t this_monday = FloorTo(now_ms - 4 * kMsPerDay, kWeek) + 4 * kMsPerDay;
  int64_t weeks = (duration_ms + kWeek - 1) / kWeek;
  return this_monday - weeks * kWeek;
}

struct DemoFleet::Impl {
  std::vector<std::unique_ptr<Cluster>> clusters;
  std::vector<Device> devices;
  std::vector<DemoJob> jobs;
};

DemoFleet::DemoFleet(const DemoOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->clusters.push_back(std::make_unique<Cluster>(options, ""));
  int64_t per_cluster = 0;
  for (const Device& d : impl_->clusters[0]->devices) per_cluster += d.is_mig() ? 0 : 1;
  int64_t copies = options.gpus <= per_cluster ? 1 : (options.gpus + per_cluster - 1) / per_cluster;
  for (int64_t k = 1; k < copies; ++k) {
    DemoOptions o = options;
    o.seed = options.seed + static_cast<uint64_t>(k);
    impl_->clusters.push_back(std::make_unique<Cluster>(o, fmt::format("c{}-", k + 1)));
  }
  for (const auto& c : impl_->clusters) {
    impl_->devices.insert(impl_->devices.end(), c->devices.begin(), c->devices.end());
    impl_->jobs.insert(impl_->jobs.end(), c->public_jobs.begin(), c->public_jobs.end());
  }
}
DemoFleet::~DemoFleet() = default;

Goals DemoFleet::FleetGoals() const {
  Goals g;
  g.fleet_target = 0.6;
  g.pool_targets = {{"serving", 0.4}, {"dev", 0.3}};
  // About a month of each team's demo spend, some above it and some below.
  for (auto [team, budget] : {std::pair{"nlp", "90000.00"}, {"vision", "50000.00"},
                              {"speech", "80000.00"}, {"recsys", "100000.00"},
                              {"platform", "10000.00"}}) {
    g.monthly_budgets[team] = Money::Parse(budget).value();
  }
  return g;
}

PriceBook DemoFleet::Prices() const {
  auto entry = [](const char* model, const char* price, CapacityType type) {
    return PriceEntry{model, "*", type, Money::Parse(price).value(), {0, kForever}};
  };
  return PriceBook::Create({
                               entry("NVIDIA H100 80GB HBM3", "2.49", CapacityType::kReserved),
                               entry("NVIDIA L40S", "1.10", CapacityType::kOnDemand),
                               entry("NVIDIA A100-SXM4-80GB", "1.29", CapacityType::kReserved),
                               entry("NVIDIA H200", "3.20", CapacityType::kReserved),
                           })
      .value();
}

const std::vector<Device>& DemoFleet::devices() const { return impl_->devices; }
const std::vector<DemoJob>& DemoFleet::jobs() const { return impl_->jobs; }
std::vector<Batch> DemoFleet::Advance(int64_t until_ms, int64_t span_ms) {
  std::vector<Batch> out = impl_->clusters[0]->Advance(until_ms, span_ms);
  for (size_t k = 1; k < impl_->clusters.size(); ++k) {
    std::vector<Batch> more = impl_->clusters[k]->Advance(until_ms, span_ms);
    out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  return out;
}
int64_t DemoFleet::cursor_ms() const { return impl_->clusters[0]->cursor; }
int64_t DemoFleet::end_ms() const { return impl_->clusters[0]->end; }
int DemoFleet::clusters() const { return static_cast<int>(impl_->clusters.size()); }

}  // namespace gpuledger::demo
