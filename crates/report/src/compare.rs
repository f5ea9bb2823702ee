//! `iodig compare`: the briefs' advantage tables between runs. Every later run is compared with
//! the first (the baseline): ops/s per workload × thread count and its ratio ("1.5X better"), the
//! max-performance ratio per workload, latency ratios ("7.0X lower"), overlaid curves, Welch
//! tests where repetitions (or per-second samples) allow, and the regression check. What makes
//! runs unlike (target rate, dataset, workload, database, interrupted or all-failed steps) is
//! said before any ratio, and steps whose operations all failed are never a term of one.

use crate::analysis::{steps_list, sweeps, Point, WorkloadSweep};
use crate::data::{load_run, RunData};
use crate::doc::{distinct, target_rate, thousands, us_as_ms, Doc, Table};
use crate::outcome::Outcome;
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
    /// Points the regression check gave no verdict on, with why (empty without a threshold).
    pub unchecked: Vec<String>,
    /// How the runs differ and which steps are partial or failed (also in `summary_markdown`).
    pub caveats: Vec<String>,
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

/// The dataset's properties: another value loads other data.
const DATASET_KEYS: [&str; 12] = iodig_model::props::DATASET_PROPERTIES;
/// Properties said elsewhere (target, database) or meant to vary (threads, seed).
const IGNORED_KEYS: [&str; 4] = ["target", "threadcount", "db", "seed"];

/// "5000 in a, 20000 in b" when the runs do not all agree on `value`.
fn differing(runs: &[RunData], value: impl Fn(&RunData) -> String) -> Option<String> {
    let values: Vec<String> = runs.iter().map(value).collect();
    if values.iter().all(|v| *v == values[0]) {
        return None;
    }
    Some(
        runs.iter()
            .zip(&values)
            .map(|(r, v)| format!("{v} in {}", r.name()))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// "recordcount 5000 in a, 20000 in b" for each of `keys` the runs disagree on.
fn property_differences<'a>(
    runs: &[RunData],
    keys: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    keys.into_iter()
        .filter_map(|k| {
            differing(runs, |r| {
                r.doc
                    .config
                    .properties
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| "unset".into())
            })
            .map(|d| format!("{k} {d}"))
        })
        .collect()
}

/// The target rate(s) the run's measured steps ran at.
fn run_targets(r: &RunData) -> String {
    let t = distinct(
        r.run_steps()
            .map(|s| target_rate(s.summary.target_ops_per_sec)),
    );
    if t.is_empty() {
        target_rate(r.doc.config.target_ops_per_sec)
    } else {
        t.join(", ")
    }
}

/// What the reader must weigh the ratios against: how the runs differ, and the steps whose
/// figures are partial (interrupted) or measure failures (no operation succeeded).
fn caveats(runs: &[RunData], all: &[Vec<WorkloadSweep>]) -> Vec<String> {
    let mut c = Vec::new();
    if let Some(d) = differing(runs, |r| r.doc.config.db.clone()) {
        c.push(format!("Databases differ: {d}."));
    }
    if let Some(d) = differing(runs, run_targets) {
        c.push(format!(
            "Target rates differ: {d}. A target caps ops/s, so ratios against another rate do not compare capacity; thread counts whose targets differ are not checked for regressions."
        ));
    }
    if let Some(d) = differing(runs, |r| {
        distinct(r.run_steps().map(|s| s.summary.workload.as_str())).join(" + ")
    }) {
        c.push(format!(
            "Workloads differ: {d}; only the baseline's workloads are compared."
        ));
    }
    let dataset = property_differences(runs, DATASET_KEYS);
    if !dataset.is_empty() {
        c.push(format!(
            "Dataset properties differ: {}. Another dataset changes what is cached and what reaches the device: the ratios compare different data.",
            dataset.join("; ")
        ));
    }
    let said: Vec<&str> = DATASET_KEYS.iter().chain(&IGNORED_KEYS).copied().collect();
    let others = distinct(
        runs.iter()
            .flat_map(|r| r.doc.config.properties.keys())
            .map(String::as_str)
            .filter(|k| !said.contains(k)),
    );
    let others = property_differences(runs, others);
    if !others.is_empty() {
        c.push(format!(
            "Workload and other properties differ: {}. The op mix, key choice or settings differ: the ratios compare different work.",
            others.join("; ")
        ));
    }
    for r in runs {
        if r.doc.status != "completed" {
            c.push(format!(
                "{} ended {} (not completed): steps it did not run are missing from the comparison.",
                r.name(),
                r.doc.status
            ));
        }
        let interrupted: Vec<String> = r
            .steps
            .iter()
            .filter(|s| s.summary.interrupted)
            .map(|s| s.label())
            .collect();
        if !interrupted.is_empty() {
            c.push(format!(
                "{}: {} ended early (interrupted): its figures cover part of the step; marked in the tables and not checked for regressions.",
                r.name(),
                interrupted.join(", ")
            ));
        }
        let failed: Vec<(String, Outcome)> = r
            .steps
            .iter()
            .map(|s| (s.label(), Outcome::of(&s.summary)))
            .filter(|(_, o)| o.all_failed())
            .collect();
        if !failed.is_empty() {
            c.push(format!(
                "{}: no operation of {} succeeded ({}): left out of the ratios and peaks.",
                r.name(),
                failed
                    .iter()
                    .map(|(l, _)| l.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                Outcome::merged(failed.iter().map(|(_, o)| o)).failure_list()
            ));
        }
    }
    for (ri, r) in runs.iter().enumerate().skip(1) {
        for w in &all[0] {
            let Some(o) = find(&all[ri], &w.workload) else {
                continue;
            };
            let missing: Vec<String> = w
                .points
                .iter()
                .filter(|p| !o.points.iter().any(|q| q.threads == p.threads))
                .map(|p| p.threads.to_string())
                .collect();
            if !missing.is_empty() {
                c.push(format!(
                    "{} has no {} step at {} threads, which the baseline ran: not compared.",
                    r.name(),
                    w.workload,
                    missing.join(", ")
                ));
            }
        }
    }
    c
}

/// Ratios only between points whose operations succeeded.
fn comparable(base: &Point, new: &Point) -> bool {
    !base.all_failed && !new.all_failed
}

/// A point's caveats for the tables' note column ("" when none).
fn note(p: &Point) -> String {
    p.caveats().join("; ")
}

/// A later run's point's note: its caveats and a target that differs from the baseline's.
fn pair_note(base: &Point, new: &Point) -> String {
    let mut n = new.caveats();
    if base.all_failed {
        n.push("baseline all failed".into());
    }
    if base.target_ops_per_sec != new.target_ops_per_sec {
        n.push(format!(
            "target {} (baseline {})",
            target_rate(new.target_ops_per_sec),
            target_rate(base.target_ops_per_sec)
        ));
    }
    n.join("; ")
}

/// What the regression check does with a later run's point.
#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    /// Compare ops/s and p99 with the limit.
    Check,
    /// A regression whatever the limit, with why.
    Regression(String),
    /// No verdict either way, with why.
    Skip(String),
}

/// Points whose figures cannot be compared get no ratio-based verdict: all failures in the
/// baseline leave nothing to compare with; all failures in the later run are a regression (a
/// check must not pass a run that did no work); partial (interrupted) steps and other target
/// rates are said and skipped.
fn verdict(base: &Point, new: &Point) -> Verdict {
    if base.all_failed {
        return Verdict::Skip(
            "no operation of the baseline's succeeded, so there is nothing to compare with".into(),
        );
    }
    if new.all_failed {
        return Verdict::Regression(format!(
            "none of its operations succeeded ({}) while the baseline's did",
            new.outcome.failure_list()
        ));
    }
    let mut partial = Vec::new();
    if !base.interrupted.is_empty() {
        partial.push(format!("the baseline's {}", steps_list(&base.interrupted)));
    }
    if !new.interrupted.is_empty() {
        partial.push(format!("its {}", steps_list(&new.interrupted)));
    }
    let mut why = Vec::new();
    if !partial.is_empty() {
        why.push(format!(
            "{} ended early (interrupted), so the figures cover part of a step",
            partial.join(" and ")
        ));
    }
    if base.target_ops_per_sec != new.target_ops_per_sec {
        why.push(format!(
            "its target rate ({}) is not the baseline's ({})",
            target_rate(new.target_ops_per_sec),
            target_rate(base.target_ops_per_sec)
        ));
    }
    if !why.is_empty() {
        return Verdict::Skip(why.join("; "));
    }
    Verdict::Check
}

/// Ops/s drop and p99 rise of `new` against `base` beyond `pct`, as sentences after the point's name.
fn limit_regressions(base: &Point, new: &Point, base_name: &str, pct: f64) -> Vec<String> {
    let mut out = Vec::new();
    let drop = (1.0 - new.ops_per_sec / base.ops_per_sec) * 100.0;
    if drop > pct {
        out.push(format!(
            "ops/s {drop:.1}% lower than {base_name} ({} vs {}), over the {pct}% limit",
            thousands(new.ops_per_sec),
            thousands(base.ops_per_sec)
        ));
    }
    if base.all.p99_us > 0 {
        let rise = (new.all.p99_us as f64 / base.all.p99_us as f64 - 1.0) * 100.0;
        if rise > pct {
            out.push(format!(
                "p99 {rise:.1}% higher than {base_name} ({} ms vs {} ms), over the {pct}% limit",
                us_as_ms(new.all.p99_us as f64),
                us_as_ms(base.all.p99_us as f64)
            ));
        }
    }
    out
}

/// The comparison of runs, for the files and the terminal.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub doc: Doc,
    /// The caveats and advantage tables in Markdown.
    pub summary: String,
    pub regressions: Vec<String>,
    /// Points the regression check gave no verdict on, with why (empty without a limit).
    pub unchecked: Vec<String>,
    pub caveats: Vec<String>,
}

fn md_list(title: &str, items: &[String]) -> String {
    let mut o = format!("## {title}\n\n");
    for i in items {
        o.push_str(&format!("- {i}\n"));
    }
    o.push('\n');
    o
}

/// Builds the comparison document, the caveats and the regression check.
pub fn compare_doc(runs: &[RunData], fail_pct: Option<f64>) -> Comparison {
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
                "{} · {} · {} · target {} · kernel {} · {}",
                r.path.display(),
                r.doc.config.db,
                r.doc.status,
                run_targets(r),
                e.kernel,
                storage
            ),
        ));
    }
    doc.blocks.push(crate::doc::Block::Facts(facts));
    doc.p("Ratios compare each run with the baseline (the first run): ops/s as new ÷ baseline (\"better\" when higher), latency as baseline ÷ new (\"lower\" when the new run waits less).");
    let caveats = caveats(runs, &all);
    doc.h(2, "Caveats");
    if caveats.is_empty() {
        doc.p("The runs agree on database, target rate, workloads, dataset and workload properties; every step completed with successful operations.");
    } else {
        doc.list(caveats.clone());
    }

    let mut summary = String::new();
    if !caveats.is_empty() {
        summary.push_str(&md_list("Caveats", &caveats));
    }
    let mut regressions = Vec::new();
    let mut unchecked = Vec::new();
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
        "note",
    ])
    .text_columns(&[1, 4, 6, 7]);
    let dash = || "–".to_string();
    for w in &all[0] {
        let bp = w.peak_point();
        t.row(vec![
            w.workload.clone(),
            base.name(),
            bp.map_or_else(dash, |p| thousands(p.ops_per_sec)),
            bp.map_or_else(dash, |p| p.threads.to_string()),
            "baseline".into(),
            bp.map_or_else(dash, |p| us_as_ms(p.all.p9999_us as f64)),
            "baseline".into(),
            bp.map_or_else(|| "all failed".into(), note),
        ]);
        for (ri, r) in runs.iter().enumerate().skip(1) {
            let Some(o) = find(&all[ri], &w.workload) else {
                continue;
            };
            let row = match (bp, o.peak_point()) {
                (_, None) => vec![dash(), dash(), dash(), dash(), dash(), "all failed".into()],
                (Some(b), Some(p)) => vec![
                    thousands(p.ops_per_sec),
                    p.threads.to_string(),
                    better(p.ops_per_sec / b.ops_per_sec),
                    us_as_ms(p.all.p9999_us as f64),
                    lower(b.all.p9999_us as f64, p.all.p9999_us as f64),
                    pair_note(b, p),
                ],
                (None, Some(p)) => vec![
                    thousands(p.ops_per_sec),
                    p.threads.to_string(),
                    dash(),
                    us_as_ms(p.all.p9999_us as f64),
                    dash(),
                    "baseline all failed".into(),
                ],
            };
            let mut cells = vec![w.workload.clone(), r.name()];
            cells.extend(row);
            t.row(cells);
        }
    }
    summary.push_str("## Maximum performance by workload\n\n");
    summary.push_str(&crate::markdown::table(&t));
    doc.table(t);

    for w in &all[0] {
        doc.h(2, format!("Workload {}", w.workload));
        // Overlaid curves, without points whose figures measure failures.
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
            let labels: Vec<String> = o
                .usable_points()
                .map(|p| format!("{}t", p.threads))
                .collect();
            c.series.push(Series {
                name: format!("{} p99.99", r.name()),
                points: o
                    .usable_points()
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
                    .usable_points()
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
        let mut t = Table::new(&[
            "threads",
            "run",
            "ops/s",
            "vs baseline",
            "significant",
            "note",
        ])
        .text_columns(&[1, 3, 4, 5]);
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
                note(bp),
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
                let point = format!("{} {} × {} threads", r.name(), w.workload, bp.threads);
                let found = find(&all[ri], &w.workload)
                    .and_then(|o| o.points.iter().find(|p| p.threads == bp.threads));
                let Some(op) = found else {
                    if fail_pct.is_some() {
                        unchecked.push(format!(
                            "{point}: not checked: {} has no such step",
                            r.name()
                        ));
                    }
                    continue;
                };
                let ok = comparable(bp, op);
                let ratio =
                    |f: &dyn Fn() -> String| if ok { f() } else { "– (all failed)".into() };
                t.row(vec![
                    bp.threads.to_string(),
                    r.name(),
                    thousands(op.ops_per_sec),
                    ratio(&|| better(op.ops_per_sec / bp.ops_per_sec)),
                    if ok {
                        significance(bp, op)
                    } else {
                        "n/a".into()
                    },
                    pair_note(bp, op),
                ]);
                lt.row(vec![
                    bp.threads.to_string(),
                    r.name(),
                    us_as_ms(op.all.mean_us),
                    ratio(&|| lower(bp.all.mean_us, op.all.mean_us)),
                    us_as_ms(op.all.p99_us as f64),
                    ratio(&|| lower(bp.all.p99_us as f64, op.all.p99_us as f64)),
                    us_as_ms(op.all.p9999_us as f64),
                    ratio(&|| lower(bp.all.p9999_us as f64, op.all.p9999_us as f64)),
                ]);
                let Some(pct) = fail_pct else { continue };
                match verdict(bp, op) {
                    Verdict::Check => regressions.extend(
                        limit_regressions(bp, op, &base.name(), pct)
                            .into_iter()
                            .map(|s| format!("{point}: {s}")),
                    ),
                    Verdict::Regression(why) => regressions.push(format!("{point}: {why}")),
                    Verdict::Skip(why) => unchecked.push(format!("{point}: not checked: {why}")),
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
    if let Some(pct) = fail_pct {
        doc.h(
            2,
            format!("Regression check (limit {pct}% on ops/s and p99)"),
        );
        if regressions.is_empty() {
            doc.p("No checked point is worse than the baseline beyond the limit.");
        } else {
            doc.list(regressions.clone());
        }
        if !unchecked.is_empty() {
            doc.p("Not checked (no verdict either way):");
            doc.list(unchecked.clone());
            summary.push('\n');
            summary.push_str(&md_list("Not checked for regressions", &unchecked));
        }
    }
    Comparison {
        doc,
        summary,
        regressions,
        unchecked,
        caveats,
    }
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
    let c = compare_doc(&runs, opts.fail_on_regression_pct);
    std::fs::create_dir_all(&opts.out).map_err(|e| {
        anyhow::anyhow!(
            "--out {}: cannot create the directory ({e}); choose a writable directory",
            opts.out.display()
        )
    })?;
    let mut files = Vec::new();
    for (name, text) in [
        (HTML, crate::html::render(&c.doc)),
        (MARKDOWN, crate::markdown::render(&c.doc)),
    ] {
        let p = opts.out.join(name);
        write_atomic(&p, text.as_bytes())?;
        files.push(p);
    }
    Ok(CompareOutput {
        files,
        summary_markdown: c.summary,
        regressions: c.regressions,
        unchecked: c.unchecked,
        caveats: c.caveats,
    })
}
