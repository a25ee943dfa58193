#include "alerting/sinks.h"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

namespace gpuledger::alerting {

namespace {

using nlohmann::json;

json AlertJson(const Alert& a) {
  return json{{"labels", a.labels},
              {"annotations", a.annotations},
              {"startsAt", FormatTime(a.starts_at_ms)},
              {"endsAt", FormatTime(a.ends_at_ms)}};
}

// "http://host:port/path" into the client's base and the path.
struct Url {
  std::string base;
  std::string path;
};

Result<Url> SplitUrl(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0)) {
    return InvalidArgument(fmt::format("\"{}\": want an http:// or https:// URL", url));
  }
  size_t slash = url.find('/', scheme + 3);
  if (slash == std::string::npos) return Url{url, "/"};
  return Url{url.substr(0, slash), url.substr(slash)};
}

// Retry-After as seconds (the form Slack sends); 1 s when absent or unreadable.
int64_t RetryAfterMs(const httplib::Result& res) {
  std::string v = res->get_header_value("Retry-After");
  char* end = nullptr;
  long seconds = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || end == v.c_str() || seconds < 0) return kMsPerSecond;
  return static_cast<int64_t>(seconds) * kMsPerSecond;
}

class HttpSink : public Sink {
 public:
  HttpSink(std::string name, Url url, int64_t min_interval_ms)
      : name_(std::move(name)), url_(std::move(url)), min_interval_ms_(min_interval_ms) {}
  const std::string& name() const override { return name_; }
  int64_t min_interval_ms() const override { return min_interval_ms_; }

 protected:
  Attempt Post(const std::string& body) {
    httplib::Client client(url_.base);
    client.set_connection_timeout(5);
    client.set_read_timeout(10);
    client.set_write_timeout(10);
    auto res = client.Post(url_.path, body, "application/json");
    if (!res) {
      return {Unavailable(fmt::format("{}: POST {}{}: {}", name_, url_.base, url_.path, httplib::to_string(res.error())))};
    }
    if (res->status >= 200 && res->status < 300) return {};
    Status failed = Unavailable(fmt::format("{}: POST {}{}: HTTP {}: {}", name_, url_.base, url_.path, res->status,
                                            res->body.substr(0, 200)));
    if (res->status == 429) return {failed, RetryAfterMs(res)};
    return {failed, 0, res->status >= 500 || res->status == 408};
  }

 private:
  std::string name_;
  Url url_;
  int64_t min_interval_ms_;
};

class AlertmanagerSinkImpl final : public HttpSink {
 public:
  using HttpSink::HttpSink;
  Attempt Send(const std::vector<Alert>& alerts) override { return Post(AlertmanagerBody(alerts)); }
};

class SlackSinkImpl final : public HttpSink {
 public:
  using HttpSink::HttpSink;
  Attempt Send(const std::vector<Alert>& alerts) override { return Post(SlackMessage(alerts)); }
};

class WebhookSinkImpl final : public HttpSink {
 public:
  using HttpSink::HttpSink;
  Attempt Send(const std::vector<Alert>& alerts) override {
    json list = json::array();
    for (const Alert& a : alerts) {
      json j = AlertJson(a);
      j["status"] = a.resolved ? "resolved" : "firing";
      list.push_back(std::move(j));
    }
    return Post(json{{"version", "1"}, {"alerts", std::move(list)}}.dump());
  }
};

template <typename Impl>
Result<std::unique_ptr<Sink>> Make(const char* kind, const std::string& url, const std::string& name,
                                   int64_t min_interval_ms) {
  GPULEDGER_ASSIGN_OR_RETURN(Url u, SplitUrl(url));
  std::string host = u.base.substr(u.base.find("://") + 3);
  return std::unique_ptr<Sink>(
      std::make_unique<Impl>(fmt::format("{}:{}", kind, name.empty() ? host : name), std::move(u), min_interval_ms));
}

// `text` cut to `limit` characters (at a UTF-8 boundary), ending in "..." when cut.
std::string Cut(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t end = limit - 3;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "...";
}

}  // namespace

std::string AlertmanagerBody(const std::vector<Alert>& alerts) {
  json list = json::array();
  for (const Alert& a : alerts) list.push_back(AlertJson(a));
  return list.dump();
}

std::string SlackMessage(const std::vector<Alert>& alerts) {
  size_t firing = 0, notices = 0;
  for (const Alert& a : alerts) {
    notices += IsNotice(a) ? 1 : 0;
    firing += a.resolved || IsNotice(a) ? 0 : 1;
  }
  std::string headline =
      notices == alerts.size()
          ? fmt::format("gpuledger: {} intervention notice{}", notices, notices == 1 ? "" : "s")
          : fmt::format("gpuledger: {} objective alert{} firing, {} resolved", firing, firing == 1 ? "" : "s",
                        alerts.size() - firing - notices);
  std::string text = headline;
  json blocks = json::array();
  blocks.push_back({{"type", "header"}, {"text", {{"type", "plain_text"}, {"text", Cut(headline, 150)}}}});
  // The header, one section per alert, and when they do not fit a last context block.
  size_t room = kSlackMaxBlocks - 1;
  for (size_t i = 0; i < alerts.size(); ++i) {
    const Alert& a = alerts[i];
    auto get = [&](const char* key) {
      auto it = a.annotations.find(key);
      return it == a.annotations.end() ? std::string() : it->second;
    };
    bool notice = IsNotice(a);
    std::string state = notice ? (a.labels.at("severity") == "warning" ? "WARNING" : "NOTICE")
                               : (a.resolved ? "RESOLVED" : "FIRING");
    std::string line = fmt::format("{} {}", state, get("summary"));
    text += "\n" + line;
    if (blocks.size() == room && i + 1 < alerts.size()) {
      blocks.push_back({{"type", "context"},
                        {"elements", json::array({{{"type", "mrkdwn"},
                                                   {"text", fmt::format("and {} more alerts", alerts.size() - i)}}})}});
      break;
    }
    // An objective's alert names its slo and window; a quota's its quota and threshold.
    auto label = [&](const char* key, const char* other) {
      auto it = a.labels.find(key);
      if (it == a.labels.end()) it = a.labels.find(other);
      return it == a.labels.end() ? std::string() : it->second;
    };
    // A notice names its rule and job.
    std::string body = notice ? fmt::format("*{}* `{}` on job `{}`\n{}", state == "WARNING" ? "Warning" : "Notice",
                                            label("rule", "rule"), label("job", "job"), get("description"))
                              : fmt::format("*{}* `{}` ({})\n{}", a.resolved ? "Resolved" : "Firing",
                                            label("slo", "quota"), label("window", "threshold"), get("description"));
    blocks.push_back({{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", Cut(body, kSlackMaxSectionChars)}}}});
  }
  return json{{"text", Cut(text, 40000)}, {"blocks", std::move(blocks)}}.dump();
}

Result<std::unique_ptr<Sink>> AlertmanagerSink(const std::string& url, const std::string& name) {
  std::string base = url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  return Make<AlertmanagerSinkImpl>("alertmanager", base + "/api/v2/alerts", name, 0);
}

Result<std::unique_ptr<Sink>> SlackSink(const std::string& webhook_url, const std::string& name) {
  return Make<SlackSinkImpl>("slack", webhook_url, name, kMsPerSecond);
}

Result<std::unique_ptr<Sink>> WebhookSink(const std::string& url, const std::string& name) {
  return Make<WebhookSinkImpl>("webhook", url, name, 0);
}

}  // namespace gpuledger::alerting
