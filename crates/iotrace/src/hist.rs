//! Histogram bucket math shared with the BPF side (src/bpf/iotrace.h): index functions that
//! mirror the C ones, bucket bounds, and percentiles.

use iodig_model::trace::{Bucket, Latency};

/// Size buckets up to 2 MiB: bucket 0 holds 0-byte IOs (flushes), bucket i the sizes in
/// (4096·(i−1), 4096·i] bytes.
pub const SIZE_LIN_BUCKETS: usize = 513;
/// All size buckets (689): the linear ones, then 16 per power of two from 2 MiB to 4 GiB.
pub const SIZE_BUCKETS: usize = SIZE_LIN_BUCKETS + 11 * 16;
/// Sub-bucket bits of the whole-trace latency histograms: 8 buckets per power of two (±6%).
pub const LAT_SUB_BITS: u32 = 3;
/// Buckets of a whole-trace latency histogram (304), exact below 8 ns, up to 2^40 ns (18 min).
pub const LAT_BUCKETS: usize = ((40 - LAT_SUB_BITS + 1) << LAT_SUB_BITS) as usize;
/// Sub-bucket bits of the per-second and attribution histograms: 4 per power of two (±12%).
pub const SEC_SUB_BITS: u32 = 2;
/// Buckets of a per-second latency histogram (156), up to 2^40 ns.
pub const SEC_BUCKETS: usize = ((40 - SEC_SUB_BITS + 1) << SEC_SUB_BITS) as usize;
const LAT_CLAMP: u64 = (1 << 40) - 1;

/// Size bucket of an IO of `bytes` (same as `size_idx` in iotrace.bpf.c).
pub fn size_idx(bytes: u32) -> usize {
    if bytes == 0 {
        return 0;
    }
    if bytes <= 2 << 20 {
        return bytes.div_ceil(4096) as usize;
    }
    let p = 31 - (bytes - 1).leading_zeros();
    SIZE_LIN_BUCKETS + (((p - 21) << 4) + (((bytes - 1) >> (p - 4)) & 15)) as usize
}

/// Bounds `(lower, upper]` in bytes of size bucket `i`.
pub fn size_bounds(i: usize) -> (u64, u64) {
    if i < SIZE_LIN_BUCKETS {
        let upper = 4096 * i as u64;
        return (upper.saturating_sub(4096), upper);
    }
    let j = (i - SIZE_LIN_BUCKETS) as u64;
    let p = 21 + j / 16;
    let width = 1u64 << (p - 4);
    let lower = (1u64 << p) + (j % 16) * width;
    (lower, lower + width)
}

/// Latency bucket of `ns` with `g` sub-bucket bits (same as `lat_idx` in iotrace.bpf.c).
pub fn lat_idx(ns: u64, g: u32) -> usize {
    let ns = ns.min(LAT_CLAMP);
    if ns < 1 << g {
        return ns as usize;
    }
    let p = 63 - ns.leading_zeros();
    (u64::from((p - g + 1) << g) | ((ns >> (p - g)) & ((1 << g) - 1))) as usize
}

/// Bounds `[lower, upper)` in ns of latency bucket `i` with `g` sub-bucket bits.
pub fn lat_bounds(i: usize, g: u32) -> (u64, u64) {
    let i = i as u64;
    if i < 1 << g {
        return (i, i + 1);
    }
    let p = (i >> g) + u64::from(g) - 1;
    let width = 1u64 << (p - u64::from(g));
    let lower = (1u64 << p) + (i & ((1 << g) - 1)) * width;
    (lower, lower + width)
}

/// Non-empty buckets of `counts` with bounds from `bounds`.
pub fn to_buckets(counts: &[u64], bounds: impl Fn(usize) -> (u64, u64)) -> Vec<Bucket> {
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(i, &count)| {
            let (lower, upper) = bounds(i);
            Bucket {
                lower,
                upper,
                count,
            }
        })
        .collect()
}

/// The upper bound of the bucket holding quantile `q` (0..=1) of the IOs; 0 when empty: the
/// rule the report reads the saved buckets with, so the tracer's p99 and the report's agree.
pub use iodig_model::trace::bucket_quantile as quantile;

/// A latency summary from total bucket counts (`g` sub-bucket bits), with an exact max if known.
pub fn latency(counts: &[u64], g: u32, exact_max: Option<u64>) -> Option<Latency> {
    let buckets = to_buckets(counts, |i| lat_bounds(i, g));
    let count: u64 = buckets.iter().map(|b| b.count).sum();
    if count == 0 {
        return None;
    }
    let top = buckets.last().map_or(0, |b| b.upper);
    let q = |p| quantile(&buckets, p).min(exact_max.unwrap_or(u64::MAX));
    Some(Latency {
        count,
        max_ns: exact_max.unwrap_or(top),
        p50_ns: q(0.5),
        p90_ns: q(0.9),
        p99_ns: q(0.99),
        p999_ns: q(0.999),
        p9999_ns: q(0.9999),
        buckets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_buckets_hold_their_sizes() {
        for bytes in [
            1u32,
            512,
            4096,
            4097,
            508 << 10,
            512 << 10,
            2 << 20,
            (2 << 20) + 1,
            3 << 30,
            u32::MAX,
        ] {
            let (lo, hi) = size_bounds(size_idx(bytes));
            assert!(
                lo < u64::from(bytes) && u64::from(bytes) <= hi,
                "{bytes} not in ({lo}, {hi}]"
            );
        }
        assert_eq!(size_idx(0), 0);
        assert_eq!(size_bounds(0), (0, 0));
        assert_eq!(size_idx(u32::MAX), SIZE_BUCKETS - 1);
        assert_eq!(size_bounds(size_idx(512 << 10)), (508 << 10, 512 << 10));
        assert_eq!(
            size_bounds(size_idx(2 << 30)),
            ((2u64 << 30) - (1 << 26), 2 << 30)
        );
    }

    #[test]
    fn size_buckets_are_contiguous() {
        for i in 1..SIZE_BUCKETS - 1 {
            assert_eq!(
                size_bounds(i).1,
                size_bounds(i + 1).0,
                "gap after bucket {i}"
            );
        }
        assert!(size_bounds(SIZE_BUCKETS - 1).1 >= 4 << 30);
    }

    #[test]
    fn latency_buckets_hold_their_values_within_precision() {
        for g in [LAT_SUB_BITS, SEC_SUB_BITS] {
            for ns in [0u64, 1, 7, 8, 9, 1000, 4095, 123_456_789, LAT_CLAMP] {
                let (lo, hi) = lat_bounds(lat_idx(ns, g), g);
                assert!(lo <= ns && ns < hi, "g={g}: {ns} not in [{lo}, {hi})");
                assert!((hi - lo) as f64 <= (lo.max(1) as f64) / f64::from(1 << g) + 1.0);
            }
        }
        assert_eq!(lat_idx(u64::MAX, LAT_SUB_BITS), LAT_BUCKETS - 1);
        assert_eq!(lat_idx(u64::MAX, SEC_SUB_BITS), SEC_BUCKETS - 1);
        for i in 0..LAT_BUCKETS - 1 {
            assert_eq!(
                lat_bounds(i, LAT_SUB_BITS).1,
                lat_bounds(i + 1, LAT_SUB_BITS).0
            );
        }
    }

    #[test]
    fn quantiles_and_summary() {
        let mut counts = vec![0u64; LAT_BUCKETS];
        counts[lat_idx(1_000, LAT_SUB_BITS)] = 99;
        counts[lat_idx(1_000_000, LAT_SUB_BITS)] = 1;
        let l = latency(&counts, LAT_SUB_BITS, Some(1_000_000)).unwrap();
        assert_eq!(l.count, 100);
        assert_eq!(
            l.p50_ns,
            lat_bounds(lat_idx(1_000, LAT_SUB_BITS), LAT_SUB_BITS).1
        );
        assert_eq!(l.p99_ns, l.p50_ns);
        assert_eq!(l.p999_ns, 1_000_000, "capped by the exact max");
        assert!(latency(&[0; 4], 2, None).is_none());
    }

    /// A native program over src/bpf/buckets.h: for each value on stdin, its log2, latency
    /// buckets (both resolutions), size bucket and µs, as the BPF programs compute them.
    const BUCKETS_HARNESS: &str = r#"#include <stdio.h>
#include <stdint.h>
typedef uint8_t __u8; typedef uint16_t __u16; typedef uint32_t __u32; typedef int32_t __s32;
typedef uint64_t __u64; typedef int64_t __s64;
#define __always_inline inline __attribute__((always_inline))
#include "buckets.h"
int main(void)
{
	unsigned long long v;

	while (scanf("%llu", &v) == 1) {
		struct lat_ix x = lat_ix(v);

		printf("%u %u %u %u %llu", log2_u64(v), x.fine, x.coarse,
		       size_idx(v > 0xffffffffULL ? 0xffffffffu : (__u32)v),
		       (unsigned long long)ns_to_us(v));
		/* period_of with the right hint, its neighbours, a far one and none */
		for (int l = 0; l < 2; l++) {
			__u64 len = l ? 1000000000ULL : 100000000ULL, q = v / len;
			__u64 hints[5] = {q, q - 1, q + 1, q + 1000, 0};

			for (int h = 0; h < 5; h++) {
				__u64 hint = hints[h];
				__u64 id = period_of(v, len, &hint);

				printf(" %llu/%llu", (unsigned long long)id, (unsigned long long)hint);
			}
		}
		printf("\n");
	}
	return 0;
}
"#;

    /// Values that reach every branch of the bucket math: 0–5000, every power of two with its
    /// neighbours, and 20,000 xorshift values spread over all magnitudes below 2^63.
    fn probe_values() -> Vec<u64> {
        let mut values: Vec<u64> = (0..=5000).collect();
        for p in 0..63 {
            let v = 1u64 << p;
            values.extend([v - 1, v, v + 1, v + v / 2]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push((x >> 1) >> (x % 63));
        }
        values
    }

    /// The bucket math in src/bpf/buckets.h, compiled natively from the very file the BPF
    /// object includes, gives the same index as this module for every probe value. The BPF
    /// side has no branches or leading-zero count, so a slip there would file IOs one bucket
    /// off. Its period_of gives the exact slot and second from any hint, as a division would.
    #[test]
    fn the_bpf_bucket_math_agrees_with_this_module() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("buckets_check.c");
        let bin = dir.path().join("buckets_check");
        std::fs::write(&src, BUCKETS_HARNESS).unwrap();
        let bpf_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/bpf");
        let out = std::process::Command::new("clang")
            .args(["-O2", "-Wall", "-I", bpf_dir])
            .arg(&src)
            .arg("-o")
            .arg(&bin)
            .output()
            .expect("clang (the BPF build's compiler) runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        let values = probe_values();
        let input: String = values.iter().map(|v| format!("{v}\n")).collect();
        let input_path = dir.path().join("values");
        std::fs::write(&input_path, input).unwrap();
        let out = std::process::Command::new(&bin)
            .stdin(std::fs::File::open(&input_path).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success());
        let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        assert_eq!(lines.len(), values.len());
        for (v, line) in values.iter().zip(lines) {
            let mut want = format!(
                "{} {} {} {} {}",
                63u32.saturating_sub(v.leading_zeros()),
                lat_idx(*v, LAT_SUB_BITS),
                lat_idx(*v, SEC_SUB_BITS),
                size_idx(u32::try_from(*v).unwrap_or(u32::MAX)),
                v / 1000
            );
            // Whatever the hint, the slot and the second, with the hint left on the answer.
            for len in [100_000_000u64, 1_000_000_000] {
                want += &format!(" {0}/{0}", v / len).repeat(5);
            }
            assert_eq!(line, want, "value {v}: C gives {line}, Rust {want}");
        }
    }
}
