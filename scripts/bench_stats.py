"""bench_stats.py: the intervals the tracer benchmarks judge an IOPS loss by (imported by the
Python in bench-tracer.sh, bench-tracer-parts.sh, bench-tracer-toggle.sh and
bench-tracer-pool.py)."""
import math
import random
import statistics

# Two-sided 95 % t quantiles: row k holds the quantile of k - 1 degrees of freedom, and a sample
# of n takes the first row k >= n - 1, so it gets the quantile of fewer degrees of freedom than
# its own (the wider, safer interval); 1.96 beyond row 60.
_T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 8: 2.36, 10: 2.26, 15: 2.14, 20: 2.09,
        30: 2.04, 40: 2.02, 60: 2.00}


def log_ratio_interval(ratios):
    """Geometric mean of the ratios and its 95 % t interval over their logs: (mean, lo, hi).
    One ratio has no spread to judge by: its interval is the ratio itself."""
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    mean = statistics.mean(logs)
    sd = statistics.stdev(logs) if n > 1 else 0.0
    q = next((v for k, v in sorted(_T95.items()) if n - 1 <= k), 1.96)
    half = q * sd / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _bootstrap(ratios, stat, rounds=2000, seed=1):
    rng = random.Random(seed)
    boots = sorted(stat(rng.choices(ratios, k=len(ratios))) for _ in range(rounds))
    return boots[int(0.025 * rounds)], boots[int(0.975 * rounds) - 1]


def median_interval(ratios, rounds=2000):
    """The median ratio and its 95 % bootstrap interval over `rounds` resamples: (median, lo,
    hi)."""
    lo, hi = _bootstrap(ratios, statistics.median, rounds)
    return statistics.median(ratios), lo, hi


def trimmed_log_ratio_interval(ratios, trim=0.1):
    """Geometric mean of the ratios without the lowest and highest `trim` share of them, and its
    95 % bootstrap interval: (mean, lo, hi). Other load on a shared machine throws single cycles
    far off, up as often as down; trimmed, they no longer decide the mean, and unlike the median
    every cycle in the middle still counts."""
    def stat(xs):
        logs = sorted(math.log(x) for x in xs)
        k = int(len(logs) * trim)
        return math.exp(statistics.mean(logs[k:len(logs) - k]))
    lo, hi = _bootstrap(ratios, stat)
    return stat(ratios), lo, hi
