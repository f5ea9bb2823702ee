#!/usr/bin/env bash
# bench-agent-stream.sh: what an observed host's agent costs while it streams a step (its chunks
# every 2 s: the tracer's seconds, the system samples, the node's events). Runs `iodig agent`
# here, as `run --observe` does over SSH, driven by the same JSON lines on its stdin (prepare,
# start, SECONDS of measurement, stop), while dd writes 8 MiB with O_DIRECT every second so the
# traced disk is busy; prints, per binary, the agent's CPU time (user + system from /proc, its
# whole life) and the bytes of each kind of reply it sent (chunks: count, bytes, bytes per
# second of the step). With BASE set, the two binaries are run alternately ROUNDS times each
# and the medians are printed side by side.
#
# Usage (root): scripts/bench-agent-stream.sh [SECONDS] [ROUNDS]
#   IODIG=path/to/iodig   (default target/release/iodig)
#   BASE=path/to/iodig    (optional: a build to compare with, e.g. one without the stream)
set -euo pipefail

SECS=${1:-20}
ROUNDS=${2:-3}
IODIG=${IODIG:-target/release/iodig}
[[ $(id -u) == 0 ]] || { echo "bench-agent-stream.sh: run as root (the agent traces with eBPF)" >&2; exit 3; }
[[ -x $IODIG ]] || { echo "bench-agent-stream.sh: $IODIG not found; cargo build --release or set IODIG" >&2; exit 2; }
[[ -z ${BASE:-} || -x $BASE ]] || { echo "bench-agent-stream.sh: BASE=$BASE is not an executable" >&2; exit 2; }

work=$(mktemp -d /var/tmp/iodig-bench-stream.XXXXXX)
trap 'rm -rf "$work"' EXIT

# One round: prints "cpu_s chunks chunk_bytes stopped_bytes".
round() {
    local bin=$1 out=$work/replies.jsonl
    (
        echo '{"op":"prepare"}'; sleep 1
        echo '{"op":"start"}'; sleep "$SECS"
        echo '{"op":"stop","since_unix_ms":0}'; sleep 1
    ) | "$bin" agent --db basic --trace auto --slot-ms 100 >"$out" 2>"$work/agent.err" &
    # A background pipeline's $! is its last process: the agent.
    local agent=$!
    for _ in $(seq "$SECS"); do
        dd if=/dev/zero of="$work/io" bs=1M count=8 oflag=direct conv=fsync 2>/dev/null
        sleep 1
    done
    # The agent's own CPU, read just before its stdin closes (it exits then).
    local ticks=0
    while kill -0 "$agent" 2>/dev/null; do
        ticks=$(awk '{print $14 + $15}' "/proc/$agent/stat" 2>/dev/null || echo "$ticks")
        sleep 0.2
    done
    wait "$agent" || true
    python3 - "$out" "$ticks" "$(getconf CLK_TCK)" <<'PY'
import json, sys
path, ticks, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
chunks = chunk_bytes = stopped = 0
for line in open(path):
    kind = next(iter(json.loads(line)))
    if kind == "chunk":
        chunks += 1
        chunk_bytes += len(line)
    elif kind == "stopped":
        stopped = len(line)
print(f"{ticks / hz:.2f} {chunks} {chunk_bytes} {stopped}")
PY
}

declare -A cpu chunks bytes
for r in $(seq "$ROUNDS"); do
    for side in ${BASE:+base} new; do
        bin=$IODIG
        [[ $side == base ]] && bin=$BASE
        read -r c n b s < <(round "$bin")
        echo "round $r $side: agent CPU ${c} s over ${SECS} s, ${n} chunks, ${b} bytes of chunks ($((b / SECS)) B/s), stopped ${s} bytes"
        cpu[$side]+="$c "; chunks[$side]+="$n "; bytes[$side]+="$b "
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for side in ${BASE:+base} new; do
    m=$(echo "${cpu[$side]}" | median)
    echo "median $side: agent CPU $m s over $SECS s ($(python3 -c "print(f'{100*$m/$SECS:.2f}')") % of one CPU), chunk bytes $(echo "${bytes[$side]}" | median)"
done
