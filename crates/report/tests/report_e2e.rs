//! End to end: a generated run directory goes through `write_report`, and the report's numbers
//! are checked against run.json and the step histograms; the Markdown is snapshotted
//! (tests/snapshots/report_e2e__report-small.snap, with insta).

mod support;

use iodig_model::RunDoc;
use iodig_report::doc::{thousands, us_as_ms};
use iodig_report::{write_report, write_report_with, LatencyOp, ReportOptions};
use iodig_stats::SeriesSet;
use std::path::Path;
use support::fixture::{generate, FixtureSpec};

fn small_spec() -> FixtureSpec {
    FixtureSpec {
        workloads: vec!["workloada".into(), "workloadc".into()],
        threads: vec![8, 32, 128],
        secs: 20,
        nodes: 1,
        io_events_per_step: 5_000,
        latency_samples_per_step: 2_000,
        flush_every_secs: 6,
        ..Default::default()
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn report_numbers_match_run_json() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let doc: RunDoc = generate(&small_spec(), &dir).unwrap();
    let out = write_report(&dir).unwrap();
    assert_eq!(out.files.len(), 7);
    let md = read(&dir.join("report.md"));
    let mut all_ops_rows = Vec::new();
    for s in &doc.steps {
        // Each step's throughput appears in its workload's OPS table row.
        let row = format!(
            "| {} | 1 | {} |",
            s.threads,
            thousands(s.throughput_ops_per_sec)
        );
        assert!(md.contains(&row), "missing {row:?} for step {}", s.index);
        // Per-op latency rows carry run.json's figures.
        for (name, v) in &s.series {
            let row = format!(
                "| {} | {name} | {} | {} | {} | {} |",
                s.threads,
                thousands(v.count as f64),
                us_as_ms(v.mean_us),
                us_as_ms(v.p50_us as f64),
                us_as_ms(v.p99_us as f64)
            );
            assert!(md.contains(&row), "missing {row:?}");
        }
        // The OPS table shows READ latency by default, the READ histogram's own percentiles;
        // with --op all, the exact merge of the step's histograms.
        let h: iodig_model::StepHistograms =
            serde_json::from_str(&read(&dir.join(&s.dir).join("histograms.json"))).unwrap();
        let set = SeriesSet::from_encoded(&h.series).unwrap();
        let mut all = iodig_stats::new_histogram();
        let mut reads = iodig_stats::new_histogram();
        for (id, hist) in set.histograms() {
            all.add(hist).unwrap();
            if iodig_stats::series_name(id) == "READ" {
                reads.add(hist).unwrap();
            }
        }
        let ops_row = |h: &hdrhistogram::Histogram<u64>| {
            format!(
                "| {} | 1 | {} | – | {} | {} |",
                s.threads,
                thousands(s.throughput_ops_per_sec),
                us_as_ms(h.mean()),
                us_as_ms(h.value_at_quantile(0.99) as f64)
            )
        };
        assert!(
            md.contains(&ops_row(&reads)),
            "{} not in report",
            ops_row(&reads)
        );
        assert!(md.contains("OPS by thread count (read latency)"));
        assert!(md.contains(&format!(
            " | {} | ",
            us_as_ms(reads.value_at_quantile(0.9999) as f64)
        )));
        all_ops_rows.push(ops_row(&all));
    }
    write_report_with(
        &dir,
        &ReportOptions {
            op: Some(LatencyOp::All),
        },
    )
    .unwrap();
    let md_all = read(&dir.join("report.md"));
    assert!(md_all.contains("OPS by thread count (all ops latency)"));
    for row in &all_ops_rows {
        assert!(md_all.contains(row), "{row} not in the --op all report");
    }
    write_report(&dir).unwrap();
    // The IO summary's GB equal the trace totals.
    let trace = iodig_model::series::read_trace(&dir.join(&doc.steps[0].dir))
        .unwrap()
        .unwrap();
    let (_, read_bytes) = trace.op_totals("read");
    assert!(
        md.contains(&format!(
            "| read | 100% 0–4 KiB | {:.2} |",
            read_bytes as f64 / 1e9
        )),
        "read row"
    );
    // CSV: one ALL row per workload × threads with run.json's throughput.
    let csv = read(&dir.join("report-ops.csv"));
    for s in &doc.steps {
        let prefix = format!(
            "{},{},1,{},{:.3},,ALL,",
            s.workload, s.threads, s.index, s.throughput_ops_per_sec
        );
        assert!(
            csv.lines().any(|l| l.starts_with(&prefix)),
            "csv row {prefix}"
        );
    }
    let client = read(&dir.join("report-client.csv"));
    assert_eq!(
        client.lines().count(),
        1 + doc.steps.iter().map(|s| 20 * s.series.len()).sum::<usize>()
    );
    assert!(read(&dir.join("report-io.csv")).lines().count() > 100);
}

#[test]
fn html_is_self_contained_with_labelled_charts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    generate(&small_spec(), &dir).unwrap();
    write_report(&dir).unwrap();
    let html = read(&dir.join("report.html"));
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(!html.contains("<script"), "no JavaScript");
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "no external resources"
    );
    // 2 sweep charts + per step (6 steps): 2 client, 4 IO, 2 system, 2 size histograms, and a
    // latency heat map per op with IO (reads and writes in every step).
    let heat_maps = html
        .matches(r#"aria-label="Device latency of every "#)
        .count();
    assert!(heat_maps >= 6 * 2, "{heat_maps} heat maps");
    // The front page draws one chart per headline that has one (a sweep's curve, a step's
    // IO), and the size mix as a table.
    let run = iodig_report::data::load_run(&dir).unwrap();
    let report = iodig_report::analysis::analyse(&run);
    use iodig_report::analysis::headlines::Topic;
    let mut sweeps_drawn: Vec<usize> = report.headlines.iter().filter_map(|h| h.sweep).collect();
    sweeps_drawn.dedup();
    let headline_charts = report
        .headlines
        .iter()
        .filter(|h| h.step.is_some())
        .filter(|h| !matches!(h.topic, Topic::SizeMix | Topic::NotStorageBound))
        .count()
        + sweeps_drawn.len();
    assert!(headline_charts >= 1, "{:?}", report.headlines);
    // The client's latency with its slowest seconds circled, when a step has any.
    let slow_seconds_chart = usize::from(report.steps.iter().any(|s| !s.slow_seconds.is_empty()));
    assert_eq!(
        html.matches("<svg ").count(),
        headline_charts + 2 + 6 * 10 + heat_maps + slow_seconds_chart
    );
    for svg in html.split("<svg ").skip(1) {
        let svg = &svg[..svg.find("</svg>").unwrap()];
        assert!(
            svg.contains("font-weight=\"bold\""),
            "every chart has a title"
        );
        assert!(svg.contains("rotate(-90)"), "every chart has a y label");
        assert!(
            svg.contains('(') && svg.contains(')'),
            "axis labels carry units"
        );
    }
    for label in [
        "throughput (ops/s)",
        "latency (ms, log scale)",
        "throughput (MB/s)",
        "IOPS (IO/s)",
        "queue depth (requests)",
        "CPU time (%)",
        "memory (MB)",
        "time (UTC, hh:mm:ss)",
        "flush (db)",
    ] {
        assert!(html.contains(label), "{label}");
    }
}

#[test]
fn markdown_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run-small");
    let spec = FixtureSpec {
        workloads: vec!["workloadc".into()],
        threads: vec![16, 64, 128],
        secs: 6,
        nodes: 1,
        io_events_per_step: 2_000,
        latency_samples_per_step: 600,
        flush_every_secs: 3,
        ..Default::default()
    };
    generate(&spec, &dir).unwrap();
    write_report(&dir).unwrap();
    let md = read(&dir.join("report.md"));
    // insta compares with trailing whitespace trimmed; the document ends with one blank line.
    assert!(
        md.ends_with("|\n\n") && !md.ends_with("\n\n\n"),
        "report.md should end with a table row and one blank line"
    );
    // `cargo insta review` (or INSTA_UPDATE=always) accepts a change.
    insta::assert_snapshot!("report-small", md);
}

#[test]
fn bad_input_names_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let e = format!("{:#}", write_report(&missing).unwrap_err());
    assert!(
        e.contains("nope") && e.contains("no such run directory"),
        "{e}"
    );
    let e = format!("{:#}", write_report(tmp.path()).unwrap_err());
    assert!(
        e.contains(&tmp.path().display().to_string()) && e.contains("not a run directory"),
        "{e}"
    );
    let dir = tmp.path().join("future");
    generate(
        &FixtureSpec {
            secs: 3,
            threads: vec![8],
            io_events_per_step: 100,
            ..Default::default()
        },
        &dir,
    )
    .unwrap();
    let p = dir.join("run.json");
    let text = read(&p).replacen(
        &format!("\"schema_version\": {}", iodig_model::SCHEMA_VERSION),
        "\"schema_version\": 99",
        1,
    );
    std::fs::write(&p, text).unwrap();
    let e = format!("{:#}", write_report(&dir).unwrap_err());
    assert!(
        e.contains("run.json") && e.contains("schema version 99"),
        "{e}"
    );
}

#[test]
fn report_without_trace_events_or_histograms_still_renders() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bare");
    let spec = FixtureSpec {
        threads: vec![8, 16],
        secs: 4,
        io_events_per_step: 0,
        flush_every_secs: 0,
        with_histograms: false,
        ..Default::default()
    };
    generate(&spec, &dir).unwrap();
    write_report(&dir).unwrap();
    let md = read(&dir.join("report.md"));
    assert!(md.contains("count-weighted means"), "approximation is said");
    assert!(!md.contains("IO summary"));
}

#[test]
fn many_cpus_are_kept_as_their_spread_and_the_report_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cpus96");
    let doc = generate(
        &FixtureSpec {
            threads: vec![8],
            secs: 5,
            io_events_per_step: 500,
            cpus: 96,
            per_cpu_samples: 96,
            ..Default::default()
        },
        &dir,
    )
    .unwrap();
    let step = dir.join(&doc.steps[0].dir);
    let sys = iodig_model::series::read_sys(&step).unwrap().unwrap();
    assert!(sys.per_cpu_summarised.unwrap().contains("96 CPUs"));
    // The fixture's CPU 3 runs at 95 % user: the busiest of every sample.
    for s in &sys.samples {
        let spread = s.cpu_spread.unwrap();
        assert!(s.per_cpu.is_empty() && spread.busiest_cpu == 3, "{s:?}");
    }
    write_report(&dir).unwrap();
    let md = read(&dir.join("report.md"));
    assert!(
        md.contains("busiest CPU") && md.contains("per-CPU samples summarised for 96 CPUs"),
        "{md}"
    );
}
