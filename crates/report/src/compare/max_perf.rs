//! Maximum performance by workload: each run's peak ops/s and its p99.99 there (of the latency
//! compared, READ by default), with their ratios to the baseline's and, over repetitions, their
//! 95% intervals.

use super::ratio::{better_with, lower, lower_with, note, pair_note};
use super::Runs;
use crate::analysis::Point;
use crate::doc::{thousands, us_as_ms, Doc, Table};

/// The table, into the document and the terminal summary.
pub(super) fn section(doc: &mut Doc, runs: &Runs, summary: &mut String) {
    doc.h(2, "Maximum performance by workload");
    let w = runs.op.words();
    let (at_max, vs) = (
        format!("{w} p99.99 ms at max"),
        format!("{w} p99.99 vs baseline"),
    );
    let mut t = Table::new(&[
        "workload",
        "run",
        "max ops/s",
        "at threads",
        "vs baseline",
        &at_max,
        &vs,
        "note",
    ])
    .text_columns(&[1, 4, 6, 7]);
    let dash = || "–".to_string();
    for w in runs.base_sweeps() {
        let bp = w.peak_point();
        t.row(vec![
            w.workload.clone(),
            runs.base().name(),
            bp.map_or_else(dash, |p| thousands(p.ops_per_sec)),
            bp.map_or_else(dash, |p| p.threads.to_string()),
            "baseline".into(),
            bp.map_or_else(dash, |p| us_as_ms(p.lat.p9999_us as f64)),
            "baseline".into(),
            bp.map_or_else(|| "all failed".into(), note),
        ]);
        for (ri, r) in runs.runs.iter().enumerate().skip(1) {
            let Some(o) = runs.sweep(ri, &w.workload) else {
                continue;
            };
            let intervals = match (bp, o.peak_point()) {
                (Some(b), Some(p)) => (
                    runs.ops_interval(b, p),
                    Some(runs.latency_ratio(b, ri, p, &w.op, |s| s.p9999_us as f64)),
                ),
                _ => (Err(String::new()), None),
            };
            let row = later_row(bp, o.peak_point(), &intervals);
            let mut cells = vec![w.workload.clone(), r.name()];
            cells.extend(row);
            t.row(cells);
        }
    }
    summary.push_str("## Maximum performance by workload\n\n");
    summary.push_str(&crate::markdown::table(&t));
    doc.table(t);
}

/// The 95% interval of a later run's peak ops/s ratio, or why there is none, and its p99.99
/// ratio with its interval.
type Intervals = (Result<(f64, f64), String>, Option<super::LatencyRatio>);

/// A later run's cells after its name: its peak against the baseline's, when both have one,
/// each ratio with its interval when the repetitions give one.
fn later_row(base: Option<&Point>, new: Option<&Point>, ci: &Intervals) -> Vec<String> {
    let dash = || "–".to_string();
    match (base, new) {
        (_, None) => vec![dash(), dash(), dash(), dash(), dash(), "all failed".into()],
        (Some(b), Some(p)) => vec![
            thousands(p.ops_per_sec),
            p.threads.to_string(),
            better_with(p.ops_per_sec / b.ops_per_sec, &ci.0),
            us_as_ms(p.lat.p9999_us as f64),
            match &ci.1 {
                Some(l) => lower_with(l.base_us, l.new_us, &l.ci),
                None => lower(b.lat.p9999_us as f64, p.lat.p9999_us as f64),
            },
            pair_note(b, p),
        ],
        (None, Some(p)) => vec![
            thousands(p.ops_per_sec),
            p.threads.to_string(),
            dash(),
            us_as_ms(p.lat.p9999_us as f64),
            dash(),
            "baseline all failed".into(),
        ],
    }
}
