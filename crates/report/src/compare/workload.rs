//! A workload's comparison: the runs' curves overlaid, then ops/s and latency per thread count,
//! each later run's figures with their ratios to the baseline's.

use super::ratio::{better, comparable, lower, note, pair_note, significance};
use super::Runs;
use crate::analysis::findings::capitalise;
use crate::analysis::{Point, WorkloadSweep};
use crate::doc::{thousands, us_as_ms, Doc, Table};
use crate::svg::{LineChart, Series, XKind};

/// The section; its ops/s table also goes into the terminal summary.
pub(super) fn section(doc: &mut Doc, runs: &Runs, w: &WorkloadSweep, summary: &mut String) {
    doc.h(2, format!("Workload {}", w.workload));
    curves(doc, runs, w);
    doc.h(3, "Ops/s by thread count");
    let t = ops_table(runs, w);
    summary.push_str(&format!(
        "\n## Workload {}: ops/s by thread count\n\n",
        w.workload
    ));
    summary.push_str(&crate::markdown::table(&t));
    doc.table(t);
    doc.h(
        3,
        format!("{} latency by thread count", capitalise(&w.op.words())),
    );
    doc.table(latency_table(runs, w));
}

/// Overlaid curves, without points whose figures measure failures: p99.99 solid, avg dashed,
/// one colour per run.
fn curves(doc: &mut Doc, runs: &Runs, w: &WorkloadSweep) {
    let mut c = LineChart::new(
        &format!(
            "{}: ops/s vs {} latency, each run (points labelled with threads)",
            w.workload,
            w.op.words()
        ),
        "throughput (ops/s)",
        &format!("{} latency (ms, log scale)", w.op.words()),
        XKind::Number,
    );
    c.y_log = true;
    for (ri, r) in runs.runs.iter().enumerate() {
        let Some(o) = runs.sweep(ri, &w.workload) else {
            continue;
        };
        let labels: Vec<String> = o
            .latency_points()
            .map(|p| format!("{}t", p.threads))
            .collect();
        c.series.push(Series {
            name: format!("{} p99.99", r.name()),
            points: o
                .latency_points()
                .map(|p| (p.ops_per_sec, p.lat.p9999_us as f64 / 1000.0))
                .collect(),
            color: ri,
            markers: true,
            labels: labels.clone(),
            ..Default::default()
        });
        c.series.push(Series {
            name: format!("{} avg", r.name()),
            points: o
                .latency_points()
                .map(|p| (p.ops_per_sec, p.lat.mean_us / 1000.0))
                .collect(),
            color: ri,
            dashed: true,
            markers: true,
            ..Default::default()
        });
    }
    doc.line_chart(c);
}

/// A ratio cell, or why there is none (a side whose operations all failed).
fn ratio(base: &Point, new: &Point, f: impl Fn() -> String) -> String {
    if comparable(base, new) {
        f()
    } else {
        "– (all failed)".into()
    }
}

/// A table with one row per thread count of the baseline and, under it, one per later run that
/// has that thread count; `base` and `later` give the cells after the thread count and run.
fn per_thread_table(
    runs: &Runs,
    w: &WorkloadSweep,
    headers: &[&str],
    text_columns: &[usize],
    base: impl Fn(&Point) -> Vec<String>,
    later: impl Fn(&Point, &Point) -> Vec<String>,
) -> Table {
    let mut t = Table::new(headers).text_columns(text_columns);
    for bp in &w.points {
        let mut cells = vec![bp.threads.to_string(), runs.base().name()];
        cells.extend(base(bp));
        t.row(cells);
        for (r, op) in runs.later_points(&w.workload, bp.threads) {
            let Some(op) = op else { continue };
            let mut cells = vec![bp.threads.to_string(), r.name()];
            cells.extend(later(bp, op));
            t.row(cells);
        }
    }
    t
}

/// Ops/s per thread count, each later run's with its ratio and whether the difference is
/// significant.
fn ops_table(runs: &Runs, w: &WorkloadSweep) -> Table {
    per_thread_table(
        runs,
        w,
        &[
            "threads",
            "run",
            "ops/s",
            "vs baseline",
            "significant",
            "note",
        ],
        &[1, 3, 4, 5],
        |bp| {
            vec![
                thousands(bp.ops_per_sec),
                "baseline".into(),
                String::new(),
                note(bp),
            ]
        },
        |bp, op| {
            vec![
                thousands(op.ops_per_sec),
                ratio(bp, op, || better(op.ops_per_sec / bp.ops_per_sec)),
                if comparable(bp, op) {
                    significance(bp, op)
                } else {
                    "n/a".into()
                },
                pair_note(bp, op),
            ]
        },
    )
}

/// Avg, p99 and p99.99 (all ops) per thread count, each later run's with its ratio.
fn latency_table(runs: &Runs, w: &WorkloadSweep) -> Table {
    per_thread_table(
        runs,
        w,
        &[
            "threads",
            "run",
            "avg ms",
            "avg",
            "p99 ms",
            "p99",
            "p99.99 ms",
            "p99.99",
        ],
        &[1, 3, 5, 7],
        |bp| {
            let b = &bp.lat;
            vec![
                us_as_ms(b.mean_us),
                "baseline".into(),
                us_as_ms(b.p99_us as f64),
                "baseline".into(),
                us_as_ms(b.p9999_us as f64),
                "baseline".into(),
            ]
        },
        |bp, op| {
            let (b, n) = (&bp.lat, &op.lat);
            vec![
                us_as_ms(n.mean_us),
                ratio(bp, op, || lower(b.mean_us, n.mean_us)),
                us_as_ms(n.p99_us as f64),
                ratio(bp, op, || lower(b.p99_us as f64, n.p99_us as f64)),
                us_as_ms(n.p9999_us as f64),
                ratio(bp, op, || lower(b.p9999_us as f64, n.p9999_us as f64)),
            ]
        },
    )
}
