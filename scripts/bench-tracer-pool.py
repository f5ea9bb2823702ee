#!/usr/bin/env python3
"""bench-tracer-pool.py: the IOPS loss over several runs of bench-tracer-toggle.sh at once.

On a shared machine one run's cycles share its half hour's load, so runs disagree more than
their own intervals say; pooling their cycles gives every run's conditions a say. Reads the
"cycle N: ... ratio R" lines of each log and prints, per log and pooled, the geometric mean (95 %
t interval), the 10 %-trimmed geometric mean and the median (95 % bootstrap intervals), as
losses in %.

Usage: scripts/bench-tracer-pool.py LOG [LOG ...]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_stats import log_ratio_interval, median_interval, trimmed_log_ratio_interval  # noqa: E402


def cycle_ratios(path):
    try:
        with open(path) as f:
            return [float(line.split()[-1]) for line in f if line.startswith("cycle ")]
    except OSError as e:
        sys.exit(f"bench-tracer-pool.py: cannot read {path}: {e.strerror}")


def loss(ratio):
    return 100 * (1 - ratio)


def show(name, ratios):
    cols = []
    for label, (m, lo, hi) in (("geometric mean", log_ratio_interval(ratios)),
                               ("10 %-trimmed", trimmed_log_ratio_interval(ratios)),
                               ("median", median_interval(ratios))):
        cols.append(f"{label} {loss(m):.2f} % ({loss(hi):.2f} to {loss(lo):.2f})")
    print(f"{name}: {len(ratios)} cycles; loss " + "; ".join(cols))


def main(paths):
    if not paths:
        sys.exit("usage: bench-tracer-pool.py LOG [LOG ...] (logs of bench-tracer-toggle.sh)")
    pooled = []
    for path in paths:
        ratios = cycle_ratios(path)
        if len(ratios) < 2:
            sys.exit(f"bench-tracer-pool.py: {path} has fewer than 2 'cycle' lines; "
                     "is it the output of bench-tracer-toggle.sh?")
        show(path, ratios)
        pooled += ratios
    if len(paths) > 1:
        show("pooled", pooled)


if __name__ == "__main__":
    main(sys.argv[1:])
