#!/usr/bin/env python3
"""The large-fleet benchmarks (docs/benchmarks.md): the demo's workload model at N GPUs,
the queries people wait for, timed against a running `gpuledger serve`.

    scripts/fleet_bench.py [--gpus 1000,10000] [--days 31] [--interval 300s]
        [--postgresql] [--pg-gpus 1000] [--replicas 1,3] [--senders 8] [--reps 7]
        [--bin build/release/src/cli/gpuledger] [--keep DIR]

For each size N (SQLite):
  1. `gpuledger demo --once --gpus N` writes the span into a fresh store (the ledger's own
     ingest and rollup refresh): its wall time and samples per second, the file's size;
  2. `gpuledger serve --now END` on that store, then each query once to warm up and
     --reps times timed (median, min, max, in ms): usage 30 days and 7 days by team,
     chargeback for the month, the dashboard's fleet series (30 and 7 days by pool, hourly),
     the 7-day heatmap (every GPU and slice; above max_heatmap_cells the server answers 413,
     which is reported), the weekly report; and `gpuledger usage --by team` over the same 30
     days run as a command (process start and store open included);
  3. the server's resident memory afterwards (VmRSS, VmHWM);
  4. a server on a fresh store fed one day of the same fleet over HTTP (`demo --once
     --server`): samples per second, CPU per million samples, the server's peak memory.
With --postgresql: a PostgreSQL 15 of its own (initdb into a temporary directory, as
`nobody` when run as root, fsync and synchronous_commit on: durable before the
acknowledgement), then for each replica count R: a fresh database, R `gpuledger serve`
processes on it, and `gpuledger demo --once --gpus INGEST_GPUS --days INGEST_DAYS
--interval INGEST_INTERVAL --server URL1,...,URLR --senders S` streaming that span to them
(a batch per node and hour, as an agent with a long spool would send): samples per second,
and CPU seconds per million samples of the servers and of PostgreSQL (from /proc, so that
the load of a shared machine moves the rate but much less the CPU). Then PG_GPUS GPUs over
the span the SQLite stores hold are sent to one server on a fresh database, and the queries
of step 2 run against it.

Each query's time comes with the CPU time the server spent meanwhile (from /proc; its
background threads included, which are idle then): on a shared machine the wall time moves
with the load, the CPU time much less. Nothing is asserted: the figures are printed, one
line each, for the note and the docs.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

START = "2026-10-01T00:00:00Z"   # a month wholly inside the span: chargeback 2026-10
END_OF_MONTH = "2026-11-01T00:00:00Z"
WEEK = "2026-W43"                 # Mon 2026-10-19 .. Sun 2026-10-25
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User + system CPU of a live process (and of its waited-for children)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime + cutime + cstime) / CLK_TCK


def memory_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def run(argv, **kw):
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"fleet_bench: {' '.join(argv)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p, time.monotonic() - t0


def stats(ms):
    return f"median {statistics.median(ms):.0f} ms (min {min(ms):.0f}, max {max(ms):.0f}; {len(ms)} runs)"


class Server:
    def __init__(self, binary, config, now, log_path, db=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [binary, "serve", "--config", config, "--listen", f"127.0.0.1:{self.port}", "--now", now]
        if db:
            argv += ["--db", db]
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"fleet_bench: the server exited ({self.proc.returncode}); see {log_path}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        sys.exit("fleet_bench: the server did not answer /healthz in 10 minutes")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)
        self.log.close()


def get(url, path, token):
    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            body = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        body = e.read()
        status = e.code
    return status, body, (time.monotonic() - t0) * 1000


QUERIES = [
    ("usage 30d by team", "/api/v1/usage?window=30d&by=team"),
    ("usage 7d by team", "/api/v1/usage?window=7d&by=team"),
    ("chargeback 2026-10", "/api/v1/chargeback?period=2026-10"),
    ("fleet series 30d by pool, 1h", "/api/v1/series?window=30d&by=pool&step=1h"),
    ("fleet series 7d by pool, 1h", "/api/v1/series?window=7d&by=pool&step=1h"),
    ("heatmap 7d, every device", "/api/v1/heatmap?window=7d"),
    ("weekly report " + WEEK, f"/api/v1/reports/weekly?week={WEEK}"),
]


def time_queries(label, url, token, reps, pid, db_cpu=None):
    for name, path in QUERIES:
        status, body, _ = get(url, path, token)  # warm-up
        if status != 200:
            print(f"{label} | {name} | HTTP {status}: {body[:200].decode(errors='replace')}", flush=True)
            continue
        ms, cpu, db = [], [], []
        for _ in range(reps):
            c0, d0 = cpu_seconds(pid), db_cpu() if db_cpu else 0
            ms.append(get(url, path, token)[2])
            cpu.append((cpu_seconds(pid) - c0) * 1000)
            db.append(((db_cpu() if db_cpu else 0) - d0) * 1000)
        in_db = f" | PostgreSQL CPU {stats(db)}" if db_cpu else ""
        print(f"{label} | {name} | {stats(ms)} | server CPU {stats(cpu)}{in_db} | {len(body):,} bytes", flush=True)
    mem = memory_kb(pid)
    print(f"{label} | server memory after the queries | VmRSS {mem['VmRSS'] / 1024:.0f} MB, "
          f"VmHWM {mem['VmHWM'] / 1024:.0f} MB", flush=True)


def admin_token(binary):
    p, _ = run([binary, "token", "--name", "bench", "--role", "admin"])
    token = p.stdout.split("\n", 1)[0].removeprefix("token: ").strip()
    section = p.stdout.split("\n", 2)[2]
    return token, section


def bench_config(demo_toml, out_path, token_section, extra=""):
    """The demo's config (store, prices, targets) with the bench's token, without its
    objectives and intervention rules: the server's objectives loop would evaluate them
    every minute beside the queries, and its CPU would be counted as theirs."""
    with open(demo_toml) as f:
        text = f.read()
    kept, skipping = [], False
    for line in text.splitlines():
        if line.startswith("["):
            skipping = line.startswith("[[objective]]") or line.startswith("[[intervention]]")
        if not skipping:
            kept.append(line)
    with open(out_path, "w") as f:
        f.write("\n".join(kept) + "\n" + extra + "\n" + token_section)


def sqlite_size(args, work, n, token, token_section):
    db = os.path.join(work, f"fleet{n}.db")
    label = f"SQLite {n} GPUs"
    if args.reuse and os.path.exists(db):
        print(f"{label} | the store of an earlier run, {os.path.getsize(db) / 1e6:,.0f} MB", flush=True)
    else:
        p, wall = run([args.bin, "demo", "--once", "--gpus", str(n), "--days", str(args.days), "--interval",
                       args.interval, "--start", START, "--db", db])
        line = [x for x in p.stderr.replace("\r", "\n").splitlines() if "batches," in x][-1]
        samples = int(line.split(" batches, ")[1].split(" samples")[0])
        devices = line.split(" from ")[1].split(" GPUs")[0]
        size = sum(os.path.getsize(db + s) for s in ("", "-wal") if os.path.exists(db + s))
        print(f"{label} | demo --once ({args.days} days at {args.interval}, {devices} GPUs and slices) | "
              f"{wall:.0f} s, {samples:,} samples, {samples / wall:,.0f} samples/s ({line.strip()}) | "
              f"store {size / 1e6:,.0f} MB", flush=True)
    config = os.path.join(work, f"fleet{n}.bench.toml")
    bench_config(db[:-3] + ".toml", config, token_section)
    t0 = time.monotonic()
    srv = Server(args.bin, config, END_OF_MONTH, os.path.join(work, f"serve{n}.log"))
    print(f"{label} | serve start-up to /healthz | {time.monotonic() - t0:.1f} s", flush=True)
    try:
        time_queries(label, srv.url, token, args.reps, srv.proc.pid)
    finally:
        srv.stop()
    ms, cpu = [], []
    for _ in range(3):
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        _, wall = run([args.bin, "usage", "--config", config, "--from", "2026-10-02T00:00:00Z", "--to", END_OF_MONTH,
                       "--by", "team"])
        ms.append(wall * 1000)
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime) * 1000)
    print(f"{label} | `gpuledger usage --from 2026-10-02 --to 2026-11-01 --by team` (30 days) as a command | "
          f"{stats(ms)} | CPU {stats(cpu)}", flush=True)
    # The same fleet reporting to a server on a fresh store, over HTTP, as its agents would.
    live = os.path.join(work, f"live{n}.toml")
    bench_config(db[:-3] + ".toml", live, token_section, '[server]\nmax_sample_age = "62d"\n')
    live_db = os.path.join(work, f"live{n}.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(live_db + suffix):
            os.remove(live_db + suffix)
    srv = Server(args.bin, live, END_OF_MONTH, os.path.join(work, f"live{n}.log"), live_db)
    try:
        stream(args, label, [srv], n, 1, args.interval, token)
    finally:
        srv.stop()


def stream(args, label, srvs, gpus, days, interval, token, db_cpu=None):
    """`demo --once --server` sends the span to the servers; prints the rate and the CPU."""
    cpu0 = [cpu_seconds(s.proc.pid) for s in srvs]
    db0 = db_cpu() if db_cpu else 0
    p, wall = run([args.bin, "demo", "--once", "--gpus", str(gpus), "--days", str(days), "--interval", interval,
                   "--start", START, "--server", ",".join(s.url for s in srvs), "--token", token,
                   "--senders", str(args.senders)])
    served = sum(cpu_seconds(s.proc.pid) - c for s, c in zip(srvs, cpu0))
    samples = int(p.stdout.split(" batches, ")[1].split(" samples")[0])
    client_cpu = float(p.stdout.rsplit("CPU ", 1)[1].split(" s")[0])
    m = samples / 1e6
    db = f", PostgreSQL {(db_cpu() - db0) / m:.2f} s" if db_cpu else ""
    mem = ", ".join(f"{memory_kb(s.proc.pid)['VmHWM'] / 1024:.0f} MB" for s in srvs)
    print(f"{label} | sustained ingest over HTTP, durable, {args.senders} senders, {days} day(s) at {interval}, "
          f"a batch per node and hour | "
          f"{samples:,} samples in {wall:.0f} s: {samples / wall:,.0f} samples/s | CPU per million samples: "
          f"server(s) {served / m:.2f} s{db}, generator and senders {client_cpu / m:.2f} s | server VmHWM {mem}",
          flush=True)


class Postgres:
    def __init__(self, work):
        self.dir = os.path.join(work, "pg")
        os.makedirs(self.dir)
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        if not os.path.exists(os.path.join(bindir, "initdb")):
            bindir = "/usr/lib/postgresql/15/bin"
        self.bin = bindir
        self.as_user = []
        if os.geteuid() == 0:  # initdb and postgres refuse root (docs/store-postgresql.md)
            shutil.chown(self.dir, "nobody", "nogroup")
            os.chmod(work, 0o755)
            self.as_user = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        data = os.path.join(self.dir, "data")
        run(self.as_user + [os.path.join(bindir, "initdb"), "-D", data, "-U", "gpuledger", "-A", "trust"])
        opts = (f"-c listen_addresses='' -c unix_socket_directories={self.dir} -c fsync=on "
                f"-c synchronous_commit=on -c max_connections=200 -c shared_buffers=1GB "
                f"-c max_wal_size=4GB -c checkpoint_timeout=15min")
        run(self.as_user + [os.path.join(bindir, "pg_ctl"), "-D", data, "-l", os.path.join(self.dir, "log"),
                            "-o", opts, "-w", "start"])
        self.data = data
        with open(os.path.join(data, "postmaster.pid")) as f:
            self.pid = int(f.readline())

    def psql(self, sql):
        run(["psql", "-h", self.dir, "-U", "gpuledger", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql])

    def size(self, db):
        out = subprocess.run(["psql", "-h", self.dir, "-U", "gpuledger", "-d", db, "-tAc",
                              "SELECT pg_database_size(current_database())"], capture_output=True, text=True, check=True)
        return int(out.stdout.strip())

    def url(self, db):
        return f"postgresql://gpuledger@/{db}?host={self.dir}"

    def cpu(self):
        """CPU seconds of the postmaster and every live backend, and of the exited ones the
        postmaster has waited for."""
        total = cpu_seconds(self.pid)
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
                if ppid == self.pid:
                    total += cpu_seconds(int(entry))
        return total

    def stop(self):
        run(self.as_user + [os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"])


def postgresql(args, work, token, token_section):
    # The demo's config (prices, targets) is the same at every size: take it from a short run.
    probe = os.path.join(work, "probe.db")
    run([args.bin, "demo", "--once", "--days", "1", "--interval", "300s", "--start", START, "--db", probe])
    pg = Postgres(work)
    srvs = []

    def servers(name, count):
        pg.psql(f"DROP DATABASE IF EXISTS {name}")
        pg.psql(f"CREATE DATABASE {name}")
        config = os.path.join(work, f"{name}.bench.toml")
        # Samples a month old are what is being sent: nothing is refused for age.
        bench_config(probe[:-3] + ".toml", config, token_section, '[server]\nmax_sample_age = "62d"\n')
        return [Server(args.bin, config, END_OF_MONTH, os.path.join(work, f"{name}-{i}.log"), pg.url(name))
                for i in range(count)]

    try:
        # Sustained ingest: a day of the one-cluster fleet at 10 s, to 1 and to 3 replicas.
        for r in args.replicas:
            srvs = servers(f"ingest{r}", r)
            stream(args, f"PostgreSQL {args.ingest_gpus} GPUs, {r} replica(s)", srvs, args.ingest_gpus,
                   args.ingest_days, args.ingest_interval, token, pg.cpu)
            for s in srvs:
                s.stop()
            srvs = []
        # The queries, on the span the SQLite stores hold: sent through one server, or
        # with --pg-direct written straight into the database by the demo, as --db does.
        label = f"PostgreSQL {args.pg_gpus} GPUs"
        if args.pg_direct:
            pg.psql("DROP DATABASE IF EXISTS queries")
            pg.psql("CREATE DATABASE queries")
            demo_toml = os.path.join(work, "queries.demo.toml")
            t0, c0 = time.monotonic(), pg.cpu()
            run([args.bin, "demo", "--once", "--gpus", str(args.pg_gpus), "--days", str(args.days), "--interval",
                 args.interval, "--start", START, "--db", pg.url("queries"), "--write-config", demo_toml])
            print(f"{label} | filled by demo --once --db, {args.days} days at {args.interval} | "
                  f"{time.monotonic() - t0:.0f} s, PostgreSQL CPU {pg.cpu() - c0:.0f} s", flush=True)
            config = os.path.join(work, "queries.bench.toml")
            bench_config(demo_toml, config, token_section)
            srvs = [Server(args.bin, config, END_OF_MONTH, os.path.join(work, "queries-0.log"), pg.url("queries"))]
        else:
            srvs = servers("queries", 1)
            stream(args, label, srvs, args.pg_gpus, args.days, args.interval, token, pg.cpu)
        time_queries(label, srvs[0].url, token, args.reps, srvs[0].proc.pid, pg.cpu)
        print(f"{label} | database size {pg.size('queries') / 1e6:,.0f} MB", flush=True)
    finally:
        for s in srvs:
            s.stop()
        pg.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/release/src/cli/gpuledger")
    ap.add_argument("--gpus", default="1000,10000", help="SQLite sizes, comma-separated; empty: none")
    ap.add_argument("--days", type=int, default=31)
    ap.add_argument("--interval", default="300s")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--postgresql", action="store_true")
    ap.add_argument("--pg-gpus", type=int, default=1000)
    ap.add_argument("--replicas", default="1,3", help="PostgreSQL sustained ingest to so many servers; empty: none")
    ap.add_argument("--pg-direct", action="store_true", help="PostgreSQL queries: fill the database with "
                    "demo --once --db (fast) rather than through a server (as agents would)")
    ap.add_argument("--ingest-gpus", type=int, default=344, help="PostgreSQL sustained ingest: the fleet's size")
    ap.add_argument("--ingest-days", type=int, default=1)
    ap.add_argument("--ingest-interval", default="10s")
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--keep", help="work in this folder and keep it (default: a temporary one, removed)")
    ap.add_argument("--reuse", action="store_true", help="with --keep: a size's store made by an earlier run is "
                    "queried again, not made anew")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    args.replicas = [int(x) for x in args.replicas.split(",") if x]
    work = args.keep or tempfile.mkdtemp(prefix="fleet-bench-")
    os.makedirs(work, exist_ok=True)
    try:
        token, section = admin_token(args.bin)
        print(f"fleet_bench: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start", flush=True)
        for n in [int(x) for x in args.gpus.split(",") if x]:
            sqlite_size(args, work, n, token, section)
        if args.postgresql:
            postgresql(args, work, token, section)
        print(f"fleet_bench: load average {os.getloadavg()[0]:.1f} at the end", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
