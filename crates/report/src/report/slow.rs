//! The front page's "Why the slowest seconds were slow": the run's slowest seconds with their
//! most likely cause and evidence, each step's share of causes, and the client's latency of
//! the step with the slowest second, those seconds marked on it.

use super::step::{line, Timeline};
use crate::analysis::slow::{shares, Cause, SlowSecond};
use crate::analysis::{Report, StepView};
use crate::doc::{Doc, Table};
use crate::svg::Series;

/// How many seconds the front page lists; every one is in `slow-seconds.csv`.
const LISTED: usize = 10;

/// How far a second stood above its step's typical second.
fn factor(s: &SlowSecond) -> f64 {
    s.p99_ms / s.typical_p99_ms.max(1e-3)
}

pub(super) fn section(doc: &mut Doc, report: &Report) {
    let all: Vec<(&StepView, &SlowSecond)> = report
        .steps
        .iter()
        .flat_map(|v| v.slow_seconds.iter().map(move |s| (v, s)))
        .collect();
    if all.is_empty() {
        return;
    }
    doc.h(2, "Why the slowest seconds were slow");
    let counts: Vec<String> = Cause::ALL
        .iter()
        .filter_map(|c| {
            let n = all.iter().filter(|(_, s)| s.cause == *c).count();
            (n > 0).then(|| format!("{} {n}", c.name()))
        })
        .collect();
    doc.p(format!(
        "Each step's three slowest seconds of every op (when 1.25× its typical second's p99 or more), and every second whose p99 was at least 3× the typical second's, set against what every place measured in that second: {} in all ({}). Every one is in slow-seconds.csv; the rule is in docs/report.md.",
        all.len(),
        counts.join(", ")
    ));
    let mut ranked = all.clone();
    ranked.sort_by(|a, b| factor(b.1).total_cmp(&factor(a.1)));
    let mut t = Table::new(&[
        "second (UTC)",
        "step",
        "op",
        "client p99 (ms)",
        "typical p99 (ms)",
        "cause",
        "where",
        "evidence",
    ])
    .text_columns(&[0, 2, 5, 6, 7]);
    for (v, s) in ranked.iter().take(LISTED) {
        t.row(vec![
            crate::svg::clock(s.start_unix_ms as f64),
            v.index.to_string(),
            s.op.clone(),
            format!("{:.2}", s.p99_ms),
            format!("{:.2}", s.typical_p99_ms),
            s.cause.name().into(),
            s.place.clone(),
            s.evidence.clone(),
        ]);
    }
    doc.table(t);
    let mut per_step = Table::new(&["step", "slow seconds", "causes"]).text_columns(&[2]);
    for v in report.steps.iter().filter(|v| !v.slow_seconds.is_empty()) {
        let causes: Vec<String> = shares(&v.slow_seconds)
            .iter()
            .map(|(c, n)| format!("{} {n}", c.name()))
            .collect();
        per_step.row(vec![
            v.label.clone(),
            v.slow_seconds.len().to_string(),
            causes.join(", "),
        ]);
    }
    doc.folded("Slow seconds per step, by cause", per_step);
    if let Some((v, _)) = ranked.first() {
        chart(doc, v);
    }
}

/// The client's per-second p99 of each op in step `v`, its slow seconds circled; an op's
/// `Intended-` seconds (under `--target`) are circled without a line of their own.
fn chart(doc: &mut Doc, v: &StepView) {
    let t = Timeline::of(v);
    let mut c = t.chart(
        &format!(
            "{}: client p99 per second, the slow seconds circled",
            v.label
        ),
        "latency (ms, log)",
    );
    // A slow second can be a thousand times its step's typical one: a log axis shows both.
    c.y_log = true;
    let mut ops: Vec<&str> = v.lat_p99_ms.keys().map(String::as_str).collect();
    for s in &v.slow_seconds {
        if !ops.contains(&s.op.as_str()) {
            ops.push(&s.op);
        }
    }
    for (i, op) in ops.into_iter().enumerate() {
        if let Some(l) = v.lat_p99_ms.get(op) {
            c.series.push(line(format!("{op} p99"), l, i, false));
        }
        let marked: Vec<(f64, f64)> = v
            .slow_seconds
            .iter()
            .filter(|s| s.op == op)
            .map(|s| (s.start_unix_ms as f64 + 500.0, s.p99_ms))
            .collect();
        if !marked.is_empty() {
            c.series.push(Series {
                name: format!("{op} slow seconds"),
                points: marked,
                color: i,
                only_markers: true,
                ..Default::default()
            });
        }
    }
    doc.line_chart(c);
}
