//! `write_compare` on generated runs: advantage ratios, significance with repetitions, the
//! regression check, what makes runs unlike (said before any ratio), steps whose operations all
//! failed or that were interrupted, and errors naming the path.

mod support;

use iodig_report::{write_compare, CompareOptions, CompareOutput};
use std::path::{Path, PathBuf};
use support::fixture::{edit_run, fail_step, generate, FixtureSpec};

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

fn runs(tmp: &Path) -> (PathBuf, PathBuf) {
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
        op: None,
    })
    .unwrap();
    assert!(r.regressions.is_empty(), "{:?}", r.regressions);
    assert!(r.caveats.is_empty() && r.unchecked.is_empty(), "{r:?}");
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(
        md.contains("The runs agree on database, target rate"),
        "{md}"
    );
    assert!(!r.summary_markdown.contains("Caveats"));
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
        op: None,
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
        op: None,
    })
    .unwrap_err();
    assert!(e.to_string().contains("at least two"));
    let bad = tmp.path().join("missing-run");
    let e = write_compare(&CompareOptions {
        runs: vec![a, bad],
        out: tmp.path().into(),
        fail_on_regression_pct: None,
        op: None,
    })
    .unwrap_err();
    assert!(format!("{e:#}").contains("missing-run"), "{e:#}");
}

fn compare(tmp: &Path, runs: Vec<PathBuf>, pct: f64) -> (CompareOutput, String, String) {
    let out = tmp.join("out");
    let r = write_compare(&CompareOptions {
        runs,
        out: out.clone(),
        fail_on_regression_pct: Some(pct),
        op: None,
    })
    .unwrap();
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    (r, md, html)
}

fn has(list: &[String], text: &str) -> bool {
    list.iter().any(|s| s.contains(text))
}

#[test]
fn unlike_runs_are_said_before_any_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let (base, other) = (tmp.path().join("slow"), tmp.path().join("capped"));
    generate(&spec(1.0, 1), &base).unwrap();
    generate(&spec(1.0, 2), &other).unwrap();
    edit_run(&base, |d| {
        d.config
            .properties
            .insert("recordcount".into(), "5000".into());
    })
    .unwrap();
    edit_run(&other, |d| {
        d.config.db = "rocksdb".into();
        d.config.target_ops_per_sec = Some(2000.0);
        d.config
            .properties
            .insert("recordcount".into(), "20000".into());
        d.config
            .properties
            .insert("readproportion".into(), "0.95".into());
        for s in &mut d.steps {
            s.target_ops_per_sec = Some(2000.0);
            s.throughput_ops_per_sec = 199.0;
        }
        d.steps[0].interrupted = true;
        d.status = "interrupted".into();
    })
    .unwrap();
    let (r, md, html) = compare(tmp.path(), vec![base, other], 5.0);
    for said in [
        "Databases differ: cassandra in slow, rocksdb in capped.",
        "Target rates differ: as fast as possible in slow, 2,000 ops/s in capped.",
        "Dataset properties differ: recordcount 5000 in slow, 20000 in capped.",
        "Workload and other properties differ: readproportion unset in slow, 0.95 in capped.",
        "capped: The run was interrupted (Ctrl-C or SIGTERM)",
        "capped: step 0 (workloada × 8 threads) ended early (interrupted)",
    ] {
        assert!(has(&r.caveats, said), "{said:?} not in {:#?}", r.caveats);
        assert!(
            r.summary_markdown.contains(said),
            "the terminal sees {said:?}"
        );
        assert!(md.contains(said) && html.contains(said), "{said:?}");
    }
    assert!(
        r.summary_markdown.starts_with("## Caveats\n"),
        "caveats come first"
    );
    // Ratios are still shown, each marked; no verdict on a capped or partial point.
    assert!(
        md.lines()
            .any(|l| l.contains("X worse | ")
                && (l.contains(" | no (p=") || l.contains(" | yes (p="))),
        "{md}"
    );
    assert!(
        md.contains("| target 2,000 ops/s (baseline as fast as possible) |"),
        "{md}"
    );
    assert!(
        md.contains("step 0 interrupted; target 2,000 ops/s"),
        "{md}"
    );
    assert!(r.regressions.is_empty(), "{:?}", r.regressions);
    assert!(
        has(&r.unchecked, "capped workloada × 64 threads: not checked: its target rate (2,000 ops/s) is not the baseline's (as fast as possible)"),
        "{:?}",
        r.unchecked
    );
    assert!(
        has(
            &r.unchecked,
            "capped workloada × 8 threads: not checked: its step 0 ended early (interrupted), so the figures cover part of a step; its target rate (2,000 ops/s)"
        ),
        "{:?}",
        r.unchecked
    );
    assert!(r
        .summary_markdown
        .contains("## Not checked for regressions"));
}

#[test]
fn steps_whose_operations_all_failed_are_no_ratio_and_no_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let (slow, fast) = runs(tmp.path());
    // The faster run's 8-thread repetitions failed fast: the highest ops/s, nothing done.
    for i in 0..3 {
        fail_step(&fast, i, "ERROR").unwrap();
    }
    edit_run(&fast, |d| {
        for s in &mut d.steps[..3] {
            s.throughput_ops_per_sec = 900_000.0;
        }
    })
    .unwrap();
    let (r, md, _) = compare(tmp.path(), vec![slow.clone(), fast.clone()], 10.0);
    assert!(
        has(
            &r.caveats,
            "fast: no operation of step 0 (workloada × 8 threads), step 1 (workloada × 8 threads), step 2 (workloada × 8 threads) succeeded (READ ERROR 750, UPDATE ERROR 750): left out of the ratios and peaks."
        ),
        "{:?}",
        r.caveats
    );
    // Max performance is the best point that worked; the failed point has no ratio.
    assert!(
        !md.contains("900,000 | 8 |"),
        "a failed point is a peak:\n{md}"
    );
    assert!(md.contains("| workloada | fast | "), "{md}");
    assert!(
        md.contains("| 900,000 | – (all failed) | n/a | n/a | all failed |"),
        "{md}"
    );
    assert!(!md.contains("600.0X"), "no ratio against failures");
    assert_eq!(r.regressions.len(), 1, "{:?}", r.regressions);
    assert!(
        r.regressions[0].starts_with(
            "fast workloada × 8 threads: none of its operations succeeded (READ ERROR"
        ) && r.regressions[0].ends_with("while the baseline's did"),
        "{:?}",
        r.regressions
    );
    // With the failures in the baseline there is nothing to compare with: no verdict, said.
    let tmp2 = tempfile::tempdir().unwrap();
    let (r, md, _) = compare(tmp2.path(), vec![fast, slow], 10.0);
    assert!(!has(&r.regressions, "× 8 threads"), "{:?}", r.regressions);
    assert!(
        has(
            &r.unchecked,
            "slow workloada × 8 threads: not checked: no operation of the baseline's succeeded"
        ),
        "{:?}",
        r.unchecked
    );
    assert!(md.contains("all failed"), "{md}");
}

#[test]
fn an_interrupted_point_gets_no_verdict_while_the_others_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let (slow, fast) = runs(tmp.path());
    edit_run(&slow, |d| d.steps[3].interrupted = true).unwrap();
    let (r, _, _) = compare(tmp.path(), vec![fast, slow], 10.0);
    assert!(
        has(&r.regressions, "slow workloada × 8 threads: ops/s"),
        "{:?}",
        r.regressions
    );
    assert!(!has(&r.regressions, "× 64 threads"), "{:?}", r.regressions);
    assert!(
        has(
            &r.unchecked,
            "slow workloada × 64 threads: not checked: its step 3 ended early (interrupted)"
        ),
        "{:?}",
        r.unchecked
    );
    assert!(has(
        &r.caveats,
        "slow: step 3 (workloada × 64 threads) ended early"
    ));
}

/// Two generated runs set up as a drive comparison: another device and data directory, the
/// baseline labelled in its run.json, the other named on the command line.
fn drive_comparison(tmp: &Path) -> (PathBuf, PathBuf) {
    let (slow, fast) = runs(tmp);
    edit_run(&slow, |d| {
        d.config.label = Some("Solidigm D5-P5316".into());
        d.config
            .properties
            .insert("cassandra.storagedir".into(), "/data/a".into());
    })
    .unwrap();
    edit_run(&fast, |d| {
        d.config
            .properties
            .insert("cassandra.storagedir".into(), "/data/b".into());
        d.config.properties.insert(
            "cassandra.compaction".into(),
            "LeveledCompactionStrategy".into(),
        );
        d.environment.data_dir = Some("/data/b/cassandra".into());
        let s = d.environment.storage.as_mut().unwrap();
        s.device = Some("nvme1n1".into());
        s.model = Some("Micron_9300_MTFDHAL3T8TDP".into());
        s.scheduler = Some("[none] mq-deadline".into());
    })
    .unwrap();
    (slow, fast)
}

#[test]
fn a_drive_comparison_names_its_configurations_and_shows_what_differs() {
    let tmp = tempfile::tempdir().unwrap();
    let (slow, fast) = drive_comparison(tmp.path());
    let named = PathBuf::from(format!("Micron 9300={}", fast.display()));
    let (r, md, html) = compare(tmp.path(), vec![slow.clone(), named], 50.0);

    // Each run's slow seconds side by side, as many as its own report finds in its run steps.
    let slow_seconds = |dir: &Path| {
        let report = iodig_report::analysis::analyse(&iodig_report::load_run(dir).unwrap());
        report
            .steps
            .iter()
            .filter(|s| s.phase == "run")
            .map(|s| s.slow_seconds.len())
            .sum::<usize>()
    };
    let (n_slow, n_fast) = (slow_seconds(&slow), slow_seconds(&fast));
    let side = md
        .split("## Why the slowest seconds were slow, side by side")
        .nth(1)
        .unwrap_or_else(|| panic!("no slow-seconds section:\n{md}"));
    if n_slow + n_fast > 0 {
        let all = side
            .lines()
            .find(|l| l.starts_with("| all causes |"))
            .unwrap();
        assert_eq!(
            all,
            format!("| all causes | {n_slow} | {n_fast} |"),
            "{side}"
        );
    } else {
        assert!(side.contains("No measured step of these runs"), "{side}");
    }

    // Where the data lives and the database's settings are the configuration, not other work.
    assert!(r.caveats.is_empty(), "{:#?}", r.caveats);
    assert!(!md.contains("different work"), "{md}");
    assert!(md.contains("The runs agree on database"), "{md}");

    // Named by label in the title, every table header and the terminal.
    assert!(
        md.starts_with("# iodig compare: Solidigm D5-P5316 vs Micron 9300\n"),
        "{md}"
    );
    assert!(
        md.contains("| threads | Solidigm D5-P5316 ops/s | Solidigm D5-P5316 read p99 ms | Micron 9300 ops/s | Micron 9300 read p99 ms | Micron 9300 advantage | Micron 9300 read p99 |"),
        "{md}"
    );
    assert!(r.summary_markdown.contains("Micron 9300 advantage"));
    assert!(!md.contains("| fast") && !md.contains("| slow"), "{md}");

    // The configuration table: what differs first, devices leading; the rest folded.
    let config = md.split("## Configuration").nth(1).unwrap();
    let rows: Vec<&str> = config
        .lines()
        .filter(|l| l.starts_with("| "))
        .take(8)
        .collect();
    assert_eq!(
        rows[0],
        "| configuration | Solidigm D5-P5316 | Micron 9300 |"
    );
    assert_eq!(rows[1], "| device | nvme0n1 | nvme1n1 |", "{config}");
    assert_eq!(
        rows[2],
        "| device model | Generated NVMe SSD | Micron_9300_MTFDHAL3T8TDP |"
    );
    for differs in [
        "| data directory | /data/cassandra | /data/b/cassandra |",
        "| cassandra.compaction | – | LeveledCompactionStrategy |",
        "| cassandra.storagedir | /data/a | /data/b |",
    ] {
        assert!(config.contains(differs), "{differs}\n{config}");
    }
    let (differ, equal) = config.split_once("<details>").unwrap();
    assert!(equal.contains("| file system | xfs | xfs |"), "{equal}");
    // The scheduler in effect, not the list on offer: "none" in both.
    assert!(equal.contains("| IO scheduler | none | none |"), "{equal}");
    assert!(!differ.contains("| file system |"), "{differ}");
    assert!(html.contains("<details><summary>Equal in every run ("));
    assert!(
        r.summary_markdown.contains(
            "## Configuration: what differs\n\n| configuration | Solidigm D5-P5316 | Micron 9300 |"
        ),
        "{}",
        r.summary_markdown
    );

    // Three repetitions each: every ratio of the wide table carries its 95% interval.
    let wide: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("| 8 |") || l.starts_with("| 64 |"))
        .take(2)
        .collect();
    for row in &wide {
        assert_eq!(row.matches("(95% CI ").count(), 2, "{row}");
    }
    assert!(!md.contains("Ratios without a 95% interval"), "{md}");
    let peak = md
        .lines()
        .find(|l| l.starts_with("| workloada | Micron 9300 | "))
        .unwrap();
    assert_eq!(peak.matches("(95% CI ").count(), 2, "{peak}");

    // The CSV names the runs the same way and gives the ratios as numbers with intervals.
    let csv = std::fs::read_to_string(tmp.path().join("out/compare-ops.csv")).unwrap();
    let row = csv
        .lines()
        .find(|l| l.starts_with("workloada,8,Micron 9300,false,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let f: Vec<&str> = row.split(',').collect();
    let (ratio, lo, hi): (f64, f64, f64) = (
        f[7].parse().unwrap(),
        f[8].parse().unwrap(),
        f[9].parse().unwrap(),
    );
    assert!(lo < ratio && ratio < hi && ratio > 1.2, "{row}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("workloada,8,Solidigm D5-P5316,true,")),
        "{csv}"
    );
}

#[test]
fn one_repetition_says_why_a_ratio_has_no_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    generate(
        &FixtureSpec {
            repetitions: 1,
            ..spec(1.0, 1)
        },
        &a,
    )
    .unwrap();
    generate(
        &FixtureSpec {
            repetitions: 1,
            ..spec(1.5, 2)
        },
        &b,
    )
    .unwrap();
    let (r, md, _) = compare(tmp.path(), vec![a, b], 50.0);
    assert!(!md.contains("(95% CI "), "{md}");
    assert!(
        md.contains("Ratios without a 95% interval (one repetition each)"),
        "{md}"
    );
    assert!(r.summary_markdown.contains("one repetition each"));
    assert!(md.contains("| no interval: one repetition each |"), "{md}");
}

#[test]
fn unusable_names_are_refused_naming_the_argument() {
    let tmp = tempfile::tempdir().unwrap();
    let (slow, fast) = runs(tmp.path());
    let err = |runs: Vec<PathBuf>| {
        let e = write_compare(&CompareOptions {
            runs,
            out: tmp.path().join("o"),
            fail_on_regression_pct: None,
            op: None,
        })
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        format!("{e:#}")
    };
    let arg = |label: &str, dir: &Path| PathBuf::from(format!("{label}={}", dir.display()));
    let e = err(vec![slow.clone(), arg("", &fast)]);
    assert!(
        e.contains(&format!("={}: ", fast.display())) && e.contains("empty"),
        "{e}"
    );
    let e = err(vec![slow.clone(), arg("two\nlines", &fast)]);
    assert!(
        e.contains("two\nlines=") && e.contains("control character"),
        "{e}"
    );
    let e = err(vec![arg("Same", &slow), arg("Same", &fast)]);
    assert!(
        e.contains(&format!(
            "Same={} and Same={}",
            slow.display(),
            fast.display()
        )) && e.contains("both runs are named \"Same\""),
        "{e}"
    );
    // A label equal to another run's directory name is as ambiguous.
    let e = err(vec![slow.clone(), arg("slow", &fast)]);
    assert!(e.contains("both runs are named \"slow\""), "{e}");
    let nowhere = tmp.path().join("nowhere");
    let e = err(vec![slow.clone(), arg("Micron 9300", &nowhere)]);
    assert!(
        e.starts_with(&format!("Micron 9300={}: not a run: ", nowhere.display())),
        "{e}"
    );
    // A run.json label that could not be a label is refused too, with the way out.
    edit_run(&fast, |d| d.config.label = Some(" ".into())).unwrap();
    let e = err(vec![slow.clone(), fast.clone()]);
    assert!(
        e.contains("its run.json's label") && e.contains("LABEL="),
        "{e}"
    );
    // Named on the command line, it compares.
    write_compare(&CompareOptions {
        runs: vec![slow, arg("fast", &fast)],
        out: tmp.path().join("o"),
        fail_on_regression_pct: None,
        op: None,
    })
    .unwrap();
}
