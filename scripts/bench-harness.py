#!/usr/bin/env python3
"""Harness overhead of iodig on RocksDB, measured side by side in one run.

Loads RECORDS records (default 1M) once, then alternates, ROUNDS times (default 3), for each of
1, 2 and 4 threads: the bare RocksDB `get` loop (crates/runner/examples/bare_get.rs) and
`iodig run` of workload C with uniform keys, SECS seconds each (default 10). Prints medians, the
ratio iodig / bare, client CPU µs per op (user + system of the whole process, RocksDB included,
from wait4), and the peak RSS of iodig at 128 threads. Build first:
    cargo build --release && cargo build --release -p iodig-runner --example bare_get
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
IODIG = os.path.join(TARGET, "release", "iodig")
BARE = os.path.join(TARGET, "release", "examples", "bare_get")
RECORDS = int(os.environ.get("RECORDS", 1_000_000))
SECS = int(os.environ.get("SECS", 10))
ROUNDS = int(os.environ.get("ROUNDS", 3))


def run_measured(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "CI": "1"})
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed ({status}):\n{err}")
    return out, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def main():
    work = tempfile.mkdtemp(prefix="iodig-bench-", dir="/var/tmp")
    db = os.path.join(work, "db")
    common = ["-P", "workloads/workloadc", "-p", f"recordcount={RECORDS}", "-p", f"rocksdb.dir={db}", "--trace", "off", "--out", work]
    run_measured([IODIG, "load", *common, "--threads", "4"])
    print(f"# harness overhead: {RECORDS} records, workload C uniform, {SECS}s per measurement, {ROUNDS} rounds")
    print("| threads | bare get ops/s | iodig ops/s | iodig / bare | iodig CPU µs/op | bare CPU µs/op |")
    print("|---|---|---|---|---|---|")
    for threads in (1, 2, 4):
        bare, mine, bare_cpu, mine_cpu = [], [], [], []
        for _ in range(ROUNDS):
            out, cpu, _ = run_measured([BARE, db, str(RECORDS), str(threads), str(SECS)])
            ops = float(out.strip())
            bare.append(ops)
            bare_cpu.append(cpu * 1e6 / (ops * SECS))
            out, cpu, _ = run_measured([
                IODIG, "run", "--no-load", *common, "-p", "requestdistribution=uniform",
                "--threads", str(threads), "--duration", f"{SECS}s", "--warmup", "0s",
            ])
            tput = float(re.search(r"\[OVERALL\], Throughput\(ops/sec\), (\S+)", out).group(1))
            ops_done = float(re.search(r"\[READ\], Operations, (\d+)", out).group(1))
            mine.append(tput)
            mine_cpu.append(cpu * 1e6 / ops_done)
        b, m = statistics.median(bare), statistics.median(mine)
        print(f"| {threads} | {b:,.0f} | {m:,.0f} | {m / b:.3f} | {statistics.median(mine_cpu):.2f} | {statistics.median(bare_cpu):.2f} |")
    _, _, rss = run_measured([
        IODIG, "run", "--no-load", *common, "-p", "requestdistribution=uniform",
        "--threads", "128", "--duration", "5s", "--warmup", "0s",
    ])
    print(f"\npeak RSS of iodig at 128 threads (RocksDB block cache 8 MiB included): {rss / 2**20:.1f} MiB")
    subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
