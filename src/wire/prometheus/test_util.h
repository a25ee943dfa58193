// Helpers for the prometheus tests: fixture paths and file reading.
#pragma once

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace gpuledger::prometheus::testutil {

// The whole file, or nullopt when it cannot be read.
inline std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A fixture of this folder's testdata/.
inline std::string Testdata(std::string_view name) {
  return std::string(GPULEDGER_PROM_TESTDATA_DIR) + "/" + std::string(name);
}

// A file of the shared real-data folder (never copied into the repository).
inline std::string SharedData(std::string_view relative) {
  return std::string(GPULEDGER_SHARED_DATA_DIR) + "/" + std::string(relative);
}

}  // namespace gpuledger::prometheus::testutil
