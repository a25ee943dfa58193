// The real `gpuledger serve` for the agent's end-to-end tests: server::Server over a
// ledger the test owns, on 127.0.0.1 and a free port, taking one agent-role bearer token.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "server/auth.h"
#include "server/server.h"

namespace gpuledger::agent::testing {

// Creates and starts the server; `node` names the token, `secret` is what the agent sends.
inline Result<std::unique_ptr<server::Server>> StartRealServer(ledger::Ledger& ledger, const Clock& clock,
                                                               const std::string& node,
                                                               const std::string& secret) {
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.access_log = false;
  server::TokenEntry token{.name = node, .role = server::Role::kAgent};
  GPULEDGER_RETURN_IF_ERROR(server::ParseTokenHash(server::HashToken(secret), token));
  options.tokens.push_back(token);
  GPULEDGER_ASSIGN_OR_RETURN(std::unique_ptr<server::Server> real, server::Server::Create(ledger, clock, options));
  GPULEDGER_RETURN_IF_ERROR(real->Start());
  return real;
}

}  // namespace gpuledger::agent::testing
