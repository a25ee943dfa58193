// A real PostgreSQL 15 for tests, from Debian's packages (postgresql-15): `initdb` into a
// temporary directory, the server started with `pg_ctl` listening only on a Unix socket
// in that directory (no TCP port to collide on), stopped and the directory removed when
// the test binary ends. One server per test binary (a GoogleTest Environment registered
// by this library), started on first use; one fresh database per test (CreateDatabase).
//
// Where the binaries are: $GPULEDGER_PG_BINDIR, else `pg_config --bindir`, else Debian's
// /usr/lib/postgresql/15/bin. Missing binaries: Shared() returns kUnavailable, and the
// caller skips with GPULEDGER_SKIP_OR_FAIL_IN_CI() (CI=true makes it a failure).
//
// Running as root (CI does): initdb and postgres refuse to run as root. Then the server's
// commands run as the unprivileged user `nobody` (group `nogroup`): the child process
// drops to it with setgroups/setgid/setuid before exec, the same as
// `setpriv --reuid=nobody --regid=nogroup --clear-groups`, and the temporary directory
// is chowned to it. The test process itself stays root and connects over the socket as
// the database superuser `gpuledger` (trust authentication, local socket only). As any
// other user the commands run as that user. docs/store-postgresql.md says the same.
//
// initdb runs once per user and PostgreSQL version: its result is kept as a template in
// the temporary directory (gpuledger-pg-template-UID-VERSION, safe to delete) and each
// server starts on a copy, since ctest runs every test in a process of its own.
//
// A binary that crashes or is killed leaves nothing running: a watchdog process stops the
// server and removes its directory when the binary's end of a pipe closes.
//
// The server runs with fsync=off: tests check what a crash of a *client* does, never
// power loss, and fsync would only make them slower.
//
// Thread-safety: Shared() may be called from any thread; the server's methods are
// thread-safe (each opens its own connection).
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuledger::store::pgtest {

struct Account;

// A role pgbouncer gives one server connection at most (max_user_connections = 1): what a
// full pool does to its clients, who wait for a server in its queue. The test that uses
// it creates the role in the database.
inline constexpr std::string_view kOneServerUser = "one_server";

class PgTestServer {
 public:
  // The test binary's server, started on the first call (initdb + pg_ctl start, a second
  // or two); later calls return the same one, or the same error. Stopped by the
  // Environment when the binary ends.
  static Result<PgTestServer*> Shared();

  // Creates an empty database with a new unique name (from `hint`: letters and digits
  // kept, the rest '_') and returns that name (Url(name) connects to it).
  Result<std::string> CreateDatabase(std::string_view hint);

  // The URL of database `db` as role `user` (the superuser when empty).
  std::string Url(std::string_view db, std::string_view user = {}) const;

  // The URL of database `db` through a pgbouncer in transaction mode in front of this
  // server (/usr/sbin/pgbouncer, Debian package pgbouncer), started on first use, as role
  // `user` (the superuser when empty). kUnavailable when pgbouncer is not installed or
  // does not start. It knows the superuser, `reader` and kOneServerUser.
  Result<std::string> BouncerUrl(std::string_view db, std::string_view user = {});

  // Runs `sql` (any number of statements) in database `db` as the superuser.
  Status Exec(std::string_view db, std::string_view sql) const;

  // Stops the server (pg_ctl stop -m fast) and starts it again on the same data: what a
  // database restart does to connected clients. REQUIRES: no other test uses it meanwhile.
  Status Stop();
  Status Start();

  const std::filesystem::path& dir() const { return dir_; }

  ~PgTestServer();

 private:
  PgTestServer() = default;
  Status Init();
  Status InitData(const Account& account);
  void StartWatchdog();
  Status RunPg(const std::string& tool, const std::vector<std::string>& args) const;
  Status RunAs(const std::string& exe, const std::vector<std::string>& args) const;
  void StopBouncer() const;

  std::filesystem::path bindir_, dir_, data_, socket_dir_;
  bool running_ = false;
  std::mutex bouncer_mu_;
  bool bouncer_started_ = false;
  int watchdog_fd_ = -1;
  int watchdog_pid_ = -1;
};

}  // namespace gpuledger::store::pgtest
