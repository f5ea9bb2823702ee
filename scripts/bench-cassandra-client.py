#!/usr/bin/env python3
"""Client efficiency against one local Apache Cassandra node (started here, on 127.0.0.1),
iodig side by side with latte (the Rust CQL benchmark) when latte is installed.

Loads RECORDS records (default 100k, 10 × 100-byte fields, keys user0 … in order so latte's
script can address them), warms the server up for WARM seconds (default 120: the JVM's JIT and
the post-load compactions settle; its rate still climbs for minutes after), then runs YCSB
workload C (uniform reads) for SECS seconds (default 20) at 64 and at 1024 requests in flight,
ROUNDS times (default 3), alternating iodig and latte so both see the same server state. Both
run their requests on IO_THREADS runtime threads (default 1: the server shares the machine's
cores).
PIN=1 puts the server on CPU 0 and the clients on CPU 1 (taskset): the server no longer
preempts the client, which makes client CPU per op far steadier run to run (for A/B
comparisons), at the cost of the server's second core.

Printed per tool and concurrency (medians over rounds):
  - ops/s;
  - client CPU µs/op in the measured window: iodig's own `client_cpu_s` (getrusage of its
    process) over its operations; latte's "CPU time" over its cycles;
  - whole-process CPU µs/op: user + system of the process from wait4 (start-up, warm-up and
    report included) over all operations, warm-up ones estimated at the measured rate;
  - peak RSS of the client process.

Build first (`cargo build --profile dist`: thin LTO, as the figures in docs/benchmarks.md); latte: `cargo install latte-cli` (or LATTE=path).
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
IODIG = os.environ.get("IODIG") or os.path.join(TARGET, "dist", "iodig")
LATTE = os.environ.get("LATTE") or shutil.which("latte")
HERE = os.path.dirname(os.path.abspath(__file__))
LATTE_SCRIPT = os.path.join(HERE, "latte", "ycsb-read.rn")
RECORDS = int(os.environ.get("RECORDS", 100_000))
SECS = int(os.environ.get("SECS", 20))
ROUNDS = int(os.environ.get("ROUNDS", 3))
WARM = int(os.environ.get("WARM", 120))
IO_THREADS = int(os.environ.get("IO_THREADS", 1))
PIN = os.environ.get("PIN") == "1"
CLIENT = ["taskset", "-c", "1"] if PIN else []
WARMUP = 2


def measured(cmd, cwd=None):
    """Runs cmd, returning stdout, stderr and (cpu seconds, peak RSS bytes) from wait4."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "CI": "1"}, cwd=cwd)
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed ({status}):\n{err}")
    return out, err, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def run(cmd):
    return measured(cmd)[:2]


def iodig_round(common, conc):
    out, err, cpu, rss = measured([*CLIENT, IODIG, "run", "--no-load", *common, "--threads", str(conc),
                                   "--io-threads", str(IO_THREADS), "--duration", f"{SECS}s",
                                   "--warmup", f"{WARMUP}s"])
    run_dir = re.search(r"results: (\S+)", err).group(1)
    step = json.load(open(os.path.join(run_dir, "run.json")))["steps"][-1]
    ops = step["operations"]
    return (step["throughput_ops_per_sec"], step["client_cpu_s"] * 1e6 / ops,
            cpu * 1e6 / (ops * (SECS + WARMUP) / SECS), rss / 2**20)


def latte_round(conc, work):
    per_thread = max(1, conc // IO_THREADS)
    out, _, cpu, rss = measured([*CLIENT, LATTE, "run", "-q", LATTE_SCRIPT, "-P", f"rows={RECORDS}", "-d", f"{SECS}s",
                                 "-w", f"{WARMUP}s", "-t", str(IO_THREADS), "-p", str(per_thread),
                                 "127.0.0.1"], cwd=work)
    num = lambda label: float(re.search(label + r"\s+\[[^\]]+\]\s+([\d.]+)", out).group(1))
    cycles, elapsed, window_cpu = num("Cycles"), num("Elapsed time"), num("CPU time")
    return (cycles / elapsed, window_cpu * 1e6 / cycles,
            cpu * 1e6 / (cycles * (SECS + WARMUP) / SECS), rss / 2**20)


def main():
    work = tempfile.mkdtemp(prefix="iodig-cass-bench-", dir="/var/tmp")
    nodes = os.path.join(work, "nodes")
    run([IODIG, "cassandra", "up", "--nodes", "1", "--heap", "2G", "--dir", nodes])
    try:
        if PIN:
            status = json.loads(run([IODIG, "cassandra", "status", "--json", "--dir", nodes])[0])
            run(["taskset", "-a", "-p", "-c", "0", str(status[0]["pid"])])
        common = ["--db", "cassandra", "-p", "hosts=127.0.0.1", "-P", "workloads/workloadc",
                  "-p", f"recordcount={RECORDS}", "-p", "insertorder=ordered",
                  "-p", "requestdistribution=uniform", "--trace", "off", "--out", work]
        run([IODIG, "load", *common, "--threads", "64"])
        # A freshly started JVM serves a fraction of its steady rate for the first minute.
        run([IODIG, "run", "--no-load", *common, "--threads", "256", "--duration", f"{WARM}s"])
        tools = ["iodig"] + (["latte"] if LATTE else [])
        if not LATTE:
            print("# latte not found (cargo install latte-cli, or LATTE=path): iodig alone")
        print(f"# 1 local Cassandra node, workload C uniform, {RECORDS} records, {SECS}s × {ROUNDS} rounds, "
              f"{IO_THREADS} client runtime thread(s){', server on CPU 0, client on CPU 1' if PIN else ''}, medians")
        print("| client | in flight | ops/s | client CPU µs/op (window) | µs/op (whole process) | peak RSS MiB |")
        print("|---|---|---|---|---|---|")
        for conc in (64, 1024):
            results = {t: [] for t in tools}
            for _ in range(ROUNDS):
                results["iodig"].append(iodig_round(common, conc))
                if LATTE:
                    results["latte"].append(latte_round(conc, work))
            for tool, rs in results.items():
                med = lambda i: statistics.median(r[i] for r in rs)
                print(f"| {tool} | {conc} | {med(0):,.0f} | {med(1):.2f} | {med(2):.2f} | {max(r[3] for r in rs):.1f} |",
                      flush=True)
    finally:
        subprocess.run([IODIG, "cassandra", "down", "--dir", nodes], capture_output=True)
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
