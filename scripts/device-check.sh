#!/usr/bin/env bash
# device-check.sh: checks gpuledger's NVML binding on a real NVIDIA GPU machine.
#
# 1. Builds nvml_probe (src/nvml/nvml_probe.cc) with g++ alone: fmt is used header-only,
#    so the machine needs g++ (C++20) and the fmt headers, not the project's other
#    dependencies. Set FMT_INCLUDE_DIR to a folder holding fmt/ when they are not in
#    the compiler's default path, or NVML_PROBE to a probe built elsewhere.
# 2. Starts the probe (one line per device per second: GPM SM activity, coarse
#    utilization, the gap profile) and runs a PyTorch workload with a known duty
#    cycle on CUDA device 0: bursts of matrix products separated by deliberate sleeps,
#    then idle.
# 3. Prints, per phase, the intended duty cycle next to what the probe measured.
#
# Reads only: it changes no GPU setting (no clocks, no MIG, no persistence mode).
# Needs x86-64 Linux, an NVIDIA driver, python3 with torch (CUDA). No network.
# Finishes in about two minutes, under five with a cold build.
#
#   scripts/device-check.sh [--seconds-per-phase N]   (default 15)
set -euo pipefail

cd "$(dirname "$0")/.."
phase_s=15
if [[ "${1:-}" == "--seconds-per-phase" ]]; then
  phase_s="${2:?--seconds-per-phase needs a value}"
fi
out_dir="${DEVICE_CHECK_OUT:-build/device-check}"
mkdir -p "$out_dir"

probe="${NVML_PROBE:-}"
if [[ -z "$probe" ]]; then
  probe="$out_dir/nvml_probe"
  echo "== building nvml_probe (g++, fmt header-only)"
  fmt_flag=()
  if [[ -n "${FMT_INCLUDE_DIR:-}" ]]; then fmt_flag=(-I"$FMT_INCLUDE_DIR"); fi
  g++ -std=c++20 -O2 -DFMT_HEADER_ONLY -Isrc "${fmt_flag[@]}" \
    src/core/status.cc src/core/time.cc src/core/model.cc src/core/money.cc \
    src/nvml/nvml_api.cc src/nvml/collector.cc src/nvml/nvml_probe.cc \
    -ldl -pthread -o "$probe"
fi

echo "== driver and GPUs (nvidia-smi, read-only query)"
nvidia-smi --query-gpu=index,uuid,name,driver_version,mig.mode.current \
  --format=csv,noheader 2>/dev/null || echo "(nvidia-smi not available)"

# Phases: name, burst_ms, gap_ms (gap_ms < 0: idle throughout). Intended duty cycle
# = burst / (burst + gap).
phases="warmup 500 0;duty50 200 200;duty80 400 100;short_gaps 90 30;idle 0 -1"
nphases=$(echo "$phases" | tr ';' '\n' | wc -l)
probe_s=$(( phase_s * nphases + 10 ))

echo "== starting nvml_probe for ${probe_s}s"
"$probe" --seconds "$probe_s" --interval-ms 1000 >"$out_dir/probe.log" 2>"$out_dir/probe.err" &
probe_pid=$!
trap 'kill "$probe_pid" 2>/dev/null || true' EXIT  # never leave the probe behind
sleep 2

echo "== running the workload (${phase_s}s per phase)"
PHASES="$phases" PHASE_S="$phase_s" python3 - >"$out_dir/phases.log" <<'PY'
import os, sys, time
import torch

assert torch.cuda.is_available(), "no CUDA device visible to PyTorch"
dev = torch.device("cuda:0")
props = torch.cuda.get_device_properties(0)
uuid = getattr(props, "uuid", None)
print(f"gpu name={props.name} uuid={'GPU-' + str(uuid) if uuid is not None else '-'}")
n = 8192
a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
phase_s = float(os.environ["PHASE_S"])

def busy_for(seconds):
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(4):
            a @ b
        torch.cuda.synchronize()

for spec in os.environ["PHASES"].split(";"):
    name, burst_ms, gap_ms = spec.split()
    burst, gap = int(burst_ms) / 1000, int(gap_ms) / 1000
    start = time.time()
    while time.time() - start < phase_s:
        if gap < 0:
            time.sleep(0.05)
            continue
        busy_for(burst)
        if gap > 0:
            time.sleep(gap)
    end = time.time()
    intended = 0.0 if gap < 0 else burst / (burst + gap)
    print(f"phase name={name} start_ms={int(start*1000)} end_ms={int(end*1000)} intended={intended:.3f}")
    sys.stdout.flush()
PY

wait "$probe_pid" || { echo "nvml_probe failed:"; cat "$out_dir/probe.err"; exit 1; }

echo "== what the binding resolved"
grep -E '^(driver|symbol|device|enumeration_failure)' "$out_dir/probe.log" || true
echo "== failed calls (distinct)"
grep '^failure' "$out_dir/probe.log" | sed 's/^failure t_ms=[0-9]* //' | sort | uniq -c || true

echo "== measured vs intended duty cycle (device 0; first and last 2 s of each phase left out)"
python3 - "$out_dir/probe.log" "$out_dir/phases.log" <<'PY'
import re, sys
probe_log, phases_log = sys.argv[1], sys.argv[2]

def kv(line):
    return dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))

gpu_uuid, phases = None, []
for line in open(phases_log):
    d = kv(line)
    if line.startswith("gpu ") and d.get("uuid", "-") != "-":
        gpu_uuid = d["uuid"]
    if line.startswith("phase "):
        phases.append((d["name"], int(d["start_ms"]), int(d["end_ms"]), float(d["intended"])))
samples = [kv(l) for l in open(probe_log) if l.startswith("sample ")]
if gpu_uuid is None or not any(s["uuid"] == gpu_uuid for s in samples):
    gpus = [s["uuid"] for s in samples if s["uuid"].startswith("GPU-")]
    gpu_uuid = gpus[0] if gpus else None
if gpu_uuid is None:
    sys.exit("no GPU samples in the probe log")

def num(s, key):
    v = s.get(key, "-")
    return None if v == "-" else float(v)

def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None

def fmt(x):
    return "   -  " if x is None else f"{x:6.3f}"

print(f"device {gpu_uuid}")
print(f"{'phase':<11} {'intended':>8} {'sm_active':>9} {'gpu_util':>8} {'gap_busy':>8} {'gaps/s':>6} {'n':>3}")
for name, start, end, intended in phases:
    sel = [s for s in samples if s["uuid"] == gpu_uuid and start + 2000 <= int(s["t_ms"]) <= end - 2000]
    busy = [float(re.search(r'busy=([\d.]+)', s["gaps"]).group(1)) if s["gaps"] != "-" else None for s in sel]
    gaps = [int(re.search(r'gaps=(\d+)', s["gaps"]).group(1)) if s["gaps"] != "-" else None for s in sel]
    print(f"{name:<11} {intended:8.3f} {fmt(mean(num(s, 'sm_active') for s in sel)):>9} "
          f"{fmt(mean(num(s, 'gpu_util') for s in sel)):>8} {fmt(mean(busy)):>8} "
          f"{fmt(mean(gaps)):>6} {len(sel):>3}")
print("sm_active comes from GPM (Hopper+); gpu_util is NVML's coarse 'a kernel ran' figure;")
print("gap_busy is the busy share from the driver's sample buffer (nvmlDeviceGetSamples).")
PY
echo "== logs in $out_dir"
