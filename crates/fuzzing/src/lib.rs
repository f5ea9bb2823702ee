//! The entry points of the fuzz targets (`fuzz/`, cargo-fuzz) and of their regression test:
//! each feeds arbitrary bytes to one reader of user input or of a run directory, the way iodig
//! itself reads it. Errors are expected; a panic is a bug. Kept in the workspace so the inputs
//! that once crashed (`fuzz/regressions/<target>/`) replay in the ordinary test suite.

use iodig_model::props::Properties;
use iodig_workload::WorkloadSpec;
use std::path::{Path, PathBuf};

/// One fuzz target: arbitrary bytes in, errors allowed, no panic.
pub type Target = fn(&[u8]);

/// The targets, by name: the fuzz binaries and the regression folders use these names.
pub const TARGETS: &[(&str, Target)] = &[
    ("properties_file", properties_file),
    ("property_override", property_override),
    ("experiment_file", experiment_file),
    ("run_directory", run_directory),
];

/// A YCSB property file (`-P`), then the workload spec parsed from it.
pub fn properties_file(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut props = Properties::new();
    props.load_str(&text, "fuzz");
    let _ = WorkloadSpec::from_properties(&props);
}

/// `-p name=value` overrides, one per line, over workload A, then the spec.
pub fn property_override(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut props = Properties::new();
    let (_, workloada) = iodig_workload::BUILTIN_WORKLOADS[0];
    props.load_str(workloada, "workloada");
    for line in text.lines() {
        let _ = props.apply_override(line);
    }
    let _ = WorkloadSpec::from_properties(&props);
}

/// An experiment file (TOML), read and turned into the runner's workload runs.
pub fn experiment_file(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("experiment.toml");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(file) = iodig_runner::experiment_file::ExperimentFile::read(&path) {
        let _ = file.workload_runs(&["recordcount=5".into()]);
        let _ = file.stop_rule();
    }
}

/// The files of a run directory a reader takes in, one replaced by the input: the first byte
/// picks which (run.json, or a step's summary, trace, system samples, database events,
/// histograms, HDR interval log, per-second series of schema 1 or 2), the rest is its content. Then everything
/// that reads run directories runs on it: run.json's reader, the report, and compare.
pub fn run_directory(data: &[u8]) {
    const FILES: &[&str] = &[
        "run.json",
        "steps/01-workloada-t1/summary.json",
        "steps/01-workloada-t1/trace.json",
        "steps/01-workloada-t1/sys.json",
        "steps/01-workloada-t1/db-events.json",
        "steps/01-workloada-t1/histograms.json",
        "steps/01-workloada-t1/latency.hlog",
        "steps/01-workloada-t1/timeseries.json",
        // Schema 2's series files: present, they take the place of the series inline.
        "steps/01-workloada-t1/trace.json.gz",
        "steps/01-workloada-t1/latency.hlog.gz",
        "steps/01-workloada-t1/timeseries.jsonl.gz",
        "steps/01-workloada-t1/trace-seconds.jsonl.gz",
        "steps/01-workloada-t1/trace-class-seconds.jsonl.gz",
        "steps/01-workloada-t1/sys-samples.jsonl.gz",
        "steps/01-workloada-t1/db-events.jsonl.gz",
    ];
    let Some((&which, content)) = data.split_first() else {
        return;
    };
    let Ok(tmp) = tempfile::tempdir() else { return };
    let run = tmp.path().join("run");
    if copy_dir(&seed_run(), &run).is_err() {
        return;
    }
    let target = run.join(FILES[usize::from(which) % FILES.len()]);
    if std::fs::write(&target, content).is_err() {
        return;
    }
    let _ = iodig_model::reading::read_run_doc(&run);
    let _ = iodig_report::write_report(&run);
    let _ = iodig_report::write_compare(&iodig_report::CompareOptions {
        runs: vec![seed_run(), run.clone()],
        out: tmp.path().join("compare"),
        fail_on_regression_pct: Some(5.0),
        op: None,
    });
}

/// A real run directory (RocksDB, workload A, 1 thread, traced with eBPF), kept in the repo.
pub fn seed_run() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-run")
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}
