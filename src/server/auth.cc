#include "server/auth.h"

#include <cctype>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>

namespace gpuledger::server {
namespace {

constexpr std::string_view kScheme = "sha256:";
constexpr size_t kSaltBytes = 16;

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

Result<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return InvalidArgument("odd number of hex digits");
  std::string out;
  out.reserve(hex.size() / 2);
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return InvalidArgument(fmt::format("'{}{}' is not hex", hex[i], hex[i + 1]));
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string Sha256(std::string_view salt, std::string_view token) {
  std::string input;
  input.reserve(salt.size() + token.size());
  input.append(salt).append(token);
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(), md);
  return std::string(reinterpret_cast<const char*>(md), sizeof md);
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  // RAND_bytes fails only when the system has no entropy source; a token or salt must
  // then not be made at all.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    std::abort();
  }
  return out;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAgent: return "agent";
    case Role::kViewer: return "viewer";
    case Role::kAdmin: return "admin";
  }
  return "?";
}

Result<Role> ParseRole(std::string_view text) {
  if (text == "agent") return Role::kAgent;
  if (text == "viewer") return Role::kViewer;
  if (text == "admin") return Role::kAdmin;
  return InvalidArgument(fmt::format("role \"{}\": want agent, viewer or admin", text));
}

bool Principal::MaySeeTeam(std::string_view team) const {
  if (role == Role::kAdmin) return true;
  if (role != Role::kViewer) return false;
  return std::find(teams.begin(), teams.end(), team) != teams.end();
}

std::string HashTokenWithSalt(std::string_view token, std::string_view salt) {
  return fmt::format("{}{}:{}", kScheme, Hex(salt), Hex(Sha256(salt, token)));
}

std::string HashToken(std::string_view token) {
  return HashTokenWithSalt(token, RandomBytes(kSaltBytes));
}

std::string NewToken() { return "glt_" + Hex(RandomBytes(32)); }

Status ParseTokenHash(std::string_view text, TokenEntry& entry) {
  if (text.substr(0, kScheme.size()) != kScheme) {
    return InvalidArgument("token hash: want \"sha256:<salt hex>:<digest hex>\"");
  }
  std::string_view rest = text.substr(kScheme.size());
  size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return InvalidArgument("token hash: no ':' between salt and digest");
  auto salt = Unhex(rest.substr(0, colon));
  if (!salt.ok()) return salt.status().WithContext("token hash: salt");
  if (salt->empty()) return InvalidArgument("token hash: empty salt");
  auto digest = Unhex(rest.substr(colon + 1));
  if (!digest.ok()) return digest.status().WithContext("token hash: digest");
  if (digest->size() != SHA256_DIGEST_LENGTH) {
    return InvalidArgument(fmt::format("token hash: digest has {} bytes, want 32", digest->size()));
  }
  entry.salt = std::move(*salt);
  entry.digest = std::move(*digest);
  return Status::Ok();
}

Result<Principal> Authenticator::Authenticate(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.empty()) {
    return Status(StatusCode::kUnauthenticated, "no bearer token (Authorization: Bearer <token>)");
  }
  // The scheme is case-insensitive (RFC 7235 section 2.1): "bearer" and "BEARER" too.
  auto is_bearer = [&] {
    if (authorization.size() <= kBearer.size()) return false;
    for (size_t i = 0; i < kBearer.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(authorization[i])) !=
          std::tolower(static_cast<unsigned char>(kBearer[i]))) {
        return false;
      }
    }
    return true;
  };
  if (!is_bearer()) {
    return Status(StatusCode::kUnauthenticated, "Authorization header is not \"Bearer <token>\"");
  }
  std::string_view token = authorization.substr(kBearer.size());
  const TokenEntry* match = nullptr;
  // Every entry is checked, so the time taken does not say which one matched.
  for (const TokenEntry& e : entries_) {
    std::string d = Sha256(e.salt, token);
    if (d.size() == e.digest.size() && CRYPTO_memcmp(d.data(), e.digest.data(), d.size()) == 0) {
      match = &e;
    }
  }
  if (match == nullptr) return Status(StatusCode::kUnauthenticated, "unknown bearer token");
  return Principal{match->name, match->role, match->teams, match->nodes};
}

}  // namespace gpuledger::server
