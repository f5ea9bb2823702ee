//! Integrity: what reading back every acknowledged versioned write found (`iodig verify`,
//! `--verify`), and what the run's own reads saw while it ran.

use crate::data::RunData;
use crate::doc::{thousands, Doc, Table};

pub(super) fn section(doc: &mut Doc, run: &RunData) {
    let Some(i) = &run.doc.integrity else { return };
    doc.h(2, "Integrity");
    doc.p(format!(
        "Every key with an acknowledged versioned write was read back ({}, by {}). A value is stale when it is older than the last write acknowledged for it (an overlapping write may win), corrupt when it is not a value iodig wrote there, missing when the record or field is gone.",
        i.read_with,
        if i.checked_by == "run" {
            "the run after its last step"
        } else {
            "iodig verify"
        }
    ));
    let mut t = Table::new(&[
        "keys read back",
        "ok",
        "missing",
        "stale",
        "corrupt",
        "unreadable",
        "holding an unacknowledged write",
    ]);
    t.row(vec![
        thousands(i.keys as f64),
        thousands(i.ok as f64),
        thousands(i.missing as f64),
        thousands(i.stale as f64),
        thousands(i.corrupt as f64),
        thousands(i.unreadable as f64),
        thousands(i.unacknowledged as f64),
    ]);
    doc.table(t);
    if !i.per_node.is_empty() {
        doc.p("Each node read alone (the others paused until it saw them down, then every key read through it at ONE): which replica is behind. A node behind is not a lost write while the reads above find it; repair or hints bring it up to date.");
        let mut t = Table::new(&[
            "node",
            "keys read",
            "ok",
            "missing",
            "stale",
            "corrupt",
            "unreadable",
        ])
        .text_columns(&[0]);
        for n in &i.per_node {
            t.row(vec![
                n.node.clone(),
                thousands(n.keys as f64),
                thousands(n.ok as f64),
                thousands(n.missing as f64),
                thousands(n.stale as f64),
                thousands(n.corrupt as f64),
                thousands(n.unreadable as f64),
            ]);
        }
        doc.table(t);
    }
    let d = i.during_run;
    if d.checked > 0 {
        doc.p(format!(
            "During the run, {} reads were judged against the writes acknowledged before each began: {} stale, {} corrupt, {} missing.",
            thousands(d.checked as f64),
            thousands(d.stale as f64),
            thousands(d.corrupt as f64),
            thousands(d.missing as f64)
        ));
    }
    if !i.examples.is_empty() {
        let mut t = Table::new(&[
            "key",
            "field",
            "found",
            "acknowledged version",
            "version found",
        ])
        .text_columns(&[0, 1, 2]);
        for e in &i.examples {
            t.row(vec![
                e.key.clone(),
                if e.field.is_empty() {
                    "(record)".into()
                } else {
                    e.field.clone()
                },
                e.verdict.clone(),
                e.acknowledged_version.to_string(),
                e.found_version.map_or("—".into(), |v| v.to_string()),
            ]);
        }
        doc.table(t);
    }
}
