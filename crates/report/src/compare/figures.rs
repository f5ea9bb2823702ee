//! The briefs' figures as grouped bars: relative performance and relative p99 / p99.99 latency
//! by workload × threads (baseline = 1), p99.9 latency by workload × workers, and maximum
//! performance by workload. A point one run lacks is drawn as "not tested", never as zero.

use super::ratio::{better, comparable};
use super::Runs;
use crate::analysis::Point;
use crate::doc::Doc;
use crate::svg::BarChart;
use iodig_model::SeriesSummary;

/// One bar position: a workload at a thread count.
struct Slot<'a> {
    workload: &'a str,
    threads: u64,
}

/// "a 64t" for workloada at 64 threads: the briefs' axis labels are as short.
fn slot_label(s: &Slot) -> String {
    let short = s
        .workload
        .strip_prefix("workload")
        .filter(|r| !r.is_empty())
        .unwrap_or(s.workload);
    format!("{short} {}t", s.threads)
}

/// Every workload of the baseline × the union of the runs' thread counts.
fn slots<'a>(runs: &'a Runs) -> Vec<Slot<'a>> {
    runs.base_sweeps()
        .iter()
        .flat_map(|w| {
            runs.thread_union(&w.workload)
                .into_iter()
                .map(move |threads| Slot {
                    workload: &w.workload,
                    threads,
                })
        })
        .collect()
}

/// A grouped bar chart over the slots: per run, `value(baseline point, run's point)`; NaN (drawn
/// "not tested") where either is missing, and no bar where the figures measure failures.
fn slot_chart(
    runs: &Runs,
    title: String,
    y_label: String,
    unit: &str,
    reference: Option<f64>,
    value: impl Fn(usize, &str, &Point, &Point) -> Option<f64>,
) -> BarChart {
    let slots = slots(runs);
    let mut groups = Vec::new();
    let mut labels = Vec::new();
    for (ri, r) in runs.runs.iter().enumerate() {
        let (mut values, mut texts) = (Vec::new(), Vec::new());
        for s in &slots {
            let b = runs.point(0, s.workload, s.threads);
            let p = runs.point(ri, s.workload, s.threads);
            let (v, t) = match (b, p) {
                (Some(b), Some(p)) if comparable(b, p) => {
                    (value(ri, s.workload, b, p).unwrap_or(0.0), "")
                }
                (Some(_), Some(_)) => (0.0, ""),
                // The run ran it; only the baseline to divide by is missing.
                (None, Some(_)) => (f64::NAN, "no baseline"),
                _ => (f64::NAN, ""),
            };
            values.push(v);
            texts.push(t.to_string());
        }
        groups.push((r.name(), values));
        labels.push(texts);
    }
    BarChart {
        title,
        x_label: "workload × threads".into(),
        y_label,
        categories: slots.iter().map(slot_label).collect(),
        groups,
        bar_labels: labels,
        reference,
        unit: unit.into(),
    }
}

/// `f` of two latencies as new ÷ baseline, when both measured the op.
fn lat_ratio(
    runs: &Runs,
    (ri, workload): (usize, &str),
    b: &Point,
    p: &Point,
    f: fn(&SeriesSummary) -> f64,
) -> Option<f64> {
    let op = &runs.sweep(0, workload)?.op;
    // As the tables give it: the repetitions' means when there are some.
    (b.lat.count > 0 && p.lat.count > 0)
        .then(|| runs.latency_ratio(b, ri, p, op, f).new_over_base())
        .flatten()
}

/// The relative charts and p99.9 by workload × workers, under their own heading.
pub(super) fn section(doc: &mut Doc, runs: &Runs) {
    let words = runs.op.words();
    doc.h(
        2,
        format!("Relative performance and {words} latency by workload × threads"),
    );
    doc.p(format!(
        "Each run against the baseline ({}) at the same workload and thread count: ops/s as new ÷ baseline (higher is better), {words} latency as new ÷ baseline (lower is better). \"not tested\" marks a thread count a run did not run.",
        runs.base().name()
    ));
    doc.bar_chart(slot_chart(
        runs,
        "Relative performance (ops/s, baseline = 1)".into(),
        "ops/s ÷ baseline (X)".into(),
        "X",
        Some(1.0),
        |_, _, b, p| Some(p.ops_per_sec / b.ops_per_sec),
    ));
    doc.bar_chart(slot_chart(
        runs,
        format!("Relative p99 {words} latency (baseline = 1, lower is better)"),
        format!("p99 {words} latency ÷ baseline (X)"),
        "X",
        Some(1.0),
        |ri, w, b, p| lat_ratio(runs, (ri, w), b, p, |s| s.p99_us as f64),
    ));
    doc.bar_chart(slot_chart(
        runs,
        format!("Relative p99.99 {words} latency (baseline = 1, lower is better)"),
        format!("p99.99 {words} latency ÷ baseline (X)"),
        "X",
        Some(1.0),
        |ri, w, b, p| lat_ratio(runs, (ri, w), b, p, |s| s.p9999_us as f64),
    ));
    doc.bar_chart(p999_chart(runs));
}

/// p99.9 latency in ms by workload × workers, each run's own figure (not tested where a run
/// lacks the thread count, whatever the baseline did).
fn p999_chart(runs: &Runs) -> BarChart {
    let words = runs.op.words();
    let slots = slots(runs);
    let groups = runs
        .runs
        .iter()
        .enumerate()
        .map(|(ri, r)| {
            let values = slots
                .iter()
                .map(|s| match runs.point(ri, s.workload, s.threads) {
                    Some(p) if !p.all_failed && p.lat.count > 0 => p.lat.p999_us as f64 / 1000.0,
                    Some(_) => 0.0,
                    None => f64::NAN,
                })
                .collect();
            (r.name(), values)
        })
        .collect();
    BarChart {
        title: format!("p99.9 {words} latency by workload × workers (lower is better)"),
        x_label: "workload × workers".into(),
        y_label: format!("p99.9 {words} latency (ms)"),
        categories: slots.iter().map(slot_label).collect(),
        groups,
        unit: " ms".into(),
        ..Default::default()
    }
}

/// Maximum performance by workload: each run's peak ops/s, later runs labelled with their
/// ratio to the baseline's peak ("1.5X better").
pub(super) fn max_perf_chart(runs: &Runs) -> BarChart {
    let workloads: Vec<&str> = runs
        .base_sweeps()
        .iter()
        .map(|w| w.workload.as_str())
        .collect();
    let peak = |ri: usize, w: &str| runs.sweep(ri, w).and_then(|s| s.peak_point());
    let mut groups = Vec::new();
    let mut labels = Vec::new();
    for (ri, r) in runs.runs.iter().enumerate() {
        let mut values = Vec::new();
        let mut texts = Vec::new();
        for w in &workloads {
            let p = peak(ri, w);
            values.push(p.map_or(f64::NAN, |p| p.ops_per_sec));
            texts.push(match (ri, peak(0, w), p) {
                (_, _, None) if runs.sweep(ri, w).is_some() => "all failed".into(),
                (0, ..) => String::new(),
                (_, Some(b), Some(p)) => better(p.ops_per_sec / b.ops_per_sec),
                _ => String::new(),
            });
        }
        groups.push((r.name(), values));
        labels.push(texts);
    }
    BarChart {
        title: "Maximum performance by workload (each run's peak ops/s)".into(),
        x_label: "workload".into(),
        y_label: "maximum throughput (ops/s)".into(),
        categories: workloads.iter().map(ToString::to_string).collect(),
        groups,
        bar_labels: labels,
        unit: " ops/s".into(),
        ..Default::default()
    }
}
