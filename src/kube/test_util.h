// A temporary folder for the kube tests' sockets, removed at the end. Unix socket paths
// are limited to 107 bytes, so it sits directly in the system's temp folder.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace gpuledger::kube::testing {

class SocketDir {
 public:
  SocketDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gl-kube-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~SocketDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace gpuledger::kube::testing
