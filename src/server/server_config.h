// The [server] table of gpuledger's TOML config (docs/server.md): listen address,
// tokens, limits, remote-write mapping, scrape targets. Command-line flags override it.
#pragma once

#include <string>

#include "core/status.h"
#include "server/server.h"

namespace gpuledger::server {

// Reads the [server] table of `path` into `options` (keys absent keep their value).
// A file without [server] changes nothing. Unknown keys and bad values are errors naming
// the file, line and key.
Status LoadServerConfig(const std::string& path, ServerOptions& options);

}  // namespace gpuledger::server
