// A throwaway Slurm cluster on localhost for tests (the agent's and the actuators'):
// munged, slurmctld and slurmd from Debian, started by testdata/slurm/slurm_harness.sh
// under a folder of the test's, on free loopback ports, with SLURM_CONF pointing at it
// until the cluster is destroyed. Header-only, for test binaries.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

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

class Cluster {
 public:
  // Starts the cluster with its state under `work`; error() says why when it did not.
  explicit Cluster(std::string work) : work_(std::move(work)) {
    auto out = RunCommand({Harness(), "start", work_, std::to_string(test_env::FreeLoopbackPort()),
                           std::to_string(test_env::FreeLoopbackPort())},
                          60'000);
    if (!out.ok()) {
      error_ = out.status().message();
      return;
    }
    ::setenv("SLURM_CONF", (std::filesystem::path(work_) / "slurm.conf").c_str(), 1);
  }
  ~Cluster() {
    (void)RunCommand({Harness(), "stop", work_}, 30'000);
    ::unsetenv("SLURM_CONF");
  }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  const std::string& error() const { return error_; }

 private:
  std::string work_;
  std::string error_;
};

}  // namespace gpuledger::agent::local_slurm
