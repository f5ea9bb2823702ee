//! A step's block-IO charts (when it was traced): throughput (per-second mean and busiest
//! slot), IOPS, device latency and queue depth, one colour per op across the charts.

use super::step::{line, Timeline};
use crate::analysis::StepView;
use crate::doc::Doc;

const OP_COLORS: [(&str, usize); 5] = [
    ("read", 0),
    ("write", 1),
    ("discard", 2),
    ("flush", 3),
    ("other", 8),
];

fn op_color(op: &str) -> usize {
    OP_COLORS
        .iter()
        .find(|c| c.0 == op)
        .map(|c| c.1)
        .unwrap_or(8)
}

pub(super) fn charts(doc: &mut Doc, s: &StepView, t: &Timeline) {
    if s.io.is_empty() {
        return;
    }
    let mut c = t.chart(
        "Block IO throughput: per-second mean (solid) and busiest slot (dashed)",
        "throughput (MB/s)",
    );
    for (op, l) in &s.io {
        c.series
            .push(line(format!("{op} mean"), &l.mb_s, op_color(op), false));
        c.series
            .push(line(format!("{op} max"), &l.mb_s_max, op_color(op), true));
    }
    doc.line_chart(c);
    let mut c = t.chart("Block IO operations per second", "IOPS (IO/s)");
    for (op, l) in &s.io {
        c.series
            .push(line(op.clone(), &l.iops, op_color(op), false));
    }
    doc.line_chart(c);
    let mut c = t.chart(
        "Device latency (issue → completion): per-second max (solid) and p99 (dashed)",
        "latency (ms)",
    );
    for (op, l) in &s.io {
        c.series.push(line(
            format!("{op} max"),
            &l.lat_max_ms,
            op_color(op),
            false,
        ));
        c.series
            .push(line(format!("{op} p99"), &l.lat_p99_ms, op_color(op), true));
    }
    doc.line_chart(c);
    let mut c = t.chart("Queue depth (requests in flight)", "queue depth (requests)");
    c.series.push(line("mean", &s.qd_mean, 0, false));
    c.series.push(line("max", &s.qd_max, 1, false));
    doc.line_chart(c);
}
