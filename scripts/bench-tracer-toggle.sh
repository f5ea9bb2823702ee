#!/usr/bin/env bash
# bench-tracer-toggle.sh: the tracer's IOPS cost within one long fio run. fio 4 KiB random reads
# (O_DIRECT, libaio, QD 32) run for the whole benchmark and log their IOPS every second; meanwhile
# `iodig trace` is started and stopped in cycles (ON seconds traced, OFF seconds not). Each cycle
# compares its traced seconds with the untraced seconds just before and just after it. Seconds
# and neighbours a second apart share the machine's state far more than separate fio runs do
# (no process start, the same file position and cache), so the ratios spread less than the
# rounds of bench-tracer.sh and bench-tracer-parts.sh.
#
# A second counts as traced when it lies inside the trace's window (start_unix_ms..end_unix_ms
# of `iodig trace --json`: programs attached), as untraced when no `iodig` process was alive
# at any point of it nor in the SETTLE_MS after its exit (its BPF load, its exit and the freeing
# after it are neither). Prints each cycle's ratio, then their geometric mean with a 95 % t
# interval, and with bootstrap intervals their 10 %-trimmed geometric mean and their median (the
# figures to trust when other load on the machine throws single cycles far off), and whether the
# first untraced second of a gap runs slower than the last (a teardown cost that would flatter
# the tracer).
#
# Usage (root): scripts/bench-tracer-toggle.sh [CYCLES] [ON] [OFF]   (default 40 6 6)
#   IODIG=path/to/iodig (default target/release/iodig), BENCH_DIR=dir (default /var/tmp)
#   DEVICE=cpu    loop device over a cached file, through the page cache: CPU-bound (default)
#   DEVICE=disk   direct-IO loop device over an uncached file on BENCH_DIR's disk
#   TRACE_FLAGS="--no-attribution"   extra flags for `iodig trace`
#   TRACE=idle    trace another, idle loop device instead: every program attached and run on
#                 fio's IO, each returning after its device check (the cost of being attached)
#   TRACE=nop     no iodig: a program that does nothing on each of NOP_TRACEPOINTS (default
#                 "block_io_start block_rq_complete", the two any attributing tracer needs), by
#                 scripts/nop_tracer.py: the kernel's own dispatch cost, the floor under a tracer
#   WARMUP=S      untraced seconds before the first cycle, not compared (default 5; 30 with
#                 DEVICE=disk, where the host's cache of the new file ramps up for ~15 s)
#   SETTLE_MS=N   an untraced second must start N ms after `iodig` exited (default 1000): in
#                 one run the second right after the exit ran 4 % slower than the later ones
#                 (likely the kernel freeing the programs and maps), flattering the tracer
#   KEEP=dir      keep the per-second log and the traces there; ANALYZE=dir prints the
#                 comparison of a kept run again (with another SETTLE_MS) without running one
set -euo pipefail
source "$(dirname "$0")/bench_disk.sh"

CYCLES=${1:-40}
ON=${2:-6}
OFF=${3:-6}
IODIG=${IODIG:-target/release/iodig}
DIR=${BENCH_DIR:-/var/tmp}
DEVICE=${DEVICE:-cpu}
if [[ $DEVICE == disk ]]; then WARMUP=${WARMUP:-30}; else WARMUP=${WARMUP:-5}; fi

# The comparison, from a run's directory: fio's per-second log, procs.txt and the traces.
analyze() {
python3 - "$(dirname "$0")" "$1" "${SETTLE_MS:-1000}" <<'PY'
import json, statistics, sys
sys.path.insert(0, sys.argv[1])
from bench_stats import log_ratio_interval, median_interval, trimmed_log_ratio_interval
work = sys.argv[2]
# fio's per-second log: "end of the second in unix ms, IOs in that second, ..."
secs = [(int(l.split(',')[0]), int(l.split(',')[1])) for l in open(f"{work}/fio_iops.1.log")]
procs, windows, lost = [], [], 0
for line in open(f"{work}/procs.txt"):
    a, b, path = line.split()
    t = json.load(open(f"{work}/{path}"))
    procs.append((int(a), int(b)))
    windows.append((t["start_unix_ms"], t["end_unix_ms"]))
    lost += t["self_check"]["lost_events"]
def traced(s, e):
    return next((i for i, (a, b) in enumerate(windows) if a <= s and e <= b), None)
settle = int(sys.argv[3])
def untraced(s, e):
    return all(e <= a or b + settle <= s for a, b in procs)
on = [[] for _ in windows]
off = [[] for _ in range(len(windows) + 1)]  # off[i]: between process i-1 and process i
for end, ios in secs:
    s = end - 1000
    i = traced(s, end)
    if i is not None:
        on[i].append(ios)
    elif untraced(s, end):
        off[sum(1 for a, _ in procs if a < s)].append(ios)
ratios = []
for i, xs in enumerate(on):
    base = off[i] + off[i + 1]
    if xs and off[i] and off[i + 1]:
        r = statistics.mean(xs) / statistics.mean(base)
        ratios.append(r)
        print(f"cycle {i + 1}: traced {statistics.mean(xs):.0f} IOPS over {len(xs)} s, "
              f"untraced {statistics.mean(base):.0f} over {len(base)} s around it, ratio {r:.4f}")
if len(ratios) < 2:
    sys.exit("bench-tracer-toggle.sh: fewer than 2 cycles with traced and untraced seconds; raise ON/OFF")
mean, lo, hi = log_ratio_interval(ratios)
med, mlo, mhi = median_interval(ratios)
tri, tlo, thi = trimmed_log_ratio_interval(ratios)
all_off = [x for xs in off for x in xs]
print(f"{len(ratios)} cycles: traced/untraced IOPS, geometric mean {mean:.4f} (loss {100 * (1 - mean):.2f} %), "
      f"95 % CI {lo:.4f}-{hi:.4f} (loss {100 * (1 - hi):.2f} % to {100 * (1 - lo):.2f} %)")
print(f"10 %-trimmed geometric mean {tri:.4f} (loss {100 * (1 - tri):.2f} %), bootstrap 95 % CI "
      f"{tlo:.4f}-{thi:.4f} (loss {100 * (1 - thi):.2f} % to {100 * (1 - tlo):.2f} %)")
print(f"median ratio {med:.4f}, bootstrap 95 % CI {mlo:.4f}-{mhi:.4f}; "
      f"untraced seconds {min(all_off)}-{max(all_off)} IOPS; lost events {lost}")
# The first counted untraced second after a trace against the last one before the next: a
# teardown cost left after SETTLE_MS falls in the first, and a ratio under 1 would show it.
edges = [xs[0] / xs[-1] for xs in off[1:-1] if len(xs) >= 2 and xs[-1] > 0]
if len(edges) >= 2:
    mean, lo, hi = log_ratio_interval(edges)
    print(f"untraced second just after a trace / just before the next: geometric mean {mean:.4f} "
          f"(95 % CI {lo:.4f}-{hi:.4f}), median {statistics.median(edges):.4f}, {len(edges)} gaps")
PY
}

if [[ -n ${ANALYZE:-} ]]; then
    [[ -f $ANALYZE/procs.txt && -f $ANALYZE/fio_iops.1.log ]] || { echo "bench-tracer-toggle.sh: ANALYZE=$ANALYZE holds no kept run (procs.txt, fio_iops.1.log); give a directory filled by KEEP=dir" >&2; exit 2; }
    analyze "$ANALYZE"
    exit
fi
[[ $(id -u) == 0 ]] || { echo "bench-tracer-toggle.sh: run as root (loop devices, eBPF)" >&2; exit 3; }
command -v fio >/dev/null || { echo "bench-tracer-toggle.sh: fio missing (apt-get install fio)" >&2; exit 2; }
[[ ${TRACE:-} == nop || -x $IODIG ]] || { echo "bench-tracer-toggle.sh: $IODIG not found; build with cargo build --release or set IODIG" >&2; exit 2; }
[[ $DEVICE == cpu || $DEVICE == disk ]] || { echo "bench-tracer-toggle.sh: DEVICE must be cpu or disk, not $DEVICE" >&2; exit 2; }
(( ON >= 3 && OFF >= 3 )) || { echo "bench-tracer-toggle.sh: ON and OFF must be at least 3 seconds (whole seconds are compared)" >&2; exit 2; }

work=$(mktemp -d "$DIR/iodig-toggle.XXXXXX")
loopdev=""
idle=""
fio_pid=""
cleanup() {
    [[ -n $fio_pid ]] && kill "$fio_pid" 2>/dev/null && wait "$fio_pid" 2>/dev/null
    [[ -n $loopdev ]] && losetup -d "$loopdev"
    [[ -n $idle ]] && losetup -d "$idle"
    if [[ -n ${KEEP:-} && -f $work/procs.txt ]]; then
        mkdir -p "$KEEP" && cp "$work"/fio_iops.1.log "$work"/procs.txt "$work"/trace*.json "$KEEP"/
    fi
    rm -rf "$work"
}
trap cleanup EXIT
loopdev=$(bench_loop_device "$DEVICE" "$work/disk.img" 1024)
dev=${loopdev#/dev/}
if [[ ${TRACE:-} == idle ]]; then
    truncate -s 64M "$work/idle.img"
    idle=$(losetup -f --show "$work/idle.img")
    dev=${idle#/dev/}
fi

now_ms() { date +%s%3N; }
total=$((WARMUP + CYCLES * (ON + OFF + 3) + 5))
fio --name=randread --filename="$loopdev" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio \
    --direct=1 --time_based --runtime="$total" --size=1024M --randrepeat=0 \
    --write_iops_log="$work/fio" --log_avg_msec=1000 --log_unix_epoch=1 \
    --output-format=json --output="$work/fio.json" &
fio_pid=$!
sleep "$WARMUP" # fio's start (and on a disk, the host cache's ramp) is no one's
for c in $(seq 1 "$CYCLES"); do
    t0=$(now_ms)
    if [[ ${TRACE:-} == nop ]]; then
        "$(dirname "$0")/nop_tracer.py" "$ON" ${NOP_TRACEPOINTS:-block_io_start block_rq_complete} > "$work/trace$c.json"
    else
        "$IODIG" trace ${TRACE_FLAGS:-} --device "$dev" --json -- sleep "$ON" > "$work/trace$c.json"
    fi
    echo "$t0 $(now_ms) trace$c.json" >> "$work/procs.txt"
    sleep "$OFF"
done
kill -INT "$fio_pid" 2>/dev/null || true
wait "$fio_pid" 2>/dev/null || true
fio_pid=""
analyze "$work"
echo "device: $DEVICE; traced: ${TRACE:-the fio device}$([[ ${TRACE:-} == nop ]] && echo " (${NOP_TRACEPOINTS:-block_io_start block_rq_complete})"); machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
