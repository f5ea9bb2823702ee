#!/usr/bin/env bash
# bench-tracer-parts.sh: where the tracer's IOPS loss comes from. Runs the DEVICE=disk job of
# bench-tracer.sh (fio 4 KiB randread, O_DIRECT, QD 32, on a direct-IO loop device over an
# uncached 1 GiB file on BENCH_DIR's disk) in rounds; each round runs every variant once, in an
# order rotated per round so drift in the machine's load spreads over all of them. Prints each
# round's IOPS and every variant's ratio to `base` (geometric mean over the rounds, t interval).
#
# Usage (root): scripts/bench-tracer-parts.sh [ROUNDS] [SECONDS]
#   VARIANTS=base,ds,idle,full   which to run (default: all four, comma-separated):
#     base   fio alone
#     ds     under `iodig trace --mode diskstats`: the tracer's process, no BPF program
#     idle   under `iodig trace` of another, idle loop device: every program attached and run,
#            each returning after its device check
#     full   under `iodig trace` of the loop device (attribution on, the default)
#     other  like full with the binary OTHER (an earlier build, or one whose programs return at
#            once: the cost of being attached at all)
#   IODIG=path/to/iodig (default target/release/iodig), OTHER=path/to/iodig, BENCH_DIR=dir
#   DEVICE=cpu   the loop device reads its file through the page cache, the file cached: the
#                CPU-bound job where the programs' CPU time shows most (default: disk)
set -euo pipefail
source "$(dirname "$0")/bench_disk.sh"

ROUNDS=${1:-20}
SECS=${2:-5}
IODIG=${IODIG:-target/release/iodig}
DIR=${BENCH_DIR:-/var/tmp}
DEVICE=${DEVICE:-disk}
[[ $DEVICE == disk || $DEVICE == cpu ]] || { echo "bench-tracer-parts.sh: DEVICE must be disk or cpu, not $DEVICE" >&2; exit 2; }

[[ $(id -u) == 0 ]] || { echo "bench-tracer-parts.sh: run as root (loop devices, eBPF)" >&2; exit 3; }
command -v fio >/dev/null || { echo "bench-tracer-parts.sh: fio missing (apt-get install fio)" >&2; exit 2; }
[[ -x $IODIG ]] || { echo "bench-tracer-parts.sh: $IODIG not found; build with cargo build --release or set IODIG" >&2; exit 2; }
IFS=',' read -ra variants <<< "${VARIANTS:-base,ds,idle,full}"
for v in "${variants[@]}"; do
    case $v in
        base | ds | idle | full) ;;
        other) [[ -x ${OTHER:-} ]] || { echo "bench-tracer-parts.sh: variant other needs OTHER=path/to/iodig" >&2; exit 2; } ;;
        *) echo "bench-tracer-parts.sh: unknown variant $v in VARIANTS (base, ds, idle, full, other)" >&2; exit 2 ;;
    esac
done

work=$(mktemp -d "$DIR/iodig-parts.XXXXXX")
loopdev=""; idle=""
cleanup() {
    [[ -n $loopdev ]] && losetup -d "$loopdev"
    [[ -n $idle ]] && losetup -d "$idle"
    rm -rf "$work"
}
trap cleanup EXIT
loopdev=$(bench_loop_device "$DEVICE" "$work/disk.img" 1024)
truncate -s 64M "$work/idle.img"
idle=$(losetup -f --show "$work/idle.img")
dev=${loopdev#/dev/}

fio_cmd=(fio --name=randread --filename="$loopdev" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio
         --direct=1 --time_based --runtime="$SECS" --size=1024M --randrepeat=0 --output-format=json
         --output="$work/fio.json")
iops() { python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$work/fio.json"; }

n=${#variants[@]}
for r in $(seq 1 "$ROUNDS"); do
    line="round $r:"
    for i in $(seq 0 $((n - 1))); do
        v=${variants[$(((i + r) % n))]}
        case $v in
            base) "${fio_cmd[@]}" ;;
            ds) "$IODIG" trace --mode diskstats --device "$dev" --json -- "${fio_cmd[@]}" > /dev/null ;;
            idle) "$IODIG" trace --device "${idle#/dev/}" --json -- "${fio_cmd[@]}" > /dev/null ;;
            full) "$IODIG" trace --device "$dev" --json -- "${fio_cmd[@]}" > /dev/null ;;
            other) "$OTHER" trace --device "$dev" --json -- "${fio_cmd[@]}" > /dev/null ;;
        esac
        echo "$r $v $(iops)" >> "$work/all.txt"
        line+=" $v=$(iops)"
    done
    echo "$line"
done
python3 - "$(dirname "$0")" "$work/all.txt" <<'PY'
import collections, statistics, sys
sys.path.insert(0, sys.argv[1])
from bench_stats import log_ratio_interval
by = collections.defaultdict(dict)
for r, v, x in (l.split() for l in open(sys.argv[2])):
    by[int(r)][v] = float(x)
print(f"{len(by)} rounds; base median {statistics.median(by[r]['base'] for r in by):.0f} IOPS")
for v in by[1]:
    if v == "base":
        continue
    mean, lo, hi = log_ratio_interval([by[r][v] / by[r]["base"] for r in by])
    print(f"{v}: IOPS / base {mean:.4f}, loss {100 * (1 - mean):.2f} % "
          f"(95 % interval {100 * (1 - hi):.2f} % to {100 * (1 - lo):.2f} %)")
if "full" in by[1] and "other" in by[1]:
    mean, lo, hi = log_ratio_interval([by[r]["full"] / by[r]["other"] for r in by])
    print(f"full / other, round by round: {mean:.4f} (95 % interval {lo:.4f} to {hi:.4f})")
PY
echo "device: $DEVICE; machine: $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
