#!/usr/bin/env python3
"""biolatency_as_trace.py: libbpf-tools' biolatency behind the command line of `iodig trace`, so
scripts/bench-tracer-toggle.sh can switch it on and off in place of iodig's tracer
(`IODIG=scripts/biolatency_as_trace.py scripts/bench-tracer-toggle.sh`, which
scripts/bench-tracer-vs-biolatency.sh runs with MODE=toggle).

Takes `trace [FLAGS] --device DEV --json -- sleep SECS` as the toggle script passes it: starts
`biolatency -d DEV`, waits until its BPF links are in place (its /proc/PID/fdinfo), keeps it
attached SECS seconds, stops it with SIGINT, and prints the window it was attached
(`start_unix_ms`, `end_unix_ms`) in the shape the toggle script reads from `iodig trace --json`.
biolatency keeps no event stream, so it has no lost events to report: 0.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time


def links_of(pid):
    count = 0
    for info in pathlib.Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            if "link_type:" in info.read_text():
                count += 1
        except OSError:
            pass  # closed meanwhile
    return count


def main(argv):
    try:
        device = argv[argv.index("--device") + 1]
        secs = float(argv[argv.index("--") + 2])
    except (ValueError, IndexError):
        sys.exit("biolatency_as_trace.py: expected `trace ... --device DEV --json -- sleep SECS`, "
                 f"got {' '.join(argv)}")
    tool = os.environ.get("BIOLATENCY") or shutil.which("biolatency")
    if not tool:
        sys.exit("biolatency_as_trace.py: biolatency not found (apt-get install libbpf-tools)")
    proc = subprocess.Popen([tool, "-d", device], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    last, since = -1, time.monotonic()
    deadline = since + 30
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"biolatency_as_trace.py: {tool} -d {device} did not attach "
                     f"(exit {proc.returncode})")
        links = links_of(proc.pid)
        now = time.monotonic()
        if links != last:
            last, since = links, now
        elif links > 0 and now - since >= 0.2:
            break
        time.sleep(0.02)
    start_ms = time.time_ns() // 1_000_000
    time.sleep(secs)
    # The window ends before the stop, as iodig's ends before its programs are detached.
    end_ms = time.time_ns() // 1_000_000
    proc.send_signal(signal.SIGINT)
    proc.wait()
    print(json.dumps({"start_unix_ms": start_ms, "end_unix_ms": end_ms,
                      "self_check": {"lost_events": 0}}))


if __name__ == "__main__":
    main(sys.argv[1:])
