#!/bin/sh
# Writes the gpuledger(1) manual page from the binary's own --help texts: the top-level
# help, then each subcommand's (nested ones too, as CLI11 lists them), gzipped as
# Debian wants manual pages (-9n: reproducible).
#   packaging/manpage.sh BINARY VERSION OUT.1.gz
set -eu
bin=$1
version=$2
out=$3
# Run as `gpuledger` from PATH, so that the usage lines say "gpuledger", not the build path.
PATH="$(cd "$(dirname "$bin")" && pwd):$PATH"
export PATH
bin=gpuledger
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# roff-safe text: backslashes escaped, lines that would start a request protected.
roff() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# Subcommand names in a CLI11 help text (the lines under "Subcommands:").
subcommands() {
  "$@" --help 2>/dev/null | awk 'tolower($0) ~ /^subcommands:/ {on=1; next} on && /^  [a-z]/ {print $1} on && /^[^ ]/ {on=0}'
}

section() {  # section "gpuledger sub ..." : one .SS with that command's help, then its subcommands
  title=$1
  shift
  printf '.SS %s\n.nf\n' "$title"
  "$@" --help 2>&1 | roff
  printf '.fi\n'
  for s in $(subcommands "$@"); do
    section "$title $s" "$@" "$s"
  done
}

{
  printf '.TH GPULEDGER 1 "" "gpuledger %s" "User Commands"\n' "$version"
  printf '.SH NAME\ngpuledger \\- GPU cost ledger: node agent, server, reports and simulator\n'
  printf '.SH SYNOPSIS\n.B gpuledger\n.I command\n[\\fIoptions\\fR]\n'
  printf '.SH DESCRIPTION\nThis page is generated from the program'"'"'s own \\fB\\-\\-help\\fR texts.\n'
  printf '.SH OPTIONS\n.nf\n'
  "$bin" --help 2>&1 | roff
  printf '.fi\n.SH COMMANDS\n'
  for s in $(subcommands "$bin"); do
    section "gpuledger $s" "$bin" "$s"
  done
  printf '.SH FILES\n.TP\n/etc/gpuledger/agent.toml, /etc/gpuledger/server.toml\nconfiguration\n'
  printf '.TP\n/var/lib/gpuledger\nthe server'"'"'s store and the agent'"'"'s spool\n'
  printf '.SH SEE ALSO\n/usr/share/doc/gpuledger\n'
} > "$tmp"
gzip -9n < "$tmp" > "$out"
