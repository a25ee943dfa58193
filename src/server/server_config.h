// The config's [server] section (config::ServerSection, read by config::Load; docs/server.md)
// onto ServerOptions: listen address, tokens, limits, remote-write mapping, scrape targets.
// Command-line flags override it afterwards.
#pragma once

#include "config/config.h"
#include "core/status.h"
#include "server/server.h"

namespace gpuledger::server {

// Overlays the values `section` sets onto `options` (keys absent keep their value) and
// checks what belongs to the server's own grammar: token roles and hashes, viewer teams,
// scrape kinds, URLs and metric names, one job-bound target per job and kind, and the
// label rules (as a DcgmMapper). Errors name FILE:LINE of the value and its key. On
// failure `options` may be partly changed: the caller refuses to start.
Status ApplyServerConfig(const config::ServerSection& section, ServerOptions& options);

}  // namespace gpuledger::server
