//! A step's "who issued the IO" tables: per op and activity class, and per op and node, each
//! with the briefs' "% by IO count / % by volume", the attribution self-check, and what flush
//! and compaction IO did to the client and to the other classes' IO.

use crate::analysis::attribution::ShareRow;
use crate::analysis::background::{Background, ClientSide, IoSide, IoSplit};
use crate::analysis::StepView;
use crate::doc::{thousands, us_as_ms, Doc, Table};

pub(super) fn tables(doc: &mut Doc, s: &StepView) {
    if s.classes.is_empty() {
        return;
    }
    doc.h(3, "Who issued the IO");
    share_table(doc, "activity", &s.classes);
    // One node (or none) says nothing the class table does not.
    let nodes: Vec<&ShareRow> = s.nodes.iter().filter(|r| r.who != "(no cgroup)").collect();
    if nodes.len() > 1 {
        share_table(doc, "node / cgroup", &s.nodes);
    }
    if let Some(check) = &s.attribution_check {
        doc.p(check.clone());
    }
    if let Some(b) = &s.background {
        beside_background(doc, b);
    }
}

fn beside_background(doc: &mut Doc, b: &Background) {
    let what = b.classes.join(", ");
    doc.h(4, "Beside flush and compaction IO");
    if !b.client.is_empty() {
        doc.p(format!(
            "The client's latency (ms) in the seconds in which {what} IO completed against the seconds without; each side merges the per-second histograms exactly. An operation counts in the second it completed (the interval log's resolution)."
        ));
        let mut t = Table::new(&[
            "op",
            "s with",
            "ops",
            "p50",
            "p99",
            "max",
            "s without",
            "ops",
            "p50",
            "p99",
            "max",
        ]);
        let cells = |c: &ClientSide| {
            let ms = |us: u64| {
                if c.ops == 0 {
                    "–".to_string()
                } else {
                    us_as_ms(us as f64)
                }
            };
            vec![
                c.seconds.to_string(),
                thousands(c.ops as f64),
                ms(c.p50_us),
                ms(c.p99_us),
                ms(c.max_us),
            ]
        };
        for c in &b.client {
            let mut row = vec![c.series.clone()];
            row.extend(cells(&c.with));
            row.extend(cells(&c.without));
            t.row(row);
        }
        doc.table(t);
    }
    // Background classes are the cause, not the subject: their own split (overlapping each
    // other) would read as an effect.
    let io: Vec<&IoSplit> =
        b.io.iter()
            .filter(|s| !b.background.contains(&s.class))
            .collect();
    if !io.is_empty() {
        doc.p(format!(
            "Each other class's reads and writes split by the kernel, per IO: \"with\" when a {what} request was in the block layer at some point of the IO's life. Queue = OS time from request allocation to issue; device = issue to completion (ms, ±12 %)."
        ));
        let mut t = Table::new(&[
            "op",
            "class",
            "IOs with",
            "queue p50",
            "queue p99",
            "device p99",
            "IOs without",
            "queue p50",
            "queue p99",
            "device p99",
        ])
        .text_columns(&[1]);
        let cells = |s: &IoSide| {
            let ms = |v: f64| {
                if s.ios == 0 {
                    "–".to_string()
                } else {
                    format!("{v:.3}")
                }
            };
            vec![
                thousands(s.ios as f64),
                ms(s.queue_p50_ms),
                ms(s.queue_p99_ms),
                ms(s.device_p99_ms),
            ]
        };
        for s in io {
            let mut row = vec![s.op.clone(), s.class.clone()];
            row.extend(cells(&s.with));
            row.extend(cells(&s.without));
            t.row(row);
        }
        doc.table(t);
    }
    if !b.depth.is_empty() {
        doc.p("The depth each class held: mean requests queued in the OS and at the device over the window (reads and writes), and its busiest second in the block layer.");
        let mut t = Table::new(&["class", "mean queued", "mean at device", "busiest second"])
            .text_columns(&[0]);
        for d in &b.depth {
            t.row(vec![
                d.class.clone(),
                format!("{:.2}", d.queued),
                format!("{:.2}", d.device),
                format!("{:.2}", d.peak),
            ]);
        }
        doc.table(t);
    }
}

fn share_table(doc: &mut Doc, who: &str, rows: &[ShareRow]) {
    let mut t =
        Table::new(&["op", who, "IOs", "MB", "% by IO count", "% by volume"]).text_columns(&[1]);
    for r in rows {
        t.row(vec![
            r.op.clone(),
            r.who.clone(),
            thousands(r.ios as f64),
            format!("{:.1}", r.bytes as f64 / 1e6),
            format!("{:.1}%", r.pct_ios),
            format!("{:.1}%", r.pct_bytes),
        ]);
    }
    doc.table(t);
}
