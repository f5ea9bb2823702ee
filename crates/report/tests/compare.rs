//! `write_compare` on generated runs: advantage ratios, significance with repetitions, the
//! regression check, and errors naming the path.

use iodig_report::fixture::{generate, FixtureSpec};
use iodig_report::{write_compare, CompareOptions};
use std::path::PathBuf;

fn spec(speed: f64, seed: u64) -> FixtureSpec {
    FixtureSpec {
        workloads: vec!["workloada".into()],
        threads: vec![8, 64],
        repetitions: 3,
        secs: 5,
        io_events_per_step: 0,
        latency_samples_per_step: 500,
        speed,
        seed,
        flush_every_secs: 0,
        ..Default::default()
    }
}

fn runs(tmp: &std::path::Path) -> (PathBuf, PathBuf) {
    let (a, b) = (tmp.join("slow"), tmp.join("fast"));
    generate(&spec(1.0, 1), &a).unwrap();
    generate(&spec(1.5, 2), &b).unwrap();
    (a, b)
}

#[test]
fn advantage_tables_and_significance() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = runs(tmp.path());
    let out = tmp.path().join("out");
    let r = write_compare(&CompareOptions {
        runs: vec![a, b],
        out: out.clone(),
        fail_on_regression_pct: Some(5.0),
    })
    .unwrap();
    assert!(r.regressions.is_empty(), "{:?}", r.regressions);
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(out.join("compare.html").is_file());
    assert!(
        r.summary_markdown.contains("1.5X better"),
        "{}",
        r.summary_markdown
    );
    assert!(md.contains("X lower"), "{md}");
    assert!(
        md.contains("yes (p="),
        "3 repetitions each: Welch on repetition means\n{md}"
    );
    assert!(md.contains("repetitions)"));
}

#[test]
fn regression_is_reported_beyond_the_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let (slow, fast) = runs(tmp.path());
    let r = write_compare(&CompareOptions {
        runs: vec![fast, slow],
        out: tmp.path().join("o"),
        fail_on_regression_pct: Some(10.0),
    })
    .unwrap();
    assert!(!r.regressions.is_empty());
    assert!(
        r.regressions
            .iter()
            .any(|s| s.contains("ops/s") && s.contains("lower than fast")),
        "{:?}",
        r.regressions
    );
    assert!(
        r.summary_markdown.contains("1.5X worse"),
        "{}",
        r.summary_markdown
    );
}

#[test]
fn needs_two_valid_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, _) = runs(tmp.path());
    let e = write_compare(&CompareOptions {
        runs: vec![a.clone()],
        out: tmp.path().into(),
        fail_on_regression_pct: None,
    })
    .unwrap_err();
    assert!(e.to_string().contains("at least two"));
    let bad = tmp.path().join("missing-run");
    let e = write_compare(&CompareOptions {
        runs: vec![a, bad],
        out: tmp.path().into(),
        fail_on_regression_pct: None,
    })
    .unwrap_err();
    assert!(format!("{e:#}").contains("missing-run"), "{e:#}");
}
