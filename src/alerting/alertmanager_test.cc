// The Alertmanager sink against a real Alertmanager (Debian's prometheus-alertmanager),
// started by the test on a free loopback port with its storage in a temporary folder and
// clustering off, read back through GET /api/v2/alerts.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "alerting/alerts.h"
#include "alerting/sinks.h"
#include "core/testing/free_port.h"
#include "core/testing/missing_component.h"

namespace gpuledger::alerting {
namespace {

using nlohmann::json;
constexpr const char* kAlertmanager = "/usr/bin/prometheus-alertmanager";


class RealAlertmanager {
 public:
  RealAlertmanager() {
    dir_ = std::filesystem::temp_directory_path() / ("gpuledger-am-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "data");
    std::ofstream(dir_ / "alertmanager.yml") << "route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n";
    port_ = test_env::FreeLoopbackPort();
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = std::freopen((dir_ / "alertmanager.log").c_str(), "w", stderr);
      (void)log;
      std::string config = "--config.file=" + (dir_ / "alertmanager.yml").string();
      std::string storage = "--storage.path=" + (dir_ / "data").string();
      std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
      execl(kAlertmanager, "alertmanager", config.c_str(), storage.c_str(), listen.c_str(), "--cluster.listen-address=",
            nullptr);
      _exit(127);
    }
  }
  ~RealAlertmanager() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Whether it answers /-/ready within 30 s (false at once if it exited).
  bool WaitReady() {
    httplib::Client c(url());
    for (int i = 0; i < 300; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      auto res = c.Get("/-/ready");
      if (res && res->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  json Alerts() const {
    httplib::Client c(url());
    auto res = c.Get("/api/v2/alerts");
    if (!res || res->status != 200) return json::array();
    return json::parse(res->body);
  }
  std::string Log() const {
    std::ifstream f(dir_ / "alertmanager.log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

objectives::ObjectiveStatus Burning(bool firing) {
  objectives::ObjectiveStatus st;
  st.spec = ObjectiveSpec{.name = "training-utilization", .kind = ObjectiveKind::kUtilization,
                          .scope = {ObjectiveScope::Of::kPool, "training"}, .target = 0.65};
  st.tally = objectives::RatioTally(58, 100, 0.65);
  for (size_t i = 0; i < st.alerts.size(); ++i) st.alerts[i].window = objectives::kBurnWindows[i];
  st.alerts[3].firing = firing;
  st.alerts[3].long_burn = 1.2;
  st.alerts[3].short_burn = 1.3;
  return st;
}

// The alerts the Alertmanager holds for our objective.
std::vector<json> Ours(const json& alerts) {
  std::vector<json> out;
  for (const json& a : alerts) {
    if (a["labels"].value("slo", "") == "training-utilization") out.push_back(a);
  }
  return out;
}

TEST(AlertmanagerTest, AFiringAlertArrivesWithItsLabelsAndAResolvedOneLeaves) {
  if (!std::filesystem::exists(kAlertmanager)) {
    GPULEDGER_SKIP_OR_FAIL_IN_CI() << "prometheus-alertmanager not installed (Debian package prometheus-alertmanager)";
  }
  RealAlertmanager am;
  ASSERT_TRUE(am.WaitReady()) << am.Log();
  auto sink = AlertmanagerSink(am.url());
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();

  SystemClock clock;
  AlertTracker tracker;
  int64_t start = clock.NowMs();
  std::vector<Alert> firing = tracker.Update({Burning(true)}, start);
  ASSERT_EQ(firing.size(), 1u);
  Attempt sent = (*sink)->Send(firing);
  ASSERT_TRUE(sent.status.ok()) << sent.status.ToString();

  std::vector<json> held = Ours(am.Alerts());
  ASSERT_EQ(held.size(), 1u) << am.Alerts().dump();
  const json& a = held[0];
  EXPECT_EQ(a["labels"]["alertname"], "GpuledgerObjectiveBurn");
  EXPECT_EQ(a["labels"]["pool"], "training");
  EXPECT_EQ(a["labels"]["window"], "3d/6h");
  EXPECT_EQ(a["labels"]["severity"], "ticket");
  EXPECT_EQ(a["annotations"]["value"], "58.0%");
  EXPECT_EQ(a["annotations"]["burn_long"], "1.200");
  EXPECT_EQ(a["status"]["state"], "active");
  auto ends = ParseTime(a["endsAt"].get<std::string>());
  ASSERT_TRUE(ends.ok()) << a.dump();
  EXPECT_GT(*ends, start + 3 * kMsPerMinute);  // a few resend intervals ahead

  // Sent again while firing: still one alert, its start kept.
  ASSERT_TRUE((*sink)->Send(tracker.Update({Burning(true)}, start + kMsPerMinute)).status.ok());
  EXPECT_EQ(Ours(am.Alerts()).size(), 1u);

  // Resolved: endsAt = now; the Alertmanager no longer lists it as active.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<Alert> resolved = tracker.Update({Burning(false)}, clock.NowMs());
  ASSERT_EQ(resolved.size(), 1u);
  ASSERT_TRUE(resolved[0].resolved);
  ASSERT_TRUE((*sink)->Send(resolved).status.ok());
  for (const json& left : Ours(am.Alerts())) EXPECT_NE(left["status"]["state"], "active") << left.dump();
}

}  // namespace
}  // namespace gpuledger::alerting
