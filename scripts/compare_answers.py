#!/usr/bin/env python3
"""Compares two gpuledger builds' answers on one store, byte for byte.

A change that makes a query faster must not change what it answers. This starts
`serve` from each binary in turn on the same store (a fleet made by
`scripts/fleet_bench.py --keep DIR`, or any store with its config), asks both the
benchmark's queries and a few more, and prints one line per query: "same" when the
two HTTP statuses and bodies are identical, to the byte (so to the micro-unit),
"DIFFERENT" otherwise. Exits 1 when any answer differs.

    scripts/compare_answers.py --old OLD_BIN --new NEW_BIN --config DIR/fleet1000.toml

`--now` is the server's clock (default: the benchmark's, the end of October 2026).
"""
import argparse
import hashlib
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet_bench as fb  # noqa: E402

EXTRA = [
    "/api/v1/fleet",
    "/api/v1/usage?window=7d&by=team,pool,hour",
    "/api/v1/usage?window=30d&by=project,kind",
    "/api/v1/series?window=7d&by=kind&step=1h",
    "/api/v1/series?window=30d&by=team&step=1d",
    "/api/v1/reports/weekly?week=2026-W42",
]


def answers(binary, config, now, work):
    token, section = fb.admin_token(binary)
    # Beside the store's config: a relative store path in it still names the store.
    bench = os.path.join(os.path.dirname(os.path.abspath(config)), "compare.bench.toml")
    fb.bench_config(config, bench, section)
    try:
        srv = fb.Server(binary, bench, now, os.path.join(work, "compare-serve.log"))
        try:
            return {p: fb.get(srv.url, p, token)[:2] for p in [q for _, q in fb.QUERIES] + EXTRA}
        finally:
            srv.stop()
    finally:
        os.remove(bench)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--config", required=True, help="the store's config (demo --once writes one beside the store)")
    ap.add_argument("--now", default=fb.END_OF_MONTH)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuledger-compare-") as work:
        old = answers(args.old, args.config, args.now, work)
        new = answers(args.new, args.config, args.now, work)
    differ = 0
    for path, (s1, b1) in old.items():
        s2, b2 = new[path]
        same = s1 == s2 and b1 == b2
        differ += not same
        print(f"{'same' if same else 'DIFFERENT'} | {path} | HTTP {s1}/{s2} | {len(b1):,} / {len(b2):,} bytes | "
              f"sha256 {hashlib.sha256(b1).hexdigest()[:12]} / {hashlib.sha256(b2).hexdigest()[:12]}", flush=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
