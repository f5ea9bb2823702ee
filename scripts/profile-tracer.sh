#!/usr/bin/env bash
# profile-tracer.sh: where the tracer's BPF programs spend their time, by source line. Runs the
# CPU-bound job of bench-tracer.sh (fio 4 KiB randread, O_DIRECT, QD 32, on a loop device over
# a cached 1 GiB file) under `iodig trace`, samples every CPU with perf for SECS seconds in the
# middle of it, then maps each sample inside a program to the line of iotrace.bpf.c or
# handlers.bpf.h it came from, through the kernel's own line table for the loaded program
# (BPF_OBJ_GET_INFO_BY_FD: jited_line_info -> line_info -> `bpftool prog dump xlated linum`).
# This needs no libbfd and no /proc/kcore, which bpftool's and perf's annotation need.
#
# Read the lines with care: a sample lands a few instructions after a slow one (skid), so the
# cost of a cache miss, an atomic or a helper call shows on the line after it.
#
# Usage (root): scripts/profile-tracer.sh [SECS]
#   IODIG=path/to/iodig (default target/release/iodig), BENCH_DIR=dir (default /var/tmp)
#   TOP=N   lines shown per program (default 15)
#   SYMBOLS=N  also the whole machine's N busiest symbols (perf report --sort sym): where the
#              programs' dispatch, the kernel around them and the idle loop stand
#   UNTRACED=1 the same job without the tracer (with SYMBOLS, the profile to compare against)
set -euo pipefail
source "$(dirname "$0")/bench_disk.sh"

SECS=${1:-4}
IODIG=${IODIG:-target/release/iodig}
DIR=${BENCH_DIR:-/var/tmp}

[[ $(id -u) == 0 ]] || { echo "profile-tracer.sh: run as root (loop devices, eBPF, perf)" >&2; exit 3; }
for t in fio perf bpftool python3; do
    command -v $t >/dev/null || { echo "profile-tracer.sh: $t missing (apt-get install fio linux-perf bpftool)" >&2; exit 2; }
done
[[ -n ${UNTRACED:-} || -x $IODIG ]] || { echo "profile-tracer.sh: $IODIG not found; build with cargo build --release or set IODIG" >&2; exit 2; }

work=$(mktemp -d "$DIR/iodig-profile.XXXXXX")
loopdev=""
cleanup() {
    [[ -n $loopdev ]] && losetup -d "$loopdev"
    rm -rf "$work"
}
trap cleanup EXIT
loopdev=$(bench_loop_device cpu "$work/disk.img" 1024)

# Each loaded program's line table, dumped while the trace runs: before sampling, so that a slow
# perf (its write-out under load) cannot outlive the trace, and the dump is not in the profile.
dump_line_tables() {
progs=$(bpftool prog show | grep -o 'name rq_[a-z]*_btf' | cut -d' ' -f2 | sort -u)
for p in $progs; do
    id=$(bpftool prog show name "$p" | awk -F: 'NR == 1 { print $1 }')
    bpftool prog dump xlated id "$id" linum > "$work/$p.xlated"
    python3 - "$id" "$work/$p.lines" <<'PY'
# The loaded program's JIT line table: (offset in its image, BPF instruction) pairs.
import ctypes, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 256)
    if libc.syscall(321, cmd, buf, len(attr)) < 0:  # __NR_bpf on x86-64
        raise OSError(ctypes.get_errno(), "bpf")
fd = libc.syscall(321, 13, ctypes.create_string_buffer(struct.pack('<I', int(sys.argv[1])), 16), 16)
if fd < 0:
    raise OSError(ctypes.get_errno(), "BPF_PROG_GET_FD_BY_ID")
def info(req):
    ib = ctypes.create_string_buffer(bytes(req), 240)
    bpf(15, struct.pack('<IIQ', fd, 240, ctypes.addressof(ib)))  # BPF_OBJ_GET_INFO_BY_FD
    return ib.raw
raw = info(bytearray(240))
nks, nfl = struct.unpack_from('<II', raw, 104)
nli, = struct.unpack_from('<I', raw, 148)
lrs, = struct.unpack_from('<I', raw, 172)
ks = ctypes.create_string_buffer(nks * 8); fl = ctypes.create_string_buffer(nfl * 4)
li = ctypes.create_string_buffer(nli * lrs); jli = ctypes.create_string_buffer(nli * 8)
req = bytearray(240)
struct.pack_into('<IIQQ', req, 104, nks, nfl, ctypes.addressof(ks), ctypes.addressof(fl))
struct.pack_into('<I', req, 148, nli)
struct.pack_into('<QQ', req, 152, ctypes.addressof(li), ctypes.addressof(jli))
struct.pack_into('<IIII', req, 168, nli, lrs, 8, 0)
info(req)
# The program's own image: its first function (the others are its BPF-to-BPF callees).
base, = struct.unpack_from('<Q', ks.raw, 0)
size, = struct.unpack_from('<I', fl.raw, 0)
with open(sys.argv[2], 'w') as f:
    for i in range(nli):
        insn, = struct.unpack_from('<I', li.raw, i * lrs)
        addr, = struct.unpack_from('<Q', jli.raw, i * 8)
        if base <= addr < base + size:
            f.write(f"{addr - base} {insn}\n")
PY
done
}

symbols() {
    [[ -n ${SYMBOLS:-} ]] || return 0
    echo "the whole machine's $SYMBOLS busiest symbols:"
    perf report -i "$work/perf.data" --sort sym --stdio 2> /dev/null | grep -v '^#' | grep -v '^$' \
        | head -n "$SYMBOLS" || true
}

job=(fio --name=randread --filename="$loopdev" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio \
    --direct=1 --time_based --runtime=$((SECS + 6)) --size=1024M --randrepeat=0 \
    --output-format=json --output="$work/fio.json")
if [[ -n ${UNTRACED:-} ]]; then
    "${job[@]}" &
else
    "$IODIG" trace --device "${loopdev#/dev/}" --json -- "${job[@]}" > "$work/trace.json" &
fi
job_pid=$!
sleep 3
[[ -n ${UNTRACED:-} ]] || dump_line_tables
perf record -a -q -o "$work/perf.data" -- sleep "$SECS" > /dev/null 2>&1
wait $job_pid
if [[ -n ${UNTRACED:-} ]]; then
    echo "fio untraced: $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$work/fio.json") IOPS"
    symbols
    exit 0
fi
perf script -i "$work/perf.data" -F ip,sym,symoff 2> /dev/null | grep -o 'rq_[a-z]*_btf+0x[0-9a-f]*' \
    > "$work/samples.txt" || true
all=$(perf script -i "$work/perf.data" -F ip 2> /dev/null | wc -l)
echo "fio under the tracer: $(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["jobs"][0]["read"]["iops"]))' "$work/fio.json") IOPS; $all samples on all CPUs"
python3 - "$work" "$all" ${TOP:-15} $progs <<'PY'
import bisect, collections, re, sys
work, total, top, progs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
samples = collections.defaultdict(collections.Counter)
for s in open(f"{work}/samples.txt"):
    name, off = s.strip().split('+')
    samples[name][int(off, 16)] += 1
for p in progs:
    table = sorted(tuple(map(int, l.split())) for l in open(f"{work}/{p}.lines"))
    offs = [t[0] for t in table]
    src, cur = {}, None
    for l in open(f"{work}/{p}.xlated"):
        m = re.match(r'\s*;\s*(.*)\[file:\S*/(\S+) line_num:(\d+)', l)
        if m:
            cur = f"{m.group(2)}:{m.group(3)}: {m.group(1).strip()[:70]}"
            continue
        m = re.match(r'\s*(\d+):', l)
        if m and cur:
            src[int(m.group(1))] = cur
    by_line = collections.Counter()
    for off, n in samples[p].items():
        i = bisect.bisect_right(offs, off) - 1
        by_line[src.get(table[i][1], '?') if i >= 0 else 'prologue'] += n
    n = sum(by_line.values())
    print(f"\n{p}: {n} samples, {100 * n / max(total, 1):.2f} % of all")
    for line, k in by_line.most_common(top):
        print(f"  {100 * k / max(n, 1):5.1f} %  {line}")
PY
symbols
