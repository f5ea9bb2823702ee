//! A workload's sweep over thread counts: the throughput/latency curve and the OPS table with
//! the sweep's latency op (READ unless `--op` says otherwise), thread counts a stop rule left
//! "(not tested)", the peak and the bend, and each op's latency.

use crate::analysis::{self, WorkloadSweep};
use crate::doc::{thousands, us_as_ms, Doc, Table, NOT_TESTED};
use crate::svg::{LineChart, Series, XKind};

pub(super) fn section(doc: &mut Doc, s: &WorkloadSweep) {
    doc.h(
        2,
        format!(
            "Workload {}: throughput against {} latency",
            s.workload,
            s.op.words()
        ),
    );
    curve(doc, s);
    ops_table(doc, s);
    peak_and_bend(doc, s);
    latency_per_op(doc, s);
}

/// Latency against throughput over the thread counts: where the database stops scaling.
pub(super) fn curve(doc: &mut Doc, s: &WorkloadSweep) {
    let mut chart = LineChart::new(
        &format!(
            "{}: ops/s vs {} latency across thread counts (points labelled with threads)",
            s.workload,
            s.op.words()
        ),
        "throughput (ops/s)",
        &format!("{} latency (ms, log scale)", s.op.words()),
        XKind::Number,
    );
    chart.y_log = true;
    let labels: Vec<String> = s
        .latency_points()
        .map(|p| format!("{}t", p.threads))
        .collect();
    type Pick = (
        &'static str,
        fn(&iodig_model::SeriesSummary) -> f64,
        usize,
        bool,
    );
    let pick: [Pick; 4] = [
        ("avg", |x| x.mean_us, 0, true),
        ("p99", |x| x.p99_us as f64, 1, false),
        ("p99.9", |x| x.p999_us as f64, 2, false),
        ("p99.99", |x| x.p9999_us as f64, 3, false),
    ];
    for (name, f, color, dashed) in pick {
        chart.series.push(Series {
            name: name.into(),
            points: s
                .latency_points()
                .map(|p| (p.ops_per_sec, f(&p.lat) / 1000.0))
                .collect(),
            color,
            dashed,
            markers: true,
            only_markers: false,
            labels: if name == "p99.99" || name == "avg" {
                labels.clone()
            } else {
                Vec::new()
            },
        });
    }
    doc.line_chart(chart);
}

/// The OPS table: one row per thread count, repetitions merged, with the sweep's latency op;
/// thread counts the stop rule left out read "(not tested)" as in the briefs.
fn ops_table(doc: &mut Doc, s: &WorkloadSweep) {
    let w = s.op.words();
    doc.h(3, format!("OPS by thread count ({w} latency)"));
    let head = |stat: &str| format!("{w} {stat} ms");
    let headers = [
        "threads".to_string(),
        "repetitions".into(),
        "ops/s".into(),
        "±95% CI".into(),
        head("avg"),
        head("p99"),
        head("p99.9"),
        head("p99.99"),
        "client CPU µs/op".into(),
        "failed ops".into(),
        "status".into(),
    ];
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&headers).text_columns(&[10]);
    for threads in s.thread_counts() {
        let Some(p) = s.at(threads) else {
            let why = s.not_tested_at(threads).map_or("", |n| n.why.as_str());
            let mut cells = vec![threads.to_string(), NOT_TESTED.into()];
            cells.extend((0..8).map(|_| String::new()));
            cells.push(why.to_string());
            t.row(cells);
            continue;
        };
        let lat = |v: f64| {
            if p.lat.count > 0 {
                us_as_ms(v)
            } else {
                "–".into()
            }
        };
        t.row(vec![
            p.threads.to_string(),
            p.rep_ops.len().to_string(),
            thousands(p.ops_per_sec),
            p.ops_ci95.map(thousands).unwrap_or_else(|| "–".into()),
            lat(p.lat.mean_us),
            lat(p.lat.p99_us as f64),
            lat(p.lat.p999_us as f64),
            lat(p.lat.p9999_us as f64),
            p.client_cpu_us_per_op
                .map(|c| format!("{c:.1}"))
                .unwrap_or_else(|| "–".into()),
            p.outcome.failed_cell(),
            p.status(),
        ]);
    }
    doc.table(t);
}

/// The peak and the bend in words, with the bend's rule.
fn peak_and_bend(doc: &mut Doc, s: &WorkloadSweep) {
    let mut lines = Vec::new();
    match s.peak_point() {
        Some(p) => lines.push(format!(
            "Peak: {} ops/s at {} threads.",
            thousands(p.ops_per_sec),
            p.threads
        )),
        None => lines.push(
            "No peak: no operation succeeded at any thread count (the figures above measure failures)."
                .into(),
        ),
    }
    if s.points.iter().any(|p| p.all_failed) {
        lines.push("Thread counts marked \"all failed\" had no successful operation: they are left out of the chart, the peak and the bend.".into());
    }
    if let Some(first) = s.not_tested.first() {
        lines.push(format!(
            "Not tested: {} threads; the sweep {}.",
            s.not_tested
                .iter()
                .map(|n| n.threads.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            first.why
        ));
    }
    match &s.bend {
        Some(b) => lines.push(format!(
            "Latency bends at {} threads: {} p99 {:.1}× the {}-thread figure for {} ops/s (rule: p99 > {}× while ops/s < +{}%).",
            b.at,
            s.op.words(),
            b.p99_ratio,
            b.before,
            analysis::gain_pct(b.ops_gain_pct),
            analysis::BEND_P99_FACTOR,
            analysis::BEND_OPS_GAIN * 100.0
        )),
        None if s.usable_points().count() > 1 => lines.push(format!(
            "No bend within the sweep (rule: p99 > {}× while ops/s < +{}% from one thread count to the next).",
            analysis::BEND_P99_FACTOR,
            analysis::BEND_OPS_GAIN * 100.0
        )),
        None => {}
    }
    doc.list(lines);
}

/// Each op's latency per thread count.
fn latency_per_op(doc: &mut Doc, s: &WorkloadSweep) {
    doc.h(3, "Latency per op");
    let mut t = Table::new(&[
        "threads",
        "op",
        "operations",
        "avg ms",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "p99.99 ms",
        "max ms",
    ])
    .text_columns(&[1]);
    for p in &s.points {
        for (op, v) in &p.per_op {
            t.row(vec![
                p.threads.to_string(),
                op.clone(),
                thousands(v.count as f64),
                us_as_ms(v.mean_us),
                us_as_ms(v.p50_us as f64),
                us_as_ms(v.p99_us as f64),
                us_as_ms(v.p999_us as f64),
                us_as_ms(v.p9999_us as f64),
                us_as_ms(v.max_us as f64),
            ]);
        }
    }
    doc.table(t);
}
