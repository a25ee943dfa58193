// Bearer-token authentication and roles for the server. Tokens are never stored: the
// config holds, per token, a random salt and SHA-256(salt || token), and a presented
// token is checked against each entry with a constant-time comparison.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/batch.h"
#include "core/status.h"

namespace gpuledger::server {

enum class Role {
  kAgent,   // may only write batches (native and remote-write)
  kViewer,  // reads the jobs and costs of its teams, and fleet totals
  kAdmin,   // everything
};
std::string_view RoleName(Role role);
Result<Role> ParseRole(std::string_view text);

// One configured token: "sha256:<salt hex>:<digest hex>" in the config file.
struct TokenEntry {
  std::string name;                // for logs: who made the request
  Role role = Role::kViewer;
  std::vector<std::string> teams;  // kViewer: the teams it may see (at least one)
  std::vector<std::string> nodes;  // kAgent: the nodes it may report for (patterns; empty: any)
  std::string salt;                // raw bytes
  std::string digest;              // raw SHA-256(salt || token)
};

// Who made a request.
struct Principal {
  std::string name;
  Role role = Role::kViewer;
  std::vector<std::string> teams;  // kViewer only
  std::vector<std::string> nodes;  // kAgent only: the nodes it may report for (empty: any)

  // A viewer sees only these teams' jobs; agents see nothing, admins everything.
  bool MaySeeTeam(std::string_view team) const;
  // As the sender of a batch: its name, bound to its nodes (BatchSender).
  BatchSender AsSender() const { return {name, nodes}; }
};

// "sha256:<salt hex>:<digest hex>" for `token` with a fresh random salt (16 bytes).
std::string HashToken(std::string_view token);
// The same with a given salt (tests).
std::string HashTokenWithSalt(std::string_view token, std::string_view salt);
// A fresh random token: "glt_" + 32 random bytes in hex.
std::string NewToken();

// Parses the stored form into `entry.salt` and `entry.digest`. Fails, naming the
// problem, on anything but "sha256:<hex>:<64 hex digits>".
Status ParseTokenHash(std::string_view text, TokenEntry& entry);

// Checks presented tokens against the configured entries. Immutable; thread-safe.
class Authenticator {
 public:
  explicit Authenticator(std::vector<TokenEntry> entries) : entries_(std::move(entries)) {}

  bool empty() const { return entries_.empty(); }

  // Resolves an Authorization header value ("Bearer <token>"). kUnauthenticated when it
  // is missing, malformed or matches no entry; the message never echoes the token.
  Result<Principal> Authenticate(std::string_view authorization) const;

 private:
  std::vector<TokenEntry> entries_;
};

}  // namespace gpuledger::server
