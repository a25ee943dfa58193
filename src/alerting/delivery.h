// Delivery of alerts to one sink, off the evaluation's thread: a failing or slow sink
// never blocks evaluation or ingest. Each queue owns one worker thread that sends the
// batches in order, retrying a failed one with exponential backoff (or after the
// receiver's Retry-After), keeping at least the sink's minimum interval between sends,
// and dropping the oldest batch when the queue is full. Its counters feed /metrics. A
// batch may carry a callback that learns how its delivery ended (an owner's notice, whose
// outcome the audit log records).
//
// Thread-safety: Enqueue, counters and WaitIdle may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "alerting/alerts.h"
#include "alerting/sinks.h"

namespace gpuledger::alerting {

struct DeliveryOptions {
  int64_t initial_backoff_ms = kMsPerSecond;  // doubled after each failed attempt
  int64_t max_backoff_ms = kMsPerMinute;
  int max_attempts = 10;      // then the batch is given up (counted)
  size_t max_queued = 1000;   // batches waiting; past it the oldest is dropped (counted)
};

struct DeliveryCounters {
  int64_t sent_total = 0;          // batches delivered
  int64_t alerts_sent_total = 0;   // alerts in them
  int64_t failed_attempts_total = 0;
  int64_t given_up_total = 0;      // batches dropped after max_attempts or a refusal
  int64_t dropped_total = 0;       // batches dropped because the queue was full
  int64_t queued = 0;              // batches waiting now (with the one in flight)
  std::string last_error;
};

// How one batch's delivery ended: delivered, given up, or dropped unsent.
struct DeliveryReport {
  std::string sink;  // the sink's name ("slack:platform")
  bool delivered = false;
  int attempts = 0;   // 0: never sent (dropped from a full queue)
  std::string error;  // the last failure, when not delivered
};
// Called once per batch that ends, on the queue's worker thread (or Enqueue's caller's, for
// a batch dropped from a full queue), with no lock of the queue held. Not called for what
// is still queued or in flight when the queue is destroyed.
using DeliveryDone = std::function<void(const DeliveryReport&)>;

class DeliveryQueue {
 public:
  DeliveryQueue(std::unique_ptr<Sink> sink, DeliveryOptions options = {});
  ~DeliveryQueue();  // stops the worker; what is still queued is not sent
  DeliveryQueue(const DeliveryQueue&) = delete;
  DeliveryQueue& operator=(const DeliveryQueue&) = delete;

  // Queues `alerts` (ignored when empty), with `done` to call when their delivery ends.
  // Never blocks on the sink.
  void Enqueue(std::vector<Alert> alerts, DeliveryDone done = nullptr);
  DeliveryCounters counters() const;
  const std::string& name() const { return name_; }
  // Waits until nothing is queued or in flight, at most `timeout_ms`; true when idle.
  bool WaitIdle(int64_t timeout_ms);

 private:
  void Run();

  std::unique_ptr<Sink> sink_;
  std::string name_;
  DeliveryOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Batch {
    std::vector<Alert> alerts;
    DeliveryDone done;
  };
  std::deque<Batch> queue_;  // GUARDED_BY(mu_)
  bool in_flight_ = false;                // GUARDED_BY(mu_)
  bool stop_ = false;                     // GUARDED_BY(mu_)
  DeliveryCounters counters_;             // GUARDED_BY(mu_)
  std::thread worker_;
};

}  // namespace gpuledger::alerting
