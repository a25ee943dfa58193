// Where alerts go: Prometheus Alertmanager's API v2, a Slack incoming webhook and a
// generic JSON webhook, each over HTTP (cpp-httplib stays inside sinks.cc). A sink makes
// one delivery attempt per call; retries, backoff and rate limits are the delivery
// queue's (alerting/delivery.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "alerting/alerts.h"
#include "core/status.h"

namespace gpuledger::alerting {

struct Attempt {
  Status status;              // Ok: delivered
  int64_t retry_after_ms = 0;  // the receiver asked to wait this long (429 Retry-After)
  bool retryable = true;       // false: retrying the same alerts cannot succeed (a 4xx other than 429)
};

class Sink {
 public:
  virtual ~Sink() = default;
  // How counters and logs name it: "alertmanager:HOST:PORT", "slack:NAME", ...
  virtual const std::string& name() const = 0;
  // One attempt to deliver `alerts` (not empty).
  virtual Attempt Send(const std::vector<Alert>& alerts) = 0;
  // The least time between two deliveries (Slack: about one message a second).
  virtual int64_t min_interval_ms() const { return 0; }
};

// `url` is the Alertmanager's base ("http://127.0.0.1:9093"); alerts go to POST
// {url}/api/v2/alerts as its OpenAPI describes (labels, annotations, startsAt, endsAt).
// Fails naming the URL when it is not http:// or https://.
Result<std::unique_ptr<Sink>> AlertmanagerSink(const std::string& url, const std::string& name = "");

// A Slack incoming webhook: a `text` fallback and blocks, within Slack's limits (at most
// 50 blocks a message, 3,000 characters a section: longer text is cut with "..." and the
// alerts past the limit are counted in the last block).
Result<std::unique_ptr<Sink>> SlackSink(const std::string& webhook_url, const std::string& name = "");

// A generic webhook: POST {"version": "1", "alerts": [...]} with the Alertmanager fields.
Result<std::unique_ptr<Sink>> WebhookSink(const std::string& url, const std::string& name = "");

inline constexpr size_t kSlackMaxBlocks = 50;
inline constexpr size_t kSlackMaxSectionChars = 3000;

// The Slack message for `alerts`, as JSON text (for the sink and its tests).
std::string SlackMessage(const std::vector<Alert>& alerts);
// The Alertmanager API v2 body for `alerts`, as JSON text.
std::string AlertmanagerBody(const std::vector<Alert>& alerts);

}  // namespace gpuledger::alerting
