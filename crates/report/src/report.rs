//! `iodig report`: lays the analysed run out as a document (header, findings, sweeps, steps)
//! and writes report.html, report.md and the CSV files into the run directory.

use crate::analysis::{self, status_text, Report, StepView, WorkloadSweep};
use crate::data::{load_run, RunData};
use crate::doc::{distinct, target_rate, thousands, us_as_ms, Doc, Table};
use crate::svg::{Band, BarChart, LineChart, Series, XKind};
use anyhow::Result;
use iodig_model::fsio::write_atomic;
use std::path::{Path, PathBuf};

/// File names written into the run directory.
pub const HTML: &str = "report.html";
pub const MARKDOWN: &str = "report.md";
pub const CSV_OPS: &str = "report-ops.csv";
pub const CSV_CLIENT: &str = "report-client.csv";
pub const CSV_IO: &str = "report-io.csv";
pub const CSV_STEPS: &str = "report-steps.csv";

/// What `write_report` produced.
#[derive(Debug, Clone)]
pub struct ReportOutput {
    pub files: Vec<PathBuf>,
    pub findings: Vec<String>,
}

/// Reads `run_dir`, writes the report files into it, and returns their paths.
pub fn write_report(run_dir: &Path) -> Result<ReportOutput> {
    let run = load_run(run_dir)?;
    let report = analysis::analyse(&run);
    let doc = report_doc(&run, &report);
    let outputs: [(&str, Vec<u8>); 6] = [
        (HTML, crate::html::render(&doc).into_bytes()),
        (MARKDOWN, crate::markdown::render(&doc).into_bytes()),
        (CSV_STEPS, crate::csv::steps(&report).into_bytes()),
        (CSV_OPS, crate::csv::ops(&report).into_bytes()),
        (CSV_CLIENT, crate::csv::client(&run).into_bytes()),
        (CSV_IO, crate::csv::io(&run).into_bytes()),
    ];
    let mut files = Vec::new();
    for (name, bytes) in outputs {
        let p = run_dir.join(name);
        write_atomic(&p, &bytes)?;
        files.push(p);
    }
    Ok(ReportOutput {
        files,
        findings: report.findings,
    })
}

/// What `-P` named or, without a file, the built-in workload the runner fell back to (its
/// label names it: the runner labels such steps with the built-in's name).
fn workload_files(run: &RunData) -> String {
    let files = &run.doc.config.property_files;
    if !files.is_empty() {
        return files.join(", ");
    }
    // "workload" is the runner's label when it knew no name.
    let labels = distinct(
        run.steps
            .iter()
            .map(|s| s.summary.workload.as_str())
            .filter(|w| *w != "workload"),
    );
    if labels.is_empty() {
        "built-in defaults (no -P file)".into()
    } else {
        format!("built-in {} (no -P file)", labels.join(", "))
    }
}

/// "nvme0n1 (Samsung SSD) · non-rotational · scheduler none".
fn describe_device(
    name: &str,
    model: Option<&str>,
    rotational: Option<bool>,
    scheduler: Option<&str>,
) -> String {
    let mut dev = name.to_string();
    if let Some(m) = model {
        dev.push_str(&format!(" ({m})"));
    }
    if let Some(r) = rotational {
        dev.push_str(if r {
            " · rotational"
        } else {
            " · non-rotational"
        });
    }
    if let Some(sch) = scheduler {
        dev.push_str(&format!(" · scheduler {sch}"));
    }
    dev
}

/// The devices the steps' block-IO traces recorded, each once, in order of appearance: the
/// only device facts of a run whose database is remote (no data directory to resolve).
fn traced_devices(run: &RunData) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for d in run
        .steps
        .iter()
        .filter_map(|s| s.trace.as_ref())
        .flat_map(|t| &t.devices)
    {
        if out.iter().any(|(n, _)| *n == d.name) {
            continue;
        }
        let info = d.info.as_ref();
        let desc = describe_device(
            &d.name,
            info.and_then(|i| i.model.as_deref()),
            info.and_then(|i| i.rotational),
            info.and_then(|i| i.scheduler.as_deref()),
        );
        out.push((d.name.clone(), desc));
    }
    out
}

fn header(doc: &mut Doc, run: &RunData, report: &Report) {
    let d = &run.doc;
    let c = &d.config;
    let e = &d.environment;
    let mut facts = vec![
        ("run".into(), format!("{} ({})", report.run_name, d.status)),
        ("tool".into(), format!("{} {}", d.tool.name, d.tool.version)),
        ("command".into(), d.tool.command_line.join(" ")),
        ("database".into(), c.db.clone()),
        ("workload files".into(), workload_files(run)),
        (
            "threads".into(),
            c.threads
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("target".into(), target_rate(c.target_ops_per_sec)),
        ("warm-up".into(), format!("{} s per step", c.warmup_secs)),
        ("seed".into(), c.seed.to_string()),
    ];
    for key in [
        "hosts",
        "recordcount",
        "operationcount",
        "fieldcount",
        "fieldlength",
        "requestdistribution",
    ] {
        if let Some(v) = c.properties.get(key) {
            facts.push((key.into(), v.clone()));
        }
    }
    facts.push((
        "host".into(),
        format!("{} · kernel {}", e.hostname, e.kernel),
    ));
    facts.push((
        "CPU".into(),
        format!(
            "{} × {} · {:.1} GiB memory",
            e.cpus,
            e.cpu_model,
            e.memory_bytes as f64 / (1u64 << 30) as f64
        ),
    ));
    let traced = traced_devices(run);
    let traced_list = |t: &[(String, String)]| {
        t.iter()
            .map(|(_, d)| d.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    };
    if let Some(s) = &e.storage {
        let name = s.device.clone().unwrap_or_else(|| s.source.clone());
        facts.push((
            "device".into(),
            describe_device(
                &name,
                s.model.as_deref(),
                s.rotational,
                s.scheduler.as_deref(),
            ),
        ));
        facts.push((
            "file system".into(),
            format!("{} on {} ({})", s.fs_type, s.mount_point, s.source),
        ));
        // `--device` can add devices beyond the one under the data directory.
        if traced.iter().any(|(n, _)| *n != name) {
            facts.push(("traced devices".into(), traced_list(&traced)));
        }
    } else if !traced.is_empty() {
        facts.push((
            "device".into(),
            format!("{} (from the block-IO trace)", traced_list(&traced)),
        ));
    }
    if let Some(dd) = &e.data_dir {
        facts.push(("data directory".into(), dd.clone()));
    }
    // Trace mode as asked, and as it ran per step when that differs.
    let modes = distinct(report.steps.iter().map(|s| match &s.trace_note {
        Some(n) => format!("{} ({n})", s.trace_mode),
        None => s.trace_mode.clone(),
    }));
    facts.push((
        "trace".into(),
        format!("asked: {} · ran: {}", c.trace, modes.join("; ")),
    ));
    doc.blocks.push(crate::doc::Block::Facts(facts));
    if !report.notes.is_empty() {
        doc.h(3, "Notes");
        doc.list(report.notes.clone());
    }
}

/// One row per step, the load included, with what its return codes and end say.
fn steps_table(doc: &mut Doc, report: &Report) {
    doc.h(2, "Steps");
    let mut t = Table::new(&[
        "step",
        "phase",
        "workload",
        "threads",
        "target",
        "operations",
        "ops/s",
        "failed ops",
        "status",
    ])
    .text_columns(&[1, 2, 4, 8]);
    for s in &report.steps {
        t.row(vec![
            s.index.to_string(),
            s.phase.clone(),
            s.workload.clone(),
            s.threads.to_string(),
            target_rate(s.target_ops_per_sec),
            thousands(s.operations as f64),
            thousands(s.throughput_ops_per_sec),
            s.outcome.failed_cell(),
            status_text(&s.caveats()),
        ]);
    }
    doc.table(t);
}

fn sweep_section(doc: &mut Doc, s: &WorkloadSweep) {
    doc.h(
        2,
        format!("Workload {}: throughput against latency", s.workload),
    );
    let mut chart = LineChart::new(
        &format!(
            "{}: ops/s vs latency across thread counts (points labelled with threads)",
            s.workload
        ),
        "throughput (ops/s)",
        "latency (ms, log scale)",
        XKind::Number,
    );
    chart.y_log = true;
    let labels: Vec<String> = s
        .usable_points()
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
                .usable_points()
                .map(|p| (p.ops_per_sec, f(&p.all) / 1000.0))
                .collect(),
            color,
            dashed,
            markers: true,
            labels: if name == "p99.99" || name == "avg" {
                labels.clone()
            } else {
                Vec::new()
            },
        });
    }
    doc.line_chart(chart);
    doc.h(3, "OPS by thread count (all ops)");
    let mut t = Table::new(&[
        "threads",
        "repetitions",
        "ops/s",
        "±95% CI",
        "avg ms",
        "p99 ms",
        "p99.9 ms",
        "p99.99 ms",
        "client CPU µs/op",
        "failed ops",
        "status",
    ])
    .text_columns(&[10]);
    for p in &s.points {
        t.row(vec![
            p.threads.to_string(),
            p.rep_ops.len().to_string(),
            thousands(p.ops_per_sec),
            p.ops_ci95.map(thousands).unwrap_or_else(|| "–".into()),
            us_as_ms(p.all.mean_us),
            us_as_ms(p.all.p99_us as f64),
            us_as_ms(p.all.p999_us as f64),
            us_as_ms(p.all.p9999_us as f64),
            p.client_cpu_us_per_op
                .map(|c| format!("{c:.1}"))
                .unwrap_or_else(|| "–".into()),
            p.outcome.failed_cell(),
            p.status(),
        ]);
    }
    doc.table(t);
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
    match &s.bend {
        Some(b) => lines.push(format!(
            "Latency bends at {} threads: p99 {:.1}× the {}-thread figure for {:+.0}% ops/s (rule: p99 > {}× while ops/s < +{}%).",
            b.at,
            b.p99_ratio,
            b.before,
            b.ops_gain_pct,
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

fn bands(s: &StepView) -> (Vec<Band>, Vec<(usize, String)>) {
    let mut kinds: Vec<(usize, String)> = Vec::new();
    let bands = s
        .events
        .iter()
        .map(|e| {
            let kind = match e.kind.as_str() {
                "flush" => 0,
                "compaction" => 1,
                _ => 2,
            };
            let name = if kind == 2 {
                e.kind.clone()
            } else {
                format!("{} (db)", e.kind)
            };
            if !kinds.iter().any(|k| k.0 == kind) {
                kinds.push((kind, name));
            }
            Band {
                x0: e.start_unix_ms as f64,
                x1: e.end_unix_ms.map(|v| v as f64).unwrap_or(s.end_ms),
                kind,
            }
        })
        .collect();
    (bands, kinds)
}

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

fn step_section(doc: &mut Doc, s: &StepView) {
    doc.h(2, s.title.clone());
    let mut facts = vec![format!(
        "Measured {} → {} UTC; trace mode {}{}.",
        crate::svg::clock(s.start_ms),
        crate::svg::clock(s.end_ms),
        s.trace_mode,
        s.trace_note
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default()
    )];
    if !s.events.is_empty() {
        let flushes = s.events.iter().filter(|e| e.kind == "flush").count();
        let comps = s.events.iter().filter(|e| e.kind == "compaction").count();
        facts.push(format!(
            "Database events: {flushes} flushes, {comps} compactions (shaded on the charts)."
        ));
    }
    doc.list(facts);
    if !s.warnings.is_empty() || !s.findings.is_empty() {
        doc.h(3, "Findings");
        doc.list(s.warnings.iter().chain(&s.findings).cloned().collect());
    }
    let (bands, band_legend) = bands(s);
    let range = Some((s.start_ms, s.end_ms.max(s.start_ms + 1000.0)));
    let x_label = "time (UTC, hh:mm:ss)";
    let chart = |title: &str, y: &str| {
        let mut c = LineChart::new(title, x_label, y, XKind::UnixMs);
        c.bands = bands.clone();
        c.band_legend = band_legend.clone();
        c.x_range = range;
        c
    };
    // Client.
    let mut c = chart("Client throughput", "throughput (ops/s)");
    c.series.push(Series {
        name: "ops/s".into(),
        points: s.ops_per_sec.clone(),
        ..Default::default()
    });
    doc.line_chart(c);
    let mut c = chart("Client latency per op (per second)", "latency (ms)");
    for (i, (op, l)) in s.lat_p99_ms.iter().enumerate() {
        c.series.push(Series {
            name: format!("{op} p99"),
            points: l.clone(),
            color: i,
            ..Default::default()
        });
    }
    for (i, (op, l)) in s.lat_mean_ms.iter().enumerate() {
        c.series.push(Series {
            name: format!("{op} avg"),
            points: l.clone(),
            color: i,
            dashed: true,
            ..Default::default()
        });
    }
    doc.line_chart(c);
    // Block IO.
    if !s.io.is_empty() {
        let mut c = chart(
            "Block IO throughput: per-second mean (solid) and busiest slot (dashed)",
            "throughput (MB/s)",
        );
        for (op, l) in &s.io {
            c.series.push(Series {
                name: format!("{op} mean"),
                points: l.mb_s.clone(),
                color: op_color(op),
                ..Default::default()
            });
            c.series.push(Series {
                name: format!("{op} max"),
                points: l.mb_s_max.clone(),
                color: op_color(op),
                dashed: true,
                ..Default::default()
            });
        }
        doc.line_chart(c);
        let mut c = chart("Block IO operations per second", "IOPS (IO/s)");
        for (op, l) in &s.io {
            c.series.push(Series {
                name: op.clone(),
                points: l.iops.clone(),
                color: op_color(op),
                ..Default::default()
            });
        }
        doc.line_chart(c);
        let mut c = chart(
            "Device latency (issue → completion): per-second max (solid) and p99 (dashed)",
            "latency (ms)",
        );
        for (op, l) in &s.io {
            c.series.push(Series {
                name: format!("{op} max"),
                points: l.lat_max_ms.clone(),
                color: op_color(op),
                ..Default::default()
            });
            c.series.push(Series {
                name: format!("{op} p99"),
                points: l.lat_p99_ms.clone(),
                color: op_color(op),
                dashed: true,
                ..Default::default()
            });
        }
        doc.line_chart(c);
        let mut c = chart("Queue depth (requests in flight)", "queue depth (requests)");
        c.series.push(Series {
            name: "mean".into(),
            points: s.qd_mean.clone(),
            color: 0,
            ..Default::default()
        });
        c.series.push(Series {
            name: "max".into(),
            points: s.qd_max.clone(),
            color: 1,
            ..Default::default()
        });
        doc.line_chart(c);
    }
    // System.
    let mut c = chart("CPU (all CPUs)", "CPU time (%)");
    c.series.push(Series {
        name: "busy".into(),
        points: s.cpu_busy.clone(),
        color: 0,
        ..Default::default()
    });
    c.series.push(Series {
        name: "iowait".into(),
        points: s.cpu_iowait.clone(),
        color: 1,
        ..Default::default()
    });
    doc.line_chart(c);
    let mut c = chart("Memory waiting for and under writeback", "memory (MB)");
    c.series.push(Series {
        name: "dirty".into(),
        points: s.dirty_mb.clone(),
        color: 4,
        ..Default::default()
    });
    c.series.push(Series {
        name: "writeback".into(),
        points: s.writeback_mb.clone(),
        color: 6,
        ..Default::default()
    });
    doc.line_chart(c);
    // Per-second summary table: the averages and what hides under them.
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
    // IO summary as in the blog.
    if !s.io_rows.is_empty() {
        doc.h(3, "IO summary");
        let mut t = Table::new(&[
            "op",
            "block size",
            "total GB",
            "% by IO count",
            "% by volume",
            "IOs",
        ])
        .text_columns(&[1]);
        for r in &s.io_rows {
            t.row(vec![
                r.op.clone(),
                r.band.clone(),
                format!("{:.2}", r.gb),
                format!("{:.1}%", r.pct_ios),
                format!("{:.1}%", r.pct_bytes),
                thousands(r.ios as f64),
            ]);
        }
        doc.table(t);
    }
    if !s.size_hists.is_empty() {
        let bins: std::collections::BTreeSet<u64> = s
            .size_hists
            .iter()
            .flat_map(|h| h.by_count_pct.keys().chain(h.by_bytes_pct.keys()).copied())
            .collect();
        let cats: Vec<String> = bins
            .iter()
            .map(|b| format!("≤{}", size_short(*b)))
            .collect();
        for (title, by_bytes) in [
            ("Block sizes by IO count", false),
            ("Block sizes by volume", true),
        ] {
            let groups = s
                .size_hists
                .iter()
                .map(|h| {
                    let m = if by_bytes {
                        &h.by_bytes_pct
                    } else {
                        &h.by_count_pct
                    };
                    (
                        h.op.clone(),
                        bins.iter()
                            .map(|b| m.get(b).copied().unwrap_or(0.0))
                            .collect(),
                    )
                })
                .collect();
            doc.bar_chart(BarChart {
                title: format!("{title} (power-of-two bins)"),
                x_label: "IO size (bytes, upper bound of bin)".into(),
                y_label: if by_bytes {
                    "share of the op's bytes (%)".into()
                } else {
                    "share of the op's IOs (%)".into()
                },
                categories: cats.clone(),
                groups,
            });
        }
        doc.h(3, "Block size histogram");
        let mut headers = vec!["size ≤".to_string()];
        for h in &s.size_hists {
            headers.push(format!("{} % IOs", h.op));
            headers.push(format!("{} % bytes", h.op));
        }
        let hs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&hs);
        for (b, cat) in bins.iter().zip(&cats) {
            let mut row = vec![cat.clone()];
            for h in &s.size_hists {
                row.push(format!(
                    "{:.1}",
                    h.by_count_pct.get(b).copied().unwrap_or(0.0)
                ));
                row.push(format!(
                    "{:.1}",
                    h.by_bytes_pct.get(b).copied().unwrap_or(0.0)
                ));
            }
            t.row(row);
        }
        doc.table(t);
    }
}

/// 4K, 512K, 1M, 2G.
pub fn size_short(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{}G", b >> 30),
        b if b >= 1 << 20 => format!("{}M", b >> 20),
        b if b >= 1 << 10 => format!("{}K", b >> 10),
        b => format!("{b}B"),
    }
}

/// The whole report as a document.
pub fn report_doc(run: &RunData, report: &Report) -> Doc {
    let mut doc = Doc::new(&format!("iodig report: {}", report.run_name));
    header(&mut doc, run, report);
    doc.h(2, "Findings");
    if report.steps.len() > 3 {
        doc.p("Each step's own findings (bursts, queue depth, latency during flushes) are listed in its section below.");
    }
    if report.findings.is_empty() {
        doc.p("No finding passed its rule on this data (see docs/report.md for the rules).");
    } else {
        doc.list(report.findings.clone());
    }
    steps_table(&mut doc, report);
    for s in &report.sweeps {
        sweep_section(&mut doc, s);
    }
    for s in &report.steps {
        step_section(&mut doc, s);
    }
    doc
}
