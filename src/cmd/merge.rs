//! `iodig merge`: several clients' run directories into one, exactly.

use crate::cli::MergeArgs;
use iodig_runner::RunError;
use std::process::ExitCode;

pub fn run(args: &MergeArgs) -> Result<ExitCode, RunError> {
    let merged = iodig_runner::merge::merge_runs(&args.runs, &args.out)?;
    show(&merged);
    Ok(ExitCode::SUCCESS)
}

/// Prints each merged step's YCSB text, writes the report and names the run directory.
pub fn show(merged: &std::path::Path) {
    let Ok(steps) = std::fs::read_dir(merged.join("steps")) else {
        eprintln!("results: {}", merged.display());
        return;
    };
    let mut steps: Vec<_> = steps.flatten().collect();
    steps.sort_by_key(std::fs::DirEntry::file_name);
    for line in steps {
        if let Ok(text) = std::fs::read_to_string(line.path().join(iodig_model::files::YCSB_TEXT)) {
            println!("# {}", line.file_name().to_string_lossy());
            print!("{text}");
        }
    }
    if let Err(e) = iodig_report::write_report(merged) {
        eprintln!("warning: the report could not be written: {e:#}");
    }
    eprintln!("results: {}", merged.display());
}
