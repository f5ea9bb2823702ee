//! A run directory of schema 1 (pretty JSON, series inline) still renders, exactly as the iodig
//! that wrote it rendered it; and the same run written in schema 2 (series in `*.jsonl.gz`)
//! renders the same report, so the new files lose nothing the report reads.
//!
//! `fixtures/schema1-run` is a real run (embedded RocksDB, workload A, 2 threads, 3 s, traced
//! with eBPF) written by iodig before schema 2; `fixtures/schema1-report` is what that iodig's
//! `iodig report` wrote for it.

use iodig_model::{files, series};
use std::path::{Path, PathBuf};

const REPORT_FILES: &[&str] = &[
    "report.md",
    "report.html",
    "report-steps.csv",
    "report-ops.csv",
    "report-client.csv",
    "report-io.csv",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

/// The run copied under `parent` with the fixture's directory name, which the report shows.
fn copy_run(parent: &Path) -> PathBuf {
    let run = parent.join("schema1-run");
    copy_dir(&fixtures().join("schema1-run"), &run);
    run
}

fn assert_report_as_before(run: &Path) {
    iodig_report::write_report(run).unwrap();
    for f in REPORT_FILES {
        let want = std::fs::read_to_string(fixtures().join("schema1-report").join(f)).unwrap();
        let got = std::fs::read_to_string(run.join(f)).unwrap();
        assert!(
            want == got,
            "{f} differs from the report of the iodig that wrote the run; first differing line: {:?}",
            want.lines()
                .zip(got.lines())
                .find(|(a, b)| a != b)
        );
    }
}

#[test]
fn a_schema_1_run_renders_as_it_did() {
    let tmp = tempfile::tempdir().unwrap();
    let run = copy_run(tmp.path());
    let doc = iodig_model::reading::read_run_doc(&run).unwrap();
    assert_eq!(doc.schema_version, 1);
    let step = run.join(&doc.steps[1].dir);
    assert!(step.join(series::TIMESERIES_V1).is_file() && !step.join(series::TIMESERIES).exists());
    assert_report_as_before(&run);
}

#[test]
fn the_same_run_in_schema_2_renders_the_same_report_in_fewer_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let run = copy_run(tmp.path());
    let doc = iodig_model::reading::read_run_doc(&run).unwrap();
    let (mut v1_bytes, mut v2_bytes) = (0, 0);
    let size = |dir: &Path, names: &[&str]| -> u64 {
        names
            .iter()
            .filter_map(|n| std::fs::metadata(dir.join(n)).ok())
            .map(|m| m.len())
            .sum()
    };
    for s in &doc.steps {
        let dir = run.join(&s.dir);
        v1_bytes += size(&dir, &[files::TRACE, files::SYSSTAT, series::TIMESERIES_V1]);
        assert!(!dir.join(series::TRACE).exists());
        let trace = series::read_trace(&dir).unwrap().unwrap();
        let sys = series::read_sys(&dir).unwrap().unwrap();
        let samples = series::read_timeseries(&dir).unwrap().unwrap();
        assert!(trace.devices.iter().any(|d| !d.seconds.is_empty()));
        series::write_trace(&dir, &trace).unwrap();
        series::write_sys(&dir, &sys).unwrap();
        series::write_timeseries(&dir, &samples).unwrap();
        std::fs::remove_file(dir.join(series::TIMESERIES_V1)).unwrap();
        std::fs::remove_file(dir.join(files::TRACE)).unwrap();
        v2_bytes += size(&dir, &[files::SYSSTAT]) + size(&dir, series::ALL);
        // What was written reads back as what was read.
        assert_eq!(series::read_trace(&dir).unwrap().unwrap(), trace);
        assert_eq!(series::read_sys(&dir).unwrap().unwrap(), sys);
    }
    let mut raw: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join(files::RUN)).unwrap()).unwrap();
    raw["schema_version"] = iodig_model::SCHEMA_VERSION.into();
    std::fs::write(
        run.join(files::RUN),
        serde_json::to_vec_pretty(&raw).unwrap(),
    )
    .unwrap();
    assert_report_as_before(&run);
    assert!(
        v2_bytes * 5 <= v1_bytes,
        "schema 2 wrote {v2_bytes} bytes of series and their documents for schema 1's {v1_bytes}"
    );
}
