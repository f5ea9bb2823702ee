//! Why the slowest seconds were slow, run beside run: how many of each run's slow seconds each
//! cause explains, and the share of its steps' seconds that were slow, so a drive or a setting
//! that trades device queues for JVM pauses shows in one table.

use super::Runs;
use crate::analysis::slow::{Cause, SlowSecond};
use crate::doc::{Doc, Table};

pub(super) fn section(doc: &mut Doc, runs: &Runs) {
    let per_run: Vec<Vec<&SlowSecond>> = runs
        .runs
        .iter()
        .map(|r| {
            r.step_views
                .iter()
                .filter(|v| v.phase == "run")
                .flat_map(|v| &v.slow_seconds)
                .collect()
        })
        .collect();
    doc.h(2, "Why the slowest seconds were slow, side by side");
    if per_run.iter().all(Vec::is_empty) {
        doc.p("No measured step of these runs had a second whose client p99 stood out of its typical second.");
        return;
    }
    doc.p(
        "Each run's slow seconds (its steps' three slowest of every op when 1.25× their typical \
         second or more, and every second 3× it) by their most likely cause, as each run's \
         report and slow-seconds.csv name them (docs/report.md).",
    );
    let mut headers = vec!["cause".to_string()];
    headers.extend(runs.runs.iter().map(crate::data::RunData::name));
    let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&header_refs).text_columns(&[0]);
    let cell = |seconds: &[&SlowSecond], c: Option<Cause>| {
        let n = seconds
            .iter()
            .filter(|s| c.is_none_or(|c| s.cause == c))
            .count();
        if c.is_none() || seconds.is_empty() {
            return n.to_string();
        }
        format!("{n} ({:.0} %)", 100.0 * n as f64 / seconds.len() as f64)
    };
    let mut total = vec!["all causes".to_string()];
    total.extend(per_run.iter().map(|s| cell(s, None)));
    t.row(total);
    for c in Cause::ALL {
        if per_run.iter().all(|s| s.iter().all(|x| x.cause != c)) {
            continue;
        }
        let mut row = vec![c.name().to_string()];
        row.extend(per_run.iter().map(|s| cell(s, Some(c))));
        t.row(row);
    }
    doc.table(t);
}
