// An HTTP server on a free loopback port for tests that stand in for a receiver (a Slack
// webhook, an API server): the test registers its routes, the server answers on its own
// thread until destroyed. Header-only: for test binaries that link cpp-httplib.
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace gpuledger::test_env {

class LoopbackHttpServer {
 public:
  // `routes` registers the handlers on the server before it binds.
  explicit LoopbackHttpServer(const std::function<void(httplib::Server&)>& routes) {
    routes(http_);
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    // A stop() before the thread is listening would be lost (and the join hang).
    while (!http_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackHttpServer() {
    http_.stop();
    thread_.join();
  }
  LoopbackHttpServer(const LoopbackHttpServer&) = delete;
  LoopbackHttpServer& operator=(const LoopbackHttpServer&) = delete;

  // "http://127.0.0.1:PORT" followed by `path`.
  std::string url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace gpuledger::test_env
