// A small HTTP client for talking to a gpuledger server (the CLI's --server, the live
// demo's feeder, tests and benchmarks). Keeps httplib out of its users.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gpuledger::server {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
  // A paged answer's cursor of its next page (the Gpuledger-Next-After header): "" on the
  // last page, or when the answer is not paged.
  std::string next_after;
};

struct HttpRequestOptions {
  std::string token;  // sent as "Authorization: Bearer <token>" when not empty
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timeout_ms = 60'000;
};

// GET base_url + path ("http://127.0.0.1:8080", "/api/v1/usage?window=7d"). Any HTTP
// status is a response; only a failure to connect or read is an error (kUnavailable).
Result<HttpResponse> HttpGet(const std::string& base_url, const std::string& path,
                             const HttpRequestOptions& options = {});
// POST `body` with `content_type`.
Result<HttpResponse> HttpPost(const std::string& base_url, const std::string& path, std::string_view body,
                              const std::string& content_type, const HttpRequestOptions& options = {});

// Percent-encodes a query parameter value.
std::string UrlEncode(std::string_view text);

// The message of an error reply ({"error":..., "message": ...}), or the body itself.
std::string ErrorMessageOf(const HttpResponse& response);

}  // namespace gpuledger::server
