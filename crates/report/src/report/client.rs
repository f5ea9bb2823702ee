//! A step's client charts: throughput, and each op's p99 and mean latency, per second.

use super::step::{line, Timeline};
use crate::analysis::StepView;
use crate::doc::Doc;

pub(super) fn charts(doc: &mut Doc, s: &StepView, t: &Timeline) {
    let mut c = t.chart("Client throughput", "throughput (ops/s)");
    c.series.push(line("ops/s", &s.ops_per_sec, 0, false));
    doc.line_chart(c);
    // One colour per op: its p99 solid, its mean dashed.
    let mut c = t.chart("Client latency per op (per second)", "latency (ms)");
    for (i, (op, l)) in s.lat_p99_ms.iter().enumerate() {
        c.series.push(line(format!("{op} p99"), l, i, false));
    }
    for (i, (op, l)) in s.lat_mean_ms.iter().enumerate() {
        c.series.push(line(format!("{op} avg"), l, i, true));
    }
    doc.line_chart(c);
}
