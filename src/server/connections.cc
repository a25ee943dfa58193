#include "server/connections.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace gpuledger::server {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The address and port of a socket address, or port -1 when it is not IP.
std::pair<std::string, int> AddressOf(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    return {text, ntohs(v4->sin_port)};
  }
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return {text, ntohs(v6->sin6_port)};
  }
  return {"", -1};
}

// The peer of `fd` when it is a socket connected to our `port`; port -1 otherwise.
std::pair<std::string, int> PeerOf(int fd, int port) {
  sockaddr_storage local{}, peer{};
  socklen_t len = sizeof local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return {"", -1};
  if (AddressOf(local).second != port) return {"", -1};
  len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return {"", -1};  // the listener
  return AddressOf(peer);
}

// The process's sockets connected to `port`, as (fd, peer).
std::vector<std::pair<int, std::pair<std::string, int>>> ConnectionsTo(int port) {
  std::vector<std::pair<int, std::pair<std::string, int>>> out;
#ifdef __linux__
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  int own = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    auto peer = PeerOf(static_cast<int>(fd), port);
    if (peer.second >= 0) out.push_back({static_cast<int>(fd), std::move(peer)});
  }
  closedir(dir);
#else
  (void)port;
#endif
  return out;
}

}  // namespace

ElasticPool::ElasticPool(size_t min_threads, size_t max_threads) : max_threads_(std::max(min_threads, max_threads)) {
  MutexLock lock(mu_);
  for (size_t i = 0; i < std::max<size_t>(min_threads, 1); ++i) threads_.emplace_back([this] { Work(); });
}

ElasticPool::~ElasticPool() { shutdown(); }

void ElasticPool::enqueue(std::function<void()> fn) {
  MutexLock lock(mu_);
  queue_.push_back(std::move(fn));
  if (idle_ < queue_.size() && threads_.size() < max_threads_) threads_.emplace_back([this] { Work(); });
  cv_.NotifyOne();
}

void ElasticPool::shutdown() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.NotifyAll();
  for (std::thread& t : threads) t.join();
}

size_t ElasticPool::threads() const {
  MutexLock lock(mu_);
  return threads_.size();
}

void ElasticPool::Work() {
  for (;;) {
    std::function<void()> fn;
    {
      MutexLock lock(mu_);
      ++idle_;
      cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopping, and nothing left to run
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

ConnectionGuard::ConnectionGuard(int port, Options options) : port_(port), options_(options) {}

ConnectionGuard::~ConnectionGuard() { Stop(); }

void ConnectionGuard::Start() {
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void ConnectionGuard::Stop() {
  if (!started_) return;
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
  started_ = false;
}

void ConnectionGuard::RequestStarted(const std::string& addr, int port) {
  MutexLock lock(mu_);
  in_request_[{addr, port}] = true;
}

void ConnectionGuard::RequestDone(const std::string& addr, int port) {
  int64_t now = SteadyMs();
  MutexLock lock(mu_);
  in_request_[{addr, port}] = false;
  done_at_[{addr, port}] = now;
}

int64_t ConnectionGuard::shut_slow() const {
  MutexLock lock(mu_);
  return shut_slow_;
}

int64_t ConnectionGuard::shut_excess() const {
  MutexLock lock(mu_);
  return shut_excess_;
}

void ConnectionGuard::Loop() {
  for (;;) {
    {
      MutexLock lock(mu_);
      if (cv_.WaitFor(mu_, std::chrono::milliseconds(options_.tick_ms),
                      [this]() REQUIRES(mu_) { return stopping_; })) {
        return;
      }
    }
    Tick(SteadyMs());
  }
}

void ConnectionGuard::Tick(int64_t now_ms) {
  auto live = ConnectionsTo(port_);
  std::vector<std::pair<int, Peer>> to_shut;
  {
    MutexLock lock(mu_);
    std::map<std::pair<int, Peer>, Tracked> next;
    std::set<Peer> peers;
    for (auto& [fd, peer] : live) {
      auto key = std::pair{fd, peer};
      auto it = tracked_.find(key);
      Tracked t = it == tracked_.end() ? Tracked{now_ms, false} : it->second;
      auto r = in_request_.find(peer);
      t.in_request = r != in_request_.end() && r->second;
      if (auto d = done_at_.find(peer); d != done_at_.end()) t.since_ms = std::max(t.since_ms, d->second);
      next.emplace(key, t);
      peers.insert(peer);
    }
    tracked_ = std::move(next);
    std::erase_if(in_request_, [&](const auto& e) { return !peers.count(e.first); });
    std::erase_if(done_at_, [&](const auto& e) { return !peers.count(e.first); });

    // Slow: no whole request head within the timeout.
    std::map<std::string, std::vector<std::pair<int64_t, std::pair<int, Peer>>>> waiting_by_address;
    std::map<std::string, size_t> count_by_address;
    for (const auto& [key, t] : tracked_) {
      ++count_by_address[key.second.first];
      if (t.in_request) continue;
      if (now_ms - t.since_ms > options_.header_timeout_ms) {
        to_shut.push_back(key);
        ++shut_slow_;
      } else {
        waiting_by_address[key.second.first].push_back({t.since_ms, key});
      }
    }
    // Too many: the newest of an address's connections waiting for a request, beyond its cap.
    for (auto& [addr, waiting] : waiting_by_address) {
      size_t total = count_by_address[addr];
      std::sort(waiting.begin(), waiting.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      for (const auto& [since, key] : waiting) {
        if (total <= options_.max_per_address) break;
        to_shut.push_back(key);
        ++shut_excess_;
        --total;
      }
    }
    for (const auto& key : to_shut) tracked_.erase(key);
  }
  // The fd is checked again just before: a closed and reused fd is another peer.
  for (const auto& [fd, peer] : to_shut) {
    if (PeerOf(fd, port_) == peer) ::shutdown(fd, SHUT_RDWR);
  }
}

}  // namespace gpuledger::server
