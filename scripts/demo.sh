#!/usr/bin/env bash
# Builds gpuledger (release) and runs its demo, on a fresh Debian 12 machine as well as on
# a developer's.
#   scripts/demo.sh              simulate a week, print the fleet summary, exit (`demo --once`)
#   scripts/demo.sh --live [...] the live demo: the server fed by the simulated fleet until
#                                Ctrl-C (further arguments go to `gpuledger demo`)
#   scripts/demo.sh ARGS...      `gpuledger demo --once ARGS...`
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target gpuledger
if [ "${1:-}" = "--live" ]; then
  shift
  exec build/release/gpuledger demo "$@"
fi
exec build/release/gpuledger demo --once "$@"
