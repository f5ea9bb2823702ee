#!/usr/bin/env bash
# bench-tracer-vs-biolatency.sh: iodig's tracer beside the field's usual tool on the same fio
# job. The usual tool is a biolatency: bpftrace's biolatency.bt needs tracefs, which kernels
# without it (this VM's) do not have, so libbpf-tools' biolatency (Debian package libbpf-tools,
# BTF-attached, no tracefs) stands in for it, installed here when missing. fio 4 KiB random
# reads (libaio, iodepth 32, O_DIRECT) run alone, under `iodig trace` (its default, attribution
# on), under `iodig trace --no-attribution` and under biolatency, rotated round by round; prints
# IOPS lost and CPU per IO for each (scripts/bench_tracer_vs_biolatency.py says how each figure
# is taken).
#
# Usage (root: loop devices, eBPF): scripts/bench-tracer-vs-biolatency.sh
#   ROUNDS=8          rotated rounds of the four runs
#   STATS_ROUNDS=5    runs of each tracer with BPF stats on, for BPF time per IO
#   SECS=5            seconds of each fio run
#   DEVICE=cpu        a loop device over a cached file: CPU-bound, where a tracer's cost shows most
#   DEVICE=disk       a direct-IO loop device over an uncached file on BENCH_DIR's disk
#   IODIG=path        default $CARGO_TARGET_DIR/release/iodig, else target/release/iodig
#   BENCH_DIR=dir     where the backing file lives (default /var/tmp)
#   RAW=file          also append every run as a JSON line to file
#   MODE=toggle       instead of the rounds: one long fio run per tracer in which the tracer is
#                     switched on and off (scripts/bench-tracer-toggle.sh, biolatency through
#                     scripts/biolatency_as_trace.py), iodig's run then biolatency's, TOGGLE_PASSES
#                     times (default 1); each traced stretch is compared with the untraced seconds
#                     around it, the least noisy IOPS comparison on a shared machine. CYCLES=20,
#                     ON=4, OFF=4 seconds
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_disk.sh

ROUNDS=${ROUNDS:-8}
STATS_ROUNDS=${STATS_ROUNDS:-5}
SECS=${SECS:-5}
IODIG=${IODIG:-${CARGO_TARGET_DIR:-target}/release/iodig}
DIR=${BENCH_DIR:-/var/tmp}
SIZE_MB=1024

die() { echo "bench-tracer-vs-biolatency.sh: $*" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "bench-tracer-vs-biolatency.sh: run as root (loop devices, eBPF)" >&2; exit 3; }
[[ -x $IODIG ]] || die "$IODIG not found; run scripts/setup.sh (or cargo build --release) or set IODIG"
command -v fio > /dev/null || die "fio missing; scripts/setup.sh installs it"
for n in ROUNDS STATS_ROUNDS SECS; do
    [[ ${!n} =~ ^[1-9][0-9]*$ ]] || die "$n=${!n}: give a whole number, e.g. $n=5"
done
biolatency=$(command -v biolatency || true)
if [[ -z $biolatency ]]; then
    echo "installing libbpf-tools (biolatency) from Debian's packages" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libbpf-tools > /dev/null \
        || die "could not install libbpf-tools (apt-get install libbpf-tools)"
    biolatency=$(command -v biolatency) || die "libbpf-tools installed but no biolatency on PATH"
fi

if [[ ${MODE:-rounds} == toggle ]]; then
    for pass in $(seq 1 "${TOGGLE_PASSES:-1}"); do
        for who in iodig biolatency; do
            echo "# toggle pass $pass: $who"
            tracer=$IODIG
            [[ $who == biolatency ]] && tracer=$PWD/scripts/biolatency_as_trace.py
            # The per-cycle lines stay out of the table; the summary lines are printed.
            IODIG=$tracer BIOLATENCY=$biolatency scripts/bench-tracer-toggle.sh \
                "${CYCLES:-20}" "${ON:-4}" "${OFF:-4}" | grep -v '^cycle '
        done
    done
    exit 0
fi
[[ ${MODE:-rounds} == rounds ]] || die "MODE=$MODE: give MODE=toggle, or leave it unset for the rounds"

work=$(mktemp -d "$DIR/iodig-bench-biolat.XXXXXX")
loopdev=""
cleanup() {
    [[ -n $loopdev ]] && losetup -d "$loopdev"
    rm -rf "$work"
}
trap cleanup EXIT
loopdev=$(bench_loop_device "${DEVICE:-cpu}" "$work/disk.img" $SIZE_MB)

python3 scripts/bench_tracer_vs_biolatency.py --iodig "$IODIG" --biolatency "$biolatency" \
    --target "$loopdev" --device "${loopdev#/dev/}" --size-mb $SIZE_MB --secs "$SECS" \
    --rounds "$ROUNDS" --stats-rounds "$STATS_ROUNDS" --work "$work" ${RAW:+--raw "$RAW"}
echo "# job: DEVICE=${DEVICE:-cpu}; biolatency: $(dpkg-query -W -f='libbpf-tools ${Version}' libbpf-tools 2>/dev/null || echo "$biolatency")"
