// Helpers of the tests that run the real gpuledger binary (cli_test).
#pragma once

#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/batch.h"
#include "core/time.h"
#include "wire/batch.h"

namespace gpuledger::cli::testing {

struct Outcome {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// Runs `gpuledger ARGS` (the binary this test was built with) and waits for it.
inline Outcome Gpuledger(const std::string& args) {
  std::string cmd = std::string(GPULEDGER_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

// The whole content of the file at `path` ("" when it cannot be read).
inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `gpuledger ARGS` (`serve`, a live `demo`) run in the background, its output to `log`,
// for as long as the object lives (or until Stop): SIGTERM, then a wait until it has
// exited.
class BackgroundGpuledger {
 public:
  BackgroundGpuledger(const std::string& args, const std::string& log) {
    std::string pid_file = log + ".pid";
    std::string cmd = std::string(GPULEDGER_BINARY) + " " + args + " >" + log + " 2>&1 & echo $! >" + pid_file;
    if (std::system(cmd.c_str()) == 0) std::ifstream(pid_file) >> pid_;
  }
  ~BackgroundGpuledger() { Stop(); }
  BackgroundGpuledger(const BackgroundGpuledger&) = delete;
  BackgroundGpuledger& operator=(const BackgroundGpuledger&) = delete;

  bool started() const { return !pid_.empty(); }
  void Stop() {
    if (pid_.empty()) return;
    std::string cmd = "kill -TERM " + pid_ + "; while kill -0 " + pid_ + " 2>/dev/null; do sleep 0.05; done";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "could not stop the server " << pid_;
    pid_.clear();
  }

 private:
  std::string pid_;
};

// A test with a fresh folder of its own under the system's temporary directory, removed
// afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpuledger-cli-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `text` to the file `name` of the folder and returns its path.
  std::string File(const std::string& name, const std::string& text) const {
    auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

// Two hours from 2026-11-23T00:00:00Z (the Monday of 2026-W48) of one GPU in `pool`, held
// by one job of team nlp at 25% activity, in NDJSON, one batch an hour.
inline std::string TwoHoursOfOneGpu(const std::string& pool = "training") {
  std::string out;
  const int64_t base = 1'795'392'000'000;  // 2026-11-23T00:00:00Z
  for (int h = 0; h < 2; ++h) {
    Batch b;
    b.batch_id = "node-1-h" + std::to_string(h);
    b.devices.push_back(Device{.uuid = "GPU-1", .node = "node-1", .model = "NVIDIA-A100", .pool = pool,
                               .sample_interval_ms = 60'000});
    if (h == 0) {
      b.jobs.push_back(Job{.id = "j1", .team = "nlp", .project = "llm", .kind = JobKind::kTraining});
      b.allocations.push_back(Allocation{"GPU-1", "j1", base, std::nullopt});
    }
    for (int m = h == 0 ? 0 : 1; m <= 60; ++m) {
      Sample s;
      s.device_uuid = "GPU-1";
      s.t_ms = base + h * kMsPerHour + m * kMsPerMinute;
      s.sm_active = 0.25;
      b.samples.push_back(s);
    }
    out += wire::WriteBatch(b) + "\n";
  }
  return out;
}

}  // namespace gpuledger::cli::testing
