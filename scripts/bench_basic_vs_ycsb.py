#!/usr/bin/env python3
"""bench_basic_vs_ycsb.py: iodig's no-op binding (`--db basic`) beside YCSB 0.17's BasicDB at
equal threads and equal time, alternated pair by pair (driven by scripts/bench-basic-vs-ycsb.sh,
which fetches YCSB first).

Both run YCSB workload A (the same property file, recordcount 1000) for the same measured time:
iodig `run --duration D --warmup 0s --trace off` (a 1000-record load precedes its run step),
YCSB `-t -p maxexecutiontime=D` with an operation count it cannot reach. Equal time, not equal
work: the issue's goals are a rate per CPU-second and a step that ends on time, and at equal work
the faster client would run for less time, so JVM start-up and JIT would weigh differently on
each side.
When a time-bound YCSB run does not end within the timeout (at hundreds of threads on 2 busy
CPUs its main thread can wait minutes for System.err's lock before it starts the thread that
ends the run), the pair's YCSB run is made again with the operation count of the iodig run just
before (equal work), and so are the thread count's later pairs; the table says so.

Per run: operations (iodig: its run step in run.json; YCSB: its per-op `Operations` lines,
CLEANUP left out), the tool's measured runtime, CPU seconds of the whole process (user + system
from wait4), CPU seconds in the measured window (iodig: run.json's `client_cpu_s`; YCSB: the
whole process minus its CPU when it printed "Starting test.", read from /proc/PID/stat, so the
JVM's start-up is left out but its shutdown and export are in), peak RSS (wait4's ru_maxrss;
both clients are one process), and the wall time of the whole command.

Prints one row per thread count: medians over the pairs, and the ratio iodig / YCSB of
operations per CPU-second taken pair by pair (median, min-max).
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

TICKS = os.sysconf("SC_CLK_TCK")
YCSB_START_MARKER = "Starting test."


def cpu_seconds_of(pid):
    """User + system CPU seconds of a live process, from /proc/PID/stat (threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields after the command name start at field 3 (state): utime is field 14, stime 15.
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_measured(cmd, stdout_path, timeout_s, start_marker=None):
    """Runs cmd in its own process group; returns wall, CPU, peak RSS, exit status, the CPU the
    process had used when start_marker appeared on its standard error, and that error text."""
    started = time.monotonic()
    with open(stdout_path, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, start_new_session=True)
    marker_cpu = []
    err_lines = []

    def read_stderr():
        for raw in proc.stderr:
            line = raw.decode(errors="replace")
            if start_marker and not marker_cpu and line.startswith(start_marker):
                try:
                    marker_cpu.append(cpu_seconds_of(proc.pid))
                except OSError:
                    pass
            if len(err_lines) < 200:
                err_lines.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    def kill_group():
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended just as the timer fired

    killer = threading.Timer(timeout_s, kill_group)
    killer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    killer.cancel()
    reader.join(5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
        "exit": proc.returncode,
        "killed": wall >= timeout_s - 0.5 and proc.returncode == -signal.SIGKILL,
        "cpu_at_start_s": marker_cpu[0] if marker_cpu else None,
        "stderr": "".join(err_lines),
    }


def run_iodig(args, threads, work):
    out_dir = work / f"iodig-{threads}-{time.monotonic_ns()}"
    cmd = [args.iodig, "run", "--db", "basic", "-P", args.workload, "-p", "recordcount=1000",
           "--threads", str(threads), "--duration", f"{args.duration}s", "--warmup", "0s",
           "--trace", "off", "--out", str(out_dir)]
    r = run_measured(cmd, work / "iodig.out", args.duration + args.timeout)
    r["tool"] = "iodig"
    try:
        runs = sorted(out_dir.glob("*/run.json"))
        doc = json.loads(runs[-1].read_text())
        step = [s for s in doc["steps"] if s.get("phase") == "run"][-1]
        r["ops"] = step["operations"]
        r["runtime_s"] = step["runtime_ms"] / 1000
        r["window_cpu_s"] = step.get("client_cpu_s")
    except (IndexError, KeyError, OSError, ValueError) as e:
        r["error"] = f"no run step in {out_dir}: {e}; stderr: {r['stderr'][-400:]}"
    shutil.rmtree(out_dir, ignore_errors=True)
    return r


def run_ycsb(args, threads, work, operation_count=None):
    """YCSB for the measured time, or with operation_count for exactly that many operations."""
    if operation_count is None:
        limit = ["-p", "operationcount=2000000000", "-p", f"maxexecutiontime={args.duration}"]
    else:
        limit = ["-p", f"operationcount={operation_count}"]
    cmd = ["java", "-cp", f"{args.ycsb_lib}/*", "site.ycsb.Client", "-t",
           "-db", "site.ycsb.BasicDB", "-P", args.workload, "-p", "recordcount=1000", *limit,
           "-threads", str(threads), "-p", "basicdb.verbose=false",
           "-p", "basicdb.simulatedelay=0"]
    out = work / "ycsb.out"
    r = run_measured(cmd, out, args.duration + args.timeout, YCSB_START_MARKER)
    r["tool"] = "ycsb"
    r["equal_work"] = operation_count is not None
    ops, runtime_ms = 0, None
    for line in out.read_text(errors="replace").splitlines():
        m = re.match(r"\[([^\]]+)\], (Operations|RunTime\(ms\)), ([0-9.]+)$", line)
        if not m:
            continue
        series, what, value = m.groups()
        if what == "RunTime(ms)" and series == "OVERALL":
            runtime_ms = float(value)
        elif what == "Operations" and series != "CLEANUP":
            ops += int(value)
    if runtime_ms is None:
        r["error"] = f"no [OVERALL] in YCSB's output; stderr: {r['stderr'][-400:]}"
        return r
    r["ops"] = ops
    r["runtime_s"] = runtime_ms / 1000
    if r["cpu_at_start_s"] is not None:
        r["window_cpu_s"] = r["cpu_s"] - r["cpu_at_start_s"]
    return r


def log(raw, r, threads, p, args):
    r.update(threads=threads, pair=p + 1, duration_s=args.duration)
    if raw:
        raw.write(json.dumps({k: v for k, v in r.items() if k != "stderr"}) + "\n")
        raw.flush()
    if "error" in r:
        print(f"  {threads} threads, pair {p + 1}: {r['tool']}: {r['error']}", file=sys.stderr)


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def spread(values, spec):
    """'median (min-max)' of values."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):{spec}} ({min(values):{spec}}-{max(values):{spec}})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iodig", required=True)
    ap.add_argument("--ycsb-lib", required=True, help="directory holding YCSB's jars")
    ap.add_argument("--workload", default="workloads/workloada")
    ap.add_argument("--threads", default="1,4,16,64,256,1024")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=10, help="measured seconds of each run")
    ap.add_argument("--timeout", type=int, default=60,
                    help="seconds past the duration after which a run is killed")
    ap.add_argument("--equal-work", action="store_true",
                    help="YCSB runs the operation count of the iodig run before it, not the time")
    ap.add_argument("--raw", help="append every run as a JSON line to this file")
    args = ap.parse_args()
    try:
        thread_counts = [int(t) for t in args.threads.replace(",", " ").split()]
    except ValueError:
        sys.exit(f"THREADS={args.threads!r}: give thread counts like '1 4 16'")

    work = pathlib.Path(tempfile.mkdtemp(prefix="iodig-bench-ycsb.", dir="/var/tmp"))
    raw = open(args.raw, "a") if args.raw else None
    rows = []
    try:
        for threads in thread_counts:
            ycsb_stuck, ycsb_killed = False, 0
            pairs = []
            # Once YCSB has not ended within the timeout at this thread count, it runs the
            # operation count of the last iodig run instead (equal work): at many threads on
            # few busy CPUs its main thread can wait minutes for System.err's lock (the starting
            # threads' DBWrapper messages hold it) before it starts the thread that ends a
            # time-bound run, and a killed run prints nothing.
            equal_work = None
            for p in range(args.pairs):
                # Alternate which tool goes first, so a drift in the machine's load cancels out.
                results = {}
                for tool in ("iodig", "ycsb") if p % 2 == 0 else ("ycsb", "iodig"):
                    if tool == "iodig":
                        results[tool] = run_iodig(args, threads, work)
                        equal_work = results[tool].get("ops", equal_work)
                    else:
                        use_count = args.equal_work or ycsb_stuck
                        results[tool] = run_ycsb(args, threads, work,
                                                 equal_work if use_count else None)
                    log(raw, results[tool], threads, p, args)
                if results["ycsb"]["killed"] and not results["ycsb"]["equal_work"]:
                    ycsb_stuck = True
                    ycsb_killed += 1
                    if equal_work:
                        results["ycsb"] = run_ycsb(args, threads, work, equal_work)
                        log(raw, results["ycsb"], threads, p, args)
                pairs.append(results)
                i, y = results["iodig"], results["ycsb"]
                print(f"  {threads:>5} threads, pair {p + 1}/{args.pairs}: "
                      f"iodig {i.get('ops', 0) / max(i['cpu_s'], 1e-9):,.0f} ops/CPU-s, "
                      f"YCSB {y.get('ops', 0) / max(y['cpu_s'], 1e-9):,.0f} ops/CPU-s"
                      + (" (equal work)" if y["equal_work"] else ""),
                      file=sys.stderr)
            rows.append((threads, pairs, ycsb_killed))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if raw:
            raw.close()

    def per_cpu(r, cpu_key):
        cpu = r.get(cpu_key)
        return r["ops"] / cpu if "ops" in r and cpu else None

    def ratio(pair, cpu_key):
        i, y = per_cpu(pair["iodig"], cpu_key), per_cpu(pair["ycsb"], cpu_key)
        return i / y if i and y else None

    print(f"# iodig --db basic vs YCSB 0.17 BasicDB, workload A, {args.duration} s measured per "
          f"run, {args.pairs} alternated pairs per thread count; medians, ratio (min-max) pair "
          "by pair")
    print("# ops/CPU-s: operations per CPU-second of the whole process; in window: of the "
          "measured window only")
    print("| threads | iodig ops/s | YCSB ops/s | iodig ops/CPU-s | YCSB ops/CPU-s "
          "| iodig/YCSB ops per CPU-s | same, in window | iodig peak RSS MB | YCSB peak RSS MB "
          "| iodig step end - duration s (max) | iodig wall s | YCSB runtime - duration s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for threads, pairs, ycsb_killed in rows:
        iod = [p["iodig"] for p in pairs]
        ycs = [p["ycsb"] for p in pairs]
        rate = lambda rs: med(r["ops"] / r["runtime_s"] if "runtime_s" in r else None for r in rs)
        late = [r["runtime_s"] - args.duration for r in iod if "runtime_s" in r]
        notes = []
        killed = sum(r["killed"] for r in iod)
        if killed:
            notes.append(f"iodig: {killed} of {len(iod)} runs did not end within "
                         f"{args.duration + args.timeout} s and were killed")
        if ycsb_killed:
            notes.append(f"YCSB: {ycsb_killed} time-bound run(s) did not end within "
                         f"{args.duration + args.timeout} s and were killed")
        equal = sum(r["equal_work"] for r in ycs)
        if equal:
            notes.append(f"YCSB: {equal} of {len(ycs)} runs at equal work (the operation count "
                         "of the iodig run before)")
        killed = sum(r["killed"] for r in ycs)
        if killed:
            notes.append(f"YCSB: {killed} of those killed too")
        print(f"| {threads} | {fmt(rate(iod), ',.0f')} | {fmt(rate(ycs), ',.0f')} "
              f"| {fmt(med(per_cpu(r, 'cpu_s') for r in iod), ',.0f')} "
              f"| {fmt(med(per_cpu(r, 'cpu_s') for r in ycs), ',.0f')} "
              f"| {spread([ratio(p, 'cpu_s') for p in pairs], '.2f')} "
              f"| {spread([ratio(p, 'window_cpu_s') for p in pairs], '.2f')} "
              f"| {fmt(med(r['peak_mb'] for r in iod), '.0f')} "
              f"| {fmt(med(r['peak_mb'] for r in ycs), '.0f')} "
              f"| {fmt(med(late), '.2f')} ({fmt(max(late) if late else None, '.2f')}) "
              f"| {fmt(med(r['wall_s'] for r in iod), '.2f')} "
              f"| {fmt(med(r['runtime_s'] - args.duration for r in ycs if 'runtime_s' in r and not r['equal_work']), '.2f')} |"
              + (" " + "; ".join(notes) if notes else ""))
    print(f"# machine: {os.cpu_count()} CPUs, {cpu_model()}, kernel {os.uname().release}, "
          f"load {open('/proc/loadavg').read().split()[0:3]}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    main()
