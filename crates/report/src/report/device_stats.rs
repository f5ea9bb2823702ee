//! A step's "The drive's own statistics": per traced disk, what its NVMe controller counted over
//! the step (SMART / Health log, OCP latency monitor) beside what the trace counted on it; a
//! disk without such statistics is one line saying why, never a figure.

use crate::analysis::device_stats::DeviceStatsView;
use crate::analysis::StepView;
use crate::doc::{thousands, Doc, Table};

pub(super) fn section(doc: &mut Doc, s: &StepView) {
    if s.device_stats.is_empty() {
        return;
    }
    doc.h(3, "The drive's own statistics");
    let (without, with): (Vec<&DeviceStatsView>, Vec<&DeviceStatsView>) =
        s.device_stats.iter().partition(|v| v.unavailable.is_some());
    if !without.is_empty() {
        doc.list(
            without
                .iter()
                .map(|v| {
                    let mut line = v.unavailable.clone().unwrap_or_default();
                    for n in &v.notes {
                        line.push_str(&format!("; {n}"));
                    }
                    line
                })
                .collect(),
        );
    }
    for v in with {
        disk(doc, v);
    }
}

fn disk(doc: &mut Doc, v: &DeviceStatsView) {
    doc.h(4, v.label.clone());
    doc.p(format!(
        "Read from the drive before and after the step ({:.1} s apart, inside the trace's \
         window). The controller counts every namespace and every host it serves; the trace, \
         {}'s IO to the disk.",
        v.seconds,
        v.host.as_deref().unwrap_or("this machine")
    ));
    let mut t = Table::new(&["", "the drive counted", "the trace counted"]).text_columns(&[0]);
    for r in &v.counts {
        t.row(vec![r.what.clone(), r.device.clone(), r.trace.clone()]);
    }
    doc.table(t);
    let mut notes = v.notes.clone();
    if let Some(why) = &v.latency_monitor_unavailable {
        notes.push(format!("OCP latency monitor: {why}."));
    }
    if !v.buckets.is_empty() {
        doc.p(
            "The drive's OCP latency monitor: commands slower than each threshold, timed by the \
             drive from fetching the command to posting its completion; beside them, the IOs \
             the trace timed in the same range from issue to completion (a little longer; a \
             range where its histogram bucket straddles the bound).",
        );
        let mut t = Table::new(&[
            "op",
            "latency",
            "commands the drive counted",
            "IOs the trace timed",
            "latency the drive recorded in the step",
        ])
        .text_columns(&[1]);
        for r in &v.buckets {
            t.row(vec![
                r.op.clone(),
                r.range.clone(),
                format!(
                    "{}{}",
                    if r.saturated { "≥ " } else { "" },
                    thousands(r.device as f64)
                ),
                match r.trace {
                    Some((a, b)) if a == b => thousands(a as f64),
                    Some((a, b)) => format!("{}–{}", thousands(a as f64), thousands(b as f64)),
                    None => "–".into(),
                },
                r.recorded_ms
                    .map_or_else(|| "–".into(), |ms| format!("{ms} ms")),
            ]);
        }
        doc.table(t);
    }
    if !notes.is_empty() {
        doc.list(notes);
    }
}
