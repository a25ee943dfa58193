// The golden scenario files of a test binary: every `*.test` file of a folder of the
// source tree, by name, and a test name for each (one golden format for the ledger and
// the SLO engine: testdata/golden/README.md beside each).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

namespace gpuledger::test_env {

// The `*.test` files of `folder` (relative to the source tree), sorted.
inline std::vector<std::filesystem::path> GoldenFiles(const std::string& folder) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(GPULEDGER_SOURCE_DIR) / folder)) {
    if (e.path().extension() == ".test") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A file's stem with every character GoogleTest refuses in a name turned into '_'.
inline std::string GoldenTestName(const ::testing::TestParamInfo<std::filesystem::path>& param_info) {
  std::string n = param_info.param.stem().string();
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

}  // namespace gpuledger::test_env
