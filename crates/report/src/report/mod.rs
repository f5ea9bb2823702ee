//! `iodig report`: lays the analysed run out as a document and writes report.html, report.md
//! and the CSV files into the run directory. [`report_doc`] lists the sections in document
//! order; each section is a module of its own.

mod attribution;
mod block_io;
mod client;
mod cluster;
mod device_stats;
mod events;
mod findings;
mod header;
mod integrity;
mod io_summary;
mod per_io;
mod per_second;
mod slow;
mod step;
mod steps_table;
mod summary;
mod sweep;
mod system;

pub use io_summary::size_short;

use crate::analysis::{self, LatencyOp, Report};
use crate::data::{load_run_streaming, RunData};
use crate::doc::Doc;
use crate::error::ReportError;
use iodig_model::fsio::{write_atomic, AtomicFile};
use std::path::{Path, PathBuf};

/// `iodig report`'s files, all written into the run directory. This one: the report as one
/// self-contained HTML page (inline SVG charts, no script).
pub const HTML: &str = "report.html";
/// Beside a report too large for one file (a brief-scale run): each step's per-place detail
/// (a node's or the client host's charts and tables) as a page of its own, linked from
/// `report.html` where it would have stood.
pub const HTML_PAGES: &str = "report-pages";
/// The same tables and findings as Markdown (charts named, not drawn).
pub const MARKDOWN: &str = "report.md";
/// One row per workload × threads × latency series: ops/s with its 95 % interval, latency in
/// µs, failures and status.
pub const CSV_OPS: &str = "report-ops.csv";
/// One row per step × second × series: the client's ops/s and latency in µs.
pub const CSV_CLIENT: &str = "report-client.csv";
/// One row per step × device × second × op: IOs, bytes, MB/s, IOPS, device latency in ns,
/// queue depth.
pub const CSV_IO: &str = "report-io.csv";
/// One row per step, the load included: what it ran, how much, and how it ended.
pub const CSV_STEPS: &str = "report-steps.csv";
/// One row per slow second of an op: the client's p99 and max, the place, the most likely
/// cause and its evidence.
pub const CSV_SLOW_SECONDS: &str = "slow-seconds.csv";

/// What `write_report` produced.
#[derive(Debug, Clone)]
pub struct ReportOutput {
    /// Every file written, in the run directory: report.html, report.md, then the CSV files,
    /// and last the `report-pages` directory when the report was split.
    pub files: Vec<PathBuf>,
    /// The report's run-level findings, for the terminal (the Findings section's sentences).
    pub findings: Vec<String>,
}

/// What `iodig report` may be told.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// `--op`: whose latency the curves and OPS tables show; none = READ (all ops for a
    /// workload without reads).
    pub op: Option<LatencyOp>,
}

/// Reads `run_dir`, writes the report files into it (READ latency first), and returns their
/// paths.
pub fn write_report(run_dir: &Path) -> Result<ReportOutput, ReportError> {
    write_report_with(run_dir, &ReportOptions::default())
}

/// [`write_report`] with options; an `--op` the run never measured is refused, naming it.
pub fn write_report_with(
    run_dir: &Path,
    opts: &ReportOptions,
) -> Result<ReportOutput, ReportError> {
    // Step by step: each step's views and per-second CSV rows are made while its series are
    // in memory, then the series are dropped, so memory does not grow with every step's.
    // The per-second CSVs (100 MB at brief scale) go to their files a step at a time, the
    // files made once the run directory has proved to be one.
    let (mut client_csv, mut io_csv) = (crate::csv::client_header(), crate::csv::io_header());
    let mut csv_out: Option<(AtomicFile, AtomicFile)> = None;
    let mut views = Vec::new();
    let mut written = Ok(());
    let run = load_run_streaming(
        run_dir,
        |run, step| {
            views.push(analysis::step_view_of(run, step));
            crate::csv::client_rows(step, &mut client_csv);
            crate::csv::io_rows(step, &mut io_csv);
            if written.is_ok() {
                written = csv_files(run_dir, &mut csv_out).and_then(|(client, io)| {
                    client.write(client_csv.as_bytes())?;
                    io.write(io_csv.as_bytes())
                });
            }
            client_csv.clear();
            io_csv.clear();
        },
        true,
    )
    .map_err(ReportError::RunDir)?;
    written.map_err(ReportError::Output)?;
    if let Some(op) = &opts.op {
        let points: Vec<_> = analysis::sweeps_of(&run, op);
        let all_points = points.iter().flat_map(|s| s.points.iter());
        if !op.measured_in(all_points.clone()) {
            return Err(ReportError::Op(format!(
                "--op {}: {} measured no such operation (it has {}); choose one of those or --op all",
                op.words(),
                run_dir.display(),
                measured_list(&analysis::measured_ops(all_points))
            )));
        }
    }
    // Each output is written as soon as it is made and dropped before the next is made: at
    // brief scale the per-second CSVs are 100 MB and the HTML several hundred.
    let write = |name: &str, bytes: &[u8]| -> Result<PathBuf, ReportError> {
        let p = run_dir.join(name);
        write_atomic(&p, bytes).map_err(ReportError::Output)?;
        Ok(p)
    };
    // What is left unwritten is the header lines of a run without steps: such a run still
    // gets both files.
    let mut finish = || -> anyhow::Result<(PathBuf, PathBuf)> {
        let (client, io) = csv_files(run_dir, &mut csv_out)?;
        client.write(client_csv.as_bytes())?;
        io.write(io_csv.as_bytes())?;
        let (client, io) = csv_out.take().expect("made above");
        Ok((client.commit()?, io.commit()?))
    };
    let (client, io) = finish().map_err(ReportError::Output)?;
    let report = analysis::analyse_views(&run, &opts.op.clone().unwrap_or_default(), views);
    let steps = write(CSV_STEPS, crate::csv::steps(&report).as_bytes())?;
    let ops = write(CSV_OPS, crate::csv::ops(&report).as_bytes())?;
    let slow = write(
        CSV_SLOW_SECONDS,
        crate::csv::slow_seconds(&report).as_bytes(),
    )?;
    let findings = report.findings.clone();
    let doc = report_doc_consuming(&run, report);
    let html = write_html(run_dir, &doc)?;
    let markdown = write(MARKDOWN, crate::markdown::render(&doc).as_bytes())?;
    let mut files = vec![html, markdown, steps, ops, client, io, slow];
    let pages = run_dir.join(HTML_PAGES);
    if pages.is_dir() {
        files.push(pages);
    }
    Ok(ReportOutput { files, findings })
}

/// The per-second CSV files being written, made on first use.
fn csv_files<'a>(
    run_dir: &Path,
    files: &'a mut Option<(AtomicFile, AtomicFile)>,
) -> anyhow::Result<(&'a mut AtomicFile, &'a mut AtomicFile)> {
    if files.is_none() {
        *files = Some((
            AtomicFile::create(&run_dir.join(CSV_CLIENT))?,
            AtomicFile::create(&run_dir.join(CSV_IO))?,
        ));
    }
    let (client, io) = files.as_mut().expect("made above");
    Ok((client, io))
}

/// report.html, and the detail pages beside it when it is too large for one file. The pages
/// an earlier report of this run left are replaced (or removed, when this one fits in one
/// file), so they are always this report's.
fn write_html(run_dir: &Path, doc: &Doc) -> Result<PathBuf, ReportError> {
    let out = |e: std::io::Error, what: &Path| {
        ReportError::Output(anyhow::Error::new(e).context(format!("{}", what.display())))
    };
    // This report's pages are made under a temporary name and put in place after report.html,
    // so a report that fails on the way leaves the earlier report and its pages as they were.
    let pages = run_dir.join(HTML_PAGES);
    let fresh = run_dir.join(format!(".{HTML_PAGES}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    let rendered = crate::html::render_pages(
        doc,
        crate::html::ONE_FILE_BUDGET,
        HTML,
        HTML_PAGES,
        |name, html| {
            let file = Path::new(name).file_name().expect("a page has a file name");
            std::fs::create_dir_all(&fresh).map_err(|e| out(e, &fresh))?;
            write_atomic(&fresh.join(file), html.as_bytes()).map_err(ReportError::Output)
        },
    );
    let main = run_dir.join(HTML);
    let placed = rendered.and_then(|r| {
        write_atomic(&main, r.main.as_bytes()).map_err(ReportError::Output)?;
        match std::fs::remove_dir_all(&pages) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(out(e, &pages)),
            _ => {}
        }
        if r.pages > 0 {
            std::fs::rename(&fresh, &pages).map_err(|e| out(e, &pages))?;
        }
        Ok(())
    });
    let _ = std::fs::remove_dir_all(&fresh);
    placed.map(|()| main)
}

/// "READ, UPDATE" or "no operation".
pub(crate) fn measured_list(ops: &[&str]) -> String {
    if ops.is_empty() {
        "no operation".into()
    } else {
        ops.join(", ")
    }
}

/// The whole report as a document, section by section.
pub fn report_doc(run: &RunData, report: &Report) -> Doc {
    let mut doc = run_sections(run, report);
    for s in &report.steps {
        step::section(&mut doc, s);
    }
    doc
}

/// [`report_doc`] that drops each step's view once its section is in the document, so the
/// views (every chart's points) and the document are not both held whole.
fn report_doc_consuming(run: &RunData, mut report: Report) -> Doc {
    let mut doc = run_sections(run, &report);
    for s in std::mem::take(&mut report.steps) {
        step::section(&mut doc, &s);
    }
    doc
}

/// Every section before the steps' own.
fn run_sections(run: &RunData, report: &Report) -> Doc {
    let mut doc = Doc::new(&format!("iodig report: {}", report.run_name));
    // A brief's order: the headlines with their charts, the sweeps' tables and curves, then
    // every finding, the cluster, and each step's detail node by node.
    header::section(&mut doc, run, report);
    summary::section(&mut doc, report);
    slow::section(&mut doc, report);
    integrity::section(&mut doc, run);
    steps_table::section(&mut doc, report);
    for s in &report.sweeps {
        sweep::section(&mut doc, s);
    }
    findings::section(&mut doc, report);
    cluster::section(&mut doc, report);
    doc
}
