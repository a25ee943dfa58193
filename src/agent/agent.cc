#include "agent/agent.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>

#include <sys/stat.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kube/api_client.h"
#include "wire/batch.h"

namespace gpuledger::agent {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The pod directory [agent.kubernetes] asks for, or null when Kubernetes is off (not
// enabled, or left to auto and the kubelet's socket is not there).
Result<std::unique_ptr<kube::PodDirectory>> KubernetesDirectory(const KubernetesConfig& k) {
  struct stat st {};
  bool socket_there = ::stat(k.pod_resources_socket.c_str(), &st) == 0;
  if (!k.enabled.value_or(socket_there)) return std::unique_ptr<kube::PodDirectory>();
  kube::PodDirectory::Options o;
  o.socket_path = k.pod_resources_socket;
  o.rules = k.rules;
  o.stale_after_ms = k.stale_after_ms;
  std::string url = k.api_server.empty() ? kube::InClusterApiUrl() : k.api_server;
  if (!url.empty() && url != "none") o.api = kube::ApiServerOptions{url, k.token_file, k.ca_file};
  spdlog::info("agent: Kubernetes: pod resources from {}, metadata from {}", o.socket_path,
               o.api ? o.api->url : "the kubelet only (no API server)");
  auto dir = kube::PodDirectory::Create(std::move(o));
  if (!dir.ok()) return dir.status().WithContext("agent.kubernetes");
  return dir;
}

}  // namespace

struct Agent::Published {
  ExportState state;
  mutable std::once_flag rendered;
  mutable std::shared_ptr<const std::string> text;
};

Result<std::unique_ptr<Agent>> Agent::Create(const AgentConfig& config, AgentEnv env) {
  if (env.nvml == nullptr || env.clock == nullptr) return InvalidArgument("agent: NVML and a clock are required");
  std::unique_ptr<Agent> a(new Agent(config, env));
  auto collector = nvml::Collector::Create(*env.nvml, *env.clock);
  if (!collector.ok()) return collector.status().WithContext("agent: NVML");
  a->collector_ = std::move(collector).value();
  for (const nvml::NvmlError& e : a->collector_->enumeration_failures()) {
    spdlog::warn("agent: a device was left out at enumeration: {}", e.ToString());
  }
  a->devices_ = std::make_shared<const std::vector<nvml::DeviceInfo>>(a->collector_->devices());
  a->gap_totals_.resize(a->devices_->size());
  GPULEDGER_ASSIGN_OR_RETURN(a->pods_, KubernetesDirectory(config.kubernetes));
  a->attributor_ = std::make_unique<Attributor>(
      Attributor::Options{config.proc_root, config.mapping_file, config.hpc_job_mapping_dir}, env.slurm,
      a->pods_.get());

  // Nothing shares the agent yet; the locks are taken for the analysis' sake (and cost
  // nothing uncontended).
  MutexLock spool_lock(a->spool_mu_);
  MutexLock lock(a->mu_);
  GPULEDGER_ASSIGN_OR_RETURN(a->spool_, Spool::Open(config.spool_dir, config.spool_max_bytes));
  a->spool_->set_drop_callback([](const std::string& line) { spdlog::error("agent: {}", line); });
  if (a->spool_->size() > 0) {
    spdlog::info("agent: resuming {} spooled batches ({} bytes) from {}", a->spool_->size(), a->spool_->bytes(),
                 config.spool_dir);
  }
  if (env.sink != nullptr) a->pusher_ = std::make_unique<Pusher>(*a->spool_, *env.sink, *env.clock);

  std::vector<Device> inventory = nvml::ToDevices(*a->devices_, config.node, config.interval_ms);
  for (Device& d : inventory) {
    d.pool = config.pool;
    d.capacity_type = config.capacity_type;
  }
  AssemblerOptions ao;
  ao.node = config.node;
  ao.instance = fmt::format("{:x}", env.clock->NowMs());
  ao.state_file = config.spool_dir + "/open_allocations.tsv";
  auto assembler = BatchAssembler::Create(ao, std::move(inventory));
  if (!assembler.ok()) return assembler.status().WithContext("agent");
  a->assembler_ = std::make_unique<BatchAssembler>(std::move(assembler).value());
  return a;
}

Agent::~Agent() { Stop(); }

void Agent::CollectOnce() {
  double cpu0 = ThreadCpuSeconds();
  nvml::Snapshot snap = collector_->Collect();
  const std::vector<nvml::DeviceInfo>& infos = *devices_;

  if (Status st = attributor_->Refresh(snap.t_ms); !st.ok()) {
    if (st.message() != last_refresh_error_) spdlog::error("agent: attribution: {}", st.message());
    last_refresh_error_ = st.message();
  } else {
    last_refresh_error_.clear();
  }

  std::vector<Sample> samples = nvml::ToSamples(snap);
  std::vector<Holding> holdings;
  std::vector<ProcessView> views;
  std::unordered_set<uint32_t> alive;
  std::vector<std::optional<DevicePod>> device_pods(infos.size());
  int64_t nvml_errors = 0;
  for (size_t i = 0; i < snap.devices.size() && i < infos.size(); ++i) {
    const nvml::DeviceSnapshot& d = snap.devices[i];
    const nvml::DeviceInfo& info = infos[i];
    nvml_errors += static_cast<int64_t>(d.failures.size());
    if (d.gaps) gap_totals_[i].Add(*d.gaps);
    DeviceRef ref{info.uuid, info.gpu_index, std::nullopt};
    if (info.is_mig()) {
      ref.gpu_instance_id = info.gpu_instance_id;
      ref.parent_uuid = info.parent_uuid;
    }
    if (std::vector<const kube::PodHolder*> pods = attributor_->PodHolders(ref); !pods.empty()) {
      bool one_pod = std::all_of(pods.begin(), pods.end(), [&](const kube::PodHolder* h) {
        return h->ns == pods[0]->ns && h->pod == pods[0]->pod && h->container == pods[0]->container;
      });
      if (one_pod) device_pods[i] = DevicePod{pods[0]->pod, pods[0]->ns, pods[0]->container};
    }
    for (size_t k = 0; k < d.processes.size(); ++k) {
      const nvml::ProcessSnapshot& p = d.processes[k];
      alive.insert(p.pid);
      Attribution a = attributor_->ForProcess(p.pid, ref);
      if (k < samples[i].processes.size()) samples[i].processes[k].job_id = a.job.id;
      views.push_back({d.uuid, p.pid, a.job.id, std::string(AttributionSourceName(a.source))});
      if (a.attributed()) holdings.push_back({d.uuid, std::move(a.job)});
    }
    for (Attribution& h : attributor_->DeviceHolders(ref)) holdings.push_back({d.uuid, std::move(h.job)});
  }
  attributor_->EndCycle(alive);

  auto published = std::make_shared<Published>();
  published->state.node = config_.node;
  published->state.devices = devices_;
  published->state.processes = std::move(views);
  published->state.gap_totals = gap_totals_;
  published->state.label_names = config_.exposition_labels;
  published->state.device_pods = std::move(device_pods);
  if (pods_) published->state.kubernetes = pods_->status();
  int64_t t = snap.t_ms;
  int64_t span_start = last_t_ms_ > 0 ? last_t_ms_ : t - std::max<int64_t>(snap.interval_ms, 1);
  bool time_moved = t > last_t_ms_;
  if (time_moved) last_t_ms_ = t;
  double cpu = ThreadCpuSeconds() - cpu0;

  MutexLock lock(mu_);
  if (time_moved) {
    assembler_->Add(t, span_start, std::move(samples), holdings);
  } else {
    spdlog::warn("agent: the clock did not move forward ({} ms after {} ms); collection not batched", t, last_t_ms_);
  }
  counters_.collections += 1;
  counters_.collection_cpu_seconds += cpu;
  counters_.nvml_errors += nvml_errors;
  counters_.samples_dropped = assembler_->samples_dropped();
  counters_.open_allocations = static_cast<int64_t>(assembler_->open_allocations());
  published->state.counters = counters_;
  published->state.snapshot = std::move(snap);
  published_ = std::move(published);
}

std::shared_ptr<const std::string> Agent::MetricsText() const {
  std::shared_ptr<const Published> p;
  {
    MutexLock lock(mu_);
    p = published_;
  }
  if (!p) return nullptr;
  std::call_once(p->rendered, [&] { p->text = std::make_shared<const std::string>(RenderMetrics(p->state)); });
  return p->text;
}

Status Agent::FlushBatch() {
  std::optional<Batch> batch;
  {
    MutexLock lock(mu_);
    batch = assembler_->Take();
    if (Status st = assembler_->SaveState(); !st.ok()) spdlog::error("agent: {}", st.message());
  }
  if (!batch) return Status::Ok();
  std::string doc = wire::WriteBatch(*batch);
  MutexLock lock(spool_mu_);
  Status st = spool_->Append(doc);
  if (!st.ok()) return st.WithContext(fmt::format("batch {}", batch->batch_id));
  MutexLock lock2(mu_);
  counters_.spool_bytes = spool_->bytes();
  counters_.spool_batches = spool_->size();
  counters_.spool_dropped_batches = static_cast<int64_t>(spool_->dropped_batches());
  return Status::Ok();
}

int64_t Agent::PushOnce() {
  MutexLock lock(spool_mu_);
  if (!pusher_) return 0;
  int64_t sent = pusher_->Drain();
  MutexLock lock2(mu_);
  const PushStats& s = pusher_->stats();
  counters_.pushed_batches = s.sent;
  counters_.push_failures = s.failures;
  counters_.rejected_batches = s.rejected;
  counters_.spool_bytes = spool_->bytes();
  counters_.spool_batches = spool_->size();
  if (env_.slurm != nullptr) {
    if (auto* sc = dynamic_cast<ScontrolResolver*>(env_.slurm)) counters_.slurm_queries = sc->queries();
  }
  return sent;
}

AgentCounters Agent::counters() const {
  MutexLock lock(mu_);
  return counters_;
}

size_t Agent::spool_batches() const {
  MutexLock lock(spool_mu_);
  return spool_->size();
}

Status Agent::Start() {
  if (!config_.listen_address.empty()) {
    auto server = MetricsServer::Start(config_.listen_address, [this] { return MetricsText(); });
    if (!server.ok()) return server.status();
    server_ = std::move(server).value();
  }
  {
    MutexLock lock(stop_mu_);
    stopping_ = false;
  }
  collect_thread_ = std::thread([this] { CollectionLoop(); });
  push_thread_ = std::thread([this] { PushLoop(); });
  return Status::Ok();
}

void Agent::CollectionLoop() {
  using Steady = std::chrono::steady_clock;
  const auto interval = std::chrono::milliseconds(config_.interval_ms);
  auto next = Steady::now();
  for (;;) {
    CollectOnce();
    next += interval;
    auto now = Steady::now();
    if (now >= next) {
      // The collection overran: skip the ticks it covered instead of running them
      // back to back.
      auto behind = (now - next) / interval + 1;
      {
        MutexLock lock(mu_);
        counters_.cycles_skipped += behind;
      }
      next += behind * interval;
    }
    MutexLock lock(stop_mu_);
    if (stop_cv_.WaitUntil(stop_mu_, next, [this]() REQUIRES(stop_mu_) { return stopping_; })) return;
  }
}

void Agent::PushLoop() {
  using Steady = std::chrono::steady_clock;
  const auto push_interval = std::chrono::milliseconds(config_.push_interval_ms);
  const auto poll = std::min<Steady::duration>(push_interval, std::chrono::seconds(1));
  auto next_flush = Steady::now() + push_interval;
  for (;;) {
    {
      MutexLock lock(stop_mu_);
      auto wake = std::min(next_flush, Steady::now() + poll);
      if (stop_cv_.WaitUntil(stop_mu_, wake, [this]() REQUIRES(stop_mu_) { return stopping_; })) return;
    }
    auto now = Steady::now();
    if (now >= next_flush) {
      if (Status st = FlushBatch(); !st.ok()) spdlog::error("agent: {}", st.message());
      while (next_flush <= now) next_flush += push_interval;
    }
    PushOnce();
  }
}

void Agent::Stop() {
  bool was_running = collect_thread_.joinable() || push_thread_.joinable();
  {
    MutexLock lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.NotifyAll();
  if (collect_thread_.joinable()) collect_thread_.join();
  if (push_thread_.joinable()) push_thread_.join();
  if (server_) server_->Stop();
  if (was_running) {
    if (Status st = FlushBatch(); !st.ok()) spdlog::error("agent: {}", st.message());
    PushOnce();
  }
}

}  // namespace gpuledger::agent
