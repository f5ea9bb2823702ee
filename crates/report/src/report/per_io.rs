//! A step's IOs by size, from its per-IO stream (`run --events`): device latency per size class
//! and, per op, a scatter of single IOs over time coloured by size, the blog's "4 KB reads, max
//! 50 ms" against "up to 512 KB writes, max 90 ms".

use super::step::Timeline;
use crate::analysis::per_io::{PerIoOp, SAMPLE, SLOWEST};
use crate::analysis::StepView;
use crate::doc::{thousands, Doc, Table};

/// Size classes with a colour of their own in a scatter; the rest share the last one.
const COLOURED: usize = 8;

pub(super) fn section(doc: &mut Doc, s: &StepView, t: &Timeline) {
    let Some(p) = &s.per_io else { return };
    if p.ops.is_empty() {
        return;
    }
    doc.h(3, format!("Every IO by size ({})", p.file));
    let mut tb = Table::new(&[
        "op",
        "size",
        "IOs",
        "% of the op's IOs",
        "MB",
        "device p50 ms",
        "device p99 ms",
        "device max ms",
    ])
    .text_columns(&[1]);
    for op in &p.ops {
        for r in &op.sizes {
            tb.row(vec![
                op.op.clone(),
                r.label.clone(),
                thousands(r.ios as f64),
                format!("{:.1}", r.ios as f64 * 100.0 / op.ios.max(1) as f64),
                format!("{:.1}", r.bytes as f64 / 1e6),
                format!("{:.3}", r.p50_ms),
                format!("{:.3}", r.p99_ms),
                format!("{:.3}", r.max_ms),
            ]);
        }
    }
    doc.table(tb);
    if p.bad_lines > 0 {
        doc.p(format!(
            "{} lines of {} did not parse (a stream cut short ends mid-line) and are left out.",
            thousands(p.bad_lines as f64),
            p.file
        ));
    }
    for op in &p.ops {
        scatter(doc, t, op);
    }
}

fn scatter(doc: &mut Doc, t: &Timeline, op: &PerIoOp) {
    let drawn = if op.points.len() as u64 >= op.timed {
        format!("all {} timed", thousands(op.timed as f64))
    } else {
        format!(
            "{} of {} timed: the {} slowest and a uniform sample of {}",
            thousands(op.points.len() as f64),
            thousands(op.timed as f64),
            thousands(SLOWEST as f64),
            thousands(SAMPLE as f64)
        )
    };
    let mut c = t.scatter(
        &format!("Device latency of single {}s by size ({drawn})", op.op),
        "device latency (ms, log)",
    );
    let colour = |i: usize| i.min(COLOURED - 1);
    c.points = op
        .points
        .iter()
        .map(|p| (p.unix_ms, p.latency_ms, colour(p.size)))
        .collect();
    // Compact units keep eight classes on one legend line: "512K–1M", and ">512K" for the
    // classes that share the last colour.
    let compact = |l: &str| l.replace(" KiB", "K").replace(" MiB", "M");
    for (i, r) in op.sizes.iter().enumerate().take(COLOURED) {
        let label = compact(&r.label);
        let label = match label.split_once('–') {
            Some((lower, _)) if i == COLOURED - 1 && op.sizes.len() > COLOURED => {
                format!(">{lower}")
            }
            _ => label,
        };
        c.legend.push((i, label));
    }
    doc.scatter(c);
}
