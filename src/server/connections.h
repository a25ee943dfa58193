// What keeps slow or numerous clients from locking everyone out (docs/server.md,
// "Limits"). cpp-httplib 0.11 serves each connection on a thread of its task queue and
// times out only a single read (a client sending a byte every few seconds never trips
// it), and it offers no hook in its accept path. So:
//  - ElasticPool: the task queue, a pool that starts with `min_threads` and grows to
//    `max_threads` as connections arrive, so that a few slow connections do not hold
//    every thread; past the maximum, connections wait in order.
//  - ConnectionGuard: a watchdog over the server's own accepted sockets (found through
//    /proc/self/fd, Linux only; elsewhere it does nothing). A connection that has not
//    sent a whole request head within `header_timeout_ms` of its accept (or of its
//    previous request's end, while kept alive) is shut down, and so are the newest
//    connections of a client address beyond `max_per_address` that are not in a
//    request. The body's own deadline is the server's (ReadBody).
// Internal to the server library.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>

#include "core/mutex.h"

namespace gpuledger::server {

class ElasticPool : public httplib::TaskQueue {
 public:
  // REQUIRES: 1 <= min_threads <= max_threads.
  ElasticPool(size_t min_threads, size_t max_threads);
  ~ElasticPool() override;
  // Runs `fn` on an idle thread, or a new one while fewer than max_threads run.
  void enqueue(std::function<void()> fn) override;
  // Runs what was enqueued, then joins every thread. Called once, by cpp-httplib.
  void shutdown() override;
  // Threads started so far (for tests).
  size_t threads() const;

 private:
  void Work();
  const size_t max_threads_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  size_t idle_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
};

class ConnectionGuard {
 public:
  struct Options {
    int64_t header_timeout_ms = 10'000;
    size_t max_per_address = 64;
    int64_t tick_ms = 250;  // how often sockets are looked at
  };
  ConnectionGuard(int port, Options options);
  ~ConnectionGuard();  // Stop()s
  void Start();
  void Stop();
  // A request's head was read on the connection from `addr`:`port` (the pre-routing
  // handler); RequestDone: its answer was written (the logger).
  void RequestStarted(const std::string& addr, int port);
  void RequestDone(const std::string& addr, int port);
  // Connections shut down so far, for being slow and for being one too many.
  int64_t shut_slow() const;
  int64_t shut_excess() const;

 private:
  using Peer = std::pair<std::string, int>;
  struct Tracked {
    int64_t since_ms = 0;  // accept, or the end of the previous request
    bool in_request = false;
  };
  void Loop();
  void Tick(int64_t now_ms);
  const int port_;
  const Options options_;
  std::thread thread_;
  mutable Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool started_ = false;
  std::map<std::pair<int, Peer>, Tracked> tracked_ GUARDED_BY(mu_);  // by fd and peer
  std::map<Peer, bool> in_request_ GUARDED_BY(mu_);                  // from the handlers
  std::map<Peer, int64_t> done_at_ GUARDED_BY(mu_);
  int64_t shut_slow_ GUARDED_BY(mu_) = 0;
  int64_t shut_excess_ GUARDED_BY(mu_) = 0;
};

}  // namespace gpuledger::server
