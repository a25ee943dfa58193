// A throwaway Slurm cluster on localhost for tests (the agent's and the actuators'):
// munged, slurmctld and slurmd from Debian, started by testdata/slurm/slurm_harness.sh
// under a folder of the test's, on free loopback ports, with SLURM_CONF pointing at it
// until the cluster is destroyed. With Accounting::kSlurmdbd also a MariaDB on a fresh
// datadir and slurmdbd storing into it, slurmctld enforcing association limits on
// gres/gpu (the harness's header says how). Header-only, for test binaries.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "agent/slurm.h"
#include "core/testing/free_port.h"

namespace gpuledger::agent::local_slurm {

inline std::string Harness() { return std::string(GPULEDGER_SOURCE_DIR) + "/src/agent/testdata/slurm/slurm_harness.sh"; }

// Why the cluster cannot run here, or "" when it can.
inline std::string Missing() {
  if (::geteuid() != 0) return "not root (slurmd and munged need it)";
  for (const char* bin : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch",
                          "/usr/bin/scontrol", "/usr/bin/scancel", "/usr/bin/sinfo"}) {
    if (!std::filesystem::exists(bin)) {
      return fmt::format("{} missing (Debian: slurmctld slurmd slurm-client munge)", bin);
    }
  }
  return "";
}

// Why a cluster with accounting cannot run here, or "" when it can.
inline std::string MissingAccounting() {
  if (std::string why = Missing(); !why.empty()) return why;
  for (const char* bin : {"/usr/sbin/slurmdbd", "/usr/bin/sacctmgr", "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db",
                          "/usr/bin/mariadb"}) {
    if (!std::filesystem::exists(bin)) {
      return fmt::format("{} missing (Debian: slurmdbd slurm-wlm-mysql-plugin mariadb-server)", bin);
    }
  }
  return "";
}

enum class Accounting {
  kNone,      // AccountingStorageType=accounting_storage/none
  kSlurmdbd,  // slurmdbd on a MariaDB of its own; limits enforced; cluster gltest, account nlp with user root
};

class Cluster {
 public:
  // Starts the cluster with its state under `work`; error() says why when it did not.
  explicit Cluster(std::string work, Accounting accounting = Accounting::kNone) : work_(std::move(work)) {
    std::vector<std::string> argv = {Harness(), "start", work_, std::to_string(test_env::FreeLoopbackPort()),
                                     std::to_string(test_env::FreeLoopbackPort())};
    if (accounting == Accounting::kSlurmdbd) {
      argv.push_back(std::to_string(test_env::FreeLoopbackPort()));
      argv.push_back(std::to_string(test_env::FreeLoopbackPort()));
    }
    auto out = RunCommand(argv, accounting == Accounting::kSlurmdbd ? 180'000 : 60'000);
    if (!out.ok()) {
      error_ = out.status().message();
      return;
    }
    ::setenv("SLURM_CONF", (std::filesystem::path(work_) / "slurm.conf").c_str(), 1);
  }
  ~Cluster() { Stop(); }
  // Stops the daemons (once); call it before removing a folder that holds `work`, whose pid
  // files the harness reads to stop them.
  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    (void)RunCommand({Harness(), "stop", work_}, 30'000);
    ::unsetenv("SLURM_CONF");
  }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  const std::string& error() const { return error_; }

 private:
  std::string work_;
  std::string error_;
  bool stopped_ = false;
};

// A Slurm command (sbatch, scontrol, scancel...) with a 30 s limit: its output, or why it failed.
inline Result<std::string> Run(const std::vector<std::string>& argv) { return RunCommand(argv, 30'000); }

// `scontrol show job ID`, or why it failed.
inline std::string ShowJob(const std::string& id) {
  auto out = Run({"scontrol", "show", "job", id});
  return out.ok() ? *out : out.status().message();
}

// Waits, at most `seconds`, until the job's `scontrol show job` contains `text`.
inline bool WaitForJob(const std::string& id, const std::string& text, int seconds = 30) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (ShowJob(id).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace gpuledger::agent::local_slurm
