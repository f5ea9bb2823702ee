//! A step's per-second figures: the mean and the max of every charted series, since the
//! averages alone hide the bursts under them.

use crate::analysis::StepView;
use crate::doc::{Doc, Table};

pub(super) fn table(doc: &mut Doc, s: &StepView) {
    let mut t = Table::new(&["series", "unit", "mean", "max"]).text_columns(&[1]);
    let mm = |l: &[(f64, f64)]| -> Option<(f64, f64)> {
        (!l.is_empty()).then(|| {
            (
                l.iter().map(|p| p.1).sum::<f64>() / l.len() as f64,
                l.iter().map(|p| p.1).fold(f64::MIN, f64::max),
            )
        })
    };
    let mut add = |name: String, unit: &str, l: &[(f64, f64)], digits: usize| {
        if let Some((m, x)) = mm(l) {
            t.row(vec![
                name,
                unit.into(),
                format!("{m:.digits$}"),
                format!("{x:.digits$}"),
            ]);
        }
    };
    add("client throughput".into(), "ops/s", &s.ops_per_sec, 0);
    for (op, l) in &s.io {
        add(
            format!("{op} throughput (per-second mean)"),
            "MB/s",
            &l.mb_s,
            1,
        );
        add(
            format!("{op} throughput (busiest slot)"),
            "MB/s",
            &l.mb_s_max,
            1,
        );
        add(format!("{op} IOPS"), "IO/s", &l.iops, 0);
        add(format!("{op} device latency max"), "ms", &l.lat_max_ms, 2);
        add(format!("{op} device latency p99"), "ms", &l.lat_p99_ms, 2);
    }
    add(
        "queue depth (mean per second)".into(),
        "requests",
        &s.qd_mean,
        1,
    );
    add(
        "queue depth (max per second)".into(),
        "requests",
        &s.qd_max,
        0,
    );
    add("CPU busy".into(), "%", &s.cpu_busy, 1);
    add("CPU iowait".into(), "%", &s.cpu_iowait, 1);
    add("memory dirty".into(), "MB", &s.dirty_mb, 1);
    add("memory writeback".into(), "MB", &s.writeback_mb, 1);
    doc.h(3, "Per-second figures");
    doc.table(t);
}
