// Pushing batches to the server: a BatchSink takes one document; the Pusher drains the
// spool into a sink, oldest first, and backs off exponentially while the sink fails.
// Resends are safe because the server applies a batch id once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/spool.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuledger::agent {

// Where batches go. Send returns OK when the server took the batch (applied, or known
// already); kUnavailable when it could not be reached or asked to retry (5xx, 429, a
// timeout); kUnauthenticated / kPermissionDenied when it refused the token (retried
// too: an operator fixes the token, the data must survive that); kInvalidArgument when
// it refused the batch itself (a 4xx: resending would not help).
// Implementations need not be thread-safe: one Pusher calls one sink.
class BatchSink {
 public:
  virtual ~BatchSink() = default;
  virtual Status Send(std::string_view document) = 0;
};

// POSTs to `<server_url>/api/v1/batches` with `Authorization: Bearer <token>` and
// `Content-Type: application/json`. `server_url` is "http://host:port" (https when
// the cpp-httplib build has OpenSSL, as Debian's does). Fails naming the URL when it
// cannot be parsed.
Result<std::unique_ptr<BatchSink>> MakeHttpBatchSink(const std::string& server_url, std::string token,
                                                     int64_t timeout_ms = 10'000);

struct BackoffPolicy {
  int64_t initial_ms = 1'000;
  int64_t max_ms = 5 * kMsPerMinute;
  double multiplier = 2.0;
};

struct PushStats {
  int64_t sent = 0;      // batches the server took
  int64_t failures = 0;  // failed attempts (each counts)
  int64_t rejected = 0;  // batches the server refused for good, removed from the spool
  std::string last_error;
};

class Pusher {
 public:
  // REQUIRES: spool, sink and clock outlive the pusher.
  Pusher(Spool& spool, BatchSink& sink, const Clock& clock, BackoffPolicy policy = {})
      : spool_(spool), sink_(sink), clock_(clock), policy_(policy) {}

  // Sends spooled batches, oldest first, until the spool is empty, `max_batches` were
  // sent, or a send fails (then no attempt is made before next_attempt_ms()). Does
  // nothing while backing off. A refused batch is logged, counted and removed so that
  // it cannot block the ones behind it. Returns how many batches the server took.
  int64_t Drain(int64_t max_batches = 1'000'000);

  int64_t next_attempt_ms() const { return next_attempt_ms_; }
  int64_t current_backoff_ms() const { return backoff_ms_; }
  const PushStats& stats() const { return stats_; }

 private:
  Spool& spool_;
  BatchSink& sink_;
  const Clock& clock_;
  BackoffPolicy policy_;
  int64_t backoff_ms_ = 0;  // 0 while sends succeed
  int64_t next_attempt_ms_ = 0;
  PushStats stats_;
};

}  // namespace gpuledger::agent
