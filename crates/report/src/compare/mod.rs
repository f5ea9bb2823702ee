//! `iodig compare`: the briefs' advantage tables between runs. Every later run is compared with
//! the first (the baseline): ops/s per workload × thread count and its ratio ("1.5X better"), the
//! max-performance ratio per workload, latency ratios ("7.0X lower"), overlaid curves, Welch
//! tests where repetitions (or per-second samples) allow, and the regression check. What makes
//! runs unlike (target rate, dataset, workload, database, interrupted or all-failed steps) is
//! said before any ratio, and steps whose operations all failed are never a term of one.
//!
//! [`compare_doc`] lists the sections in document order; each section is a module of its own.

mod caveats;
mod config;
mod csv;
mod figures;
mod header;
mod max_perf;
mod names;
mod ratio;
mod regression;
mod slow;
mod storage_io;
mod workload;

pub use ratio::{better, better_with, lower, lower_with, significance};

use crate::analysis::{sweeps_of, LatencyOp, Point, WorkloadSweep, OP_SERIES};
use crate::data::RunData;
use crate::doc::Doc;
use crate::error::ReportError;
use iodig_model::fsio::write_atomic;
use iodig_model::SeriesSummary;
use std::path::PathBuf;

/// The HTML document written into `--out`, charts inline (each chart is also written alone as
/// `compare-NN-<title>.svg`).
pub const HTML: &str = "compare.html";
/// The Markdown document written into `--out`, each chart shown as its SVG file.
pub const MARKDOWN: &str = "compare.md";
/// Significance level of the Welch tests.
pub const ALPHA: f64 = 0.05;

/// What `iodig compare` was asked: the runs, where to write, the regression limit, the op.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The baseline first, then the runs compared with it: run directories, each optionally as
    /// `LABEL=RUN_DIR` to name it (over the label the run recorded).
    pub runs: Vec<PathBuf>,
    /// The folder the files are written into (`--out DIR`), created when missing.
    pub out: PathBuf,
    /// Percent by which a later run may be worse (lower ops/s or higher p99) before it counts
    /// as a regression.
    pub fail_on_regression_pct: Option<f64>,
    /// `--op`: whose latency is compared; none = READ when every run measured reads, else all
    /// ops (said under Caveats).
    pub op: Option<LatencyOp>,
}

/// What `iodig compare` wrote and found, for the terminal and the exit code.
#[derive(Debug, Clone)]
pub struct CompareOutput {
    /// Every file written: one SVG per chart, then compare.html, compare.md and
    /// compare-ops.csv.
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

/// The runs compared, the baseline first, with their sweeps (same order).
struct Runs<'a> {
    runs: &'a [RunData],
    sweeps: Vec<Vec<WorkloadSweep>>,
    /// Whose latency is compared.
    op: LatencyOp,
}

impl<'a> Runs<'a> {
    fn new(runs: &'a [RunData], op: &LatencyOp) -> Self {
        Runs {
            runs,
            sweeps: runs.iter().map(|r| sweeps_of(r, op)).collect(),
            op: op.clone(),
        }
    }

    fn base(&self) -> &RunData {
        &self.runs[0]
    }

    /// The baseline's sweeps: the workloads compared.
    fn base_sweeps(&self) -> &[WorkloadSweep] {
        &self.sweeps[0]
    }

    /// Run `ri`'s sweep of `workload`, when it ran it.
    fn sweep(&self, ri: usize, workload: &str) -> Option<&WorkloadSweep> {
        self.sweeps[ri].iter().find(|w| w.workload == workload)
    }

    /// Every thread count of `workload` over all runs, tested or left out by a stop rule,
    /// ascending: the rows of the briefs' wide tables.
    fn thread_union(&self, workload: &str) -> Vec<u64> {
        let mut t: Vec<u64> = (0..self.runs.len())
            .filter_map(|ri| self.sweep(ri, workload))
            .flat_map(WorkloadSweep::thread_counts)
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }

    /// Run `ri`'s point at `threads` of `workload`, when it ran it.
    fn point(&self, ri: usize, workload: &str, threads: u64) -> Option<&Point> {
        self.sweep(ri, workload).and_then(|o| o.at(threads))
    }

    /// The 95% interval of new ÷ baseline ops/s over the repetitions of two points, or why
    /// there is none.
    fn ops_interval(&self, base: &Point, new: &Point) -> Result<(f64, f64), String> {
        ratio::ratio_interval(&base.rep_ops, &new.rep_ops)
    }

    /// A latency ratio of `f` (p99, p99.99) between the baseline's point `base` and run `ri`'s
    /// point `new`, its two sides and its 95% interval from one estimator: with two or more
    /// repetitions on each side, the means of the repetitions' figures and the interval of
    /// their ratio (so the ratio always lies inside it); else each point's figure from its
    /// merged histograms, and why there is no interval.
    fn latency_ratio(
        &self,
        base: &Point,
        ri: usize,
        new: &Point,
        op: &LatencyOp,
        f: fn(&SeriesSummary) -> f64,
    ) -> LatencyRatio {
        let merged = |why: String| LatencyRatio {
            base_us: f(&base.lat),
            new_us: f(&new.lat),
            ci: Err(why),
        };
        let Some(series) = op.series() else {
            return merged("no interval: all-ops latency is not kept per repetition".into());
        };
        let reps = |ri: usize, p: &Point| -> Vec<f64> {
            p.steps
                .iter()
                .filter(|i| !p.excluded.contains(i))
                .filter_map(|i| self.runs[ri].steps.iter().find(|s| s.summary.index == *i))
                .filter_map(|s| s.summary.series.get(series))
                .filter(|s| s.count > 0)
                .map(f)
                .collect()
        };
        let (b, n) = (reps(0, base), reps(ri, new));
        match ratio::ratio_interval(&b, &n) {
            Ok((lo, hi)) => LatencyRatio {
                base_us: crate::stat::mean_var(&b).0,
                new_us: crate::stat::mean_var(&n).0,
                ci: Ok((1.0 / hi, 1.0 / lo)),
            },
            Err(why) => merged(why),
        }
    }

    /// Each later run with its point at `threads` of `workload` (none when it has no such step).
    fn later_points<'b>(
        &'b self,
        workload: &'b str,
        threads: u64,
    ) -> impl Iterator<Item = (&'b RunData, Option<&'b Point>)> + 'b {
        self.runs.iter().enumerate().skip(1).map(move |(ri, r)| {
            let point = self
                .sweep(ri, workload)
                .and_then(|o| o.points.iter().find(|p| p.threads == threads));
            (r, point)
        })
    }
}

/// A latency ratio as compare prints it ([`Runs::latency_ratio`]): its two sides in µs and the
/// 95% interval of baseline ÷ new (as latency ratios read), or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LatencyRatio {
    pub base_us: f64,
    pub new_us: f64,
    pub ci: Result<(f64, f64), String>,
}

impl LatencyRatio {
    /// New ÷ baseline, none when a side measured nothing.
    pub fn new_over_base(&self) -> Option<f64> {
        (self.base_us > 0.0 && self.new_us > 0.0).then(|| self.new_us / self.base_us)
    }
}

/// The comparison of runs, for the files and the terminal.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The comparison document: sections, tables and charts, rendered to HTML or Markdown.
    pub doc: Doc,
    /// The caveats and advantage tables in Markdown.
    pub summary: String,
    /// One sentence per regression beyond the limit, naming run, workload and threads (empty
    /// without a limit).
    pub regressions: Vec<String>,
    /// Points the regression check gave no verdict on, with why (empty without a limit).
    pub unchecked: Vec<String>,
    /// The Caveats section's points: how the runs differ, partial or failed steps, thread
    /// counts a run lacks; empty when there is none.
    pub caveats: Vec<String>,
    /// `compare-ops.csv`: every tested point with its ratios to the baseline and their
    /// intervals, runs under their names.
    pub ops_csv: String,
}

fn md_list(title: &str, items: &[String]) -> String {
    let mut o = format!("## {title}\n\n");
    for i in items {
        o.push_str(&format!("- {i}\n"));
    }
    o.push('\n');
    o
}

/// Builds the comparison document, the caveats and the regression check, section by section;
/// the terminal summary gathers the caveats and the advantage tables.
pub fn compare_doc(runs: &[RunData], fail_pct: Option<f64>, op: &OpChoice) -> Comparison {
    let runs = Runs::new(runs, &op.op);
    let mut doc = header::section(&runs);
    let differ = config::section(&mut doc, &runs);
    let caveats = caveats::section(&mut doc, &runs, op.caveat.as_deref());
    let mut summary = String::new();
    if !caveats.is_empty() {
        summary.push_str(&md_list("Caveats", &caveats));
    }
    if let Some(t) = differ {
        summary.push_str("## Configuration: what differs\n\n");
        summary.push_str(&crate::markdown::table(&t));
        summary.push('\n');
    }
    max_perf::section(&mut doc, &runs, &mut summary);
    doc.bar_chart(figures::max_perf_chart(&runs));
    figures::section(&mut doc, &runs);
    for w in runs.base_sweeps() {
        workload::section(&mut doc, &runs, w, &mut summary);
    }
    storage_io::section(&mut doc, &runs);
    slow::section(&mut doc, &runs);
    let check = fail_pct
        .map(|pct| regression::section(&mut doc, &runs, pct, &mut summary))
        .unwrap_or_default();
    Comparison {
        ops_csv: csv::ops(&runs),
        doc,
        summary,
        regressions: check.regressions,
        unchecked: check.unchecked,
        caveats,
    }
}

/// The latency op compared, and the caveat when it is not the one asked for.
#[derive(Debug, Clone, Default)]
pub struct OpChoice {
    /// The op whose latency is compared.
    pub op: LatencyOp,
    /// Why it is all ops rather than READ when no `--op` was given and some run measured no
    /// reads; none otherwise.
    pub caveat: Option<String>,
}

/// The ops with successful measurements in a run's measured steps, in [`OP_SERIES`] order.
fn run_ops(r: &RunData) -> Vec<&'static str> {
    OP_SERIES
        .iter()
        .copied()
        .filter(|op| {
            r.run_steps()
                .any(|s| s.summary.series.get(*op).is_some_and(|v| v.count > 0))
        })
        .collect()
}

/// Which latency the comparison uses: `--op` when every run measured it (all ops always), else
/// READ when every run has reads, else all ops with a caveat. Runs that share no operation at
/// all, or an `--op` some run lacks, are refused naming what each run has.
pub fn choose_op(runs: &[RunData], asked: Option<&LatencyOp>) -> Result<OpChoice, ReportError> {
    let per_run: Vec<Vec<&str>> = runs.iter().map(run_ops).collect();
    let has = |op: &str| per_run.iter().all(|ops| ops.contains(&op));
    let listing = || {
        runs.iter()
            .zip(&per_run)
            .map(|(r, ops)| format!("{} has {}", r.name(), crate::report::measured_list(ops)))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let common: Vec<&str> = OP_SERIES.iter().copied().filter(|op| has(op)).collect();
    if common.is_empty() {
        return Err(ReportError::Op(format!(
            "the runs have no operation in common ({}): there is no latency to compare; compare runs of workloads that share an operation",
            listing()
        )));
    }
    match asked {
        Some(LatencyOp::All) => Ok(OpChoice {
            op: LatencyOp::All,
            caveat: None,
        }),
        Some(op) => {
            let series = op.series().unwrap_or("READ");
            if !has(series) {
                return Err(ReportError::Op(format!(
                    "--op {}: not measured by every run ({}); choose one they share ({}) or --op all",
                    op.words(),
                    listing(),
                    common.join(", ").to_lowercase()
                )));
            }
            Ok(OpChoice {
                op: op.clone(),
                caveat: None,
            })
        }
        None if has("READ") => Ok(OpChoice::default()),
        None => Ok(OpChoice {
            op: LatencyOp::All,
            caveat: Some(format!(
                "Not every run measured reads ({}): latency is compared over all ops; --op {} compares an op they share.",
                listing(),
                common[0].to_lowercase()
            )),
        }),
    }
}

/// A file-name piece from a chart title: lower-case words joined by dashes, at most ~48 bytes.
fn slug(title: &str) -> String {
    let mut s = String::new();
    for word in title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if s.len() + word.len() > 48 {
            break;
        }
        if !s.is_empty() {
            s.push('-');
        }
        s.push_str(&word.to_ascii_lowercase());
    }
    s
}

/// Reads the runs and writes compare.html, compare.md and one SVG file per chart into
/// `opts.out`.
pub fn write_compare(opts: &CompareOptions) -> Result<CompareOutput, ReportError> {
    if opts.runs.len() < 2 {
        return Err(ReportError::Runs(format!(
            "compare needs at least two run directories (the baseline first), got {}",
            opts.runs.len()
        )));
    }
    let runs = names::load_named(&opts.runs)?;
    if runs[0].run_steps().next().is_none() {
        return Err(ReportError::Runs(format!(
            "{}: the baseline has no run steps to compare",
            runs[0].path.display()
        )));
    }
    let op = choose_op(&runs, opts.op.as_ref())?;
    let c = compare_doc(&runs, opts.fail_on_regression_pct, &op);
    std::fs::create_dir_all(&opts.out).map_err(|e| {
        ReportError::Output(anyhow::anyhow!(
            "--out {}: cannot create the directory ({e}); choose a writable directory",
            opts.out.display()
        ))
    })?;
    // Each chart also stands alone as an SVG file, for slides and for compare.md to show.
    let mut files = Vec::new();
    let mut svg_names = Vec::new();
    for (i, chart) in c.doc.charts().enumerate() {
        let name = format!("compare-{:02}-{}.svg", i + 1, slug(chart.title()));
        let p = opts.out.join(&name);
        write_atomic(&p, chart.svg().as_bytes()).map_err(ReportError::Output)?;
        svg_names.push(name);
        files.push(p);
    }
    for (name, text) in [
        (HTML, crate::html::render(&c.doc)),
        (MARKDOWN, crate::markdown::render_linked(&c.doc, &svg_names)),
        (csv::FILE, c.ops_csv.clone()),
    ] {
        let p = opts.out.join(name);
        write_atomic(&p, text.as_bytes()).map_err(ReportError::Output)?;
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
