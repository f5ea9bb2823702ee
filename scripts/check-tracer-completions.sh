#!/usr/bin/env bash
# check-tracer-completions.sh: does every block_rq_complete reach the tracer? fio 4 KiB random
# reads (O_DIRECT, iodepth 32) on an uncached file, traced on the whole disk under it, RUNS
# times; each run is counted three ways: perf's own probe on the block_rq_complete and
# block_rq_issue tracepoints (not BPF), the BPF programs' run counts (BPF stats on), and the
# trace's totals. Prints one line per run: how many completions the completion program never
# ran for (perf's completions minus its runs, less the IO perf saw outside the attach window),
# how many of those the tracer found again (their request used again) and counted, the reads
# traced, and the trace's own diskstats check with every count that differs.
#
# Usage (root): scripts/check-tracer-completions.sh [RUNS] [SECONDS]
#   IODIG=path/to/iodig   (default target/release/iodig)
#   BENCH_DIR=dir         where the 1 GiB file is written (default /var/tmp); its disk is traced
set -euo pipefail
source "$(dirname "$0")/bench_disk.sh"

RUNS=${1:-10}
SECS=${2:-5}
IODIG=${IODIG:-target/release/iodig}
DIR=${BENCH_DIR:-/var/tmp}

[[ $(id -u) == 0 ]] || { echo "check-tracer-completions.sh: run as root (eBPF, perf)" >&2; exit 3; }
for tool in fio perf python3; do
    command -v $tool >/dev/null || { echo "check-tracer-completions.sh: $tool missing (apt-get install $tool)" >&2; exit 2; }
done
[[ -x $IODIG ]] || { echo "check-tracer-completions.sh: $IODIG not found; build with cargo build --release or set IODIG" >&2; exit 2; }

work=$(mktemp -d "$DIR/iodig-check.XXXXXX")
stats_before=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() {
    echo "$stats_before" > /proc/sys/kernel/bpf_stats_enabled
    rm -rf "$work"
}
trap cleanup EXIT

file="$work/data"
uncached_file "$file" 1024
dev=$(whole_disk_of "$file")
[[ -n $dev ]] || { echo "check-tracer-completions.sh: no whole disk found under $DIR (set BENCH_DIR to a directory on a local disk)" >&2; exit 2; }

echo 1 > /proc/sys/kernel/bpf_stats_enabled
for i in $(seq 1 "$RUNS"); do
    perf stat -a -x, -e block:block_rq_complete,block:block_rq_issue -o "$work/perf" \
        "$IODIG" trace --device "$dev" --json -- \
        fio --name=check --filename="$file" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio \
            --direct=1 --time_based --runtime="$SECS" --size=1024M --output-format=terse \
        > "$work/out" 2>/dev/null
    python3 - "$i" "$dev" "$work/out" "$work/perf" <<'PY'
import json, sys
run, dev, out, perf_file = sys.argv[1:]
text = open(out).read()
doc = json.loads(text[text.index("{"):])  # fio's terse line comes first
sc = doc["self_check"]
runs = {p["name"].rsplit("_", 1)[0]: p["run_cnt"] for p in sc["programs"]}
perf = {}
for line in open(perf_file):
    f = line.strip().split(",")
    if len(f) > 3 and f[0].isdigit():
        perf[f[2].split(":")[-1]] = int(f[0])
reads = sum(d["ops"].get("read", {}).get("ios", 0) for d in doc["devices"] if d["name"] == dev)
# perf counts for the whole of iodig's process, the programs only while attached: the IO
# issued outside the attach window (perf's issues minus the issue program's runs) is taken off.
outside = perf.get("block_rq_issue", 0) - runs.get("rq_issue", 0)
skipped = perf.get("block_rq_complete", 0) - runs.get("rq_complete", 0) - outside
print(f"run {run}: completions perf {perf.get('block_rq_complete')}, completion program runs "
      f"{runs.get('rq_complete')}, issued outside the window {outside}; never ran for "
      f"{skipped}, found again and counted {sc.get('completions_unseen')}; reads traced {reads}"
      f"; diskstats_match {sc['diskstats_match']}, recursion misses {sc['recursion_misses']}",
      flush=True)
for d in doc["devices"]:
    for c in d["diskstats_check"]:
        if c["tracer_ios"] != c["diskstats_ios"]:
            print(f"    {d['name']} {c['op']}: traced {c['tracer_ios']}, diskstats {c['diskstats_ios']}")
PY
done
