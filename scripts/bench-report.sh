#!/usr/bin/env bash
# Benchmark of `iodig report` (issue 5): a generated run directory with one hour of per-second
# samples from 4 nodes and 10 million simulated raw IO events (aggregated into trace.json as the
# tracer does), each node also observed over SSH (nodes/HOST/) and the step kept for 2 clients,
# must be reported in < 10 s and < 1 GB RSS (< 5 s with the nodes and clients). Prints the
# median of 3 runs.
#
# SWEEP=1: the node story's size instead (issue 35): 4 observed nodes × 8 thread counts × 10-minute
# steps, every IO analysis run per node; same limits.
#
# Usage: scripts/bench-report.sh [WORK_DIR]   (default: a temporary directory, removed after)
# Runs the report through the iodig-report example binary, which calls the same library
# function as `iodig report`, so the benchmark needs no RocksDB build.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
work="${1:-}"
if [[ -z "$work" ]]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
fi
command -v /usr/bin/time >/dev/null || { echo "bench-report: needs GNU time (apt-get install time)" >&2; exit 2; }
cargo build --release -q -p iodig-report --examples
bin="$CARGO_TARGET_DIR/release/examples"
if [[ -n "${SWEEP:-}" ]]; then
    run="$work/run-8x10min-4nodes"
    size=--sweep
else
    run="$work/run-1h-4nodes"
    size=--big
fi
if [[ ! -f "$run/run.json" ]]; then
    "$bin/gen_run" "$run" "$size"
fi
echo "run directory: $(du -sh "$run" | cut -f1) in $(find "$run" -type f | wc -l) files"
secs=(); rss=()
for i in 1 2 3; do
    /usr/bin/time -f '%e %M' -o "$work/time.$i" "$bin/report" "$run" >/dev/null
    read -r s k <"$work/time.$i"
    secs+=("$s"); rss+=("$k")
    echo "run $i: ${s} s, $((k / 1024)) MiB max RSS"
done
median() { printf '%s\n' "$@" | sort -g | sed -n 2p; }
ms=$(median "${secs[@]}"); mk=$(median "${rss[@]}")
echo "median: ${ms} s, $((mk / 1024)) MiB max RSS (limits: 10 s, 1024 MiB)"
echo "report.html: $(du -h "$run/report.html" | cut -f1)"
awk -v s="$ms" -v k="$mk" 'BEGIN { exit !(s < 10 && k < 1048576) }' || { echo "bench-report: over the limit" >&2; exit 1; }
