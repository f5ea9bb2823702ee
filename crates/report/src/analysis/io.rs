//! The block-IO profile of a step from its trace: per-op rates, IOPS and device latency on the
//! step's time axis, queue depth, the blog's IO summary rows and the block-size histograms.

use super::Line;
use iodig_model::trace::{merge_buckets, Bucket, NarrowBand, TraceDoc};
use std::collections::BTreeMap;

/// An op's figures on the step's time axis, summed (rates, depth) or maxed (latency) over devices.
#[derive(Debug, Clone, Default)]
pub struct IoLines {
    /// MB/s (10^6 bytes) over the covered part of each second.
    pub mb_s: Line,
    /// Each second's busiest slot (`slot_ms` wide in trace.json) as MB/s: exact for one device,
    /// an upper bound for several.
    pub mb_s_max: Line,
    /// IOs per second.
    pub iops: Line,
    /// Slowest device latency (issue → completion) of the IOs completed in each second, ms; in
    /// diskstats mode iostat's await, which includes OS queueing.
    pub lat_max_ms: Line,
    /// p99 device latency of each second, ms (eBPF only; empty otherwise).
    pub lat_p99_ms: Line,
    /// OS time (request allocation → issue) of the same IOs, p99 of each second, ms (eBPF
    /// only; empty in traces from before it was kept).
    pub os_p99_ms: Line,
    /// Top bucket's upper bound of that OS time per second, ms.
    pub os_max_ms: Line,
    /// Every IO's device latency by second: second start (unix ms) → latency octave (IOs of
    /// 2^k to 2^(k+1) ns) → IOs, summed over devices (eBPF traces; the latency heat map).
    pub lat_octaves: BTreeMap<u64, BTreeMap<u32, u64>>,
}

/// The octave `k` of a latency bucket: its IOs took 2^k to 2^(k+1) ns (the kernel's ±12 %
/// buckets nest in octaves, four to one).
pub fn octave(b: &Bucket) -> u32 {
    b.lower.max(1).ilog2()
}

/// An op's dominant size buckets at the trace's own resolution (4 KiB up to 2 MiB).
#[derive(Debug, Clone, PartialEq)]
pub struct OpBands {
    /// Block-layer op (`read`, `write`, `discard`, `flush`, `other`).
    pub op: String,
    /// The op's IOs over all devices.
    pub ios: u64,
    /// Its three largest buckets by volume and three largest by IO count (their union, each at
    /// least 1 % of the op's IOs or bytes), largest share of bytes first.
    pub bands: Vec<NarrowBand>,
}

/// Per op with IO, its three largest buckets by volume and by IO count.
pub(super) fn op_bands(trace: &TraceDoc) -> Vec<OpBands> {
    iodig_model::trace::OPS
        .iter()
        .filter_map(|op| {
            let bands = trace.narrow_bands(op, 3);
            (!bands.is_empty()).then(|| OpBands {
                op: op.to_string(),
                ios: trace.op_totals(op).0,
                bands,
            })
        })
        .collect()
}

/// One row of the blog's IO summary.
#[derive(Debug, Clone, PartialEq)]
pub struct IoRow {
    /// Block-layer op (`read`, `write`, `discard`, `flush`, `other`); ops without IO have no row.
    pub op: String,
    /// The op's dominant size band with its share of the op's IOs (`74% 508–512 KiB`); `–`
    /// without size histograms (diskstats mode).
    pub band: String,
    /// The op's bytes, GB (10^9 bytes).
    pub gb: f64,
    /// Share of all the step's IOs, %.
    pub pct_ios: f64,
    /// Share of all the step's bytes, %.
    pub pct_bytes: f64,
    /// The op's IOs over all devices.
    pub ios: u64,
    /// The op's bytes over all devices.
    pub bytes: u64,
}

/// Size histogram of one op in power-of-two bins (upper bound in bytes → share %).
#[derive(Debug, Clone, PartialEq)]
pub struct SizeHist {
    /// Block-layer op (`read`, `write`, `discard`, `flush`, `other`).
    pub op: String,
    /// Share of the op's IOs per bin, %.
    pub by_count_pct: BTreeMap<u64, f64>,
    /// Share of the op's bytes per bin, %.
    pub by_bytes_pct: BTreeMap<u64, f64>,
}

/// Adds `value` at `x` in a map of lines keyed by x (to sum over devices).
fn add_at(m: &mut BTreeMap<u64, f64>, x: u64, v: f64) {
    *m.entry(x).or_default() += v;
}

fn max_at(m: &mut BTreeMap<u64, f64>, x: u64, v: f64) {
    let e = m.entry(x).or_insert(v);
    *e = e.max(v);
}

fn line(m: BTreeMap<u64, f64>) -> Line {
    m.into_iter().map(|(x, y)| (x as f64, y)).collect()
}

/// Per-op lines of a trace. Device seconds start at `unix_ms`; they are drawn at mid-second.
pub(super) fn io_lines(trace: &TraceDoc) -> (BTreeMap<String, IoLines>, Line, Line) {
    let mut out = BTreeMap::new();
    for op in iodig_model::trace::OPS {
        if trace.op_totals(op).0 == 0 {
            continue;
        }
        let (mut osp99, mut osmax) = (BTreeMap::new(), BTreeMap::new());
        let mut lat_octaves: BTreeMap<u64, BTreeMap<u32, u64>> = BTreeMap::new();
        let (mut mb, mut mbmax, mut iops, mut lmax, mut lp99) = (
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
        );
        for d in &trace.devices {
            for s in &d.seconds {
                let x = s.unix_ms + 500;
                let Some(o) = s.ops.get(op) else { continue };
                add_at(&mut mb, x, o.mb_s);
                // Sum of each device's busiest slot: exact for one device, an upper bound for several.
                add_at(&mut mbmax, x, o.mb_s_max);
                add_at(&mut iops, x, o.iops);
                if let Some(v) = o.lat_max_ns.or(o.await_ms.map(|a| (a * 1e6) as u64)) {
                    max_at(&mut lmax, x, v as f64 / 1e6);
                }
                if let Some(v) = o.lat_p99_ns {
                    max_at(&mut lp99, x, v as f64 / 1e6);
                }
                if let Some(v) = o.queue_p99_ns {
                    max_at(&mut osp99, x, v as f64 / 1e6);
                }
                if let Some(v) = o.queue_max_ns {
                    max_at(&mut osmax, x, v as f64 / 1e6);
                }
                for b in &o.lat_hist {
                    *lat_octaves
                        .entry(s.unix_ms)
                        .or_default()
                        .entry(octave(b))
                        .or_default() += b.count;
                }
            }
        }
        out.insert(
            op.to_string(),
            IoLines {
                mb_s: line(mb),
                mb_s_max: line(mbmax),
                iops: line(iops),
                lat_max_ms: line(lmax),
                lat_p99_ms: line(lp99),
                os_p99_ms: line(osp99),
                os_max_ms: line(osmax),
                lat_octaves,
            },
        );
    }
    let (mut qm, mut qx) = (BTreeMap::new(), BTreeMap::new());
    for d in &trace.devices {
        for s in &d.seconds {
            if let Some(q) = s.qd_mean {
                add_at(&mut qm, s.unix_ms + 500, q);
            }
            if let Some(q) = s.qd_max {
                add_at(&mut qx, s.unix_ms + 500, q as f64);
            }
        }
    }
    (out, line(qm), line(qx))
}

/// Groups sizes into power-of-two bins by their upper bound (4 KiB, 8 KiB, …).
pub fn pow2_bin(upper: u64) -> u64 {
    upper.max(1).next_power_of_two()
}

pub(super) fn size_hists(trace: &TraceDoc) -> Vec<SizeHist> {
    let mut out = Vec::new();
    for op in iodig_model::trace::OPS {
        let by_count = trace.size_hist(op);
        let by_bytes: Vec<Bucket> = merge_buckets(
            trace
                .devices
                .iter()
                .filter_map(|d| d.ops.get(op))
                .map(|o| o.size_bytes_hist.as_slice()),
        );
        let pct = |h: &[Bucket]| {
            let total: u64 = h.iter().map(|b| b.count).sum();
            let mut m = BTreeMap::new();
            for b in h {
                *m.entry(pow2_bin(b.upper)).or_insert(0.0) +=
                    100.0 * b.count as f64 / total.max(1) as f64;
            }
            m
        };
        if by_count.iter().any(|b| b.count > 0) {
            out.push(SizeHist {
                op: op.to_string(),
                by_count_pct: pct(&by_count),
                by_bytes_pct: pct(&by_bytes),
            });
        }
    }
    out
}

/// The blog's summary table rows.
pub fn io_rows(trace: &TraceDoc) -> Vec<IoRow> {
    trace
        .op_mix()
        .into_iter()
        .map(|m| IoRow {
            band: trace
                .dominant_band(&m.op)
                .map(|b| b.label)
                .unwrap_or_else(|| "–".into()),
            gb: m.bytes as f64 / 1e9,
            pct_ios: m.pct_ios,
            pct_bytes: m.pct_bytes,
            ios: m.ios,
            bytes: m.bytes,
            op: m.op,
        })
        .collect()
}
