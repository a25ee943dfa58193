#!/usr/bin/env bash
# Installs the Debian packages gpuledger needs, and only those that are missing, then the
# dashboard's npm packages exactly as src/dashboard/web/package-lock.json pins them.
# Idempotent; when everything is present it returns in well under a second.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh --check    exit 1 (printing what is missing) instead of installing
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git
  # libraries
  libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev libsimdjson-dev
  libsqlite3-dev sqlite3 libtomlplusplus-dev zlib1g-dev libsnappy-dev
  # the PostgreSQL store (libpq), the server and the pgbouncer its tests start (src/store/testing)
  libpq-dev postgresql-15 pgbouncer
  protobuf-compiler libprotobuf-dev
  libcpp-httplib-dev libssl-dev
  # the agent's kubelet PodResources client (src/kube): gRPC, protoc's gRPC plugin
  libgrpc++-dev protobuf-compiler-grpc
  # tests and benchmarks; clang and its runtime for the libFuzzer targets
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev
  # real components the tests and benchmarks start (promtool, Prometheus, VictoriaMetrics,
  # the Alertmanager the alert sink's test sends to)
  prometheus victoria-metrics prometheus-alertmanager
  # a local Slurm cluster for the agent's Slurm test (src/agent/testdata/slurm); with
  # slurmdbd on a MariaDB of the test's own for the quota enforcement and drift tests
  slurmctld slurmd slurm-client munge slurmdbd slurm-wlm-mysql-plugin mariadb-server
  # headless Chromium: the dashboard's browser test and `report weekly --pdf`
  chromium
  # checks the Debian package the packaging test builds
  lintian
  # checks the Helm chart's renderings against the Kubernetes API's schemas (deploy/helm/check_schema.py)
  python3-kubernetes python3-yaml
)
# Node.js and npm build the dashboard (its pinned packages) and drive its browser test.
# A machine that already has them (e.g. from NodeSource) keeps its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

# kubectl checks the Helm chart's rendered manifests offline (deploy/helm). A machine
# that already has one (e.g. from the Kubernetes project) keeps its own.
if ! command -v kubectl >/dev/null; then
  packages+=(kubernetes-client)
fi

# The dashboard's npm packages (uPlot; playwright-core for the tests), from the lock file
# only; done again when the lock file changed since the last install.
npm_packages() {
  local web
  web="$(cd "$(dirname "$0")/.." && pwd)/src/dashboard/web"
  if [ ! -f "$web/node_modules/.package-lock.json" ] ||
     [ "$web/package-lock.json" -nt "$web/node_modules/.package-lock.json" ]; then
    echo "deps: npm ci in src/dashboard/web" >&2
    (cd "$web" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The browser test's playwright-core needs Node.js 20 or later; Debian 12's own nodejs
# is 18. Without it ctest reports dashboard_browser_test skipped, and failed under
# CI=true (src/dashboard/CMakeLists.txt), so say so here, first.
node_too_old() {
  local major
  major="$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\).*/\1/p')"
  [ -z "$major" ] || [ "$major" -lt 20 ]
}
warn_if_node_too_old() {
  if node_too_old; then
    echo "deps: warning: node $(node --version 2>/dev/null) is older than 20; the dashboard's" \
         "browser test needs 20 or later (Debian 12's nodejs is 18) and fails under CI=true" >&2
  fi
}

if [ "${1:-}" = "--check" ]; then
  status=0
  if [ ${#missing[@]} -gt 0 ]; then
    echo "missing packages: ${missing[*]}" >&2
    status=1
  fi
  if command -v node >/dev/null && node_too_old; then
    echo "node $(node --version) is older than 20: the dashboard's browser test needs 20 or later" >&2
    status=1
  fi
  exit $status
fi
if [ ${#missing[@]} -eq 0 ]; then
  npm_packages
  warn_if_node_too_old
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists once if they are missing or older than a day.
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
  $SUDO apt-get update -qq
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_packages
warn_if_node_too_old
