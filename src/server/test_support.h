// Helpers for the server tests and the benchmark: a temporary folder, a ledger on a
// fresh SQLite store with a running server on 127.0.0.1 port 0, and small batches.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/batch.h"
#include "core/testing/free_port.h"
#include "core/time.h"
#include "ledger/ledger.h"
#include "server/auth.h"
#include "server/client.h"
#include "server/server.h"
#include "store/store.h"

namespace gpuledger::server::testing {

// A folder under $TMPDIR removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpuledger-srv-XXXXXX").string();
    char* made = mkdtemp(tmpl.data());
    path_ = made ? made : tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A loopback port free now (for a child process that must be told its port up front,
// such as Prometheus or VictoriaMetrics); 0 on failure.
using test_env::FreeLoopbackPort;

// Debian's victoria-metrics (/usr/bin/victoria-metrics) in a child process on a free
// loopback port, its data under `data_dir`, for the benchmarks that compare with it. url()
// is empty, and error() says why, when it is not installed or not healthy within 10 s.
class VictoriaMetricsProcess {
 public:
  explicit VictoriaMetricsProcess(const std::string& data_dir) {
    if (access("/usr/bin/victoria-metrics", X_OK) != 0) {
      error_ = "/usr/bin/victoria-metrics not installed (Debian package victoria-metrics)";
      return;
    }
    int port = FreeLoopbackPort();
    std::fflush(stdout);  // the child must not write our buffered lines again
    pid_ = fork();
    if (pid_ == 0) {
      std::string listen = fmt::format("-httpListenAddr=127.0.0.1:{}", port);
      std::string data = "-storageDataPath=" + data_dir;
      FILE* f = std::freopen("/dev/null", "w", stderr);
      f = std::freopen("/dev/null", "w", stdout);
      (void)f;
      execl("/usr/bin/victoria-metrics", "victoria-metrics", listen.c_str(), data.c_str(), "-retentionPeriod=100y",
            nullptr);
      _exit(127);
    }
    std::string url = fmt::format("http://127.0.0.1:{}", port);
    for (int i = 0; i < 100; ++i) {
      auto r = HttpGet(url, "/health", {.timeout_ms = 500});
      if (r.ok() && r->status == 200) {
        url_ = url;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    error_ = "victoria-metrics did not answer /health within 10 s";
    Stop();
  }
  ~VictoriaMetricsProcess() { Stop(); }
  VictoriaMetricsProcess(const VictoriaMetricsProcess&) = delete;
  VictoriaMetricsProcess& operator=(const VictoriaMetricsProcess&) = delete;

  const std::string& url() const { return url_; }
  const std::string& error() const { return error_; }
  // SIGTERM, and waits: VictoriaMetrics writes out what it holds in memory on the way out.
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  std::string url_, error_;
};

// `raw` gzip-compressed (for bodies sent with or without Content-Encoding: gzip).
inline std::string Gzip(std::string_view raw) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, static_cast<uLong>(raw.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// A token entry for the server's options: `token` hashed, with its name, role and teams.
inline TokenEntry TokenEntryFor(const std::string& token, const std::string& name, Role role,
                                std::vector<std::string> teams) {
  TokenEntry e;
  e.name = name;
  e.role = role;
  e.teams = std::move(teams);
  Status st = ParseTokenHash(HashToken(token), e);
  if (!st.ok()) e.name = "(unhashable: " + st.message() + ")";
  return e;
}

// A ledger on a fresh durable store and a server in front of it.
struct Harness {
  // `durable`: synchronous=FULL, as `gpuledger serve` runs (every acknowledged batch
  // survives power loss); false: NORMAL (survives a crash of the process, not of the
  // machine), for comparisons with servers that acknowledge before they sync.
  // `max_size_bytes`: the store's size cap (store::SqliteOptions), 0 for none.
  explicit Harness(const std::string& db_path, const Clock& clock, ServerOptions options = {},
                   bool durable = true, ledger::LedgerOptions ledger_options = {}, int64_t max_size_bytes = 0) {
    auto store = store::OpenSqliteStore(db_path, {.synchronous_full = durable, .max_size_bytes = max_size_bytes});
    if (!store.ok()) {
      error = store.status().ToString();
      return;
    }
    ledger = std::make_unique<ledger::Ledger>(std::move(*store), clock, std::move(ledger_options));
    options.listen = "127.0.0.1:0";
    options.access_log = false;
    auto s = Server::Create(*ledger, clock, std::move(options));
    if (!s.ok()) {
      error = s.status().ToString();
      return;
    }
    server = std::move(*s);
    Status st = server->Start();
    if (!st.ok()) error = st.ToString();
  }
  ~Harness() {
    if (server) server->Stop();
  }
  std::string url() const { return server->Url(); }

  std::string error;  // empty when the server runs
  std::unique_ptr<ledger::Ledger> ledger;
  std::unique_ptr<Server> server;
};

// A batch of `samples` one-minute samples on `gpus` GPUs of node `node` from `start_ms`,
// with one job of `team` holding them all.
inline Batch MakeBatch(const std::string& id, const std::string& node, int gpus, int64_t start_ms,
                       int samples, const std::string& team, bool declare = true) {
  Batch b;
  b.batch_id = id;
  b.source = node;
  std::string job = fmt::format("{}-job", node);
  if (declare) {
    for (int g = 0; g < gpus; ++g) {
      Device d;
      d.uuid = fmt::format("GPU-{}-{}", node, g);
      d.node = node;
      d.model = "NVIDIA H100 80GB HBM3";
      d.pool = "training";
      d.memory_mib = 81559;
      d.sample_interval_ms = kMsPerMinute;
      b.devices.push_back(d);
      b.allocations.push_back({d.uuid, job, start_ms - kMsPerMinute, std::nullopt});
    }
    Job j;
    j.id = job;
    j.team = team;
    j.project = team + "-project";
    j.kind = JobKind::kTraining;
    b.jobs.push_back(j);
  }
  for (int g = 0; g < gpus; ++g) {
    for (int i = 0; i < samples; ++i) {
      Sample s;
      s.device_uuid = fmt::format("GPU-{}-{}", node, g);
      s.t_ms = start_ms + i * kMsPerMinute;
      s.sm_active = 0.25 + 0.5 * ((i + g) % 3) / 2.0;
      s.gpu_util = 0.9;
      s.fb_used_mib = 1000.0 * (g + 1);
      b.samples.push_back(s);
    }
  }
  return b;
}

}  // namespace gpuledger::server::testing
