#!/bin/sh
# The README's examples run as written: every command of its block marked
# "readme-examples" runs, in a fresh folder (where the first makes the demo store), with
# `gpuledger` being the binary under test. A command fails the test when it exits
# non-zero or says nothing (on stdout, or in the file it was told to write with --out).
#
#   readme_examples_test.sh GPULEDGER README
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
readme=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT INT TERM

# The block: the fenced lines after the marker, up to the closing fence; comments cut.
awk '/<!-- readme-examples/ { marked = 1; next }
     marked && /^```/ { if (inside) exit; inside = 1; next }
     inside { sub(/[ \t]+#.*$/, ""); if ($0 != "") print }' "$readme" >"$dir/commands"
count=$(wc -l <"$dir/commands")
if [ "$count" -lt 5 ]; then
  echo "readme_examples: found $count commands in $readme's readme-examples block" >&2
  exit 1
fi

failed=0
n=0
cd "$dir" || exit 1
while IFS= read -r line; do
  n=$((n + 1))
  case "$line" in
    gpuledger\ *) ;;
    *) echo "FAIL: line $n does not start with gpuledger: $line" >&2; failed=$((failed + 1)); continue ;;
  esac
  args=${line#gpuledger }
  # The README's words, split as a shell would (no quoting is used in the block).
  # shellcheck disable=SC2086
  "$bin" $args >"out.$n" 2>"err.$n"
  rc=$?
  out_file=$(printf '%s\n' "$args" | sed -n 's/.*--out \([^ ]*\).*/\1/p')
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: gpuledger $args: exit $rc: $(tail -c 600 "err.$n")" >&2
    failed=$((failed + 1))
  elif [ ! -s "out.$n" ] && { [ -z "$out_file" ] || [ ! -s "$out_file" ]; }; then
    echo "FAIL: gpuledger $args: no answer" >&2
    failed=$((failed + 1))
  else
    echo "ok: gpuledger $args ($(wc -c <"out.$n") bytes)"
  fi
done <"$dir/commands"
echo "readme_examples: $n commands, $failed failed"
[ "$failed" -eq 0 ]
