//! The front page: the headline findings, each with the chart that shows it, drawn from the
//! node and step where it is worst (the briefs open with a handful of figures and their
//! charts, not with every sentence of every step).

use super::step::{line, Timeline};
use crate::analysis::headlines::{Headline, Topic};
use crate::analysis::{Report, StepView};
use crate::doc::{Doc, Table};

pub(super) fn section(doc: &mut Doc, report: &Report) {
    if report.headlines.is_empty() {
        return;
    }
    doc.h(2, "Summary");
    let mut curves_drawn = Vec::new();
    for h in &report.headlines {
        doc.p(h.sentence.clone());
        if let Some(v) = view_of(report, h) {
            chart(doc, h.topic, v);
        } else if let Some(i) = h.sweep.filter(|i| !curves_drawn.contains(i)) {
            // A sweep's peak and bend share one curve: drawn after the first.
            curves_drawn.push(i);
            if let Some(w) = report.sweeps.get(i) {
                super::sweep::curve(doc, w);
            }
        }
    }
}

/// The view a step's headline was found in: the node's, or the step's own.
fn view_of<'a>(report: &'a Report, h: &Headline) -> Option<&'a StepView> {
    let s = report.steps.get(h.step?)?;
    match h.node {
        Some(i) => s.node_views.get(i),
        None => Some(s),
    }
}

/// The one chart (or the brief's table) that shows a headline, on its place's time line.
fn chart(doc: &mut Doc, topic: Topic, v: &StepView) {
    let t = Timeline::of(v);
    let place = if v.place.is_node() {
        format!("{}, ", v.place.name())
    } else {
        String::new()
    };
    let title = |what: &str| format!("{place}{}: {what}", v.label);
    match topic {
        Topic::WriteBursts => {
            let mut c = t.chart(
                &title("write throughput, per-second mean (solid) and busiest slot (dashed)"),
                "write (MB/s)",
            );
            if let Some(l) = v.io.get("write") {
                c.series.push(line("write mean", &l.mb_s, 1, false));
                c.series
                    .push(line("write busiest slot", &l.mb_s_max, 1, true));
            }
            doc.line_chart(c);
        }
        Topic::QueueDepth => {
            let mut c = t.chart(&title("queue depth (requests in flight)"), "queue depth");
            c.series.push(line("mean", &v.qd_mean, 0, false));
            c.series.push(line("max", &v.qd_max, 1, false));
            doc.line_chart(c);
        }
        Topic::SystemVsDevice | Topic::DeviceLatency => {
            let mut c = t.chart(
                &title("per-second p99 in the OS queue (solid) and on the device (dashed)"),
                "latency (ms)",
            );
            for (i, op) in ["read", "write"].into_iter().enumerate() {
                if let Some(l) = v.io.get(op) {
                    c.series
                        .push(line(format!("{op} OS p99"), &l.os_p99_ms, i, false));
                    c.series
                        .push(line(format!("{op} device p99"), &l.lat_p99_ms, i, true));
                    if topic == Topic::DeviceLatency {
                        c.series.push(line(
                            format!("{op} device max"),
                            &l.lat_max_ms,
                            i + 2,
                            false,
                        ));
                    }
                }
            }
            doc.line_chart(c);
        }
        Topic::ClientDuringFlush => {
            let mut c = t.chart(
                &title("client p99 per op, flushes and compactions shaded"),
                "latency (ms)",
            );
            for (i, (op, l)) in v.lat_p99_ms.iter().enumerate() {
                c.series.push(line(format!("{op} p99"), l, i, false));
            }
            doc.line_chart(c);
        }
        Topic::SizeMix => {
            let mut tb = Table::new(&["op", "block size", "GB", "% by IO count", "% by volume"])
                .text_columns(&[0, 1]);
            for r in &v.io_rows {
                tb.row(vec![
                    r.op.clone(),
                    r.band.clone(),
                    format!("{:.2}", r.gb),
                    format!("{:.1}%", r.pct_ios),
                    format!("{:.1}%", r.pct_bytes),
                ]);
            }
            doc.table(tb);
        }
        Topic::NotStorageBound | Topic::Sweep => {}
    }
}
