#include "agent/push.h"

#include <httplib.h>

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpuledger::agent {
namespace {

class HttpBatchSink final : public BatchSink {
 public:
  HttpBatchSink(std::string base, std::string token, int64_t timeout_ms)
      : base_(std::move(base)), client_(base_), token_(std::move(token)) {
    auto sec = static_cast<time_t>(timeout_ms / 1000);
    auto usec = static_cast<time_t>((timeout_ms % 1000) * 1000);
    client_.set_connection_timeout(sec, usec);
    client_.set_read_timeout(sec, usec);
    client_.set_write_timeout(sec, usec);
    client_.set_keep_alive(true);
    // Without it, Nagle and delayed ACKs add ~40 ms to every POST (headers and body
    // go out in two writes).
    client_.set_tcp_nodelay(true);
  }

  Status Send(std::string_view document) override {
    httplib::Headers headers;
    if (!token_.empty()) headers.emplace("Authorization", "Bearer " + token_);
    auto res = client_.Post("/api/v1/batches", headers, document.data(), document.size(),
                            "application/json");
    if (!res) {
      return Unavailable(fmt::format("POST {}/api/v1/batches: {}", base_, httplib::to_string(res.error())));
    }
    int code = res->status;
    if (code >= 200 && code < 300) return Status::Ok();
    std::string body = res->body.substr(0, 300);
    std::string what = fmt::format("POST {}/api/v1/batches: HTTP {}: {}", base_, code, body);
    if (code == 401) return Status(StatusCode::kUnauthenticated, what);
    if (code == 403) return Status(StatusCode::kPermissionDenied, what);
    if (code == 408 || code == 429 || code >= 500) return Unavailable(what);
    return InvalidArgument(what);
  }

 private:
  std::string base_;
  httplib::Client client_;
  std::string token_;
};

}  // namespace

Result<std::unique_ptr<BatchSink>> MakeHttpBatchSink(const std::string& server_url, std::string token,
                                                     int64_t timeout_ms) {
  std::string base = server_url;
  while (base.ends_with("/")) base.pop_back();
  if (!base.starts_with("http://") && !base.starts_with("https://")) {
    return InvalidArgument(fmt::format("server url \"{}\": want http://host:port or https://host:port", server_url));
  }
  size_t host = base.find("://") + 3;
  if (host >= base.size() || base.find('/', host) != std::string::npos) {
    return InvalidArgument(fmt::format("server url \"{}\": want scheme://host[:port] without a path", server_url));
  }
  // httplib::Client throws on nothing here; an unknown scheme makes an invalid client,
  // which the check above rules out.
  return std::unique_ptr<BatchSink>(new HttpBatchSink(base, std::move(token), timeout_ms));
}

int64_t Pusher::Drain(int64_t max_batches) {
  int64_t sent = 0;
  if (clock_.NowMs() < next_attempt_ms_) return 0;
  while (sent < max_batches && spool_.size() > 0) {
    auto entry = spool_.Front();
    if (!entry.ok()) {
      // An unreadable spool file cannot be sent; drop it rather than stall the rest.
      spdlog::error("agent: spool: {}; dropping it", entry.status().message());
      ++stats_.rejected;
      if (!spool_.PopFront().ok()) return sent;
      continue;
    }
    Status st = sink_.Send(entry->document);
    if (st.ok()) {
      ++sent;
      ++stats_.sent;
      backoff_ms_ = 0;
      if (Status pop = spool_.PopFront(); !pop.ok()) {
        spdlog::error("agent: spool: {}", pop.message());
        return sent;
      }
      continue;
    }
    ++stats_.failures;
    stats_.last_error = st.message();
    if (st.code() == StatusCode::kInvalidArgument) {
      spdlog::error("agent: server refused batch {} for good, dropping it: {}", entry->sequence, st.message());
      ++stats_.rejected;
      if (!spool_.PopFront().ok()) return sent;
      continue;
    }
    backoff_ms_ = backoff_ms_ == 0
                      ? policy_.initial_ms
                      : std::min<int64_t>(policy_.max_ms, static_cast<int64_t>(static_cast<double>(backoff_ms_) *
                                                                               policy_.multiplier));
    next_attempt_ms_ = clock_.NowMs() + backoff_ms_;
    spdlog::warn("agent: push failed ({} batches waiting), retrying in {} ms: {}", spool_.size(), backoff_ms_,
                 st.message());
    break;
  }
  return sent;
}

}  // namespace gpuledger::agent
