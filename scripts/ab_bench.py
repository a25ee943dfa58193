#!/usr/bin/env python3
"""Two builds side by side on one store (docs/benchmarks.md, "Two builds side by side").

    scripts/ab_bench.py --before OLD_BIN --after NEW_BIN --store DIR/fleet.db
        [--store-after DIR/fleet2.db] [--now 2026-10-26T00:00:00Z] [--rounds 3] [--reps 3]
        [--work DIR] [--queries rec,weekly,usage7,usage30,chargeback,series30,heatmap7]

Each build serves its own copy of the store (copied into --work, the demo's .toml beside
the store giving prices and targets, without its objectives and rules), both up at once;
with --store-after, the build after serves a copy of that store instead (the same fleet
as each build writes it, when a change is to what a store holds).
Then, in rounds whose order alternates, each server answers each query once to warm up
and --reps times timed. Printed per query: the median and range of the wall times and of
the server's CPU time over all rounds, and whether the two builds' answers of the last
round are identical to the byte once each server's config path (which a weekly report
names) is taken out; then each server's memory. Nothing is asserted.
"""
import argparse
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet_bench as fb  # noqa: E402

QUERIES = {
    "rec": ("recommendations 2026-W43", "/api/v1/recommendations?from=2026-10-19T00:00:00Z&to=2026-10-26T00:00:00Z"),
    "weekly": ("weekly report 2026-W43", "/api/v1/reports/weekly?week=2026-W43"),
    "usage7": ("usage 7d by team", "/api/v1/usage?window=7d&by=team"),
    "usage30": ("usage 30d by team", "/api/v1/usage?window=30d&by=team"),
    "chargeback": ("chargeback 2026-10", "/api/v1/chargeback?period=2026-10"),
    "series30": ("fleet series 30d by pool, 1h", "/api/v1/series?window=30d&by=pool&step=1h"),
    "heatmap7": ("heatmap 7d, every device", "/api/v1/heatmap?window=7d"),
}


def summary(values):
    if not values:
        return "-"
    return f"{statistics.median(values):,.0f} ms ({min(values):,.0f}-{max(values):,.0f}, {len(values)} runs)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--store", required=True, help="the store (.db), its demo config (.toml) beside it")
    ap.add_argument("--store-after", help="the build after's store, when not --store's")
    ap.add_argument("--now", default="2026-10-26T00:00:00Z")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default="ab_bench")
    ap.add_argument("--queries", default="rec,weekly,usage7")
    a = ap.parse_args()
    queries = [QUERIES[q] for q in a.queries.split(",")]
    os.makedirs(a.work, exist_ok=True)
    token, section = fb.admin_token(a.after)
    servers, configs = {}, {}
    try:
        for name, binary in (("before", a.before), ("after", a.after)):
            store = a.store_after if name == "after" and a.store_after else a.store
            db = os.path.join(a.work, f"{name}.db")
            for suffix in ("", "-wal"):
                if os.path.exists(store + suffix):
                    shutil.copyfile(store + suffix, db + suffix)
            config = os.path.join(a.work, f"{name}.toml")
            fb.bench_config(store[:-3] + ".toml", config, section)
            configs[name] = config.encode()
            servers[name] = fb.Server(binary, config, a.now, os.path.join(a.work, f"{name}.log"), db)
        times = {(n, q): [] for n in servers for q, _ in queries}
        cpu = {(n, q): [] for n in servers for q, _ in queries}
        bodies = {}
        for r in range(a.rounds):
            for n in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
                s = servers[n]
                for q, path in queries:
                    status, body, _ = fb.get(s.url, path, token)
                    if status != 200:
                        print(f"{n} | {q} | HTTP {status}: {body[:300].decode(errors='replace')}", flush=True)
                        continue
                    bodies[(n, q)] = body.replace(configs[n], b"CONFIG")
                    for _ in range(a.reps):
                        c0 = fb.cpu_seconds(s.proc.pid)
                        times[(n, q)].append(fb.get(s.url, path, token)[2])
                        cpu[(n, q)].append((fb.cpu_seconds(s.proc.pid) - c0) * 1000)
        for q, _ in queries:
            same = bodies.get(("before", q)) == bodies.get(("after", q))
            print(f"{q} | before {summary(times[('before', q)])}, CPU {summary(cpu[('before', q)])} | "
                  f"after {summary(times[('after', q)])}, CPU {summary(cpu[('after', q)])} | "
                  f"answers identical: {same}", flush=True)
        for n, s in servers.items():
            m = fb.memory_kb(s.proc.pid)
            print(f"{n} | VmRSS {m['VmRSS'] / 1024:.0f} MB, VmHWM {m['VmHWM'] / 1024:.0f} MB", flush=True)
    finally:
        for s in servers.values():
            s.stop()


if __name__ == "__main__":
    main()
