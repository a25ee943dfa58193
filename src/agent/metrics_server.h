// The HTTP endpoint of the agent's exposition: GET /metrics answers with whatever text
// the provider returns, which must not block (the agent hands over the last complete
// snapshot). Runs its own threads; cpp-httplib stays inside the .cc file.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace gpuledger::agent {

class MetricsServer {
 public:
  using Provider = std::function<std::shared_ptr<const std::string>()>;

  // Listens on `listen_address` ("host:port"; port 0 picks a free one) and serves
  // GET /metrics from `provider` and GET /healthz. Fails naming the address when it
  // cannot bind. REQUIRES: provider is thread-safe.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& listen_address, Provider provider);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;
  // Stops listening and joins the server thread. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Splits "host:port" ("[::1]:9400", ":9400" meaning all interfaces). Fails naming the text.
Result<std::pair<std::string, int>> ParseListenAddress(const std::string& text);

}  // namespace gpuledger::agent
