#!/bin/sh
# The Debian package test (ctest package_deb, labels package;slow): packs the binary of
# this build with cpack, checks the package with lintian (no errors), extracts it into a
# scratch root and runs the installed binary's `demo --once`.
#   packaging/package_test.sh BUILD_DIR CMAKE
# Exit 77 (skipped) when lintian or dpkg-deb is missing, unless CI=true.
set -eu
build=$1
cmake=$2
cpack="$(dirname "$cmake")/cpack"

missing=""
for tool in lintian dpkg-deb dpkg-shlibdeps; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  echo "package test: missing:$missing (Debian: lintian, dpkg-dev)" >&2
  if [ "${CI:-}" = "true" ]; then exit 1; fi
  exit 77
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

"$cmake" --build "$build" --target gpuledger gpuledger_man
(cd "$build" && "$cpack" -G DEB -B "$scratch/pkg" >"$scratch/cpack.log" 2>&1) || {
  cat "$scratch/cpack.log" >&2
  exit 1
}
deb=$(ls "$scratch"/pkg/gpuledger_*.deb)
echo "package test: built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

# No lintian errors (warnings and notes are printed, not failed on).
lintian --fail-on error --tag-display-limit 0 "$deb" | tee "$scratch/lintian.txt"

dpkg-deb -x "$deb" "$scratch/root"
for f in usr/bin/gpuledger usr/share/man/man1/gpuledger.1.gz usr/share/doc/gpuledger/copyright \
         lib/systemd/system/gpuledger-agent.service lib/systemd/system/gpuledger-server.service \
         etc/gpuledger/agent.toml etc/gpuledger/server.toml; do
  if [ ! -f "$scratch/root/$f" ]; then
    echo "package test: $f is not in the package" >&2
    exit 1
  fi
done
dpkg-deb -e "$deb" "$scratch/control"
grep -qx "/etc/gpuledger/agent.toml" "$scratch/control/conffiles"
grep -q "adduser --system" "$scratch/control/postinst"
grep -q "^User=gpuledger$" "$scratch/root/lib/systemd/system/gpuledger-server.service"
gzip -dc "$scratch/root/usr/share/man/man1/gpuledger.1.gz" | grep -q '^\.SS gpuledger agent$'

# The installed binary runs: one simulated day of the demo fleet, its summary printed.
mkdir "$scratch/run"
(cd "$scratch/run" && "$scratch/root/usr/bin/gpuledger" demo --once --days 1 --db "$scratch/run/demo.db") \
  >"$scratch/demo.txt" 2>&1 || {
  cat "$scratch/demo.txt" >&2
  exit 1
}
cat "$scratch/demo.txt"
grep -q "effective utilization" "$scratch/demo.txt"
echo "package test: ok"
