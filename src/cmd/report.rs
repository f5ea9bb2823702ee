//! `iodig report RUN_DIR`: writes report.html, report.md and the CSV files into the run
//! directory and prints their paths and the findings.

use iodig_report::{LatencyOp, ReportError};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Run directory written by `iodig run` (the one holding run.json).
    #[arg(value_name = "RUN_DIR")]
    pub run_dir: PathBuf,
    /// Whose latency the curves, OPS tables, peak and bend show: read (the default, as the
    /// briefs quote it), update, insert, scan, read-modify-write (rmw), delete, or all.
    #[arg(long, value_name = "OP", value_parser = LatencyOp::parse)]
    pub op: Option<LatencyOp>,
    /// Do not print the findings.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

pub fn run(args: &ReportArgs) -> Result<ExitCode, ReportError> {
    let out = iodig_report::write_report_with(
        &args.run_dir,
        &iodig_report::ReportOptions {
            op: args.op.clone(),
        },
    )?;
    for f in &out.files {
        println!("{}", f.display());
    }
    if !args.quiet && !out.findings.is_empty() {
        println!("\nFindings:");
        for f in &out.findings {
            println!("- {f}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
