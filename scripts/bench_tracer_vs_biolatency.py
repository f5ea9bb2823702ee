#!/usr/bin/env python3
"""bench_tracer_vs_biolatency.py: iodig's tracer beside libbpf-tools' biolatency on the same fio
job, alternated (driven by scripts/bench-tracer-vs-biolatency.sh, which makes the device).

Each round runs the fio job once alone and once under each tracer, in an order rotated round by
round, so a drift in the machine's load falls on every variant alike. A tracer is started first,
and fio only once the tracer's BPF links are all in place (its /proc/PID/fdinfo shows link fds
and their number has held still), so fio's whole run is traced; the tracer is stopped with
SIGINT after fio. Per traced run:

- IOPS lost: fio's IOPS over the IOPS of the untraced run of the same round;
- the tracer's user-space CPU per IO: its process's CPU (/proc/PID/stat) over fio's run, divided
  by fio's IOs (start-up and teardown are counted apart: they do not grow with IO);
- BPF time per IO: the run_time_ns of the tracer's programs (their fdinfo) over fio's IOs. The
  kernel only counts it while /proc/sys/kernel/bpf_stats_enabled is 1, which adds a clock read to
  every program run, so it is on only in STATS_ROUNDS extra runs of each tracer, never in the
  rounds that measure IOPS.

Printed: per variant the median and min-max over the rounds (and the interquartile range of the
IOPS ratio), lost events where the tracer reports them.
"""
import argparse
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import time

def cpu_seconds_of(pid):
    """CPU seconds of a live process's threads, in nanoseconds from each thread's schedstat (the
    clock ticks of /proc/PID/stat are 10 ms: coarser than a tracer's whole share of a run)."""
    total_ns = 0
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            total_ns += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # the thread ended meanwhile
    return total_ns / 1e9


def bpf_fds(pid):
    """The BPF programs and links the process holds: ([(run_time_ns, run_cnt)], link count)."""
    progs, links = [], 0
    fd_dir = pathlib.Path(f"/proc/{pid}/fdinfo")
    for info in fd_dir.iterdir():
        try:
            text = info.read_text()
        except OSError:
            continue  # closed meanwhile
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if "link_type" in fields:
            links += 1
        elif "prog_type" in fields and "run_time_ns" in fields:
            progs.append((int(fields["run_time_ns"]), int(fields["run_cnt"])))
    return progs, links


def wait_attached(proc, name, timeout_s=30):
    """Returns once the tracer's links have held still for half a second."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{name} exited with {proc.returncode} before attaching; "
                     f"run it by hand to see why")
        _, links = bpf_fds(proc.pid)
        now = time.monotonic()
        if links != last:
            last, since = links, now
        elif links > 0 and now - since >= 0.5:
            return
        time.sleep(0.05)
    sys.exit(f"{name} did not attach within {timeout_s} s")


def run_fio(args, out):
    cmd = ["fio", "--name=randread", f"--filename={args.target}", "--rw=randread", "--bs=4k",
           "--iodepth=32", "--ioengine=libaio", "--direct=1", "--time_based",
           f"--runtime={args.secs}", f"--size={args.size_mb}M", "--randrepeat=0",
           "--output-format=json", f"--output={out}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    job = json.loads(pathlib.Path(out).read_text())["jobs"][0]["read"]
    return job["iops"], job["total_ios"]


def tracer_command(args, variant):
    if variant == "iodig":
        return [args.iodig, "trace", "--device", args.device, "--json"]
    if variant == "iodig-noattr":
        return [args.iodig, "trace", "--no-attribution", "--device", args.device, "--json"]
    if variant == "biolatency":
        return [args.biolatency, "-d", args.device]
    raise ValueError(variant)


def run_traced(args, variant, work, tag):
    out = work / f"{tag}.trace"
    with open(out, "wb") as f:
        started = time.monotonic()
        proc = subprocess.Popen(tracer_command(args, variant), stdout=f,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_attached(proc, variant)
        startup_cpu = cpu_seconds_of(proc.pid)
        attach_s = time.monotonic() - started
        iops, ios = run_fio(args, work / f"{tag}.fio.json")
        window_cpu = cpu_seconds_of(proc.pid) - startup_cpu
        progs, _ = bpf_fds(proc.pid)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        status, usage = 0, None
    proc.returncode = os.waitstatus_to_exitcode(status)
    total_cpu = usage.ru_utime + usage.ru_stime if usage else None
    r = {
        "variant": variant, "iops": iops, "ios": ios, "attach_s": attach_s,
        "user_ns_per_io": window_cpu * 1e9 / max(ios, 1),
        "startup_cpu_s": startup_cpu,
        "teardown_cpu_s": None if total_cpu is None else total_cpu - startup_cpu - window_cpu,
        "peak_mb": usage.ru_maxrss / 1024 if usage else None,
        "programs": len(progs),
        "bpf_ns_per_io": sum(t for t, _ in progs) / max(ios, 1),
        "prog_runs_per_io": sum(c for _, c in progs) / max(ios, 1),
        "exit": proc.returncode,
    }
    if variant.startswith("iodig"):
        try:
            doc = json.loads(out.read_text())
            r["lost_events"] = doc["self_check"]["lost_events"]
        except (OSError, ValueError, KeyError) as e:
            r["lost_events"] = f"unread ({e})"
    return r


def set_bpf_stats(on):
    pathlib.Path("/proc/sys/kernel/bpf_stats_enabled").write_text("1" if on else "0")


def quartiles(values):
    if len(values) < 4:
        return None
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def describe(values, spec, scale=1.0):
    values = [v * scale for v in values if v is not None]
    if not values:
        return "-"
    return f"{statistics.median(values):{spec}} ({min(values):{spec}} to {max(values):{spec}})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iodig", required=True)
    ap.add_argument("--biolatency", required=True)
    ap.add_argument("--target", required=True, help="what fio reads (a device or a file)")
    ap.add_argument("--device", required=True, help="the block device both tracers trace")
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--secs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--stats-rounds", type=int, default=5)
    ap.add_argument("--work", required=True)
    ap.add_argument("--raw", help="append every run as a JSON line to this file")
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    raw = open(args.raw, "a") if args.raw else None

    def keep(r):
        if raw:
            raw.write(json.dumps(r) + "\n")
            raw.flush()

    variants = ["none", "iodig", "iodig-noattr", "biolatency"]
    ratios = {v: [] for v in variants[1:]}
    by_variant = {v: [] for v in variants}
    stats_before = pathlib.Path("/proc/sys/kernel/bpf_stats_enabled").read_text().strip()
    try:
        set_bpf_stats(False)
        for rnd in range(args.rounds):
            k = rnd % len(variants)
            order = variants[k:] + variants[:k]
            results = {}
            for v in order:
                tag = f"r{rnd}-{v}"
                if v == "none":
                    iops, ios = run_fio(args, work / f"{tag}.fio.json")
                    results[v] = {"variant": v, "iops": iops, "ios": ios}
                else:
                    results[v] = run_traced(args, v, work, tag)
                results[v].update(round=rnd + 1, bpf_stats=False)
                keep(results[v])
                by_variant[v].append(results[v])
            base = results["none"]["iops"]
            for v in variants[1:]:
                ratios[v].append(results[v]["iops"] / base)
            print(f"  round {rnd + 1}/{args.rounds}: fio alone {base:,.0f} IOPS; "
                  + ", ".join(f"{v} {results[v]['iops'] / base:.3f}" for v in variants[1:]),
                  file=sys.stderr)
        bpf = {v: [] for v in variants[1:]}
        set_bpf_stats(True)
        for rnd in range(args.stats_rounds):
            k = rnd % (len(variants) - 1)
            order = variants[1:][k:] + variants[1:][:k]
            for v in order:
                r = run_traced(args, v, work, f"s{rnd}-{v}")
                r.update(round=rnd + 1, bpf_stats=True)
                keep(r)
                bpf[v].append(r)
    finally:
        pathlib.Path("/proc/sys/kernel/bpf_stats_enabled").write_text(stats_before)
        if raw:
            raw.close()

    print(f"# fio 4 KiB randread, libaio, iodepth 32, O_DIRECT, {args.secs} s a run on "
          f"{args.device}; {args.rounds} rotated rounds (fio alone and under each tracer), then "
          f"{args.stats_rounds} runs of each tracer with BPF stats on; median (min-max)")
    print("| | IOPS | IOPS traced / alone | IQR of the ratio | IOPS lost % | BPF ns per IO "
          "| programs, runs per IO | tracer user+sys ns per IO | total CPU ns per IO "
          "| start-up CPU ms | peak RSS MB | lost events |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    names = {"none": "fio alone", "iodig": "iodig trace (attribution on, its default)",
             "iodig-noattr": "iodig trace --no-attribution",
             "biolatency": "libbpf-tools biolatency"}
    for v in variants:
        rows = by_variant[v]
        iops = describe([r["iops"] for r in rows], ",.0f")
        if v == "none":
            print(f"| {names[v]} | {iops} | 1 | | | | | | | | | |")
            continue
        iqr = quartiles(ratios[v])
        b = bpf[v]
        bpf_med = statistics.median(r["bpf_ns_per_io"] for r in b) if b else None
        user_med = statistics.median(r["user_ns_per_io"] for r in rows)
        lost = [r.get("lost_events") for r in rows + b if "lost_events" in r]
        print(f"| {names[v]} | {iops} | {describe(ratios[v], '.3f')} "
              f"| {'-' if not iqr else f'{iqr[0]:.3f} to {iqr[1]:.3f}'} "
              f"| {describe([1 - x for x in ratios[v]], '.1f', 100)} "
              f"| {describe([r['bpf_ns_per_io'] for r in b], '.0f')} "
              f"| {statistics.median(r['programs'] for r in b) if b else '-'}, "
              f"{describe([r['prog_runs_per_io'] for r in b], '.2f')} "
              f"| {describe([r['user_ns_per_io'] for r in rows], '.1f')} "
              f"| {'-' if bpf_med is None else f'{bpf_med + user_med:.0f}'} "
              f"| {describe([r['startup_cpu_s'] for r in rows], '.0f', 1000)} "
              f"| {describe([r['peak_mb'] for r in rows], '.1f')} "
              f"| {'n/a' if not lost else (sum(lost) if all(isinstance(x, int) for x in lost) else lost)} |")
    with open("/proc/cpuinfo") as f:
        model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    print(f"# machine: {os.cpu_count()} CPUs, {model}, kernel {os.uname().release}, load "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
