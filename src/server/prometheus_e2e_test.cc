// A real Prometheus (Debian's /usr/bin/prometheus) scrapes a small static HTTP server
// that serves the real dcgm-exporter captures, and remote-writes to gpuledger: the
// ledger must show those GPUs with their models, UUIDs and activity. The same captures
// through the server's own scrape path give the same devices and figures.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "core/testing/missing_component.h"
#include "server/scrape.h"
#include "server/test_support.h"
#include "wire/prometheus/prom_text.h"
#include "ledger/store_access.h"

namespace gpuledger::server {
namespace {

using testing::TempDir;

const char* kCaptures[] = {"T4_ericsson", "L4_aws_kops", "L40S_upcloud", "GRID_A100-10C_vgpu_vks",
                           "GRID_A100-40C_vgpu_vks"};

std::string Capture(const std::string& name) {
  return testing::ReadFileOrEmpty(std::string(GPULEDGER_SHARED_DATA_DIR) + "/telemetry/dcgm_exporter/" + name +
                                  "_dcgm-exporter.prom");
}

// Serves each capture at /<name>/metrics, as dcgm-exporter would.
class StaticExporter {
 public:
  StaticExporter() {
    for (const char* name : kCaptures) {
      std::string body = Capture(name);
      http_.Get("/" + std::string(name) + "/metrics", [body](const httplib::Request&, httplib::Response& res) {
        res.set_content(body, "text/plain; version=0.0.4");
      });
    }
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
  }
  ~StaticExporter() {
    http_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
};

struct DeviceView {
  std::string node, model;
  std::optional<double> gpu_util, fb_used_mib, power_watts, dram_active;
  bool operator==(const DeviceView&) const = default;
};

std::map<std::string, DeviceView> View(ledger::Ledger& l) {
  std::map<std::string, DeviceView> out;
  auto devices = ledger::internal_StoreOf(l).ListDevices();
  if (!devices.ok()) return out;
  for (const auto& d : *devices) {
    if (d.last_sample_ms == 0) continue;
    auto s = ledger::internal_StoreOf(l).Samples(d.id, {d.last_sample_ms, d.last_sample_ms});
    if (!s.ok() || s->empty()) continue;
    const Sample& x = s->back();
    out[d.device.uuid] = {d.device.node, d.device.model, x.gpu_util, x.fb_used_mib, x.power_watts, x.dram_active};
  }
  return out;
}

TEST(PrometheusE2ETest, RemoteWriteFromRealPrometheusAndScrapeGiveTheSameLedger) {
  if (access("/usr/bin/prometheus", X_OK) != 0) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "/usr/bin/prometheus not installed (Debian: prometheus)";
  }
  for (const char* name : kCaptures) {
    if (Capture(name).empty()) {
      GPULEDGER_SKIP_OR_FAIL_IN_CI() << "capture " << name << " not found under ../shared/data";
    }
  }
  TempDir dir;
  StaticExporter exporter;
  ASSERT_GT(exporter.port(), 0);
  SystemClock clock;
  testing::Harness rw(dir.File("rw.db"), clock);
  ASSERT_EQ(rw.error, "");

  int prom_port = testing::FreeLoopbackPort();
  std::ofstream cfg(dir.File("prometheus.yml"));
  cfg << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n";
  for (const char* name : kCaptures) {
    cfg << "  - job_name: '" << name << "'\n    honor_labels: true\n    metrics_path: /" << name
        << "/metrics\n    static_configs:\n      - targets: ['127.0.0.1:" << exporter.port() << "']\n";
  }
  cfg << "remote_write:\n  - url: " << rw.url() << "/api/v1/write\n"
      << "    queue_config:\n      min_shards: 1\n      max_shards: 1\n      batch_send_deadline: 1s\n"
      << "      max_samples_per_send: 10000\n    metadata_config:\n      send: false\n";
  cfg.close();

  pid_t pid = fork();
  if (pid == 0) {
    std::string log = dir.File("prometheus.log");
    FILE* f = std::freopen(log.c_str(), "w", stderr);
    (void)f;
    std::string config = "--config.file=" + dir.File("prometheus.yml");
    std::string storage = "--storage.tsdb.path=" + dir.File("tsdb");
    std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(prom_port);
    execl("/usr/bin/prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  std::map<std::string, DeviceView> via_rw;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < deadline) {
    via_rw = View(*rw.ledger);
    if (via_rw.size() == std::size(kCaptures)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(via_rw.size(), std::size(kCaptures))
      << "Prometheus log:\n" << testing::ReadFileOrEmpty(dir.File("prometheus.log"));

  // The captures' own figures: UUID, model, host and GPU utilization (a percent).
  for (const char* name : kCaptures) {
    SCOPED_TRACE(name);
    auto parsed = prometheus::ParseText(Capture(name));
    ASSERT_TRUE(parsed.ok());
    std::string uuid, model, host;
    std::optional<double> util;
    for (const auto& fam : parsed->families) {
      for (const auto& s : fam.samples) {
        uuid = std::string(prometheus::FindLabel(s.labels, "UUID").value_or(uuid));
        model = std::string(prometheus::FindLabel(s.labels, "modelName").value_or(model));
        host = std::string(prometheus::FindLabel(s.labels, "Hostname").value_or(host));
        if (fam.name == "DCGM_FI_DEV_GPU_UTIL") util = s.value / 100;
      }
    }
    ASSERT_TRUE(via_rw.count(uuid)) << uuid;
    EXPECT_EQ(via_rw[uuid].model, model);
    EXPECT_EQ(via_rw[uuid].node, host);
    ASSERT_TRUE(util.has_value());
    ASSERT_TRUE(via_rw[uuid].gpu_util.has_value());
    EXPECT_NEAR(*via_rw[uuid].gpu_util, *util, 1e-4);
  }
  EXPECT_GT(rw.server->metrics().Value(MetricId::kIgnoredPoints, {"DCGM_FI_DEV_SM_CLOCK"}), 0);

  // The scrape path, on a second ledger.
  testing::Harness sc(dir.File("scrape.db"), clock);
  ASSERT_EQ(sc.error, "");
  auto ingestor = DcgmIngestor::Create({}, [&](const Batch& b, const BatchSender& who) { return sc.ledger->Ingest(b, who); }, nullptr);
  ASSERT_TRUE(ingestor.ok());
  Scraper scraper({}, **ingestor, clock, nullptr);
  for (const char* name : kCaptures) {
    auto r = scraper.ScrapeOnce({fmt::format("http://127.0.0.1:{}/{}/metrics", exporter.port(), name)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->applied);
  }
  EXPECT_EQ(View(*sc.ledger), via_rw);
}

// The server's scraper thread, configured with targets, fills the ledger by itself.
TEST(PrometheusE2ETest, ConfiguredScrapeTargetsAreScrapedAtTheirInterval) {
  TempDir dir;
  StaticExporter exporter;
  SystemClock clock;
  ServerOptions o;
  for (const char* name : kCaptures) {
    o.scrape_targets.push_back({fmt::format("http://127.0.0.1:{}/{}/metrics", exporter.port(), name), 200});
  }
  testing::Harness h(dir.File("s.db"), clock, o);
  ASSERT_EQ(h.error, "");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::map<std::string, DeviceView> view;
  while (std::chrono::steady_clock::now() < deadline) {
    view = View(*h.ledger);
    if (view.size() == std::size(kCaptures)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(view.size(), std::size(kCaptures));
  EXPECT_GT(h.server->metrics().Value(MetricId::kScrapes, {o.scrape_targets[0].url, "ok"}), 0);
}

}  // namespace
}  // namespace gpuledger::server
