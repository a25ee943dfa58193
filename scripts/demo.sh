#!/usr/bin/env bash
# Builds gpuledger (release) and runs `gpuledger demo`, on a fresh Debian 12 machine as
# well as on a developer's. Arguments go to `gpuledger demo` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target gpuledger
exec build/release/gpuledger demo "$@"
