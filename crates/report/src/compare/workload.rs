//! A workload's comparison, as the briefs lay it out: the runs' curves overlaid; ops/s and
//! average latency against workers on two axes; the wide OPS table (threads | each run's ops/s
//! and p99 | each later run's advantage) over the union of the runs' thread counts, "(not
//! tested)" where a run lacks one; then significance and latency ratios per thread count.

use super::ratio::{
    better, better_with, comparable, interval_cell, lower, lower_with, note, pair_note,
    significance,
};
use super::Runs;
use crate::analysis::findings::capitalise;
use crate::analysis::{Point, WorkloadSweep};
use crate::doc::{thousands, us_as_ms, Doc, Table, NOT_TESTED};
use crate::svg::{AxisSeries, LineChart, Series, TwoAxisChart, XKind};

/// "—": no ratio, as the briefs mark a comparison that cannot be made.
pub(super) const NO_RATIO: &str = "—";

/// The section; its wide OPS table also goes into the terminal summary.
pub(super) fn section(doc: &mut Doc, runs: &Runs, w: &WorkloadSweep, summary: &mut String) {
    doc.h(2, format!("Workload {}", w.workload));
    curves(doc, runs, w);
    workers_chart(doc, runs, w);
    let heading = format!("OPS by thread count ({} latency)", w.op.words());
    doc.h(3, heading.clone());
    let t = wide_table(runs, w);
    summary.push_str(&format!("\n## Workload {}: {heading}\n\n", w.workload));
    summary.push_str(&crate::markdown::table(&t));
    doc.table(t);
    let missing = missing_intervals(runs, w);
    if !missing.is_empty() {
        let p = format!(
            "Ratios without a 95% interval ({}): an interval needs the spread of two or more repetitions of both runs (repetitions = 3 in an experiment file); until then only the per-second Welch test below speaks to significance, and optimistically (successive seconds are not independent).",
            missing.join("; ")
        );
        summary.push_str(&format!("\n{p}\n"));
        doc.p(p);
    }
    doc.h(3, "Ops/s by thread count: significance");
    doc.table(ops_table(runs, w));
    doc.h(
        3,
        format!("{} latency by thread count", capitalise(&w.op.words())),
    );
    doc.table(latency_table(runs, w));
}

/// Overlaid curves, without points whose figures measure failures: p99.99 solid, avg dashed,
/// one colour per run.
fn curves(doc: &mut Doc, runs: &Runs, w: &WorkloadSweep) {
    let mut c = LineChart::new(
        &format!(
            "{}: ops/s vs {} latency, each run (points labelled with threads)",
            w.workload,
            w.op.words()
        ),
        "throughput (ops/s)",
        &format!("{} latency (ms, log scale)", w.op.words()),
        XKind::Number,
    );
    c.y_log = true;
    for (ri, r) in runs.runs.iter().enumerate() {
        let Some(o) = runs.sweep(ri, &w.workload) else {
            continue;
        };
        let labels: Vec<String> = o
            .latency_points()
            .map(|p| format!("{}t", p.threads))
            .collect();
        c.series.push(Series {
            name: format!("{} p99.99", r.name()),
            points: o
                .latency_points()
                .map(|p| (p.ops_per_sec, p.lat.p9999_us as f64 / 1000.0))
                .collect(),
            color: ri,
            markers: true,
            labels: labels.clone(),
            ..Default::default()
        });
        c.series.push(Series {
            name: format!("{} avg", r.name()),
            points: o
                .latency_points()
                .map(|p| (p.ops_per_sec, p.lat.mean_us / 1000.0))
                .collect(),
            color: ri,
            dashed: true,
            markers: true,
            ..Default::default()
        });
    }
    doc.line_chart(c);
}

/// Ops/s (solid, left axis) and average latency (dashed, right axis) against workers, one
/// colour per run, over the union of thread counts; a run's line breaks where it has no point.
fn workers_chart(doc: &mut Doc, runs: &Runs, w: &WorkloadSweep) {
    let threads = runs.thread_union(&w.workload);
    let words = w.op.words();
    let mut c = TwoAxisChart {
        title: format!(
            "{}: ops/s and average {words} latency by workers",
            w.workload
        ),
        x_label: "workers (client threads)".into(),
        left_label: "throughput (ops/s, solid)".into(),
        right_label: format!("average {words} latency (ms, dashed)"),
        categories: threads.iter().map(ToString::to_string).collect(),
        legend: runs
            .runs
            .iter()
            .enumerate()
            .map(|(ri, r)| (r.name(), ri))
            .collect(),
        ..Default::default()
    };
    for (ri, r) in runs.runs.iter().enumerate() {
        let usable = |t: u64| runs.point(ri, &w.workload, t).filter(|p| !p.all_failed);
        c.left.push(AxisSeries {
            name: format!("{} ops/s", r.name()),
            color: ri,
            values: threads
                .iter()
                .map(|&t| usable(t).map(|p| p.ops_per_sec))
                .collect(),
        });
        c.right.push(AxisSeries {
            name: format!("{} avg {words} ms", r.name()),
            color: ri,
            values: threads
                .iter()
                .map(|&t| {
                    usable(t)
                        .filter(|p| p.lat.count > 0)
                        .map(|p| p.lat.mean_us / 1000.0)
                })
                .collect(),
        });
    }
    doc.two_axis_chart(c);
}

/// The briefs' table: one row per thread count of any run; each run's ops/s and p99, each
/// later run's advantage over the baseline (ops/s new ÷ baseline) and its p99 against the
/// baseline's; "(not tested)" where a run has no such step, "—" where no ratio can be made.
fn wide_table(runs: &Runs, w: &WorkloadSweep) -> Table {
    let words = w.op.words();
    let mut headers = vec!["threads".to_string()];
    for (ri, r) in runs.runs.iter().enumerate() {
        let n = r.name();
        headers.push(format!("{n} ops/s"));
        headers.push(format!("{n} {words} p99 ms"));
        if ri > 0 {
            headers.push(format!("{n} advantage"));
            headers.push(format!("{n} {words} p99"));
        }
    }
    let text: Vec<usize> = (0..runs.runs.len())
        .skip(1)
        .flat_map(|ri| {
            // threads, the baseline's two columns, then four per later run.
            let first = 3 + 4 * (ri - 1);
            [first + 2, first + 3]
        })
        .collect();
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&headers).text_columns(&text);
    for threads in runs.thread_union(&w.workload) {
        let base = runs.point(0, &w.workload, threads);
        let mut cells = vec![threads.to_string()];
        for ri in 0..runs.runs.len() {
            let p = runs.point(ri, &w.workload, threads);
            match p {
                Some(p) => {
                    cells.push(thousands(p.ops_per_sec));
                    cells.push(p99_cell(p));
                }
                None => {
                    cells.push(NOT_TESTED.into());
                    cells.push(String::new());
                }
            }
            if ri > 0 {
                let (adv, lat) = match (base, p) {
                    (Some(b), Some(p)) if comparable(b, p) => (
                        better_with(p.ops_per_sec / b.ops_per_sec, &runs.ops_interval(b, p)),
                        if b.lat.count > 0 && p.lat.count > 0 {
                            let l = runs.latency_ratio(b, ri, p, &w.op, p99);
                            lower_with(l.base_us, l.new_us, &l.ci)
                        } else {
                            NO_RATIO.into()
                        },
                    ),
                    (Some(_), Some(_)) => ("– (all failed)".into(), NO_RATIO.into()),
                    _ => (NO_RATIO.into(), NO_RATIO.into()),
                };
                cells.push(adv);
                cells.push(lat);
            }
        }
        t.row(cells);
    }
    t
}

/// A point's p99 of the latency compared ("–" when it measured none of that op).
fn p99_cell(p: &Point) -> String {
    if p.lat.count > 0 {
        us_as_ms(p.lat.p99_us as f64)
    } else {
        "–".into()
    }
}

/// A ratio cell, or why there is none (a side whose operations all failed).
fn ratio(base: &Point, new: &Point, f: impl Fn() -> String) -> String {
    if comparable(base, new) {
        f()
    } else {
        "– (all failed)".into()
    }
}

/// A table with, for every thread count of any run, one row per run: the baseline's `base`
/// cells, each later run's `later` cells against the baseline's point (`None` when the
/// baseline has none), and "(not tested)" for a run without the thread count.
fn per_thread_table(
    runs: &Runs,
    w: &WorkloadSweep,
    headers: &[&str],
    text_columns: &[usize],
    base: impl Fn(&Point) -> Vec<String>,
    later: impl Fn(usize, Option<&Point>, &Point) -> Vec<String>,
) -> Table {
    let mut t = Table::new(headers).text_columns(text_columns);
    let blanks = headers.len().saturating_sub(3);
    for threads in runs.thread_union(&w.workload) {
        let bp = runs.point(0, &w.workload, threads);
        for (ri, r) in runs.runs.iter().enumerate() {
            let mut cells = vec![threads.to_string(), r.name()];
            match (ri, runs.point(ri, &w.workload, threads)) {
                (0, Some(p)) => cells.extend(base(p)),
                (_, Some(p)) => cells.extend(later(ri, bp, p)),
                (_, None) => {
                    cells.push(NOT_TESTED.into());
                    cells.extend((0..blanks).map(|_| String::new()));
                }
            }
            t.row(cells);
        }
    }
    t
}

/// Ops/s per thread count, each later run's with its ratio and whether the difference is
/// significant.
fn ops_table(runs: &Runs, w: &WorkloadSweep) -> Table {
    per_thread_table(
        runs,
        w,
        &[
            "threads",
            "run",
            "ops/s",
            "vs baseline",
            "95% interval",
            "significant",
            "note",
        ],
        &[1, 3, 4, 5, 6],
        |bp| {
            vec![
                thousands(bp.ops_per_sec),
                "baseline".into(),
                String::new(),
                String::new(),
                note(bp),
            ]
        },
        |_, bp, op| {
            let Some(bp) = bp else {
                return vec![
                    thousands(op.ops_per_sec),
                    format!("{NO_RATIO} (baseline not tested)"),
                    String::new(),
                    String::new(),
                    note(op),
                ];
            };
            let r = op.ops_per_sec / bp.ops_per_sec;
            vec![
                thousands(op.ops_per_sec),
                ratio(bp, op, || better(r)),
                if comparable(bp, op) {
                    interval_cell(&runs.ops_interval(bp, op), r < 1.0)
                } else {
                    "n/a".into()
                },
                if comparable(bp, op) {
                    significance(bp, op)
                } else {
                    "n/a".into()
                },
                pair_note(bp, op),
            ]
        },
    )
}

/// Avg, p99 and p99.99 of the latency compared per thread count, each later run's with its
/// ratio.
fn latency_table(runs: &Runs, w: &WorkloadSweep) -> Table {
    per_thread_table(
        runs,
        w,
        &[
            "threads",
            "run",
            "avg ms",
            "avg",
            "p99 ms",
            "p99",
            "p99 95% interval",
            "p99.99 ms",
            "p99.99",
        ],
        &[1, 3, 5, 6, 8],
        |bp| {
            let b = &bp.lat;
            vec![
                us_as_ms(b.mean_us),
                "baseline".into(),
                us_as_ms(b.p99_us as f64),
                "baseline".into(),
                String::new(),
                us_as_ms(b.p9999_us as f64),
                "baseline".into(),
            ]
        },
        |ri, bp, op| {
            let n = &op.lat;
            let r = |f: &dyn Fn(&iodig_model::SeriesSummary) -> f64| match bp {
                Some(bp) => ratio(bp, op, || lower(f(&bp.lat), f(n))),
                None => NO_RATIO.into(),
            };
            // The p99 ratio and its interval from one estimator (the repetitions' means when
            // there are some).
            let (p99_ratio, interval) = match bp {
                Some(bp) if comparable(bp, op) && bp.lat.count > 0 && n.count > 0 => {
                    let l = runs.latency_ratio(bp, ri, op, &w.op, p99);
                    (
                        lower(l.base_us, l.new_us),
                        interval_cell(&l.ci, l.base_us < l.new_us),
                    )
                }
                _ => (r(&|s| s.p99_us as f64), String::new()),
            };
            vec![
                us_as_ms(n.mean_us),
                r(&|s| s.mean_us),
                us_as_ms(n.p99_us as f64),
                p99_ratio,
                interval,
                us_as_ms(n.p9999_us as f64),
                r(&|s| s.p9999_us as f64),
            ]
        },
    )
}

/// A series' p99 in µs, the latency the wide table compares.
fn p99(s: &iodig_model::SeriesSummary) -> f64 {
    s.p99_us as f64
}

/// Why the wide table's ratios at some thread counts carry no interval, each reason once.
fn missing_intervals(runs: &Runs, w: &WorkloadSweep) -> Vec<String> {
    let mut why = Vec::new();
    for threads in runs.thread_union(&w.workload) {
        let Some(b) = runs.point(0, &w.workload, threads) else {
            continue;
        };
        for (_, p) in runs.later_points(&w.workload, threads) {
            if let Some(Err(e)) = p
                .filter(|p| comparable(b, p))
                .map(|p| runs.ops_interval(b, p))
            {
                let e = e.trim_start_matches("no interval: ").to_string();
                if !why.contains(&e) {
                    why.push(e);
                }
            }
        }
    }
    why
}
