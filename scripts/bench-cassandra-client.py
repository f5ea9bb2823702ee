#!/usr/bin/env python3
"""Client efficiency against one local Apache Cassandra node (started here, on 127.0.0.1).

Loads RECORDS records (default 100k), then runs workload C (uniform keys) for SECS seconds
(default 20) at 64 and at 1024 concurrent requests, ROUNDS times (default 2), and prints ops/s,
client CPU µs per op (user + system of the iodig process alone, from wait4, so the server's
CPU is excluded although it shares the machine) and the client's peak RSS. Build first:
    cargo build --release
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
IODIG = os.path.join(TARGET, "release", "iodig")
RECORDS = int(os.environ.get("RECORDS", 100_000))
SECS = int(os.environ.get("SECS", 20))
ROUNDS = int(os.environ.get("ROUNDS", 2))


def run(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "CI": "1"})
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed ({status}):\n{err}")
    return out, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def main():
    work = tempfile.mkdtemp(prefix="iodig-cass-bench-", dir="/var/tmp")
    nodes = os.path.join(work, "nodes")
    run([IODIG, "cassandra", "up", "--nodes", "1", "--heap", "2G", "--dir", nodes])
    try:
        common = ["--db", "cassandra", "-p", "hosts=127.0.0.1", "-P", "workloads/workloadc", "-p", f"recordcount={RECORDS}",
                  "-p", "requestdistribution=uniform", "--trace", "off", "--out", work]
        run([IODIG, "load", *common, "--threads", "64"])
        print(f"# client efficiency: 1 local Cassandra node, workload C uniform, {RECORDS} records, {SECS}s, {ROUNDS} rounds")
        print("| concurrency | ops/s | client CPU µs/op | client peak RSS MiB |")
        print("|---|---|---|---|")
        for conc in (64, 1024):
            ops, cpu_per_op, rss = [], [], []
            for _ in range(ROUNDS):
                out, cpu, maxrss = run([IODIG, "run", "--no-load", *common, "--threads", str(conc), "--duration", f"{SECS}s", "--warmup", "2s"])
                tput = float(re.search(r"\[OVERALL\], Throughput\(ops/sec\), (\S+)", out).group(1))
                done = float(re.search(r"\[READ\], Operations, (\d+)", out).group(1))
                ops.append(tput)
                # CPU covers warm-up too: divide by all operations, warm-up ones estimated at the same rate.
                cpu_per_op.append(cpu * 1e6 / (done * (SECS + 2) / SECS))
                rss.append(maxrss / 2**20)
            print(f"| {conc} | {statistics.median(ops):,.0f} | {statistics.median(cpu_per_op):.2f} | {max(rss):.1f} |")
    finally:
        subprocess.run([IODIG, "cassandra", "down", "--dir", nodes], capture_output=True)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
