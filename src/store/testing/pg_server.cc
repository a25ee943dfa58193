#include "store/testing/pg_server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <fmt/format.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

namespace gpuledger::store::pgtest {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSuperuser = "gpuledger";
constexpr const char* kDebianBindir = "/usr/lib/postgresql/15/bin";

// The directory holding initdb, pg_ctl and postgres.
fs::path FindBindir() {
  if (const char* env = std::getenv("GPULEDGER_PG_BINDIR"); env != nullptr && *env) return env;
  if (FILE* p = ::popen("pg_config --bindir 2>/dev/null", "r")) {
    std::array<char, 512> buf{};
    std::string out;
    while (std::fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
    ::pclose(p);
    while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
    if (!out.empty() && fs::exists(fs::path(out) / "initdb")) return out;
  }
  return kDebianBindir;
}

}  // namespace

// The unprivileged account the server runs as when this process is root.
struct Account {
  uid_t uid = 0;
  gid_t gid = 0;
};

namespace {

Result<Account> ServerAccount() {
  if (::geteuid() != 0) return Account{::geteuid(), ::getegid()};
  const passwd* pw = ::getpwnam("nobody");
  if (pw == nullptr) return Unavailable("running as root and there is no user nobody to run PostgreSQL as");
  Account a{pw->pw_uid, pw->pw_gid};
  if (const group* g = ::getgrnam("nogroup")) a.gid = g->gr_gid;
  return a;
}

std::string Tail(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

PgTestServer* g_server = nullptr;
Status g_error;
std::once_flag g_once;

// Stops the shared server when the test binary ends.
class PgEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    delete g_server;
    g_server = nullptr;
  }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new PgEnvironment);

}  // namespace

Result<PgTestServer*> PgTestServer::Shared() {
  std::call_once(g_once, [] {
    auto* s = new PgTestServer();
    if (Status st = s->Init(); !st.ok()) {
      g_error = st;
      delete s;
      return;
    }
    g_server = s;
  });
  if (g_server == nullptr) return g_error.ok() ? Unavailable("the PostgreSQL test server was stopped") : g_error;
  return g_server;
}

// Runs bindir/tool with `args` as the server's account, its output appended to
// commands.log in the server's directory; an error carries the log's tail.
Status PgTestServer::RunPg(const std::string& tool, const std::vector<std::string>& args) const {
  return RunAs((bindir_ / tool).string(), args);
}

Status PgTestServer::RunAs(const std::string& exe, const std::vector<std::string>& args) const {
  GPULEDGER_ASSIGN_OR_RETURN(Account account, ServerAccount());
  const fs::path log = dir_ / "commands.log";
  const std::string tool = fs::path(exe).filename().string();
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Unavailable("fork failed");
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(account.gid) != 0 || ::setuid(account.uid) != 0) _exit(126);
    }
    ::execv(exe.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Unavailable(fmt::format("{} {} failed (status {}): {}", tool, args.empty() ? "" : args.front(), status,
                                 Tail(log)));
}

Status PgTestServer::Init() {
  bindir_ = FindBindir();
  for (const char* tool : {"initdb", "pg_ctl", "postgres"}) {
    if (!fs::exists(bindir_ / tool)) {
      return Unavailable(fmt::format("PostgreSQL's {} is not in {} (Debian package postgresql-15)", tool,
                                     bindir_.string()));
    }
  }
  GPULEDGER_ASSIGN_OR_RETURN(Account account, ServerAccount());
  std::string templ = (fs::temp_directory_path() / "gpuledger-pg-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) return Unavailable("cannot make a temporary directory for PostgreSQL");
  dir_ = templ;
  data_ = dir_ / "data";
  socket_dir_ = dir_ / "sock";
  fs::create_directories(socket_dir_);
  // The account must own the directory it runs in; others may pass through to the socket.
  for (const fs::path& p : {dir_, socket_dir_}) {
    if (::chown(p.c_str(), account.uid, account.gid) != 0) {
      return Unavailable(fmt::format("cannot chown {} to the server's user", p.string()));
    }
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  }
  GPULEDGER_RETURN_IF_ERROR(InitData(account));
  {
    std::ofstream conf(data_ / "postgresql.conf", std::ios::app);
    conf << "listen_addresses = ''\n"
         << "unix_socket_directories = '" << socket_dir_.string() << "'\n"
         << "port = 5432\n"
         << "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
         << "max_connections = 200\nshared_buffers = 64MB\n";
    if (!conf) return Unavailable("cannot write postgresql.conf");
  }
  StartWatchdog();
  return Start();
}

// initdb costs a second or two of CPU, and ctest runs every test in a process of its own:
// the first server of a user and PostgreSQL version initdb's a template (under a lock
// file, so that parallel tests make it once), and every server copies it.
Status PgTestServer::InitData(const Account& account) {
  const fs::path cache = fs::temp_directory_path() /
                         fmt::format("gpuledger-pg-template-{}-{}", ::geteuid(), bindir_.parent_path().filename().string());
  const fs::path templ = cache / "data";
  fs::create_directories(cache);
  int lock = ::open((cache / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    if (lock >= 0) ::close(lock);
    return Unavailable(fmt::format("cannot lock the PostgreSQL template in {}", cache.string()));
  }
  Status st = Status::Ok();
  if (!fs::exists(templ / "PG_VERSION")) {
    // initdb runs as the server's account, into a directory it owns.
    fs::remove_all(templ);
    if (::chown(cache.c_str(), account.uid, account.gid) != 0) st = Unavailable("cannot chown the template's folder");
    if (st.ok()) {
      st = RunPg("initdb", {"--pgdata=" + templ.string(), std::string("--username=") + kSuperuser, "--auth=trust",
                            "--no-sync", "--no-instructions", "--encoding=UTF8", "--locale=C"});
    }
  }
  std::error_code ec;
  if (st.ok()) fs::copy(templ, data_, fs::copy_options::recursive, ec);
  ::close(lock);
  GPULEDGER_RETURN_IF_ERROR(st);
  if (ec) return Unavailable(fmt::format("copying the PostgreSQL template: {}", ec.message()));
  if (::chown(data_.c_str(), account.uid, account.gid) != 0) return Unavailable("cannot chown the data directory");
  for (const auto& e : fs::recursive_directory_iterator(data_)) {
    if (::lchown(e.path().c_str(), account.uid, account.gid) != 0) return Unavailable("cannot chown the data directory");
  }
  fs::permissions(data_, fs::perms::owner_all);
  return Status::Ok();
}

Status PgTestServer::Start() {
  GPULEDGER_RETURN_IF_ERROR(
      RunPg("pg_ctl", {"start", "-w", "-t", "60", "-D", data_.string(), "-l", (dir_ / "server.log").string()}));
  running_ = true;
  return Status::Ok();
}

Status PgTestServer::Stop() {
  if (!running_) return Status::Ok();
  running_ = false;
  return RunPg("pg_ctl", {"stop", "-w", "-m", "fast", "-D", data_.string()});
}

// A test binary that crashes or is killed (a ctest timeout) must not leave its server
// running: a watchdog process waits for the end of a pipe this process holds open, and
// when it ends, however this process ended, stops the server and removes its directory.
void PgTestServer::StartWatchdog() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[1]);
    char c;
    while (::read(fds[0], &c, 1) != 0) {
    }
    StopBouncer();
    if (fs::exists(data_ / "postmaster.pid")) (void)RunPg("pg_ctl", {"stop", "-w", "-m", "immediate", "-D", data_.string()});
    std::error_code ec;
    fs::remove_all(dir_, ec);
    _exit(0);
  }
  ::close(fds[0]);
  watchdog_fd_ = fds[1];
  watchdog_pid_ = pid;
}

PgTestServer::~PgTestServer() {
  StopBouncer();
  (void)Stop();
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (watchdog_fd_ >= 0) {
    ::close(watchdog_fd_);
    int status = 0;
    ::waitpid(watchdog_pid_, &status, 0);
  }
}

void PgTestServer::StopBouncer() const {
  std::ifstream pidfile(dir_ / "bouncer" / "pgbouncer.pid");
  pid_t pid = 0;
  if (pidfile >> pid && pid > 0) ::kill(pid, SIGTERM);
}

Result<std::string> PgTestServer::BouncerUrl(std::string_view db, std::string_view user) {
  std::lock_guard lock(bouncer_mu_);
  if (!bouncer_started_) {
    const fs::path exe = "/usr/sbin/pgbouncer";
    if (!fs::exists(exe)) return Unavailable("pgbouncer is not installed (Debian package pgbouncer)");
    GPULEDGER_ASSIGN_OR_RETURN(Account account, ServerAccount());
    const fs::path b = dir_ / "bouncer";
    fs::create_directories(b);
    if (::chown(b.c_str(), account.uid, account.gid) != 0) return Unavailable("cannot chown pgbouncer's folder");
    {
      std::ofstream users(b / "users.txt");
      users << "\"" << kSuperuser << "\" \"\"\n\"reader\" \"\"\n\"" << kOneServerUser << "\" \"\"\n";
      std::ofstream ini(b / "pgbouncer.ini");
      ini << "[databases]\n* = host=" << socket_dir_.string() << " port=5432\n"
          << "[pgbouncer]\nlisten_addr =\nlisten_port = 6432\nunix_socket_dir = " << b.string() << "\n"
          << "auth_type = trust\nauth_file = " << (b / "users.txt").string() << "\n"
          << "pool_mode = transaction\nmax_client_conn = 1000\ndefault_pool_size = 20\n"
          << "logfile = " << (b / "pgbouncer.log").string() << "\npidfile = " << (b / "pgbouncer.pid").string()
          << "\n[users]\n" << kOneServerUser << " = max_user_connections=1\n";
      if (!ini) return Unavailable("cannot write pgbouncer.ini");
    }
    GPULEDGER_RETURN_IF_ERROR(RunAs(exe.string(), {"-d", (b / "pgbouncer.ini").string()}));
    // -d returns once it has daemonized; wait until it answers, not only for its socket
    // file: the file is there from its bind, and a connection before its listen is refused
    // (seen once in a loaded CI run).
    const std::string ping = fmt::format("host={} port=6432 dbname=pgbouncer user={}", b.string(), kSuperuser);
    bool up = false;
    for (int i = 0; i < 200 && !up; ++i) {
      up = PQping(ping.c_str()) != PQPING_NO_RESPONSE;
      if (!up) ::usleep(50'000);
    }
    if (!up) return Unavailable("pgbouncer did not start: " + Tail(b / "pgbouncer.log"));
    bouncer_started_ = true;
  }
  return fmt::format("postgresql://{}@/{}?host={}&port=6432", user.empty() ? kSuperuser : user, db,
                     (dir_ / "bouncer").string());
}

std::string PgTestServer::Url(std::string_view db, std::string_view user) const {
  return fmt::format("postgresql://{}@/{}?host={}&port=5432", user.empty() ? kSuperuser : user, db,
                     socket_dir_.string());
}

Status PgTestServer::Exec(std::string_view db, std::string_view sql) const {
  PGconn* conn = PQconnectdb(Url(db).c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    Status st = Unavailable(fmt::format("connecting to test database {}: {}", db, PQerrorMessage(conn)));
    PQfinish(conn);
    return st;
  }
  PGresult* res = PQexec(conn, std::string(sql).c_str());
  ExecStatusType rc = PQresultStatus(res);
  Status st = (rc == PGRES_COMMAND_OK || rc == PGRES_TUPLES_OK)
                  ? Status::Ok()
                  : Internal(fmt::format("test database {}: {}: {}", db, sql, PQerrorMessage(conn)));
  PQclear(res);
  PQfinish(conn);
  return st;
}

Result<std::string> PgTestServer::CreateDatabase(std::string_view hint) {
  static std::atomic<int> counter{0};
  std::string name = fmt::format("t{}_", counter++);
  for (char c : hint) {
    if (name.size() >= 60) break;
    if (std::isalnum(static_cast<unsigned char>(c))) name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else name += '_';
  }
  GPULEDGER_RETURN_IF_ERROR(Exec("postgres", fmt::format("CREATE DATABASE \"{}\"", name)));
  return name;
}

}  // namespace gpuledger::store::pgtest
