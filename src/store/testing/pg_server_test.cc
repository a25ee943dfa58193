// The PostgreSQL test server itself: it starts (as an unprivileged user when run as
// root), gives each test its own database, and survives a restart.
#include "store/testing/pg_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/testing/missing_component.h"

namespace gpuledger::store::pgtest {
namespace {

PgTestServer* ServerOrSkip() {
  auto s = PgTestServer::Shared();
  return s.ok() ? *s : nullptr;
}

TEST(PgTestServerTest, GivesEachTestItsOwnDatabase) {
  PgTestServer* server = ServerOrSkip();
  if (server == nullptr) GPULEDGER_SKIP_OR_FAIL_IN_CI() << PgTestServer::Shared().status().ToString();
  auto a = server->CreateDatabase("one");
  auto b = server->CreateDatabase("one");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_NE(*a, *b);
  const std::string& db_a = *a;
  ASSERT_TRUE(server->Exec(db_a, "CREATE TABLE x(v int); INSERT INTO x VALUES (1)").ok());
  EXPECT_FALSE(server->Exec(db_a, "CREATE TABLE x(v int)").ok()) << "the table is there";
  // The server's data lives in the temporary directory, owned by the server's user.
  EXPECT_TRUE(std::filesystem::exists(server->dir() / "data" / "PG_VERSION"));
}

TEST(PgTestServerTest, RestartsOnItsData) {
  PgTestServer* server = ServerOrSkip();
  if (server == nullptr) GPULEDGER_SKIP_OR_FAIL_IN_CI() << PgTestServer::Shared().status().ToString();
  auto created = server->CreateDatabase("restart");
  ASSERT_TRUE(created.ok());
  const std::string& db = *created;
  ASSERT_TRUE(server->Exec(db, "CREATE TABLE kept(v int)").ok());
  ASSERT_TRUE(server->Stop().ok());
  EXPECT_FALSE(server->Exec(db, "SELECT 1").ok()) << "a stopped server answers nothing";
  ASSERT_TRUE(server->Start().ok());
  EXPECT_TRUE(server->Exec(db, "SELECT * FROM kept").ok());
}

}  // namespace
}  // namespace gpuledger::store::pgtest
