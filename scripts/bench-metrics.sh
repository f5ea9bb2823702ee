#!/usr/bin/env bash
# bench-metrics.sh: what serving `--metrics` costs the client. The same paced run of the no-op
# binding (--db basic --target RATE) runs without --metrics and with it, a curl loop scraping
# /metrics every second meanwhile, alternated A B A B … so the machine's drift falls on both.
# Each run's figures are iodig's own, from its run.json: the client's CPU seconds over the
# measured window (every thread of the process: workers, collector, the metrics server and its
# renders) and the measured ops/s. Prints each pair's ratios (with / without), then the medians.
# On a shared machine the client's CPU seconds of identical runs spread by tens of percent, far
# more than the cost looked for, so the serving thread's own CPU time is read too (utime + stime
# of the `iodig-metrics` thread from /proc, after each scrape): what serving costs, directly, as
# a share of the client's CPU.
#
# Usage: scripts/bench-metrics.sh [PAIRS] [TARGET] [DURATION]   (default 5 100000 20s)
#   IODIG=path/to/iodig (default target/release/iodig), THREADS=N (default 4),
#   PORT=N (default 19464), KEEP=dir keeps the runs and the scrapes there
set -euo pipefail
cd "$(dirname "$0")/.."

PAIRS=${1:-5}
TARGET=${2:-100000}
DURATION=${3:-20s}
IODIG=${IODIG:-target/release/iodig}
THREADS=${THREADS:-4}
PORT=${PORT:-19464}
work=${KEEP:-$(mktemp -d)}
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

# One run; prints "cpu_s ops_per_s scrapes server_cpu_s" from its run.json, the scrape count and
# the serving thread's CPU seconds.
one() {
  local with=$1 out="$work/runs-$2"
  local args=(run --db basic -P workloada --threads "$THREADS" --target "$TARGET"
    --duration "$DURATION" --warmup 2s --trace off --out "$out")
  local scraper=""
  if [[ $with == with ]]; then
    args+=(--metrics "127.0.0.1:$PORT")
  fi
  CI=1 "$IODIG" "${args[@]}" >"$work/stdout-$2" 2>"$work/stderr-$2" &
  local pid=$!
  if [[ $with == with ]]; then
    # Scrape every second for as long as the run lives, as Prometheus at a 1 s interval would,
    # and note the serving thread's CPU ticks after each scrape.
    (
      n=0
      while sleep 1 && kill -0 "$pid" 2>/dev/null; do
        curl -sf --max-time 2 "http://127.0.0.1:$PORT/metrics" -o "$work/last-scrape.txt" && n=$((n + 1))
        for t in /proc/"$pid"/task/*; do
          if [[ $(cat "$t/comm" 2>/dev/null) == iodig-metrics ]]; then
            awk '{print $14 + $15}' "$t/stat" >"$work/server-ticks-$2" 2>/dev/null || true
          fi
        done
        echo "$n" >"$work/scrapes-$2"
      done
    ) &
    scraper=$!
  fi
  wait "$pid"
  [[ -z $scraper ]] || wait "$scraper" 2>/dev/null || true
  python3 - "$out" "$work/scrapes-$2" "$work/server-ticks-$2" "$(getconf CLK_TCK)" <<'EOF'
import json, pathlib, sys
run = next(pathlib.Path(sys.argv[1]).glob("*/run.json"))
step = [s for s in json.loads(run.read_text())["steps"] if s["phase"] == "run"][0]
read = lambda p, d: pathlib.Path(p).read_text().strip() if pathlib.Path(p).exists() else d
print(step["client_cpu_s"], step["throughput_ops_per_sec"], read(sys.argv[2], "0"),
      int(read(sys.argv[3], "0")) / int(sys.argv[4]))
EOF
}

echo "bench-metrics: $PAIRS pairs, --db basic --target $TARGET --threads $THREADS --duration $DURATION, $(nproc) CPUs, $(date -u +%FT%TZ)"
printf '%-5s %12s %12s %12s %12s %8s %9s %9s %11s %8s\n' pair cpu_without cpu_with ops_without ops_with scrapes cpu_ratio ops_ratio server_cpu server_%
results=()
for i in $(seq 1 "$PAIRS"); do
  read -r cpu_b ops_b _ _ < <(one without "b$i")
  read -r cpu_a ops_a scrapes server < <(one with "a$i")
  line=$(python3 -c "print(f'{$cpu_a/$cpu_b:.4f} {$ops_a/$ops_b:.4f} {$server:.3f} {100*$server/$cpu_a:.3f}')")
  printf '%-5s %12.3f %12.3f %12.0f %12.0f %8s %9s %9s %11s %8s\n' "$i" "$cpu_b" "$cpu_a" "$ops_b" "$ops_a" "$scrapes" $line
  results+=("$cpu_b $cpu_a $ops_b $ops_a $server")
done
printf '%s\n' "${results[@]}" | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
med = lambda xs: statistics.median(xs)
print("median client CPU s: without %.3f, with %.3f; ratio (pair by pair) %.4f" % (
    med([r[0] for r in rows]), med([r[1] for r in rows]), med([r[1] / r[0] for r in rows])))
print("median ops/s: without %.0f, with %.0f; ratio (pair by pair) %.4f" % (
    med([r[2] for r in rows]), med([r[3] for r in rows]), med([r[3] / r[2] for r in rows])))
print("median serving thread CPU: %.3f s, %.3f %% of the client CPU (max %.3f %%)" % (
    med([r[4] for r in rows]), med([100 * r[4] / r[1] for r in rows]),
    max(100 * r[4] / r[1] for r in rows)))
'
