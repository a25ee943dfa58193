#!/usr/bin/env bash
# Builds the libFuzzer targets of the three parsers (Prometheus text and remote-write in
# src/wire/prometheus, the native batch in src/server), of the query API's parameters
# (src/server/fuzz_query_params.cc) and of sample chunks (src/store/fuzz_sample_chunk.cc) with clang (ASan + UBSan) and runs
# each for a bounded time, seeded from their testdata.
#   scripts/fuzz.sh          20 seconds per target
#   scripts/fuzz.sh 300      300 seconds per target
# The asan preset's tree (build/asan) is clang with GPULEDGER_FUZZ=ON, so the targets are
# already built there and this script uses it as it is. Without it, it configures a
# clang tree of its own in build/fuzz.
# Environment: FUZZ_BUILD_DIR (a tree to use or configure; default build/asan when it is
# configured for fuzzing, else build/fuzz), FUZZ_JOBS (build jobs, default 2),
# FUZZ_CMAKE_ARGS (extra configure arguments for a tree of its own, e.g. -DGPULEDGER_EXCLUDE=...).
# The corpora grow under $FUZZ_BUILD_DIR/corpus/ and are kept between runs; a crash
# leaves its input as $FUZZ_BUILD_DIR/crash-* and makes this script fail.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-20}"
# A tree configured for the fuzz targets: clang, GPULEDGER_FUZZ=ON.
fuzz_tree() {
  grep -q '^GPULEDGER_FUZZ:[A-Z]*=ON$' "$1/CMakeCache.txt" 2>/dev/null &&
    grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++' "$1/CMakeCache.txt"
}
if [ -n "${FUZZ_BUILD_DIR:-}" ]; then
  build="$FUZZ_BUILD_DIR"
elif fuzz_tree "$root/build/asan"; then
  build="$root/build/asan"
else
  build="$root/build/fuzz"
fi
mkdir -p "$build"
build="$(cd "$build" && pwd)"
testdata="$root/src/wire/prometheus/testdata"

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (Debian package clang)" >&2
  exit 1
fi

sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
fuzz_tree "$build" || CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DGPULEDGER_FUZZ=ON -DGPULEDGER_WERROR=ON \
  -DGPULEDGER_BUILD_TESTS=OFF -DGPULEDGER_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" ${FUZZ_CMAKE_ARGS:-} >/dev/null
ninja -C "$build" -j "${FUZZ_JOBS:-2}" fuzz_prom_text fuzz_remote_write fuzz_native_batch fuzz_query_params \
  fuzz_sample_chunk

run() {
  local target="$1"; shift
  local corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  cp -n "$@" "$corpus/" 2>/dev/null || true
  local bin
  bin="$(find "$build" -type f -name "$target" -perm -u+x | head -n 1)"
  echo "fuzz: $target for ${seconds}s ($(ls "$corpus" | wc -l) seed files)" >&2
  (cd "$build" && "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
    -print_final_stats=1 "$corpus")
}

run fuzz_prom_text "$testdata"/*.prom
run fuzz_remote_write "$testdata"/remote_write_golden.*
run fuzz_native_batch "$root"/src/server/testdata/batch.json*
run fuzz_query_params "$root"/src/server/testdata/query_params/*
run fuzz_sample_chunk  # no seed files: any bytes are a chunk, and samples to encode
