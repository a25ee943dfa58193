#include "agent/metrics_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <charconv>
#include <thread>

#include <fmt/format.h>

namespace gpuledger::agent {

Result<std::pair<std::string, int>> ParseListenAddress(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos) return InvalidArgument(fmt::format("listen address \"{}\": want host:port", text));
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "0.0.0.0";
  int port = -1;
  std::string_view p = std::string_view(text).substr(colon + 1);
  auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || ptr != p.data() + p.size() || port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("listen address \"{}\": port must be 0..65535", text));
  }
  return std::make_pair(host, port);
}

struct MetricsServer::Impl {
  httplib::Server server;
  std::thread thread;
  int port = 0;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() { Stop(); }

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen_address, Provider provider) {
  GPULEDGER_ASSIGN_OR_RETURN(auto hp, ParseListenAddress(listen_address));
  auto impl = std::make_unique<Impl>();
  impl->server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  impl->server.set_tcp_nodelay(true);
  // httplib's default also sets SO_REUSEPORT, which would let a second agent share the
  // port silently (and Prometheus scrape either at random); keep only SO_REUSEADDR.
  impl->server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  impl->server.Get("/metrics", [provider](const httplib::Request&, httplib::Response& res) {
    std::shared_ptr<const std::string> body = provider();
    if (!body) {
      res.status = 503;
      res.set_content("no collection yet\n", "text/plain");
      return;
    }
    // The shared_ptr keeps the text alive while httplib writes it.
    res.set_content_provider(
        body->size(), "text/plain; version=0.0.4; charset=utf-8",
        [body](size_t offset, size_t length, httplib::DataSink& sink) {
          return sink.write(body->data() + offset, length);
        });
  });
  impl->server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  int port = hp.second;
  if (port == 0) {
    port = impl->server.bind_to_any_port(hp.first);
    if (port <= 0) return Unavailable(fmt::format("/metrics: cannot listen on {}", listen_address));
  } else if (!impl->server.bind_to_port(hp.first, port)) {
    return Unavailable(fmt::format("/metrics: cannot listen on {}", listen_address));
  }
  impl->port = port;
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->server.listen_after_bind(); });
  // httplib's stop() before its loop runs would be lost; wait until it listens.
  for (int i = 0; i < 2'000 && !raw->server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

int MetricsServer::port() const { return impl_->port; }

void MetricsServer::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->server.stop();
  impl_->thread.join();
}

}  // namespace gpuledger::agent
