#include "server/client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>

#include <functional>

namespace gpuledger::server {
namespace {

Result<HttpResponse> Do(const std::string& base_url, const HttpRequestOptions& options,
                        const std::function<httplib::Result(httplib::Client&, const httplib::Headers&)>& call) {
  if (!std::string_view(base_url).starts_with("http://")) {
    return InvalidArgument(fmt::format("server url \"{}\": only http:// is supported", base_url));
  }
  httplib::Client client(base_url);
  auto timeout = std::chrono::milliseconds(options.timeout_ms);
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count() + 1, 0);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  httplib::Headers headers;
  if (!options.token.empty()) headers.emplace("Authorization", "Bearer " + options.token);
  for (const auto& [k, v] : options.headers) headers.emplace(k, v);
  httplib::Result res = call(client, headers);
  if (!res) return Unavailable(fmt::format("{}: {}", base_url, httplib::to_string(res.error())));
  return HttpResponse{res->status, res->get_header_value("Content-Type"), res->body,
                      res->get_header_value("Gpuledger-Next-After")};
}

}  // namespace

Result<HttpResponse> HttpGet(const std::string& base_url, const std::string& path,
                             const HttpRequestOptions& options) {
  return Do(base_url, options, [&](httplib::Client& c, const httplib::Headers& h) { return c.Get(path, h); });
}

Result<HttpResponse> HttpPost(const std::string& base_url, const std::string& path, std::string_view body,
                              const std::string& content_type, const HttpRequestOptions& options) {
  return Do(base_url, options, [&](httplib::Client& c, const httplib::Headers& h) {
    return c.Post(path, h, body.data(), body.size(), content_type);
  });
}

std::string UrlEncode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string ErrorMessageOf(const HttpResponse& response) {
  try {
    auto j = nlohmann::json::parse(response.body);
    if (j.is_object() && j.contains("message") && j["message"].is_string()) {
      return j["message"].get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
  }
  return response.body;
}

}  // namespace gpuledger::server
