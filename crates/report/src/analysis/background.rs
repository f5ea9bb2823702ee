//! What background IO (memtable flush, compaction) did to the foreground, from the kernel's
//! attribution and the client's interval log:
//!
//! - the client's latency per op in the seconds with flush or compaction IO against the
//!   seconds without, each side an exact merge of the per-second HDR histograms;
//! - each class's reads' and writes' OS queue time and device time, split per IO by the kernel
//!   (did a background request sit in the block layer at some point of the IO's life?);
//! - the depth each class held, queued in the OS and at the device.
//!
//! Pure functions of a [`StepData`]; the report's attribution section and findings word them.

use super::OP_SERIES;
use crate::data::StepData;
use iodig_model::trace::{bucket_quantile, merge_buckets, Bucket, SplitSide, TraceDoc};
use iodig_stats::{new_histogram, Histogram};
use std::collections::{BTreeMap, BTreeSet};

/// Classes iodig counts as background when a trace does not list them (older traces).
const DEFAULT_BACKGROUND: &[&str] = &[
    "cassandra.flush",
    "cassandra.compaction",
    "rocksdb.flush",
    "rocksdb.compaction",
];

/// The classes whose reads are the queries' own (what the briefs call "query reads").
pub const QUERY_READ_CLASSES: &[&str] = &["cassandra.read", "rocksdb.read"];

/// One side of the client split: the seconds of that kind and the ops counted in them (by start,
/// else by completion: [`ClientSplit::by_start`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientSide {
    /// Traced seconds of this kind in the client's log, over all series.
    pub seconds: usize,
    /// Operations of the series counted in those seconds.
    pub ops: u64,
    /// Median latency over those operations, µs, from the merged HDR histograms; 0 when none.
    pub p50_us: u64,
    /// p99 latency, µs; 0 when none.
    pub p99_us: u64,
    /// Slowest operation, µs; 0 when none.
    pub max_us: u64,
}

/// One client series (READ, UPDATE, …) split by seconds with and without background IO.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientSplit {
    /// The YCSB series: READ, UPDATE, INSERT, SCAN, READ-MODIFY-WRITE or DELETE.
    pub series: String,
    /// Operations counted in the second they started in (the log by start), else in
    /// the one they completed in (runs without that log).
    pub by_start: bool,
    /// In the seconds in which background (flush, compaction) IO completed.
    pub with: ClientSide,
    /// In the traced seconds without.
    pub without: ClientSide,
}

/// One side of a class's IO split: IOs, and queue and device time (ms, ±12 % buckets).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IoSide {
    /// IOs on this side, summed over devices (issued and completed while tracing).
    pub ios: u64,
    /// Median time queued in the OS (request allocation → issue to the driver), ms; 0 when no IO.
    pub queue_p50_ms: f64,
    /// p99 of that OS queue time, ms.
    pub queue_p99_ms: f64,
    /// Median device time (issue → completion), ms.
    pub device_p50_ms: f64,
    /// p99 device time, ms.
    pub device_p99_ms: f64,
}

/// One class's reads or writes (all devices), with and without background IO in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct IoSplit {
    /// Block-layer op: `read` or `write`.
    pub op: String,
    /// The activity class whose IOs these are (`rocksdb.read`, `kernel.journal`, …).
    pub class: String,
    /// IOs during whose life a background request was in the block layer.
    pub with: IoSide,
    /// IOs with no background request in the block layer at any point of their life.
    pub without: IoSide,
}

/// The mean depth one class held over the traced window, and its busiest second.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassDepth {
    /// The activity class (`rocksdb.compaction`, `cassandra.read`, …).
    pub class: String,
    /// Mean requests of the class queued in the OS (allocation → issue) over the window.
    pub queued: f64,
    /// Mean requests of the class at the device (issued, not yet completed).
    pub device: f64,
    /// The highest per-second depth in the block layer (queued + at the device).
    pub peak: f64,
}

/// Everything the report says about background IO in one step.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Background {
    /// Background classes that did IO in the step, by bytes.
    pub classes: Vec<String>,
    /// Every class counted as background (the trace's list).
    pub background: Vec<String>,
    /// The client's latency per series with and without background IO; empty when the step's
    /// interval log could not be read or merged.
    pub client: Vec<ClientSplit>,
    /// The kernel's per-IO split for each op × class, reads first, then by IOs.
    pub io: Vec<IoSplit>,
    /// Depth held by each class, deepest first.
    pub depth: Vec<ClassDepth>,
}

fn background_classes(doc: &TraceDoc) -> Vec<String> {
    match doc.attribution() {
        Some(a) if !a.background_classes.is_empty() => a.background_classes.clone(),
        _ => DEFAULT_BACKGROUND.iter().map(ToString::to_string).collect(),
    }
}

/// Unix-ms starts of the seconds in which background IO completed, and the background classes
/// that did IO, largest first.
pub fn busy_seconds(doc: &TraceDoc) -> (BTreeSet<u64>, Vec<String>) {
    let bg = background_classes(doc);
    let mut busy = BTreeSet::new();
    let mut bytes: BTreeMap<&str, u64> = BTreeMap::new();
    for r in doc
        .attribution()
        .map(|a| a.rows.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|r| bg.contains(&r.class) && r.ios > 0)
    {
        *bytes.entry(r.class.as_str()).or_default() += r.bytes;
        busy.extend(r.seconds.iter().filter(|s| s.ios > 0).map(|s| s.unix_ms));
    }
    let mut classes: Vec<(&str, u64)> = bytes.into_iter().collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.1));
    (busy, classes.into_iter().map(|c| c.0.to_string()).collect())
}

/// The step's background view; none without attribution or when no background IO ran.
pub fn background(step: &StepData) -> Option<Background> {
    let doc = step.trace.as_ref()?;
    let a = doc.attribution()?;
    let (busy, classes) = busy_seconds(doc);
    if classes.is_empty() {
        return None;
    }
    let covered: BTreeSet<u64> = doc
        .devices
        .iter()
        .flat_map(|d| d.seconds.iter().map(|s| s.unix_ms))
        .collect();
    // A report must come out of a run whose interval log is damaged: the client split is left
    // out then, the kernel's figures stay.
    let client = client_split(step, &busy, &covered).unwrap_or_default();
    let window_ms = doc.end_unix_ms.saturating_sub(doc.start_unix_ms);
    Some(Background {
        classes,
        background: background_classes(doc),
        client,
        io: io_splits(doc),
        depth: depth(a, window_ms),
    })
}

/// The unix-ms start of the wall-clock second holding the middle of the interval
/// `[start_ms, end_ms)`. The collector ends intervals on whole seconds, but late by a few ms
/// to hundreds on a loaded machine, and the first and last intervals are partial: the middle
/// says which second an interval mostly covers (its end would move every interval that ended
/// 1 ms late into the next second, against the trace's seconds).
pub fn second_of(start_ms: u64, end_ms: u64) -> u64 {
    (start_ms + end_ms.saturating_sub(start_ms) / 2) / 1000 * 1000
}

/// Merges the client's per-second histograms into "with" and "without" per series: each
/// operation in the second it started in, so a read that began while a flush wrote counts with
/// the flush even when it finished after; from the log by completion for runs without the
/// log by start. A second is one interval of the log ([`second_of`]), or two for the log by
/// start. Seconds the trace did not cover are left out.
pub fn client_split(
    step: &StepData,
    busy: &BTreeSet<u64>,
    covered: &BTreeSet<u64>,
) -> anyhow::Result<Vec<ClientSplit>> {
    let mut acc: BTreeMap<String, [Histogram; 2]> = BTreeMap::new();
    let mut seconds: [BTreeSet<u64>; 2] = Default::default();
    let mut err = None;
    let mut add = |start_ms: u64, end_ms: u64, series: &str, h: &Histogram| {
        let second = second_of(start_ms, end_ms);
        if !covered.contains(&second) {
            return;
        }
        let side = usize::from(busy.contains(&second));
        seconds[side].insert(second);
        let e = acc
            .entry(series.to_string())
            .or_insert_with(|| [new_histogram(), new_histogram()]);
        if let Err(x) = e[side].add(h) {
            err.get_or_insert(x);
        }
    };
    let want = |series: &str| OP_SERIES.contains(&series);
    let by_start = step.for_each_client_start_second(want, &mut add)?;
    if !by_start {
        step.for_each_client_second(want, &mut add)?;
    }
    if let Some(e) = err {
        anyhow::bail!("cannot merge the client's histograms: {e:?}");
    }
    let side = |h: &Histogram, n: usize| ClientSide {
        seconds: n,
        ops: h.len(),
        p50_us: if h.is_empty() {
            0
        } else {
            h.value_at_quantile(0.5)
        },
        p99_us: if h.is_empty() {
            0
        } else {
            h.value_at_quantile(0.99)
        },
        max_us: h.max(),
    };
    let order = |s: &str| OP_SERIES.iter().position(|o| *o == s).unwrap_or(99);
    let mut out: Vec<ClientSplit> = acc
        .into_iter()
        .map(|(series, [without, with])| ClientSplit {
            by_start,
            with: side(&with, seconds[1].len()),
            without: side(&without, seconds[0].len()),
            series,
        })
        .collect();
    out.sort_by_key(|c| order(&c.series));
    Ok(out)
}

fn io_side(sides: &[&SplitSide]) -> IoSide {
    let merged = |f: fn(&SplitSide) -> Option<&[Bucket]>| -> Vec<Bucket> {
        merge_buckets(sides.iter().filter_map(|s| f(s)))
    };
    let queue = merged(|s| s.queue.as_ref().map(|l| l.buckets.as_slice()));
    let device = merged(|s| s.device.as_ref().map(|l| l.buckets.as_slice()));
    let ms = |b: &[Bucket], q| bucket_quantile(b, q) as f64 / 1e6;
    IoSide {
        ios: sides.iter().map(|s| s.ios).sum(),
        queue_p50_ms: ms(&queue, 0.5),
        queue_p99_ms: ms(&queue, 0.99),
        device_p50_ms: ms(&device, 0.5),
        device_p99_ms: ms(&device, 0.99),
    }
}

/// The kernel's split per op × class, merged over devices: reads first, then by IOs.
pub fn io_splits(doc: &TraceDoc) -> Vec<IoSplit> {
    let Some(a) = doc.attribution() else {
        return Vec::new();
    };
    let mut by: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, s) in a.splits.iter().enumerate() {
        by.entry((s.op.clone(), s.class.clone()))
            .or_default()
            .push(i);
    }
    let mut out: Vec<IoSplit> = by
        .into_iter()
        .map(|((op, class), idx)| {
            let with: Vec<&SplitSide> = idx.iter().map(|&i| &a.splits[i].with_background).collect();
            let without: Vec<&SplitSide> = idx
                .iter()
                .map(|&i| &a.splits[i].without_background)
                .collect();
            IoSplit {
                op,
                class,
                with: io_side(&with),
                without: io_side(&without),
            }
        })
        .collect();
    out.sort_by(|x, y| {
        (x.op != "read")
            .cmp(&(y.op != "read"))
            .then((y.with.ios + y.without.ios).cmp(&(x.with.ios + x.without.ios)))
            .then(x.class.cmp(&y.class))
    });
    out
}

/// Mean depth per class over the window (from the kernel's time sums) and its busiest second
/// (from the rows' per-second time in the block layer), deepest first.
fn depth(a: &iodig_model::trace::Attribution, window_ms: u64) -> Vec<ClassDepth> {
    let mut mean: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for s in &a.splits {
        let (q, d) = s.depth(window_ms);
        let e = mean.entry(s.class.as_str()).or_default();
        e.0 += q;
        e.1 += d;
    }
    let mut per_second: BTreeMap<(&str, u64), f64> = BTreeMap::new();
    for r in &a.rows {
        for s in &r.seconds {
            *per_second.entry((r.class.as_str(), s.unix_ms)).or_default() += s.qd;
        }
    }
    let mut out: Vec<ClassDepth> = mean
        .into_iter()
        .map(|(class, (queued, device))| ClassDepth {
            class: class.to_string(),
            queued,
            device,
            peak: per_second
                .iter()
                .filter(|((c, _), _)| *c == class)
                .map(|(_, v)| *v)
                .fold(0.0, f64::max),
        })
        .collect();
    out.sort_by(|x, y| (y.queued + y.device).total_cmp(&(x.queued + x.device)));
    out
}

/// Fewest ops (client) or IOs (kernel) on each side for a comparison worth a sentence.
const MIN_CLIENT_OPS: u64 = 100;
const MIN_IOS: u64 = 10;

fn ms(us: u64) -> String {
    let v = us as f64 / 1000.0;
    if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        super::times(a / b)
    } else {
        "—".into()
    }
}

/// The sentences: the client's reads (else its busiest op) with and without background IO,
/// and the query reads' queue and device time, when both sides have enough data.
pub fn findings(b: &Background) -> Vec<String> {
    let mut out = Vec::new();
    let what = b.classes.join("/");
    let client = b
        .client
        .iter()
        .find(|c| c.series == "READ")
        .or_else(|| b.client.iter().max_by_key(|c| c.with.ops + c.without.ops))
        .filter(|c| c.with.ops >= MIN_CLIENT_OPS && c.without.ops >= MIN_CLIENT_OPS);
    if let Some(c) = client {
        out.push(format!(
            "Client {} ops that {} in the {} s with {what} IO: p99 {} over {} ops (max {}); in the {} s without: p99 {} over {} ops (max {}), {} at p99",
            c.series,
            if c.by_start { "started" } else { "completed" },
            c.with.seconds,
            ms(c.with.p99_us),
            c.with.ops,
            ms(c.with.max_us),
            c.without.seconds,
            ms(c.without.p99_us),
            c.without.ops,
            ms(c.without.max_us),
            ratio(c.with.p99_us as f64, c.without.p99_us as f64)
        ));
    }
    for s in b.io.iter().filter(|s| {
        s.op == "read"
            && QUERY_READ_CLASSES.contains(&s.class.as_str())
            && s.with.ios >= MIN_IOS
            && s.without.ios >= MIN_IOS
    }) {
        out.push(format!(
            "{} reads queued {:.2} ms at p99 during {what} IO against {:.2} ms without ({}); device time p99 {:.2} ms against {:.2} ms ({} and {} reads)",
            s.class,
            s.with.queue_p99_ms,
            s.without.queue_p99_ms,
            ratio(s.with.queue_p99_ms, s.without.queue_p99_ms),
            s.with.device_p99_ms,
            s.without.device_p99_ms,
            s.with.ios,
            s.without.ios
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::trace::{Attribution, ClassSplit, Latency};

    fn side(ios: u64, queue: &[(u64, u64)], device: &[(u64, u64)]) -> SplitSide {
        let lat = |b: &[(u64, u64)]| {
            Some(Latency {
                count: b.iter().map(|x| x.1).sum(),
                buckets: b
                    .iter()
                    .map(|&(upper, count)| Bucket {
                        lower: upper - 1,
                        upper,
                        count,
                    })
                    .collect(),
                ..Default::default()
            })
        };
        SplitSide {
            ios,
            queue_ns_sum: queue.iter().map(|x| x.0 * x.1).sum(),
            device_ns_sum: device.iter().map(|x| x.0 * x.1).sum(),
            queue: lat(queue),
            device: lat(device),
        }
    }

    #[test]
    fn intervals_ending_a_little_late_or_early_keep_their_second() {
        assert_eq!(second_of(1_000_897_001, 1_000_898_001), 1_000_897_000);
        assert_eq!(second_of(1_000_897_999, 1_000_898_999), 1_000_898_000);
        // 300 ms late: still the second before the end.
        assert_eq!(second_of(1_000_898_000, 1_000_899_300), 1_000_898_000);
        // The first interval starts mid-second and runs to the second after the next.
        assert_eq!(second_of(1_000_896_213, 1_000_898_000), 1_000_897_000);
        // The last, partial interval ends mid-second: its own second.
        assert_eq!(second_of(1_000_904_000, 1_000_904_214), 1_000_904_000);
    }

    #[test]
    fn io_splits_merge_devices_and_depth_is_time_over_window() {
        let split = |device: &str, with, without| ClassSplit {
            device: device.into(),
            op: "read".into(),
            class: "rocksdb.read".into(),
            with_background: with,
            without_background: without,
        };
        let a = Attribution {
            enabled: true,
            splits: vec![
                split(
                    "vda",
                    side(100, &[(4_000_000, 100)], &[(1_000_000, 100)]),
                    side(900, &[(300_000, 900)], &[(500_000, 900)]),
                ),
                split(
                    "vdb",
                    side(0, &[], &[]),
                    side(100, &[(300_000, 100)], &[(500_000, 100)]),
                ),
            ],
            ..Default::default()
        };
        let doc = TraceDoc {
            mode: "ebpf".into(),
            end_unix_ms: 1000,
            slot_ms: 100,
            histograms: true,
            self_check: iodig_model::trace::SelfCheck {
                attribution: Some(a.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        let s = io_splits(&doc);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].with.ios, s[0].without.ios), (100, 1000));
        assert_eq!(s[0].with.queue_p99_ms, 4.0);
        assert_eq!(s[0].without.queue_p99_ms, 0.3);
        // 100 × 4 ms + 1000 × 0.3 ms queued over 1 s: a mean depth of 0.7.
        let d = depth(&a, 1000);
        assert!((d[0].queued - 0.7).abs() < 1e-9, "{d:?}");
        assert!((d[0].device - 0.6).abs() < 1e-9, "{d:?}");
        let b = Background {
            classes: vec!["rocksdb.compaction".into()],
            io: s,
            ..Default::default()
        };
        let f = findings(&b);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("rocksdb.read reads queued 4.00 ms at p99 during rocksdb.compaction IO against 0.30 ms without (13×)"),
            "{}",
            f[0]
        );
    }
}
