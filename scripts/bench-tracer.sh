#!/usr/bin/env bash
# bench-tracer.sh: overhead of `iodig trace` at saturation. fio 4 KiB random reads, O_DIRECT,
# iodepth 32 on a loop device, run alternately without the tracer, with it (attribution off:
# --no-attribution) and with attribution on (the default), ROUNDS times each; prints per-run
# IOPS, the medians and their ratios, lost events, and BPF run time per IO for both. BPF stats cost two clock reads per program run, so they stay off during the IOPS
# comparison and are switched on for one extra traced run that measures run time per IO.
#
# Usage (root): scripts/bench-tracer.sh [ROUNDS] [SECONDS]
#   ROUNDS=0              no IOPS rounds: only the BPF stats runs (with BASE, the comparison)
#   IODIG=path/to/iodig   binary with the `trace` subcommand (default target/release/iodig)
#   BENCH_DIR=dir         where the loop device's backing file lives (default /var/tmp)
#   BASE=path/to/iodig    an earlier build to compare with: then the BPF stats runs (attribution
#                         on) alternate BASE and IODIG STATS_ROUNDS times (default 5) and the
#                         medians of BPF ns per IO and per program run are printed side by side,
#                         so both builds see the same machine load
#   PAIRS=N               instead of the rounds: N pairs of runs without the tracer and with it
#                         (attribution on), back to back in alternating order, SECONDS each;
#                         prints each pair's IOPS ratio, then the mean loss with its 95 %
#                         confidence interval (t, over the pairs' log ratios) and the median
#                         ratio with a bootstrap 95 % interval. Adjacent runs share the machine's
#                         load, so the pairs' ratios vary far less than the rounds' IOPS do.
#                         PAIR_FLAGS="--no-attribution" measures the tracer without attribution.
#   WARMUP=S              first one untraced fio run of S seconds, not counted: on a disk the
#                         host caches (DEVICE=file here) the first seconds run far slower
#   DEVICE=disk           the loop device passes every IO to the file on BENCH_DIR's disk
#                         (--direct-io=on, the file not cached): a real device's timing, where the
#                         tracer's CPU per IO is a smaller share (default: cpu, the buffered,
#                         CPU-bound loop device where it shows most)
#   DEVICE=file           no loop device: fio reads the uncached file itself (O_DIRECT through
#                         BENCH_DIR's file system), and the disk under it is traced. One request
#                         per fio IO, as a database on that disk would issue it
#   SCHED=mq-deadline     the loop device's I/O scheduler (loop devices start with none): every
#                         request waits in an elevator; put back at exit, as the loop device
#                         keeps it after losetup -d
set -euo pipefail
source "$(dirname "$0")/bench_disk.sh"

ROUNDS=${1:-5}
SECS=${2:-10}
IODIG=${IODIG:-target/release/iodig}
DIR=${BENCH_DIR:-/var/tmp}
SIZE_MB=1024

[[ $(id -u) == 0 ]] || { echo "bench-tracer.sh: run as root (loop devices, eBPF)" >&2; exit 3; }
command -v fio >/dev/null || { echo "bench-tracer.sh: fio missing (apt-get install fio)" >&2; exit 2; }
[[ -x $IODIG ]] || { echo "bench-tracer.sh: $IODIG not found; build with cargo build --release or set IODIG" >&2; exit 2; }

work=$(mktemp -d "$DIR/iodig-bench.XXXXXX")
img="$work/disk.img"
stats_before=$(cat /proc/sys/kernel/bpf_stats_enabled)
loopdev=""
sched_before=""
cleanup() {
    echo "$stats_before" > /proc/sys/kernel/bpf_stats_enabled
    [[ -n $sched_before ]] && echo "$sched_before" > "/sys/block/$dev/queue/scheduler"
    [[ -n $loopdev ]] && losetup -d "$loopdev"
    rm -rf "$work"
}
trap cleanup EXIT

# Written data, cached backing file, buffered loop: the device path is CPU-bound, which is
# where a tracer's per-IO cost shows most. DEVICE=disk: direct IO to the uncached file instead.
# DEVICE=file: the file itself, traced on the whole disk under it.
case ${DEVICE:-cpu} in
    file)
        uncached_file "$img" $SIZE_MB
        dev=$(whole_disk_of "$img")
        [[ -n $dev ]] || { echo "bench-tracer.sh: DEVICE=file: no whole disk found under $DIR (set BENCH_DIR to a directory on a local disk)" >&2; exit 2; }
        ;;
    *) loopdev=$(bench_loop_device "${DEVICE:-cpu}" "$img" $SIZE_MB) ;;
esac
target=${loopdev:-$img}
if [[ -n $loopdev ]]; then dev=${loopdev#/dev/}; fi
if [[ -n ${SCHED:-} ]]; then
    sched_before=$(sed 's/.*\[\(.*\)\].*/\1/' "/sys/block/$dev/queue/scheduler")
    echo "$SCHED" > "/sys/block/$dev/queue/scheduler"
fi

fio_cmd=(fio --name=randread --filename="$target" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio
         --direct=1 --time_based --runtime="$SECS" --size=${SIZE_MB}M --randrepeat=0 --output-format=json)
iops() { python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$1"; }

report() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
sc = d["self_check"]
ios = sum(o["ios"] for dev in d["devices"] for o in dev["ops"].values())
att = sc.get("attribution") or {}
rows = {}
for r in att.get("rows", []):
    rows[r["class"]] = rows.get(r["class"], 0) + r["ios"]
run = sum(p["run_time_ns"] for p in sc["programs"])
cnt = sum(p["run_cnt"] for p in sc["programs"])
print(f"  trace: mode={d['mode']} attach={d.get('attach')} ios={ios} lost_events={sc['lost_events']} "
      f"recursion_misses={sc['recursion_misses']} prog_runs={cnt} bpf_ns_per_io={run / max(ios, 1):.0f} "
      f"diskstats_match={sc['diskstats_match']} attribution_match={sc.get('attribution_match')} classes={rows}")
if not sc["diskstats_match"]:
    for dev in d["devices"]:
        for k in dev.get("diskstats_check", []):
            print(f"    {dev.get('name')} {k}")
PY
}

echo 0 > /proc/sys/kernel/bpf_stats_enabled
if [[ -n ${WARMUP:-} ]]; then
    "${fio_cmd[@]}" --runtime="$WARMUP" --output="$work/warmup.json"
    echo "warm-up: $WARMUP s untraced, $(iops "$work/warmup.json") IOPS (not counted)"
fi
if [[ -n ${PAIRS:-} ]]; then
    ratios=()
    for p in $(seq 1 "$PAIRS"); do
        # Alternate which runs first, so a drift in the machine's load cancels out.
        order=(base traced); (( p % 2 == 0 )) && order=(traced base)
        for which in "${order[@]}"; do
            if [[ $which == base ]]; then
                "${fio_cmd[@]}" --output="$work/pb$p.json"
            else
                # shellcheck disable=SC2086
                "$IODIG" trace ${PAIR_FLAGS:-} --device "$dev" --json -- "${fio_cmd[@]}" --output="$work/pt$p.json" > "$work/ptrace$p.json"
            fi
        done
        b=$(iops "$work/pb$p.json"); t=$(iops "$work/pt$p.json")
        lost=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["self_check"]["lost_events"])' "$work/ptrace$p.json")
        echo "pair $p (${order[0]} first): without $b IOPS, traced $t IOPS, ratio $(python3 -c "print(f'{$t/$b:.4f}')"), lost events $lost"
        ratios+=("$(python3 -c "print($t/$b)")")
    done
    python3 - "$(dirname "$0")" "${ratios[@]}" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from bench_stats import log_ratio_interval, median_interval
r = [float(x) for x in sys.argv[2:]]
n = len(r)
mean, lo, hi = log_ratio_interval(r)
print(f"{n} pairs: traced/untraced IOPS, geometric mean {mean:.4f} "
      f"(loss {100 * (1 - mean):.2f} %), 95 % CI {lo:.4f}-{hi:.4f} "
      f"(loss {100 * (1 - hi):.2f} % to {100 * (1 - lo):.2f} %)")
med, mlo, mhi = median_interval(r, rounds=10000)
print(f"median ratio {med:.4f}, bootstrap 95 % CI {mlo:.4f}-{mhi:.4f}; "
      f"pair ratios from {min(r):.4f} to {max(r):.4f}")
PY
    echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
declare -a base traced attributed
for r in $(seq 1 "$ROUNDS"); do
    "${fio_cmd[@]}" --output="$work/base$r.json"
    base+=("$(iops "$work/base$r.json")")
    "$IODIG" trace --no-attribution --device "$dev" --json -- "${fio_cmd[@]}" --output="$work/traced$r.json" > "$work/trace$r.json"
    traced+=("$(iops "$work/traced$r.json")")
    report "$work/trace$r.json"
    "$IODIG" trace --device "$dev" --json -- "${fio_cmd[@]}" --output="$work/attr$r.json" > "$work/trace-attr$r.json"
    attributed+=("$(iops "$work/attr$r.json")")
    report "$work/trace-attr$r.json"
    echo "round $r: without tracer ${base[-1]} IOPS, tracer ${traced[-1]} IOPS, tracer with attribution ${attributed[-1]} IOPS"
done

echo 1 > /proc/sys/kernel/bpf_stats_enabled
if [[ -n ${BASE:-} ]]; then
    [[ -x $BASE ]] || { echo "bench-tracer.sh: BASE=$BASE not found" >&2; exit 2; }
    for r in $(seq 1 "${STATS_ROUNDS:-5}"); do
        for which in base new; do
            bin=$IODIG; [[ $which == base ]] && bin=$BASE
            "$bin" trace --device "$dev" --json -- "${fio_cmd[@]}" --output="$work/$which-fio$r.json" > "$work/$which-stats$r.json"
        done
    done
    python3 - "$work" "${STATS_ROUNDS:-5}" <<'PY'
import json, statistics, sys
work, n = sys.argv[1], int(sys.argv[2])
def runs(which):
    out = []
    for r in range(1, n + 1):
        d = json.load(open(f"{work}/{which}-stats{r}.json"))
        ios = sum(o["ios"] for dev in d["devices"] for o in dev["ops"].values())
        progs = {p["name"]: p["run_time_ns"] / max(p["run_cnt"], 1) for p in d["self_check"]["programs"] if p["run_cnt"]}
        total = sum(p["run_time_ns"] for p in d["self_check"]["programs"]) / max(ios, 1)
        lost = d["self_check"]["lost_events"]
        match = d["self_check"].get("attribution_match")
        out.append((total, progs, lost, match))
    return out
base, new = runs("base"), runs("new")
print(f"BPF ns per IO, attribution on, {n} alternated runs each (BPF stats on):")
print(f"  base: runs {[round(r[0]) for r in base]} median {statistics.median(r[0] for r in base):.0f}")
print(f"  new:  runs {[round(r[0]) for r in new]} median {statistics.median(r[0] for r in new):.0f}")
for name in sorted(set(k for r in base + new for k in r[1])):
    b = [r[1][name] for r in base if name in r[1]]
    w = [r[1][name] for r in new if name in r[1]]
    fmt = lambda v: f"{statistics.median(v):.0f}" if v else "-"
    print(f"  {name:16} ns per run: base {fmt(b):>5}  new {fmt(w):>5}")
print(f"  lost events base {sum(r[2] for r in base)} new {sum(r[2] for r in new)}; attribution_match base {set(r[3] for r in base)} new {set(r[3] for r in new)}")
PY
fi
"$IODIG" trace --no-attribution --device "$dev" --json -- "${fio_cmd[@]}" --output="$work/stats.json" > "$work/trace-stats.json"
echo "BPF stats run, attribution off ($(iops "$work/stats.json") IOPS with stats on):"
report "$work/trace-stats.json"
"$IODIG" trace --device "$dev" --json -- "${fio_cmd[@]}" --output="$work/stats-attr.json" > "$work/trace-stats-attr.json"
echo "BPF stats run, attribution on ($(iops "$work/stats-attr.json") IOPS with stats on):"
report "$work/trace-stats-attr.json"

if (( ROUNDS == 0 )); then
    echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
    exit 0
fi
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mb=$(median "${base[@]}")
mt=$(median "${traced[@]}")
ma=$(median "${attributed[@]}")
echo "median without tracer:            $mb IOPS"
echo "median with tracer:               $mt IOPS"
echo "median with tracer + attribution: $ma IOPS"
python3 -c "import sys; b,t=float(sys.argv[1]),float(sys.argv[2]); print(f'ratio with/without: {t/b:.4f} (loss {100*(1-t/b):.2f}%)')" "$mb" "$mt"
python3 -c "import sys; b,t=float(sys.argv[1]),float(sys.argv[2]); print(f'ratio attribution/without: {t/b:.4f} (loss {100*(1-t/b):.2f}%)')" "$mb" "$ma"
echo "machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
