//! A step's block-IO charts (when it was traced): throughput (per-second mean and busiest
//! slot), IOPS, device latency (per-second lines and a heat map of every IO), system vs device
//! level and queue depth, one colour per op across the charts.

use super::step::{line, Timeline};
use crate::analysis::{IoLines, StepView};
use crate::doc::{Doc, Table};
use crate::svg::HeatColumn;

/// Columns of a latency heat map at most: a long step's seconds are drawn in groups.
const HEAT_COLUMNS: usize = 300;

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
    for (op, l) in &s.io {
        latency_heat(doc, s, t, op, l);
    }
    levels(doc, s, t);
    let mut c = t.chart("Queue depth (requests in flight)", "queue depth (requests)");
    c.series.push(line("mean", &s.qd_mean, 0, false));
    c.series.push(line("max", &s.qd_max, 1, false));
    doc.line_chart(c);
}

/// Every IO of one op by its device latency over time (the blog's per-IO scatter, from the
/// kernel's per-second histograms), titled with the op's commonest IO size.
fn latency_heat(doc: &mut Doc, s: &StepView, t: &Timeline, op: &str, l: &IoLines) {
    if l.lat_octaves.is_empty() {
        return;
    }
    // Cache flushes carry no data: no size to name.
    let size = s
        .bands
        .iter()
        .filter(|b| b.op != "flush")
        .find(|b| b.op == op)
        .and_then(|b| {
            b.bands
                .iter()
                .max_by(|x, y| x.pct_ios.total_cmp(&y.pct_ios))
        })
        .map(|b| format!("; commonest size {}, {:.0} %", b.label, b.pct_ios))
        .unwrap_or_default();
    let timed: u64 = l.lat_octaves.values().flat_map(|o| o.values()).sum();
    // IOs the tracer saw complete without their issue (in flight at the start, or whose state
    // a requeue lost) have no device time: said in the title rather than drawn.
    let all = s.bands.iter().find(|b| b.op == op).map_or(timed, |b| b.ios);
    let count = if all > timed {
        format!(
            "{} IOs timed of {}",
            crate::doc::thousands(timed as f64),
            crate::doc::thousands(all as f64)
        )
    } else {
        format!("{} IOs", crate::doc::thousands(timed as f64))
    };
    let mut h = t.heat_map(
        &format!("Device latency of every {op} ({count}{size}), per second"),
        "device latency (ms, log)",
    );
    // Columns by time, not by seconds with IO: an idle stretch must stay a gap on the axis.
    let (Some(&first), Some(&last)) = (l.lat_octaves.keys().next(), l.lat_octaves.keys().last())
    else {
        doc.heat_map(h);
        return;
    };
    let span_s = (last - first) / 1000 + 1;
    let group_ms = 1000 * span_s.div_ceil(HEAT_COLUMNS as u64).max(1);
    let mut columns =
        std::collections::BTreeMap::<u64, std::collections::BTreeMap<u32, u64>>::new();
    for (second_ms, octaves) in &l.lat_octaves {
        let cells = columns.entry((second_ms - first) / group_ms).or_default();
        for (k, n) in octaves {
            *cells.entry(*k).or_default() += n;
        }
    }
    for (column, cells) in columns {
        h.columns.push(HeatColumn {
            x_ms: (first + column * group_ms) as f64,
            width_ms: group_ms as f64,
            cells: cells
                .into_iter()
                .map(|(k, n)| ((1u64 << k) as f64 / 1e6, (2u64 << k) as f64 / 1e6, n))
                .collect(),
        });
    }
    doc.heat_map(h);
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
