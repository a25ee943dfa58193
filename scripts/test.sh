#!/usr/bin/env bash
# Builds gpuledger and runs every test, on a fresh Debian 12 machine as well as on a
# developer's: installs what is missing (scripts/deps.sh), builds with the asan preset
# (clang, ASan + UBSan, warnings as errors; the libFuzzer targets in the same tree), runs
# ctest, then fuzzes each parser for a bounded time (scripts/fuzz.sh, from that tree).
#   scripts/test.sh [ctest arguments...]      e.g. scripts/test.sh -L ledger
# GPULEDGER_PRESET=debug|asan|tsan|release chooses another preset (default asan).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
preset="${GPULEDGER_PRESET:-asan}"
# Where the tree was configured with another compiler (the asan preset was GCC before it
# became clang), CMake deletes the cache and configures without the preset's variables
# (no sanitizers, no build type): configure once more, so that they apply.
if ! out="$(cmake --preset "$preset" 2>&1)"; then
  echo "$out" >&2
  exit 1
fi
if grep -q "require your cache to be deleted" <<<"$out"; then
  cmake --preset "$preset" >/dev/null
fi
cmake --build --preset "$preset"
ctest --preset "$preset" "$@"
# The parsers' fuzz targets, 20 seconds each (GPULEDGER_FUZZ_SECONDS=0 skips them).
if [ $# -eq 0 ] && [ "${GPULEDGER_FUZZ_SECONDS:-20}" -gt 0 ]; then
  scripts/fuzz.sh "${GPULEDGER_FUZZ_SECONDS:-20}"
fi
