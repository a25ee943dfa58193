// The web dashboard's files, embedded into the binary at build time (embed.cmake): the
// page (index.html), its scripts and styles from src/dashboard/web, and uPlot from the
// pinned npm package. The server answers GET / with index.html and GET /assets/<name>
// with the file of that name. The files hold no data; the page asks /api/v1 for it
// with the user's token.
#pragma once

#include <span>
#include <string_view>

namespace gpuledger::dashboard {

struct Asset {
  std::string_view name;          // "index.html", "app.js", "uPlot.iife.min.js", ...
  std::string_view content_type;  // "text/javascript; charset=utf-8", ...
  std::string_view body;
  std::string_view etag;          // a quoted strong validator: a digest of the body
};

// Every embedded file.
std::span<const Asset> Assets();

// The file called `name`, or nullptr. Names are plain file names: no folders.
const Asset* FindAsset(std::string_view name);

// The headers every dashboard response carries: scripts only from this server, nothing
// fetched from elsewhere, no framing.
inline constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'";

}  // namespace gpuledger::dashboard
