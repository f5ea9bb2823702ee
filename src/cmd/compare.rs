//! `iodig compare RUN_A RUN_B [RUN…] --out DIR`: the briefs' advantage tables and figures
//! against the first run, written into the folder the user names (compare.html, compare.md,
//! one SVG per chart); exit 1 with --fail-on-regression when a later run is worse than the first
//! beyond the limit.

use iodig_report::ReportError;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// Run directories; the first is the baseline every other run is compared with. Each is
    /// named by the label it was run with (`iodig run --label`), else its directory's name;
    /// `LABEL=RUN_DIR` names it here (e.g. "Micron 9300=runs/20261127-…").
    #[arg(value_name = "[LABEL=]RUN", num_args = 2.., required = true)]
    pub runs: Vec<PathBuf>,
    /// Folder for compare.html, compare.md and the charts as SVG files (created if needed).
    /// Required, so a comparison never lands in the current directory by surprise.
    #[arg(long, required = true, value_name = "DIR")]
    pub out: PathBuf,
    /// Whose latency is compared: read (the default, as the briefs compare it; all ops when a
    /// run has no reads, said under Caveats), update, insert, scan, read-modify-write (rmw),
    /// delete, or all.
    #[arg(long, value_name = "OP", value_parser = iodig_report::LatencyOp::parse)]
    pub op: Option<iodig_report::LatencyOp>,
    /// Exit 1 when a later run's ops/s is lower, or its read p99 higher, than the baseline's by more
    /// than PCT percent at any workload × thread count.
    #[arg(long, value_name = "PCT", value_parser = crate::cli::parse_percentage)]
    pub fail_on_regression: Option<f64>,
}

pub fn run(args: &CompareArgs) -> Result<ExitCode, ReportError> {
    let out = iodig_report::write_compare(&iodig_report::CompareOptions {
        runs: args.runs.clone(),
        out: args.out.clone(),
        fail_on_regression_pct: args.fail_on_regression,
        op: args.op.clone(),
    })?;
    print!("{}", out.summary_markdown);
    println!();
    for f in &out.files {
        println!("{}", f.display());
    }
    println!("compare: written to {}", args.out.display());
    if !out.regressions.is_empty() {
        eprintln!("iodig compare: regressions beyond the limit:");
        for r in &out.regressions {
            eprintln!("- {r}");
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
