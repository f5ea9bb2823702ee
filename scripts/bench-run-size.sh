#!/usr/bin/env bash
# The run directory's size (issue 36): bytes per host-minute of a traced 60 s step, and the
# size of a brief-scale experiment with the time and peak memory of `report` and `compare` on it.
#
#   scripts/bench-run-size.sh step BEFORE_IODIG AFTER_IODIG [WORK_DIR]
#       Runs `iodig run` (embedded RocksDB, workload A, 16 threads, 60 s, --trace ebpf; root)
#       with each binary, one after the other, and prints each run directory's bytes (its
#       run.json and steps/, the report's own files left out), per host-minute of measured run
#       steps, and the ratio.
#   scripts/bench-run-size.sh brief [STEPS] [WORK_DIR]
#       A brief-scale run: one 60-min step generated (gen_run --brief-steps 1: 1 client + 4
#       observed nodes of 96 CPUs, per-second series, 2 million IO events, flushes each minute)
#       and copied into STEPS steps (default 40: 8 thread counts × 5 workloads), because
#       generating each takes over a minute here; prints its size, then `iodig report` and
#       `iodig compare` (the run against itself) under GNU time: wall seconds and peak RSS.
#       Then report.html's size, its detail pages, and how long headless Chromium takes to
#       show report.html and the largest page. Goals at 40 steps: <= 2 GB, <= 60 s, <= 1 GB
#       RSS; report.html <= 25 MB, shown in <= 5 s.
#
# WORK_DIR defaults to a temporary directory, removed after.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
command -v /usr/bin/time >/dev/null || { echo "bench-run-size: needs GNU time (apt-get install time)" >&2; exit 2; }
mode="${1:-}"
shift || true
new_work() {
    if [[ -n "${1:-}" ]]; then
        mkdir -p "$1"
        work="$1"
    else
        work="$(mktemp -d)"
        trap 'rm -rf "$work"' EXIT
    fi
}
# The run's own files: run.json and steps/ (report.* are the report's output, not the run's).
run_bytes() { du -sb --apparent-size "$1/run.json" "$1/steps" | awk '{ s += $1 } END { print s }'; }
# Measured minutes of the run steps (the load is not a step of the sweep).
run_minutes() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(s["runtime_ms"] for s in d["steps"] if s["phase"]=="run")/60000)' "$1/run.json"
}
case "$mode" in
step)
    before="${1:?usage: bench-run-size.sh step BEFORE_IODIG AFTER_IODIG [WORK_DIR]}"
    after="${2:?usage: bench-run-size.sh step BEFORE_IODIG AFTER_IODIG [WORK_DIR]}"
    new_work "${3:-}"
    declare -A per_min
    for which in before after; do
        bin="${!which}"
        out="$work/$which"
        rm -rf "$out"
        "$bin" run -P workloads/workloada --threads 16 --duration 60s --trace ebpf --out "$out" >"$work/$which.log" 2>&1
        run=$(ls -d "$out"/*-workloada-rocksdb | head -1)
        bytes=$(run_bytes "$run")
        mins=$(run_minutes "$run")
        per_min[$which]=$(awk -v b="$bytes" -v m="$mins" 'BEGIN { printf "%d", b / m }')
        echo "$which: $bytes bytes in $(find "$run/steps" -type f | wc -l) files, $mins measured minutes on 1 host: ${per_min[$which]} bytes per host-minute"
        (cd "$run/steps" && find . -type f -printf '%s %p\n' | sort -k2) | sed 's/^/  /'
    done
    awk -v a="${per_min[after]}" -v b="${per_min[before]}" 'BEGIN { printf "after/before: %.3f (goal <= 0.2)\n", a / b }'
    ;;
brief)
    steps="${1:-40}"
    new_work "${2:-}"
    cargo build --release -q -p iodig-report --example gen_run --example report --example compare
    one="$work/brief-1"
    if [[ ! -f "$one/run.json" ]]; then
        /usr/bin/time -f 'one step generated in %e s' "$CARGO_TARGET_DIR/release/examples/gen_run" "$one" --brief-steps 1
    fi
    run="$work/brief-$steps"
    rm -rf "$run"
    # Step i is the generated step's files under its own name; run.json and its summary.json
    # name it as the sweep would (workloads × thread counts, in order).
    python3 - "$one" "$run" "$steps" <<'PY'
import json, shutil, sys
from pathlib import Path
one, run, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
doc = json.loads((one / "run.json").read_text())
first = doc["steps"][0]
workloads = ["workloada", "workloadb", "workloadc", "workloadd", "workloadf"]
threads = [64, 96, 128, 192, 256, 384, 512, 1024]
run.mkdir(parents=True)
steps = []
for i in range(n):
    w, t = workloads[i // len(threads) % len(workloads)], threads[i % len(threads)]
    rel = f"steps/{i:02}-{w}-t{t}"
    shutil.copytree(one / first["dir"], run / rel)
    s = json.loads(json.dumps(first))
    s.update(index=i, dir=rel, workload=w, threads=t)
    for node in s["nodes"]:
        node["dir"] = node["dir"].replace(first["dir"], rel, 1)
    (run / rel / "summary.json").write_text(json.dumps(s))
    steps.append(s)
doc["steps"] = steps
doc["config"]["threads"] = threads
(run / "run.json").write_text(json.dumps(doc, indent=2))
PY
    bytes=$(run_bytes "$run")
    echo "brief-scale run, $steps step(s) of 60 min, 1 client + 4 nodes of 96 CPUs: $bytes bytes ($(du -sh "$run/steps" | cut -f1)) in $(find "$run/steps" -type f | wc -l) files"
    echo "  one step: $(run_bytes "$one") bytes"
    # The examples call the library functions `iodig report` and `iodig compare` call, so the
    # benchmark needs no RocksDB build.
    bin="$CARGO_TARGET_DIR/release/examples"
    /usr/bin/time -f '%e %M' -o "$work/report.time" "$bin/report" "$run" >/dev/null
    read -r s k <"$work/report.time"
    echo "report:  ${s} s, $((k / 1024)) MiB max RSS"
    pages=0
    [[ -d "$run/report-pages" ]] && pages=$(find "$run/report-pages" -type f | wc -l)
    shown=("$run/report.html")
    if ((pages)); then
        echo "report.html: $(stat -c %s "$run/report.html") bytes; $pages detail pages beside it ($(du -sb "$run/report-pages" | cut -f1) bytes)"
        shown+=("$(find "$run/report-pages" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2)")
    else
        echo "report.html: $(stat -c %s "$run/report.html") bytes, one file"
    fi
    # How long a browser takes to show it: headless Chromium's whole run (start, layout of the
    # whole page, paint, screenshot), three times; the median.
    if command -v chromium >/dev/null; then
        shot() {
            local t0 t1
            t0=$(date +%s.%N)
            chromium --headless --no-sandbox --disable-gpu --user-data-dir="$work/chromium" \
                --window-size=1000,2000 --screenshot="$work/shot.png" "file://$1" >/dev/null 2>&1
            t1=$(date +%s.%N)
            awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
        }
        for page in "${shown[@]}"; do
            times=("$(shot "$page")" "$(shot "$page")" "$(shot "$page")")
            echo "chromium shows $(basename "$page") ($(stat -c %s "$page") bytes): ${times[*]} s, median $(printf '%s\n' "${times[@]}" | sort -g | sed -n 2p) s"
        done
    else
        echo "chromium: not installed (apt-get install chromium), the page's display time not measured"
    fi
    /usr/bin/time -f '%e %M' -o "$work/compare.time" "$bin/compare" "$work/compare" "A=$run" "B=$run" >/dev/null
    read -r s k <"$work/compare.time"
    echo "compare: ${s} s, $((k / 1024)) MiB max RSS"
    ;;
*)
    sed -n '2,17p' "$0" >&2
    exit 2
    ;;
esac
