#include "server/auth.h"

#include <gtest/gtest.h>

namespace gpuledger::server {
namespace {

TokenEntry Entry(const std::string& token, Role role, std::vector<std::string> teams = {}) {
  TokenEntry e;
  e.name = "t";
  e.role = role;
  e.teams = std::move(teams);
  Status st = ParseTokenHash(HashToken(token), e);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return e;
}

TEST(AuthTest, HashesAreSaltedAndVerify) {
  std::string a = HashToken("secret"), b = HashToken("secret");
  EXPECT_NE(a, b) << "each hash has its own salt";
  EXPECT_EQ(a.find("secret"), std::string::npos);
  EXPECT_EQ(HashTokenWithSalt("secret", "salt"), HashTokenWithSalt("secret", "salt"));
  EXPECT_EQ(HashTokenWithSalt("secret", "salt").rfind("sha256:73616c74:", 0), 0u);
  Authenticator auth({Entry("secret", Role::kAdmin), Entry("other", Role::kViewer, {"nlp"})});
  auto p = auth.Authenticate("Bearer secret");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->role, Role::kAdmin);
  p = auth.Authenticate("Bearer other");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->role, Role::kViewer);
  EXPECT_TRUE(p->MaySeeTeam("nlp"));
  EXPECT_FALSE(p->MaySeeTeam("vision"));
}

// RFC 7235: the scheme is case-insensitive; the token is not.
TEST(AuthTest, TheSchemeIsCaseInsensitive) {
  Authenticator auth({Entry("secret", Role::kAgent)});
  for (const char* header : {"bearer secret", "BEARER secret", "bEaReR secret"}) {
    EXPECT_TRUE(auth.Authenticate(header).ok()) << header;
  }
  EXPECT_FALSE(auth.Authenticate("bearer SECRET").ok());
}

TEST(AuthTest, RefusesMissingMalformedAndUnknownTokens) {
  Authenticator auth({Entry("secret", Role::kAgent)});
  for (const char* header : {"", "secret", "Bearer ", "Basic c2VjcmV0", "Bearer secreT", "Bearer secret "}) {
    auto p = auth.Authenticate(header);
    ASSERT_FALSE(p.ok()) << header;
    EXPECT_EQ(p.status().code(), StatusCode::kUnauthenticated);
    EXPECT_EQ(p.status().message().find("secret"), std::string::npos) << "never echoes the token";
  }
  Principal agent{"a", Role::kAgent, {}};
  EXPECT_FALSE(agent.MaySeeTeam("nlp"));
  EXPECT_TRUE((Principal{"x", Role::kAdmin, {}}).MaySeeTeam("nlp"));
}

TEST(AuthTest, ParsesOnlyWellFormedHashes) {
  TokenEntry e;
  for (const char* bad : {"", "md5:00:00", "sha256:", "sha256:zz:" , "sha256:00:abcd", "sha256::" ,
                          "sha256:0:0000000000000000000000000000000000000000000000000000000000000000"}) {
    EXPECT_FALSE(ParseTokenHash(bad, e).ok()) << bad;
  }
  EXPECT_TRUE(ParseTokenHash(HashToken("x"), e).ok());
  EXPECT_EQ(e.digest.size(), 32u);
  EXPECT_TRUE(ParseRole("viewer").ok());
  EXPECT_FALSE(ParseRole("root").ok());
  EXPECT_NE(NewToken(), NewToken());
}

}  // namespace
}  // namespace gpuledger::server
