//! A trace's histograms: one size or latency bucket, the latency histogram of an op or a
//! class, the bucket holding a quantile, and histograms summed bucket by bucket.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One histogram bucket. Sizes: `lower < value <= upper` bytes. Latencies: `lower <= ns < upper`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bucket {
    /// Lower bound: bytes (excluded) or ns (included).
    pub lower: u64,
    /// Upper bound: bytes (included) or ns (excluded).
    pub upper: u64,
    /// IOs in the bucket; bytes in a by-volume histogram
    /// ([`OpTrace::size_bytes_hist`](super::OpTrace::size_bytes_hist)).
    pub count: u64,
}

/// A latency distribution in ns. Percentiles are bucket upper bounds (≤ 6% high).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// IOs timed: the sum of the buckets.
    pub count: u64,
    /// Exact maximum when the kernel kept one (device latency), else the top bucket's bound.
    pub max_ns: u64,
    /// Median in ns.
    pub p50_ns: u64,
    /// 90th percentile in ns.
    pub p90_ns: u64,
    /// 99th percentile in ns.
    pub p99_ns: u64,
    /// 99.9th percentile in ns.
    pub p999_ns: u64,
    /// 99.99th percentile in ns.
    pub p9999_ns: u64,
    /// The non-empty buckets, lowest first, `lower <= ns < upper`.
    pub buckets: Vec<Bucket>,
}

/// The upper bound of the bucket holding quantile `q` (0..=1) of the counts; 0 when empty.
pub fn bucket_quantile(buckets: &[Bucket], q: f64) -> u64 {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    if total == 0 {
        return 0;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for b in buckets {
        seen += b.count;
        if seen >= rank {
            return b.upper;
        }
    }
    buckets.last().map_or(0, |b| b.upper)
}

/// Sums histograms bucket by bucket (buckets are identified by their bounds).
pub fn merge_buckets<'a>(hists: impl Iterator<Item = &'a [Bucket]>) -> Vec<Bucket> {
    let mut m: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for h in hists {
        for b in h {
            *m.entry((b.lower, b.upper)).or_default() += b.count;
        }
    }
    m.into_iter()
        .map(|((lower, upper), count)| Bucket {
            lower,
            upper,
            count,
        })
        .collect()
}
