//! `iodig compare`: the briefs' advantage tables between runs. Every later run is compared with
//! the first (the baseline): ops/s per workload × thread count and its ratio ("1.5X better"), the
//! max-performance ratio per workload, latency ratios ("7.0X lower"), overlaid curves, Welch
//! tests where repetitions (or per-second samples) allow, and the regression check.

use crate::analysis::{sweeps, Point, WorkloadSweep};
use crate::data::{load_run, RunData};
use crate::doc::{thousands, us_as_ms, Doc, Table};
use crate::stat::welch;
use crate::svg::{LineChart, Series, XKind};
use anyhow::{bail, Result};
use iodig_model::fsio::write_atomic;
use std::path::PathBuf;

pub const HTML: &str = "compare.html";
pub const MARKDOWN: &str = "compare.md";
/// Significance level of the Welch tests.
pub const ALPHA: f64 = 0.05;

#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The baseline first, then the runs compared with it.
    pub runs: Vec<PathBuf>,
    pub out: PathBuf,
    /// Percent by which a later run may be worse (lower ops/s or higher p99) before it counts
    /// as a regression.
    pub fail_on_regression_pct: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct CompareOutput {
    pub files: Vec<PathBuf>,
    /// The advantage tables in Markdown, for the terminal.
    pub summary_markdown: String,
    /// One sentence per regression beyond the threshold (empty without a threshold).
    pub regressions: Vec<String>,
}

/// "1.5X better" / "1.2X worse" for a higher-is-better ratio new/base.
pub fn better(ratio: f64) -> String {
    if !ratio.is_finite() || ratio <= 0.0 {
        "–".into()
    } else if ratio >= 1.0 {
        format!("{}X better", x(ratio))
    } else {
        format!("{}X worse", x(1.0 / ratio))
    }
}

/// A ratio ≥ 1 as the briefs print it ("1.5"), with two decimals under 1.1 so that small
/// differences do not all read "1.0X".
fn x(r: f64) -> String {
    if r < 1.1 {
        format!("{r:.2}")
    } else {
        format!("{r:.1}")
    }
}

/// "7.0X lower" / "1.3X higher" for latencies base/new.
pub fn lower(base_us: f64, new_us: f64) -> String {
    if base_us <= 0.0 || new_us <= 0.0 {
        "–".into()
    } else if base_us >= new_us {
        format!("{}X lower", x(base_us / new_us))
    } else {
        format!("{}X higher", x(new_us / base_us))
    }
}

/// Welch test of two points: on repetition throughputs when both have two or more, else on
/// per-second throughput samples (autocorrelated, so the p-value is optimistic; said so).
pub fn significance(a: &Point, b: &Point) -> String {
    let (w, basis) = if a.rep_ops.len() >= 2 && b.rep_ops.len() >= 2 {
        (welch(&a.rep_ops, &b.rep_ops), "repetitions")
    } else {
        (welch(&a.second_ops, &b.second_ops), "per-second")
    };
    match w {
        Some(w) if w.p < ALPHA => format!("yes (p={}, {basis})", fmt_p(w.p)),
        Some(w) => format!("no (p={}, {basis})", fmt_p(w.p)),
        None => "n/a".into(),
    }
}

fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        "<0.001".into()
    } else {
        format!("{p:.3}")
    }
}

fn find<'a>(s: &'a [WorkloadSweep], workload: &str) -> Option<&'a WorkloadSweep> {
    s.iter().find(|w| w.workload == workload)
}

/// Builds the comparison document and the regressions.
pub fn compare_doc(runs: &[RunData], fail_pct: Option<f64>) -> (Doc, String, Vec<String>) {
    let all: Vec<Vec<WorkloadSweep>> = runs.iter().map(sweeps).collect();
    let base = &runs[0];
    let mut doc = Doc::new(&format!(
        "iodig compare: {} vs {}",
        base.name(),
        runs[1..]
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut facts = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let e = &r.doc.environment;
        let storage = e
            .storage
            .as_ref()
            .map(|s| {
                format!(
                    "{} {} on {}",
                    s.device.clone().unwrap_or_else(|| s.source.clone()),
                    s.model.clone().unwrap_or_default(),
                    s.fs_type
                )
            })
            .unwrap_or_else(|| "storage unknown".into());
        facts.push((
            if i == 0 {
                format!("{} (baseline)", r.name())
            } else {
                r.name()
            },
            format!(
                "{} · {} · kernel {} · {}",
                r.path.display(),
                r.doc.config.db,
                e.kernel,
                storage
            ),
        ));
    }
    doc.blocks.push(crate::doc::Block::Facts(facts));
    doc.p("Ratios compare each run with the baseline (the first run): ops/s as new ÷ baseline (\"better\" when higher), latency as baseline ÷ new (\"lower\" when the new run waits less).");

    let mut summary = String::new();
    let mut regressions = Vec::new();
    // Maximum performance per workload.
    doc.h(2, "Maximum performance by workload");
    let mut t = Table::new(&[
        "workload",
        "run",
        "max ops/s",
        "at threads",
        "vs baseline",
        "p99.99 ms at max",
        "p99.99 vs baseline",
    ])
    .text_columns(&[1, 4, 6]);
    for w in &all[0] {
        let bp = &w.points[w.peak];
        t.row(vec![
            w.workload.clone(),
            base.name(),
            thousands(bp.ops_per_sec),
            bp.threads.to_string(),
            "baseline".into(),
            us_as_ms(bp.all.p9999_us as f64),
            "baseline".into(),
        ]);
        for (ri, r) in runs.iter().enumerate().skip(1) {
            let Some(o) = find(&all[ri], &w.workload) else {
                continue;
            };
            let op = &o.points[o.peak];
            t.row(vec![
                w.workload.clone(),
                r.name(),
                thousands(op.ops_per_sec),
                op.threads.to_string(),
                better(op.ops_per_sec / bp.ops_per_sec),
                us_as_ms(op.all.p9999_us as f64),
                lower(bp.all.p9999_us as f64, op.all.p9999_us as f64),
            ]);
        }
    }
    summary.push_str("## Maximum performance by workload\n\n");
    summary.push_str(&crate::markdown::table(&t));
    doc.table(t);

    for w in &all[0] {
        doc.h(2, format!("Workload {}", w.workload));
        // Overlaid curves.
        let mut c = LineChart::new(
            &format!(
                "{}: ops/s vs latency, each run (points labelled with threads)",
                w.workload
            ),
            "throughput (ops/s)",
            "latency (ms, log scale)",
            XKind::Number,
        );
        c.y_log = true;
        for (ri, r) in runs.iter().enumerate() {
            let Some(o) = find(&all[ri], &w.workload) else {
                continue;
            };
            let labels: Vec<String> = o.points.iter().map(|p| format!("{}t", p.threads)).collect();
            c.series.push(Series {
                name: format!("{} p99.99", r.name()),
                points: o
                    .points
                    .iter()
                    .map(|p| (p.ops_per_sec, p.all.p9999_us as f64 / 1000.0))
                    .collect(),
                color: ri,
                markers: true,
                labels: labels.clone(),
                ..Default::default()
            });
            c.series.push(Series {
                name: format!("{} avg", r.name()),
                points: o
                    .points
                    .iter()
                    .map(|p| (p.ops_per_sec, p.all.mean_us / 1000.0))
                    .collect(),
                color: ri,
                dashed: true,
                markers: true,
                ..Default::default()
            });
        }
        doc.line_chart(c);
        // Ops/s per thread count.
        let mut t = Table::new(&["threads", "run", "ops/s", "vs baseline", "significant"])
            .text_columns(&[1, 3, 4]);
        let mut lt = Table::new(&[
            "threads",
            "run",
            "avg ms",
            "avg",
            "p99 ms",
            "p99",
            "p99.99 ms",
            "p99.99",
        ])
        .text_columns(&[1, 3, 5, 7]);
        for bp in &w.points {
            t.row(vec![
                bp.threads.to_string(),
                base.name(),
                thousands(bp.ops_per_sec),
                "baseline".into(),
                String::new(),
            ]);
            lt.row(vec![
                bp.threads.to_string(),
                base.name(),
                us_as_ms(bp.all.mean_us),
                "baseline".into(),
                us_as_ms(bp.all.p99_us as f64),
                "baseline".into(),
                us_as_ms(bp.all.p9999_us as f64),
                "baseline".into(),
            ]);
            for (ri, r) in runs.iter().enumerate().skip(1) {
                let Some(o) = find(&all[ri], &w.workload) else {
                    continue;
                };
                let Some(op) = o.points.iter().find(|p| p.threads == bp.threads) else {
                    continue;
                };
                t.row(vec![
                    bp.threads.to_string(),
                    r.name(),
                    thousands(op.ops_per_sec),
                    better(op.ops_per_sec / bp.ops_per_sec),
                    significance(bp, op),
                ]);
                lt.row(vec![
                    bp.threads.to_string(),
                    r.name(),
                    us_as_ms(op.all.mean_us),
                    lower(bp.all.mean_us, op.all.mean_us),
                    us_as_ms(op.all.p99_us as f64),
                    lower(bp.all.p99_us as f64, op.all.p99_us as f64),
                    us_as_ms(op.all.p9999_us as f64),
                    lower(bp.all.p9999_us as f64, op.all.p9999_us as f64),
                ]);
                if let Some(pct) = fail_pct {
                    let drop = (1.0 - op.ops_per_sec / bp.ops_per_sec) * 100.0;
                    if drop > pct {
                        regressions.push(format!(
                            "{} {} × {} threads: ops/s {:.1}% lower than {} ({} vs {}), over the {pct}% limit",
                            r.name(),
                            w.workload,
                            bp.threads,
                            drop,
                            base.name(),
                            thousands(op.ops_per_sec),
                            thousands(bp.ops_per_sec)
                        ));
                    }
                    if bp.all.p99_us > 0 {
                        let rise = (op.all.p99_us as f64 / bp.all.p99_us as f64 - 1.0) * 100.0;
                        if rise > pct {
                            regressions.push(format!(
                                "{} {} × {} threads: p99 {:.1}% higher than {} ({} ms vs {} ms), over the {pct}% limit",
                                r.name(),
                                w.workload,
                                bp.threads,
                                rise,
                                base.name(),
                                us_as_ms(op.all.p99_us as f64),
                                us_as_ms(bp.all.p99_us as f64)
                            ));
                        }
                    }
                }
            }
        }
        doc.h(3, "Ops/s by thread count");
        summary.push_str(&format!(
            "\n## Workload {}: ops/s by thread count\n\n",
            w.workload
        ));
        summary.push_str(&crate::markdown::table(&t));
        doc.table(t);
        doc.h(3, "Latency by thread count (all ops)");
        doc.table(lt);
    }
    for (ri, r) in runs.iter().enumerate().skip(1) {
        for w in &all[ri] {
            if find(&all[0], &w.workload).is_none() {
                doc.p(format!(
                    "{} ran workload {} which the baseline did not; it is not compared.",
                    r.name(),
                    w.workload
                ));
            }
        }
    }
    if let Some(pct) = fail_pct {
        doc.h(
            2,
            format!("Regression check (limit {pct}% on ops/s and p99)"),
        );
        if regressions.is_empty() {
            doc.p("No run is worse than the baseline beyond the limit.");
        } else {
            doc.list(regressions.clone());
        }
    }
    (doc, summary, regressions)
}

/// Reads the runs and writes compare.html and compare.md into `opts.out`.
pub fn write_compare(opts: &CompareOptions) -> Result<CompareOutput> {
    if opts.runs.len() < 2 {
        bail!(
            "compare needs at least two run directories (the baseline first), got {}",
            opts.runs.len()
        );
    }
    let runs = opts
        .runs
        .iter()
        .map(|p| load_run(p))
        .collect::<Result<Vec<_>>>()?;
    if runs[0].run_steps().next().is_none() {
        bail!(
            "{}: the baseline has no run steps to compare",
            opts.runs[0].display()
        );
    }
    let (doc, summary, regressions) = compare_doc(&runs, opts.fail_on_regression_pct);
    std::fs::create_dir_all(&opts.out).map_err(|e| {
        anyhow::anyhow!(
            "--out {}: cannot create the directory ({e}); choose a writable directory",
            opts.out.display()
        )
    })?;
    let mut files = Vec::new();
    for (name, text) in [
        (HTML, crate::html::render(&doc)),
        (MARKDOWN, crate::markdown::render(&doc)),
    ] {
        let p = opts.out.join(name);
        write_atomic(&p, text.as_bytes())?;
        files.push(p);
    }
    Ok(CompareOutput {
        files,
        summary_markdown: summary,
        regressions,
    })
}
