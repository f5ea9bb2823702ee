#!/usr/bin/env bash
# bench-soak.sh: does iodig hold steady over a long run? One `iodig run` of STEPS steps of
# MINUTES each (an experiment with repetitions) on RocksDB at a fixed target rate, traced as
# `iodig run` traces by default. Samples the client's RSS every 10 s (/proc/PID/status) and the
# run directory's size after each step, then prints the RSS after the first minute and at the
# end (growth in %) and the directory's bytes per step (linear in time when each step adds
# about the same).
#
# Usage: scripts/bench-soak.sh [STEPS] [MINUTES] [TARGET_OPS]   (default 6 × 10 min at 2000/s)
#   IODIG=path/to/iodig   (default target/release/iodig)
#   DB=basic              the no-op binding: iodig's own memory, without an embedded database's
#                         memtables and caches in the same process (default rocksdb)
set -euo pipefail

STEPS=${1:-6}
MINUTES=${2:-10}
TARGET=${3:-2000}
DB=${DB:-rocksdb}
IODIG=${IODIG:-target/release/iodig}
[[ -x $IODIG ]] || { echo "bench-soak.sh: $IODIG not found; cargo build --release or set IODIG" >&2; exit 2; }

work=$(mktemp -d /var/tmp/iodig-bench-soak.XXXXXX)
pid=""
cleanup() {
    set +e
    if [[ -n $pid ]]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi
    rm -rf "$work"
}
trap cleanup EXIT

cat > "$work/soak.toml" <<TOML
db = "$DB"
repetitions = $STEPS
duration = "${MINUTES}m"
warmup = "0s"
target = $TARGET

[properties]
recordcount = 200000

[[workload]]
file = "workloada"
threads = [8]
TOML

"$IODIG" run "$work/soak.toml" --out "$work/runs" >"$work/stdout" 2>"$work/stderr" &
pid=$!
start=$(date +%s)
rss_log="$work/rss"
step_log="$work/steps"
: >"$rss_log"; : >"$step_log"
seen_steps=0
while kill -0 "$pid" 2>/dev/null; do
    now=$(($(date +%s) - start))
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    [[ -n $rss ]] && echo "$now $rss" >>"$rss_log"
    run_dir=$(ls -d "$work"/runs/2* 2>/dev/null | head -1 || true)
    if [[ -n $run_dir && -f $run_dir/run.json ]]; then
        steps=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["steps"]))' "$run_dir/run.json" 2>/dev/null || echo "$seen_steps")
        if ((steps > seen_steps)); then
            seen_steps=$steps
            bytes=$(du -sb --exclude='report*' "$run_dir" | cut -f1)
            # The RSS of the sample before: the end of the step just recorded (the report,
            # written after the last step, reads the whole run back and is not the run's own).
            echo "$now $steps $bytes ${prev_rss:-0}" >>"$step_log"
        fi
    fi
    [[ -n $rss ]] && prev_rss=$rss
    sleep 10
done
wait "$pid" || { echo "bench-soak.sh: iodig failed:" >&2; tail -5 "$work/stderr" >&2; exit 1; }
pid=""

python3 - "$rss_log" "$step_log" "$STEPS" "$MINUTES" "$TARGET" "$DB" <<'PY'
import sys
rss = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
steps = [tuple(map(int, l.split())) for l in open(sys.argv[2]) if l.strip()]
n, minutes, target = sys.argv[3], sys.argv[4], sys.argv[5]
after_min = next((kb for t, kb in rss if t >= 60), rss[0][1])
end = rss[-1][1]
peak = max(kb for _, kb in rss)
print(f"soak: {n} steps × {minutes} min at {target} ops/s, --db {sys.argv[6]}, workload A, 8 threads, traced")
# The last samples are the report being written (it reads the whole run back): the run's own
# growth is judged at the end of its last step (the sample before it was recorded), the
# report's peak is shown apart.
last_step_kb = steps[-1][3] if steps else end
print(f"client RSS: {after_min/1024:.1f} MiB after 1 min, {last_step_kb/1024:.1f} MiB as the last step "
      f"ended: growth {100*(last_step_kb-after_min)/after_min:+.1f} %; "
      f"{end/1024:.1f} MiB at the very end, peak {peak/1024:.1f} MiB (the report included)")
prev = 0
for t, s, b, kb in steps:
    print(f"  after step {s} (t={t} s): run directory {b/1e6:.2f} MB (+{(b-prev)/1e6:.2f} MB), RSS {kb/1024:.1f} MiB")
    prev = b
PY
