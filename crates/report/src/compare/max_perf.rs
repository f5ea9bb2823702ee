//! Maximum performance by workload: each run's peak ops/s and its p99.99 there (of the latency
//! compared, READ by default), with their ratios to the baseline's.

use super::ratio::{better, lower, note, pair_note};
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
            let row = later_row(bp, o.peak_point());
            let mut cells = vec![w.workload.clone(), r.name()];
            cells.extend(row);
            t.row(cells);
        }
    }
    summary.push_str("## Maximum performance by workload\n\n");
    summary.push_str(&crate::markdown::table(&t));
    doc.table(t);
}

/// A later run's cells after its name: its peak against the baseline's, when both have one.
fn later_row(base: Option<&Point>, new: Option<&Point>) -> Vec<String> {
    let dash = || "–".to_string();
    match (base, new) {
        (_, None) => vec![dash(), dash(), dash(), dash(), dash(), "all failed".into()],
        (Some(b), Some(p)) => vec![
            thousands(p.ops_per_sec),
            p.threads.to_string(),
            better(p.ops_per_sec / b.ops_per_sec),
            us_as_ms(p.lat.p9999_us as f64),
            lower(b.lat.p9999_us as f64, p.lat.p9999_us as f64),
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
