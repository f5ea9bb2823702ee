#!/usr/bin/env bash
# bench-measure.sh: does the client's measurement keep up with a fast binding, in bounded
# memory? `iodig run --db basic` (the no-op binding: nothing but iodig's own work) for a 3 s
# run step at each thread count, untraced, and for each run: the wall time of the whole command
# (a 1000-record load and the run step included) beside the step's duration, the run step's
# measured runtime, its throughput, and the process's peak RSS (/usr/bin/time -v).
#
# With BEFORE=path/to/an/older/iodig the same runs are made with it too, one after the other
# per thread count, and (for the thread counts in AB_THREADS) farm-bench times the two side by
# side, alternated. The older client may pile up gigabytes (22.8 GB at 64 threads when this was
# written), so every run is held in a memory cgroup of MEM_CAP and killed after TIMEOUT s; such a
# run is printed as "killed (cap)" or "killed (timeout)" with what it reached.
#
# Usage (root, for the cgroup): scripts/bench-measure.sh [THREADS...]   (default 1 16 64 256 1024)
#   IODIG=path/to/iodig   (default $CARGO_TARGET_DIR/release/iodig, else target/release/iodig)
#   BEFORE=path           an older binary to compare with (optional)
#   DURATION=3s           the run step's duration
#   MEM_CAP=4G            memory cgroup limit for each run (cgroup v1 or v2)
#   TIMEOUT=60            seconds before a run is killed
#   AB_THREADS="1 16"     thread counts timed side by side with farm-bench (needs BEFORE)
#   AB_RUNS=3             farm-bench runs per command
set -euo pipefail

THREADS=("$@")
[[ ${#THREADS[@]} -gt 0 ]] || THREADS=(1 16 64 256 1024)
IODIG=${IODIG:-${CARGO_TARGET_DIR:-target}/release/iodig}
BEFORE=${BEFORE:-}
DURATION=${DURATION:-3s}
MEM_CAP=${MEM_CAP:-4G}
TIMEOUT=${TIMEOUT:-60}
AB_THREADS=${AB_THREADS:-"1 16"}
AB_RUNS=${AB_RUNS:-3}
[[ -x $IODIG ]] || { echo "bench-measure.sh: $IODIG not found; cargo build --release or set IODIG" >&2; exit 2; }
[[ -z $BEFORE || -x $BEFORE ]] || { echo "bench-measure.sh: BEFORE=$BEFORE is not executable" >&2; exit 2; }

work=$(mktemp -d /var/tmp/iodig-bench-measure.XXXXXX)
# A memory cgroup under this shell's own, so a runaway client is killed, not the machine.
cg=""
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
    cg=/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)/iodig-bench-measure-$$
    mkdir "$cg" && echo "$MEM_CAP" > "$cg/memory.max" && echo 0 > "$cg/memory.swap.max" 2>/dev/null || true
else
    cg=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)/iodig-bench-measure-$$
    mkdir "$cg" && echo "$MEM_CAP" > "$cg/memory.limit_in_bytes"
fi
cleanup() {
    set +e
    rm -rf "$work"
    [[ -n $cg ]] && rmdir "$cg" 2>/dev/null
}
trap cleanup EXIT

args() { # THREADS OUT
    echo "run --db basic --threads $1 -p recordcount=1000 --duration $DURATION --warmup 0s --trace off --out $2"
}

# One run in the cgroup: prints "wall_s peak_mb runtime_s ops_per_sec status".
run_one() { # BIN THREADS
    local bin=$1 t=$2 out="$work/out-$RANDOM" rc=0
    # shellcheck disable=SC2046
    sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
        /usr/bin/time -v -o "$work/time" timeout -s KILL "$TIMEOUT" "$bin" $(args "$t" "$out") \
        > "$work/stdout" 2> "$work/stderr" || rc=$?
    local wall peak
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/{n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$work/time")
    peak=$(awk -F': ' '/Maximum resident set size/{printf "%.0f", $2/1024}' "$work/time")
    local status=ok
    if [[ $rc -ne 0 ]]; then
        # timeout's SIGKILL and the cgroup's OOM kill both end the client with 137; the wall
        # time tells them apart.
        if awk -v w="$wall" -v t="$TIMEOUT" 'BEGIN{exit !(w >= t - 0.5)}'; then
            status="killed(timeout)"
        elif [[ $rc -eq 137 ]] || grep -q "signal 9" "$work/time"; then
            status="killed(cap)"
        else
            status="exit-$rc"
        fi
    fi
    local step
    step=$(python3 - "$out" <<'PY' 2>/dev/null || echo "- -"
import json, pathlib, sys
runs = sorted(pathlib.Path(sys.argv[1]).glob("*/run.json"))
steps = [s for s in json.loads(runs[-1].read_text())["steps"] if s.get("phase") == "run"]
s = steps[-1]
print(f'{s["runtime_ms"] / 1000:.2f} {s["throughput_ops_per_sec"]:.0f}')
PY
)
    rm -rf "$out"
    echo "$wall $peak $step $status"
}

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r); cap $MEM_CAP, timeout ${TIMEOUT}s, step $DURATION"
echo "# binary   threads  wall_s  peak_rss_MB  step_runtime_s  ops_per_sec  status"
for t in "${THREADS[@]}"; do
    for which in new before; do
        bin=$IODIG
        if [[ $which == before ]]; then
            [[ -n $BEFORE ]] || continue
            bin=$BEFORE
        fi
        printf '%-8s %8s  %s\n' "$which" "$t" "$(run_one "$bin" "$t")"
    done
done

if [[ -n $BEFORE ]] && command -v farm-bench > /dev/null; then
    for t in $AB_THREADS; do
        echo "# side by side, $t threads: A = new, B = before"
        # shellcheck disable=SC2046
        farm-bench -n "$AB_RUNS" --timeout $((AB_RUNS * 2 * TIMEOUT + 60)) \
            --vs "sh -c 'echo \$\$ > $cg/cgroup.procs; exec timeout -s KILL $TIMEOUT $BEFORE $(args "$t" "$work/ab-before")'" \
            -- sh -c "echo \$\$ > $cg/cgroup.procs; exec timeout -s KILL $TIMEOUT $IODIG $(args "$t" "$work/ab-new")"
        rm -rf "$work/ab-before" "$work/ab-new"
    done
fi
