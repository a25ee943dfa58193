// Small helpers shared by the agent's tests: a temp folder removed at the end, files
// written into it, and a child process with a chosen environment.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

namespace gpuledger::agent::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpuledger-agent-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// /proc/<pid>/environ text: each NAME=value followed by a NUL.
inline std::string EnvironText(std::initializer_list<std::string> vars) {
  std::string out;
  for (const std::string& v : vars) {
    out += v;
    out.push_back('\0');
  }
  return out;
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A child running `sleep 60` with exactly `env` as its environment; killed and reaped
// on destruction.
class Child {
 public:
  explicit Child(const std::vector<std::string>& env) {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> envp;
      for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
      envp.push_back(nullptr);
      char sleep_arg0[] = "sleep";
      char sleep_arg1[] = "60";
      char* argv[] = {sleep_arg0, sleep_arg1, nullptr};
      ::execve("/bin/sleep", argv, envp.data());
      ::_exit(127);
    }
    // Wait until the exec happened, so /proc/<pid>/environ is the new environment.
    for (int i = 0; i < 200; ++i) {
      std::ifstream comm("/proc/" + std::to_string(pid_) + "/comm");
      std::string name;
      std::getline(comm, name);
      if (name == "sleep") break;
      ::usleep(5'000);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

}  // namespace gpuledger::agent::testing
