//! Every traced IO of a step by size, from the per-IO stream (`run --events` → `io-events.csv`):
//! device latency per size class (the blog's "4 KB reads, max 50 ms; up to 512 KB writes, max
//! 90 ms"), and the IOs to draw over time: the slowest of each op and a uniform sample of the
//! rest, so a step of millions of IOs stays a chart a browser can open.

use crate::data::StepData;
use iodig_stats::Histogram;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::BufRead;

/// Always drawn, per op: its slowest IOs.
pub const SLOWEST: usize = 2_000;
/// Drawn besides, per op: a uniform sample of all its IOs.
pub const SAMPLE: usize = 8_000;

/// A step's per-IO stream, summarised.
#[derive(Debug, Clone, Default)]
pub struct PerIo {
    /// The stream's file name in the step directory.
    pub file: String,
    /// One entry per op with sized IOs, by name (cache flushes carry no size: left out).
    pub ops: Vec<PerIoOp>,
    /// Lines that did not parse (a stream cut short by a crash ends mid-line).
    pub bad_lines: u64,
}

/// One op (read, write, discard) of every device in the stream.
#[derive(Debug, Clone, Default)]
pub struct PerIoOp {
    /// `read`, `write` or `discard`, as the stream's `op` column names it.
    pub op: String,
    /// IOs of the op in the stream (with or without a device time).
    pub ios: u64,
    /// IOs with a device time (the tracer saw their issue).
    pub timed: u64,
    /// Size classes, smallest first.
    pub sizes: Vec<SizeRow>,
    /// The slowest IOs and a sample of the rest, in time order.
    pub points: Vec<IoPoint>,
}

/// One size class of an op: the IOs whose bytes fall in one power-of-two range.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SizeRow {
    /// `≤4 KiB`, `4–8 KiB`, … `256–512 KiB`.
    pub label: String,
    /// IOs of the class.
    pub ios: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Median device time (issue → completion) of the class's timed IOs, ms; 0 when none was
    /// timed.
    pub p50_ms: f64,
    /// p99 of that device time, ms; 0 when none was timed.
    pub p99_ms: f64,
    /// Slowest timed IO of the class, ms; 0 when none was timed.
    pub max_ms: f64,
}

/// One IO drawn on the per-IO scatter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IoPoint {
    /// Completion, unix ms.
    pub unix_ms: f64,
    /// Its device time (issue → completion), ms.
    pub latency_ms: f64,
    /// Index into the op's `sizes`.
    pub size: usize,
}

/// The step's per-IO stream summarised, when its trace names one that exists.
pub fn per_io(step: &StepData) -> Option<PerIo> {
    let name = step.trace.as_ref()?.events_file.clone()?;
    let file = std::fs::File::open(step.io_dir.join(&name)).ok()?;
    let mut summary = summarise(std::io::BufReader::with_capacity(1 << 20, file));
    summary.file = name;
    Some(summary)
}

/// Size class of an IO: 0 for ≤4 KiB, k for (4 KiB·2^(k-1), 4 KiB·2^k].
fn class_of(bytes: u64) -> u32 {
    let pages = bytes.div_ceil(4096).max(1);
    pages.next_power_of_two().trailing_zeros()
}

fn class_label(k: u32) -> String {
    let kib = |k: u32| -> String {
        let v = 4u64 << k;
        if v >= 1024 {
            format!("{} MiB", v / 1024)
        } else {
            format!("{v} KiB")
        }
    };
    match k {
        0 => "≤4 KiB".into(),
        k => {
            let (lo, hi) = (kib(k - 1), kib(k));
            // "4 KiB–8 KiB" reads better as "4–8 KiB" when both share the unit.
            match (lo.strip_suffix(" KiB"), hi.strip_suffix(" KiB")) {
                (Some(l), Some(h)) => format!("{l}–{h} KiB"),
                _ => format!("{lo}–{hi}"),
            }
        }
    }
}

#[derive(Default)]
struct Acc {
    ios: u64,
    timed: u64,
    classes: BTreeMap<u32, ClassAcc>,
    /// (unix ms, latency ns, class), Algorithm R over the timed IOs.
    sample: Vec<(f64, u64, u32)>,
    /// The slowest timed IOs: a min-heap on latency.
    slowest: BinaryHeap<Reverse<(u64, u64, u32)>>,
}

struct ClassAcc {
    ios: u64,
    bytes: u64,
    hist: Histogram,
}

/// Reads the CSV (`unix_ns,device,op,cmd_flags,sector,bytes,device_ns,qd`) in one pass.
pub fn summarise(input: impl BufRead) -> PerIo {
    let mut ops: BTreeMap<String, Acc> = BTreeMap::new();
    let mut bad_lines = 0;
    // A fixed seed: the same stream draws the same chart.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    for line in input.lines().skip(1) {
        let Ok(line) = line else {
            bad_lines += 1;
            continue;
        };
        let f: Vec<&str> = line.split(',').collect();
        let parsed = (f.len() >= 7)
            .then(|| {
                Some((
                    f[0].parse::<u64>().ok()?,
                    f[2],
                    f[5].parse::<u64>().ok()?,
                    f[6].parse::<u64>().ok()?,
                ))
            })
            .flatten();
        let Some((unix_ns, op, bytes, device_ns)) = parsed else {
            bad_lines += 1;
            continue;
        };
        // Cache flushes carry no data, so no size: the heat map and level charts show them.
        if op == "flush" || bytes == 0 {
            continue;
        }
        let acc = ops.entry(op.to_string()).or_default();
        acc.ios += 1;
        let k = class_of(bytes);
        let class = acc.classes.entry(k).or_insert_with(|| ClassAcc {
            ios: 0,
            bytes: 0,
            // Up to an hour in ns; a longer IO is clamped to it.
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        });
        class.ios += 1;
        class.bytes += bytes;
        if device_ns == 0 {
            continue;
        }
        class.hist.saturating_record(device_ns);
        acc.timed += 1;
        let ms = unix_ns as f64 / 1e6;
        if acc.sample.len() < SAMPLE {
            acc.sample.push((ms, device_ns, k));
        } else {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let j = rng % acc.timed;
            if (j as usize) < SAMPLE {
                acc.sample[j as usize] = (ms, device_ns, k);
            }
        }
        acc.slowest.push(Reverse((device_ns, unix_ns, k)));
        if acc.slowest.len() > SLOWEST {
            acc.slowest.pop();
        }
    }
    let ops = ops
        .into_iter()
        .map(|(op, acc)| {
            let index: BTreeMap<u32, usize> = acc
                .classes
                .keys()
                .enumerate()
                .map(|(i, k)| (*k, i))
                .collect();
            let sizes = acc
                .classes
                .iter()
                .map(|(k, c)| {
                    let q = |p: f64| c.hist.value_at_quantile(p) as f64 / 1e6;
                    let timed = !c.hist.is_empty();
                    SizeRow {
                        label: class_label(*k),
                        ios: c.ios,
                        bytes: c.bytes,
                        p50_ms: if timed { q(0.5) } else { 0.0 },
                        p99_ms: if timed { q(0.99) } else { 0.0 },
                        max_ms: c.hist.max() as f64 / 1e6,
                    }
                })
                .collect();
            let mut points: Vec<IoPoint> = acc
                .sample
                .iter()
                .map(|&(ms, ns, k)| (ms, ns, k))
                .chain(
                    acc.slowest
                        .iter()
                        .map(|Reverse((ns, t, k))| (*t as f64 / 1e6, *ns, *k)),
                )
                .map(|(unix_ms, ns, k)| IoPoint {
                    unix_ms,
                    latency_ms: ns as f64 / 1e6,
                    size: index[&k],
                })
                .collect();
            // An IO both sampled and among the slowest is drawn once: sorted on every field, so
            // its two copies are neighbours even beside another IO of the same millisecond.
            points.sort_by(|a, b| {
                a.unix_ms
                    .total_cmp(&b.unix_ms)
                    .then(a.latency_ms.total_cmp(&b.latency_ms))
                    .then(a.size.cmp(&b.size))
            });
            points.dedup();
            PerIoOp {
                op,
                ios: acc.ios,
                timed: acc.timed,
                sizes,
                points,
            }
        })
        .collect();
    PerIo {
        file: String::new(),
        ops,
        bad_lines,
    }
}

/// The finding per op: the slowest IO's size and time, and the commonest size's tail.
pub fn sentences(p: &PerIo) -> Vec<String> {
    let mut out = Vec::new();
    for op in p.ops.iter().filter(|o| o.timed > 0) {
        let Some(slowest) = op.sizes.iter().max_by(|a, b| a.max_ms.total_cmp(&b.max_ms)) else {
            continue;
        };
        let Some(common) = op.sizes.iter().max_by_key(|s| s.ios) else {
            continue;
        };
        let mut s = format!(
            "Every {} by size ({}): the slowest took {:.1} ms and was {}",
            op.op, p.file, slowest.max_ms, slowest.label
        );
        let share = common.ios as f64 * 100.0 / op.ios as f64;
        if common.label == slowest.label {
            s.push_str(&format!(
                ", the size of {share:.0} % of them (their p99 {:.2} ms)",
                common.p99_ms
            ));
        } else {
            s.push_str(&format!(
                "; {} {}s ({share:.0} % of them): p99 {:.2} ms, max {:.1} ms",
                common.label, op.op, common.p99_ms, common.max_ms
            ));
        }
        s.push('.');
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(rows: &[(u64, &str, u64, u64)]) -> String {
        let mut s = String::from("unix_ns,device,op,cmd_flags,sector,bytes,device_ns,qd\n");
        for (t, op, bytes, ns) in rows {
            s.push_str(&format!("{t},vda,{op},0x0,0,{bytes},{ns},1\n"));
        }
        s
    }

    #[test]
    fn size_classes_are_powers_of_two_of_pages() {
        assert_eq!(class_of(512), 0);
        assert_eq!(class_of(4096), 0);
        assert_eq!(class_of(4097), 1);
        assert_eq!(class_of(8192), 1);
        assert_eq!(class_of(512 * 1024), 7);
        assert_eq!(class_label(0), "≤4 KiB");
        assert_eq!(class_label(1), "4–8 KiB");
        assert_eq!(class_label(7), "256–512 KiB");
        assert_eq!(class_label(9), "1 MiB–2 MiB");
    }

    #[test]
    fn each_size_gets_its_count_tail_and_slowest() {
        let mut rows = vec![(1_000_000_000, "write", 524_288, 90_000_000)];
        for i in 0..1000u64 {
            rows.push((1_000_000_000 + i, "read", 4096, 100_000 + i));
        }
        rows.push((2_000_000_000, "read", 4096, 50_000_000));
        rows.push((2_000_000_001, "flush", 0, 1_000));
        rows.push((2_000_000_002, "read", 4096, 0)); // no device time
        let mut text = csv(&rows);
        text.push_str("2000000003,vda,rea"); // cut short
        let p = summarise(text.as_bytes());
        assert_eq!(p.bad_lines, 1);
        let read = p.ops.iter().find(|o| o.op == "read").unwrap();
        assert_eq!((read.ios, read.timed), (1002, 1001));
        assert_eq!(read.sizes.len(), 1);
        assert_eq!(read.sizes[0].ios, 1002);
        assert!(
            (read.sizes[0].max_ms - 50.0).abs() < 0.1,
            "{:?}",
            read.sizes
        );
        assert!(read.sizes[0].p50_ms < 0.2);
        assert_eq!(
            read.points.len(),
            1001,
            "under the sample size, every IO is drawn"
        );
        let write = p.ops.iter().find(|o| o.op == "write").unwrap();
        assert_eq!(write.sizes[0].label, "256–512 KiB");
        assert!(p.ops.iter().all(|o| o.op != "flush"));
        let said = sentences(&p);
        assert!(
            said[0].contains("the slowest took 50.0 ms and was ≤4 KiB"),
            "{said:?}"
        );
        assert!(said[1].contains("90.0 ms and was 256–512 KiB"), "{said:?}");
    }

    #[test]
    fn a_long_stream_draws_its_slowest_and_a_bounded_sample() {
        let rows: Vec<_> = (0..50_000u64)
            .map(|i| (i * 1000, "read", 4096, 100_000 + (i % 997)))
            .chain([(60_000_000, "read", 4096, 80_000_000)])
            .collect();
        let p = summarise(csv(&rows).as_bytes());
        let read = &p.ops[0];
        assert!(
            read.points.len() <= SAMPLE + SLOWEST,
            "{}",
            read.points.len()
        );
        assert!(read.points.len() >= SAMPLE, "{}", read.points.len());
        assert!(read
            .points
            .iter()
            .any(|pt| (pt.latency_ms - 80.0).abs() < 1e-9));
        assert!(read.points.windows(2).all(|w| w[0].unix_ms <= w[1].unix_ms));
    }
}
