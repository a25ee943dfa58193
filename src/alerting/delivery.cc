#include "alerting/delivery.h"

#include <algorithm>
#include <chrono>

namespace gpuledger::alerting {

DeliveryQueue::DeliveryQueue(std::unique_ptr<Sink> sink, DeliveryOptions options)
    : sink_(std::move(sink)), name_(sink_->name()), options_(options), worker_([this] { Run(); }) {}

DeliveryQueue::~DeliveryQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void DeliveryQueue::Enqueue(std::vector<Alert> alerts, DeliveryDone done) {
  if (alerts.empty()) return;
  DeliveryDone dropped;
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= options_.max_queued) {
      dropped = std::move(queue_.front().done);
      queue_.pop_front();
      ++counters_.dropped_total;
    }
    queue_.push_back(Batch{std::move(alerts), std::move(done)});
  }
  cv_.notify_all();
  if (dropped) dropped(DeliveryReport{.sink = name_, .error = "dropped unsent: the delivery queue was full"});
}

DeliveryCounters DeliveryQueue::counters() const {
  std::lock_guard lock(mu_);
  DeliveryCounters c = counters_;
  c.queued = static_cast<int64_t>(queue_.size()) + (in_flight_ ? 1 : 0);
  return c;
}

bool DeliveryQueue::WaitIdle(int64_t timeout_ms) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return queue_.empty() && !in_flight_; });
}

void DeliveryQueue::Run() {
  using Steady = std::chrono::steady_clock;
  Steady::time_point next_send = Steady::now();
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::vector<Alert> batch = std::move(queue_.front().alerts);
    DeliveryDone done = std::move(queue_.front().done);
    queue_.pop_front();
    in_flight_ = true;
    DeliveryReport report{.sink = name_};
    int64_t backoff_ms = options_.initial_backoff_ms;
    for (int attempt = 1;; ++attempt) {
      // Keep the sink's interval, and the wait a failure asked for; a stop ends the wait.
      if (cv_.wait_until(lock, next_send, [&] { return stop_; })) return;
      lock.unlock();
      Attempt result = sink_->Send(batch);
      lock.lock();
      report.attempts = attempt;
      next_send = Steady::now() + std::chrono::milliseconds(sink_->min_interval_ms());
      if (result.status.ok()) {
        ++counters_.sent_total;
        counters_.alerts_sent_total += static_cast<int64_t>(batch.size());
        report.delivered = true;
        break;
      }
      ++counters_.failed_attempts_total;
      counters_.last_error = result.status.message();
      report.error = result.status.message();
      if (!result.retryable || attempt >= options_.max_attempts) {
        ++counters_.given_up_total;
        break;
      }
      int64_t wait_ms = result.retry_after_ms > 0 ? result.retry_after_ms : backoff_ms;
      next_send = std::max(next_send, Steady::now() + std::chrono::milliseconds(wait_ms));
      backoff_ms = std::min(options_.max_backoff_ms, backoff_ms * 2);
    }
    if (done) {
      // Before the queue reads idle, so that WaitIdle's caller sees the callback's effect.
      lock.unlock();
      done(report);
      lock.lock();
    }
    in_flight_ = false;
    cv_.notify_all();
  }
}

}  // namespace gpuledger::alerting
