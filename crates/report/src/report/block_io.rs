//! A step's block-IO charts (when it was traced): throughput (per-second mean and busiest
//! slot), IOPS, device latency and queue depth, one colour per op across the charts.

use super::step::{line, Timeline};
use crate::analysis::StepView;
use crate::doc::{Doc, Table};

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
    levels(doc, s, t);
    let mut c = t.chart("Queue depth (requests in flight)", "queue depth (requests)");
    c.series.push(line("mean", &s.qd_mean, 0, false));
    c.series.push(line("max", &s.qd_max, 1, false));
    doc.line_chart(c);
}

/// System level vs device level: reads' and writes' per-second p99 in the OS queue (solid)
/// and on the device (dashed), and a table of each op's worst second.
fn levels(doc: &mut Doc, s: &StepView, t: &Timeline) {
    if s.levels.is_empty() {
        return;
    }
    let mut c = t.chart(
        "System level vs device level: per-second p99 in the OS queue (solid, allocation → issue) and on the device (dashed, issue → completion)",
        "latency (ms)",
    );
    for r in &s.levels {
        let l = &s.io[&r.op];
        c.series.push(line(
            format!("{} OS p99", r.op),
            &l.os_p99_ms,
            op_color(&r.op),
            false,
        ));
        c.series.push(line(
            format!("{} device p99", r.op),
            &l.lat_p99_ms,
            op_color(&r.op),
            true,
        ));
    }
    doc.line_chart(c);
    doc.h(3, "System level vs device level");
    let mut tb = Table::new(&[
        "op",
        "worst second (UTC)",
        "OS queue p99 ms",
        "device p99 ms",
        "where",
        "OS p99 peak ms",
        "device p99 peak ms",
        "seconds",
    ])
    .text_columns(&[1, 4]);
    for r in &s.levels {
        tb.row(vec![
            r.op.clone(),
            crate::svg::clock(r.worst_x),
            format!("{:.3}", r.worst_os_ms),
            format!("{:.3}", r.worst_device_ms),
            r.level().to_string(),
            format!("{:.3}", r.os_peak_ms),
            format!("{:.3}", r.device_peak_ms),
            r.seconds.to_string(),
        ]);
    }
    doc.table(tb);
}
