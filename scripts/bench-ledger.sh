#!/usr/bin/env bash
# The ledger of versioned writes at scale (docs/integrity.md, docs/benchmarks.md): memory per key
# after a load, the cost of a save, and how long workers wait while saves run, for the current
# ledger (flat array, batches appended) beside the one before it (hash of 40-byte states, whole
# file rewritten under the locks), each in a process of its own, alternated ROUNDS times.
#
#   scripts/bench-ledger.sh                 # old and new at 10^7 keys, new at 10^8
#   BIG=1000000000 scripts/bench-ledger.sh  # new also at 10^9 (about 8 GiB of memory)
#
# Then the whole binary: `iodig load` of 10^7 records on the no-op binding with and without
# versioned writes, peak RSS from /usr/bin/time -v (GNU time), alternated ROUNDS times.
#
# Environment: SMALL (default 10000000) keys for the side-by-side, BIG (default 100000000) for the
# new ledger alone, ROUNDS (default 3), WORKERS (default 4), SECS (default 10: seconds of workload
# A without saves, then as many with a save every 2 s), DIR (default a fresh directory under
# /var/tmp, removed at the end), IODIG (default $CARGO_TARGET_DIR/release/iodig).
set -euo pipefail
cd "$(dirname "$0")/.."

SMALL=${SMALL:-10000000}
BIG=${BIG:-100000000}
ROUNDS=${ROUNDS:-3}
WORKERS=${WORKERS:-4}
SECS=${SECS:-10}
TARGET=${CARGO_TARGET_DIR:-target}
IODIG=${IODIG:-$TARGET/release/iodig}
DIR=${DIR:-$(mktemp -d /var/tmp/iodig-bench-ledger.XXXXXX)}
trap 'rm -rf "$DIR"' EXIT

cargo build --release -q -p iodig-workload --example ledger_bench
BENCH=$TARGET/release/examples/ledger_bench

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# ledger_bench: one JSON line per process (bytes_per_key = RSS after the load minus RSS before, over keys)"
for round in $(seq "$ROUNDS"); do
    for which in old new; do
        "$BENCH" "$which" "$SMALL" "$DIR" "$WORKERS" "$SECS"
        rm -f "$DIR"/ledger-*
    done
done
for round in $(seq "$ROUNDS"); do
    "$BENCH" new "$BIG" "$DIR" "$WORKERS" "$SECS"
    rm -f "$DIR"/ledger-*
done

if [ -x "$IODIG" ] && [ -x /usr/bin/time ]; then
    echo "# iodig load --db basic -p recordcount=$SMALL --threads 2 --trace off: peak RSS (KiB), wall (s), ledger.bin (bytes)"
    for round in $(seq "$ROUNDS"); do
        for versioned in true false; do
            rm -rf "$DIR/runs"
            /usr/bin/time -f "versionedwrites=$versioned peak_rss_kib=%M wall_s=%e" \
                "$IODIG" load --db basic -p recordcount="$SMALL" -p versionedwrites=$versioned \
                --threads 2 --trace off --out "$DIR/runs" >/dev/null 2>"$DIR/err" || { cat "$DIR/err"; exit 1; }
            line=$(tail -1 "$DIR/err")
            size=$(find "$DIR/runs" -name ledger.bin -printf '%s' 2>/dev/null || true)
            echo "$line ledger_bin_bytes=${size:-0}"
        done
    done
fi
