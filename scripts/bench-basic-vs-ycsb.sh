#!/usr/bin/env bash
# bench-basic-vs-ycsb.sh: iodig's own cost beside YCSB's. `iodig run --db basic` (the no-op
# binding) and YCSB 0.17's BasicDB (its own no-op binding, jars from Maven Central) run
# workload A at equal threads for equal time, alternated pair by pair; prints per thread count
# the operations per CPU-second of each client and their ratio pair by pair, peak RSS, and how
# long after its duration iodig's step ended (scripts/bench_basic_vs_ycsb.py says how each
# figure is taken).
#
# Needs java and mvn (scripts/setup.sh installs both). YCSB's jars are fetched once into
# YCSB_DIR with a throwaway pom and reused after; nothing else is written outside /var/tmp.
#
# Usage: scripts/bench-basic-vs-ycsb.sh
#   THREADS="1 4 16 64 256 1024"   thread counts
#   PAIRS=5                         alternated iodig/YCSB pairs per thread count
#   DURATION=10                     measured seconds of each run
#   TIMEOUT=60                      seconds past DURATION after which a run is killed
#   IODIG=path/to/iodig             default $CARGO_TARGET_DIR/release/iodig, else target/release/iodig
#   YCSB_DIR=dir                    default ~/.cache/iodig/ycsb
#   RAW=file                        also append every run as a JSON line to file
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-"1 4 16 64 256 1024"}
PAIRS=${PAIRS:-5}
DURATION=${DURATION:-10}
TIMEOUT=${TIMEOUT:-60}
IODIG=${IODIG:-${CARGO_TARGET_DIR:-target}/release/iodig}
YCSB_DIR=${YCSB_DIR:-$HOME/.cache/iodig/ycsb}
YCSB_VERSION=0.17.0

die() { echo "bench-basic-vs-ycsb.sh: $*" >&2; exit 2; }
[[ -x $IODIG ]] || die "$IODIG not found; run scripts/setup.sh (or cargo build --release) or set IODIG"
for tool in java mvn python3; do
    command -v "$tool" > /dev/null || die "$tool missing; scripts/setup.sh installs it"
done
[[ $THREADS =~ ^[[:space:],]*[1-9][0-9]*([[:space:],]+[1-9][0-9]*)*[[:space:],]*$ ]] \
    || die "THREADS=$THREADS: give thread counts separated by spaces, e.g. THREADS=\"1 4 16\""
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || die "PAIRS=$PAIRS: give a whole number of pairs, e.g. PAIRS=5"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "TIMEOUT=$TIMEOUT: give whole seconds, e.g. TIMEOUT=60"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION=$DURATION: give whole seconds, e.g. DURATION=10 (YCSB's maxexecutiontime takes seconds)"

# YCSB's core jar and its dependencies (HdrHistogram, htrace, jackson), as Maven resolves them.
lib=$YCSB_DIR/$YCSB_VERSION/lib
if [[ ! -f $lib/core-$YCSB_VERSION.jar ]]; then
    pom_dir=$(mktemp -d /var/tmp/iodig-ycsb-pom.XXXXXX)
    trap 'rm -rf "$pom_dir"' EXIT
    cat > "$pom_dir/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.iodig.bench</groupId>
  <artifactId>ycsb-fetch</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>site.ycsb</groupId><artifactId>core</artifactId><version>$YCSB_VERSION</version></dependency>
  </dependencies>
</project>
EOF
    echo "fetching YCSB $YCSB_VERSION from Maven Central into $lib" >&2
    mkdir -p "$lib.partial"
    mvn -q -B -f "$pom_dir/pom.xml" dependency:copy-dependencies -DoutputDirectory="$lib.partial" > "$pom_dir/mvn.log" 2>&1 \
        || { cat "$pom_dir/mvn.log" >&2; die "Maven could not fetch site.ycsb:core:$YCSB_VERSION (is Maven Central reachable?)"; }
    # Renamed into place whole, so an interrupted fetch is never taken for a finished one.
    rm -rf "$lib" && mv "$lib.partial" "$lib"
    rm -rf "$pom_dir"
    trap - EXIT
fi

exec python3 scripts/bench_basic_vs_ycsb.py --iodig "$IODIG" --ycsb-lib "$lib" \
    --threads "$THREADS" --pairs "$PAIRS" --duration "$DURATION" --timeout "$TIMEOUT" ${RAW:+--raw "$RAW"}
