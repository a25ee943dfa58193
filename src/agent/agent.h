// The node agent: polls the collector every interval, attributes each process to a
// job, keeps the exposition of the last complete collection for /metrics, and every
// push interval closes a v1 batch into the on-disk spool and drains the spool to the
// server. Collection, pushing and scraping run on their own threads, so a wedged NVML
// call delays only telemetry: scrapes answer from the last snapshot, and missed
// collection cycles are skipped (counted), never queued.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "agent/agent_config.h"
#include "agent/attribution.h"
#include "agent/batch_assembler.h"
#include "agent/exporter.h"
#include "agent/metrics_server.h"
#include "agent/push.h"
#include "agent/slurm.h"
#include "agent/spool.h"
#include "core/status.h"
#include "core/time.h"
#include "nvml/collector.h"
#include "nvml/nvml_api.h"

namespace gpuledger::agent {

// What the agent reads the world through. Pointers, not owned; all must outlive it.
struct AgentEnv {
  const nvml::NvmlLibrary* nvml = nullptr;  // required
  const Clock* clock = nullptr;             // required; stamps samples and paces backoff
  BatchSink* sink = nullptr;                // null: batches stay in the spool
  SlurmResolver* slurm = nullptr;           // null: Slurm job ids are not enriched
};

class Agent {
 public:
  // Enumerates the devices, opens the spool (resuming what a previous run left) and
  // the allocation state. REQUIRES: FinishAgentConfig(config) passed.
  static Result<std::unique_ptr<Agent>> Create(const AgentConfig& config, AgentEnv env);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // One collection: NVML, attribution, the pending batch and the exposition. Called
  // by the collection thread, or by tests that drive time themselves (not both).
  void CollectOnce();
  // Closes the pending batch (if any) into the spool. Push-side: one caller at a time.
  Status FlushBatch();
  // Sends spooled batches, oldest first, unless backing off. Returns how many the
  // server took. Push-side: one caller at a time.
  int64_t PushOnce();

  // The exposition of the last complete collection (rendered once per collection, on
  // the first scrape after it); null before the first collection. Thread-safe, and it
  // never waits for a collection in progress.
  std::shared_ptr<const std::string> MetricsText() const;

  // Starts /metrics (when listen_address is set), the collection thread and the push
  // thread. Fails naming the address when /metrics cannot listen.
  Status Start();
  // Stops the threads, closes the pending batch into the spool and tries one last
  // push. Open allocations stay open in the state file for the next run. Idempotent.
  void Stop();

  int metrics_port() const { return server_ ? server_->port() : 0; }
  AgentCounters counters() const;
  const std::vector<nvml::DeviceInfo>& devices() const { return *devices_; }
  // The pusher (null without a sink). Unsynchronized: for tests that drive the agent
  // from one thread (CollectOnce/FlushBatch/PushOnce), never while Start()ed.
  const Pusher* pusher() const NO_THREAD_SAFETY_ANALYSIS { return pusher_.get(); }
  // Batches waiting in the spool. Thread-safe.
  size_t spool_batches() const;

 private:
  struct Published;
  Agent(AgentConfig config, AgentEnv env) : config_(std::move(config)), env_(env) {}
  void CollectionLoop();
  void PushLoop();

  AgentConfig config_;
  AgentEnv env_;
  std::unique_ptr<nvml::Collector> collector_;
  std::shared_ptr<const std::vector<nvml::DeviceInfo>> devices_;
  std::unique_ptr<kube::PodDirectory> pods_;  // collection side only; null off Kubernetes
  std::unique_ptr<Attributor> attributor_;    // collection side only
  std::vector<GapTotals> gap_totals_;       // collection side only
  int64_t last_t_ms_ = 0;                   // collection side only
  std::string last_refresh_error_;          // collection side only

  mutable Mutex mu_;
  std::unique_ptr<BatchAssembler> assembler_ GUARDED_BY(mu_);
  AgentCounters counters_ GUARDED_BY(mu_);
  std::shared_ptr<const Published> published_ GUARDED_BY(mu_);

  mutable Mutex spool_mu_;
  std::unique_ptr<Spool> spool_ GUARDED_BY(spool_mu_);
  std::unique_ptr<Pusher> pusher_ GUARDED_BY(spool_mu_);  // null without a sink

  std::unique_ptr<MetricsServer> server_;
  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::thread collect_thread_;
  std::thread push_thread_;
};

}  // namespace gpuledger::agent
