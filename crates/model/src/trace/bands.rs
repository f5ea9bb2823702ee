//! Size bands of a trace's size histograms: the dominant band of an op ("74 % 508–512 KiB"),
//! the buckets at the trace's own 4 KiB resolution by count and by volume, and their labels.

use super::histograms::Bucket;
use std::collections::BTreeMap;

/// A size range holding a share of one op's IOs, e.g. "74% 508–512 KiB".
#[derive(Debug, Clone, PartialEq)]
pub struct SizeBand {
    /// Lower bound in bytes, excluded.
    pub lower: u64,
    /// Upper bound in bytes, included; `u64::MAX` for the "> 2 GiB" band.
    pub upper: u64,
    /// Fraction of the op's IOs (0..=1).
    pub share: f64,
    /// Share and range as shown: "74% 508–512 KiB", "80% > 2 GiB".
    pub label: String,
}

/// One bucket at the trace's own resolution (4 KiB wide up to 2 MiB, a sixteenth of a power of
/// two above) with its share of one op's IOs and bytes: the blog's "74 % 508 KB–512 KB".
#[derive(Debug, Clone, PartialEq)]
pub struct NarrowBand {
    /// Lower bound in bytes, excluded.
    pub lower: u64,
    /// Upper bound in bytes, included.
    pub upper: u64,
    /// "508–512 KiB".
    pub label: String,
    /// IOs in the bucket.
    pub ios: u64,
    /// Bytes of those IOs (the by-volume histogram's count).
    pub bytes: u64,
    /// Percent of the op's IOs and of its bytes (0..=100).
    pub pct_ios: f64,
    /// Percent of the op's bytes (0..=100).
    pub pct_bytes: f64,
}

/// The narrowest band that says what most IOs look like: the biggest bucket, widened to its
/// larger neighbour while it holds under half of the IOs (at most 8 buckets); or, when more
/// IOs sit above 2 GiB than in that band, "> 2 GiB" (the briefs' "80% > 2 GB" discards).
pub fn dominant_band(hist: &[Bucket]) -> Option<SizeBand> {
    let total: u64 = hist.iter().map(|b| b.count).sum();
    if total == 0 {
        return None;
    }
    let top = (0..hist.len()).max_by_key(|&i| hist[i].count)?;
    let (mut lo, mut hi, mut n) = (top, top, hist[top].count);
    while (n as f64) < 0.5 * total as f64 && hi - lo < 7 {
        let left = if lo > 0 && hist[lo - 1].upper == hist[lo].lower {
            hist[lo - 1].count
        } else {
            0
        };
        let right = if hi + 1 < hist.len() && hist[hi + 1].lower == hist[hi].upper {
            hist[hi + 1].count
        } else {
            0
        };
        if left == 0 && right == 0 {
            break;
        }
        if right >= left {
            hi += 1;
            n += right;
        } else {
            lo -= 1;
            n += left;
        }
    }
    const TWO_GIB: u64 = 2 << 30;
    let above: u64 = hist
        .iter()
        .filter(|b| b.lower >= TWO_GIB)
        .map(|b| b.count)
        .sum();
    if above >= n {
        let share = above as f64 / total as f64;
        return Some(SizeBand {
            lower: TWO_GIB,
            upper: u64::MAX,
            share,
            label: format!("{:.0}% > 2 GiB", share * 100.0),
        });
    }
    let (lower, upper) = (hist[lo].lower, hist[hi].upper);
    let share = n as f64 / total as f64;
    Some(SizeBand {
        lower,
        upper,
        share,
        label: format!("{:.0}% {}", share * 100.0, band_label(lower, upper)),
    })
}

/// The `n` largest buckets by IO count and the `n` largest by volume (their union, each holding
/// at least 1 % of the op's IOs or bytes), one bucket each, largest share of bytes first.
/// `by_count` and `by_bytes` are the same buckets counted in IOs and in bytes.
pub fn narrow_bands(by_count: &[Bucket], by_bytes: &[Bucket], n: usize) -> Vec<NarrowBand> {
    let mut m: BTreeMap<(u64, u64), (u64, u64)> = BTreeMap::new();
    for b in by_count {
        m.entry((b.lower, b.upper)).or_default().0 += b.count;
    }
    for b in by_bytes {
        m.entry((b.lower, b.upper)).or_default().1 += b.count;
    }
    let ios: u64 = m.values().map(|v| v.0).sum();
    let bytes: u64 = m.values().map(|v| v.1).sum();
    if ios == 0 {
        return Vec::new();
    }
    let pct = |v: u64, all: u64| {
        if all == 0 {
            0.0
        } else {
            100.0 * v as f64 / all as f64
        }
    };
    let all: Vec<NarrowBand> = m
        .into_iter()
        .map(|((lower, upper), (i, b))| NarrowBand {
            lower,
            upper,
            label: band_label(lower, upper),
            ios: i,
            bytes: b,
            pct_ios: pct(i, ios),
            pct_bytes: pct(b, bytes),
        })
        .collect();
    let top = |key: fn(&NarrowBand) -> f64| {
        let mut idx: Vec<usize> = (0..all.len()).collect();
        idx.sort_by(|&a, &b| key(&all[b]).total_cmp(&key(&all[a])).then(a.cmp(&b)));
        idx.truncate(n);
        idx
    };
    let mut keep: Vec<usize> = top(|b| b.pct_bytes);
    keep.extend(top(|b| b.pct_ios));
    keep.sort_unstable();
    keep.dedup();
    let mut out: Vec<NarrowBand> = keep
        .into_iter()
        .map(|i| all[i].clone())
        .filter(|b| b.pct_ios >= 1.0 || b.pct_bytes >= 1.0)
        .collect();
    out.sort_by(|a, b| {
        b.pct_bytes
            .total_cmp(&a.pct_bytes)
            .then(b.pct_ios.total_cmp(&a.pct_ios))
    });
    out
}

/// "508–512 KiB" for the sizes `lower < s <= upper`; "0 B" for the zero-size bucket.
pub fn band_label(lower: u64, upper: u64) -> String {
    if upper == 0 {
        return "0 B".to_string();
    }
    // The unit of the upper bound, unless the band is narrower than a sixteenth of it: a 4 KiB
    // bucket at 1 MiB reads "1024–1028 KiB", not "1.00–1.01 MiB".
    let unit = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        .into_iter()
        .find(|(u, _)| upper >= *u && (upper - lower >= u / 16 || *u == 1 << 10))
        .unwrap_or((1, "B"));
    let f = |v: u64| {
        let x = v as f64 / unit.0 as f64;
        if (x - x.round()).abs() < 1e-9 {
            format!("{}", x.round())
        } else {
            format!("{x:.2}")
        }
    };
    format!("{}–{} {}", f(lower), f(upper), unit.1)
}

/// Bytes with a binary unit: "1.50 GiB".
pub fn human_bytes(v: u64) -> String {
    let units = [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (u, name) in units {
        if v >= u {
            return format!("{:.2} {name}", v as f64 / u as f64);
        }
    }
    format!("{v} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(lower: u64, upper: u64, count: u64) -> Bucket {
        Bucket {
            lower,
            upper,
            count,
        }
    }

    #[test]
    fn dominant_band_single_bucket() {
        let h = [b(0, 4096, 100)];
        let band = dominant_band(&h).unwrap();
        assert_eq!(band.label, "100% 0–4 KiB");
    }

    #[test]
    fn dominant_band_widens_to_majority() {
        let k = 1024;
        let h = [
            b(100 * k, 104 * k, 10),
            b(504 * k, 508 * k, 30),
            b(508 * k, 512 * k, 44),
            b(512 * k, 516 * k, 16),
        ];
        let band = dominant_band(&h).unwrap();
        assert_eq!(band.label, "74% 504–512 KiB");
        assert_eq!((band.lower, band.upper), (504 * k, 512 * k));
    }

    #[test]
    fn narrow_bands_by_count_and_by_volume() {
        let k = 1024;
        // 600 small reads of 4 KiB and 100 writes of 512 KiB: by count the 4 KiB bucket
        // dominates, by volume the 508–512 KiB one (the blog's "74 % 508 KB–512 KB").
        let count = [
            b(0, 4 * k, 600),
            b(504 * k, 508 * k, 35),
            b(508 * k, 512 * k, 100),
        ];
        let bytes = [
            b(0, 4 * k, 600 * 4 * k),
            b(504 * k, 508 * k, 35 * 506 * k),
            b(508 * k, 512 * k, 100 * 512 * k),
        ];
        let bands = narrow_bands(&count, &bytes, 1);
        assert_eq!(bands.len(), 2, "top by volume and top by count: {bands:?}");
        assert_eq!(bands[0].label, "508–512 KiB");
        let all_bytes = f64::from(600 * 4 + 35 * 506 + 100 * 512);
        assert!((bands[0].pct_bytes - 100.0 * 51200.0 / all_bytes).abs() < 1e-9);
        assert!((bands[0].pct_ios - 100.0 * 100.0 / 735.0).abs() < 1e-9);
        assert_eq!(bands[1].label, "0–4 KiB");
        assert!((bands[1].pct_ios - 100.0 * 600.0 / 735.0).abs() < 1e-9);
        assert!(narrow_bands(&[], &[], 3).is_empty());
        // Buckets under 1 % of both IOs and bytes are left out even among the top n.
        let count = [b(0, 4 * k, 1000), b(4 * k, 8 * k, 1)];
        let bytes = [b(0, 4 * k, 1000 * 4 * k), b(4 * k, 8 * k, 8 * k)];
        assert_eq!(narrow_bands(&count, &bytes, 3).len(), 1);
    }

    #[test]
    fn dominant_band_above_two_gib() {
        let g = 1u64 << 30;
        let h = [
            b(4096, 8192, 20),
            b(2 * g, 2 * g + (g >> 3), 40),
            b(3 * g, 3 * g + (g >> 3), 40),
        ];
        let band = dominant_band(&h).unwrap();
        assert_eq!(band.label, "80% > 2 GiB");
    }

    #[test]
    fn labels() {
        assert_eq!(band_label(0, 0), "0 B");
        assert_eq!(band_label(2 << 20, (2 << 20) + (1 << 18)), "2–2.25 MiB");
        assert_eq!(band_label(1 << 20, (1 << 20) + 4096), "1024–1028 KiB");
        assert_eq!(band_label(508 << 10, 512 << 10), "508–512 KiB");
        assert_eq!(human_bytes(3 << 29), "1.50 GiB");
    }
}
