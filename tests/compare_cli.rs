//! The briefs' comparison on real runs: short `iodig run` sweeps on embedded RocksDB with
//! different thread lists, one of them cut short by `--stop-when`, compared with `iodig
//! compare`; the wide table, "(not tested)", the advantage figures and the SVG charts are
//! checked against the runs' own run.json. A drive comparison of labelled runs (data on two
//! devices) checks the labels in every header and legend, the configuration table and that a
//! changed data directory is no "different work".

mod common;

use common::*;
use iodig_report::compare::{better, lower};
use iodig_report::doc::{thousands, us_as_ms};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A short RocksDB sweep (real block IO: under /var/tmp, not a tmpfs) into `out`.
fn rocksdb_run(out: &Path, threads: &str, extra: &[&str]) -> Run {
    let r = IodigArgs::run()
        .p("recordcount=2000")
        .threads(threads)
        .duration("1s")
        .warmup("0s")
        .trace("off")
        .out(out)
        .args(extra)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    r
}

/// The measured steps of a run: threads → (ops/s, READ summary).
fn points(run: &Value) -> Vec<(u64, f64, Value)> {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["phase"] == "run")
        .map(|s| {
            (
                s["threads"].as_u64().unwrap(),
                s["throughput_ops_per_sec"].as_f64().unwrap(),
                s["series"]["READ"].clone(),
            )
        })
        .collect()
}

fn at(points: &[(u64, f64, Value)], threads: u64) -> &(u64, f64, Value) {
    points.iter().find(|p| p.0 == threads).unwrap()
}

fn us(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap()
}

/// The one file in `dir` whose name holds `part`.
fn file_with(dir: &Path, part: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(part))
        .collect();
    assert_eq!(found.len(), 1, "{part}: {found:?}");
    found[0].clone()
}

/// `data-value` of the bar of `series` at `category`, or its `data-missing` text.
fn bar(svg: &str, series: &str, category: &str) -> Result<f64, String> {
    let key = format!(r#"data-series="{series}" data-category="{category}" "#);
    let at = svg
        .find(&key)
        .unwrap_or_else(|| panic!("no bar {series} × {category}"));
    let rest = &svg[at + key.len()..];
    let attr = |name: &str| {
        rest.strip_prefix(&format!("{name}=\""))
            .map(|r| r[..r.find('"').unwrap()].to_string())
    };
    match (attr("data-value"), attr("data-missing")) {
        (Some(v), _) => Ok(v.parse().unwrap()),
        (_, Some(m)) => Err(m),
        _ => panic!("bar {series} × {category} has neither value nor reason"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn real_sweeps_compare_over_the_union_of_thread_counts_with_the_briefs_figures() {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let a = rocksdb_run(&tmp.path().join("a"), "1,2", &[]);
    let b = rocksdb_run(&tmp.path().join("b"), "1,2,4", &[]);
    let (a_dir, b_dir) = (a.run_dir(), b.run_dir());
    let (a_name, b_name) = (
        a_dir.file_name().unwrap().to_string_lossy().into_owned(),
        b_dir.file_name().unwrap().to_string_lossy().into_owned(),
    );
    let (pa, pb) = (points(&a.run_json()), points(&b.run_json()));
    assert_eq!(pa.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(pb.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2, 4]);

    let out = tmp.path().join("comparison");
    let c = run_iodig(&[
        "compare",
        a_dir.to_str().unwrap(),
        b_dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    assert!(
        c.stdout
            .contains(&format!("compare: written to {}", out.display())),
        "{}",
        c.stdout
    );
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();

    // The wide table: threads | A ops/s, read p99 | B ops/s, read p99 | advantage | p99 ratio,
    // over 1, 2 and 4 threads; A never ran 4.
    let header = format!(
        "| threads | {a_name} ops/s | {a_name} read p99 ms | {b_name} ops/s | {b_name} read p99 ms | {b_name} advantage | {b_name} read p99 |"
    );
    assert!(md.contains(&header), "{header}\n{md}");
    for t in [1, 2] {
        let (ra, rb) = (at(&pa, t), at(&pb, t));
        let row = format!(
            "| {t} | {} | {} | {} | {} | {} | {} |",
            thousands(ra.1),
            us_as_ms(us(&ra.2, "p99_us")),
            thousands(rb.1),
            us_as_ms(us(&rb.2, "p99_us")),
            better(rb.1 / ra.1),
            lower(us(&ra.2, "p99_us"), us(&rb.2, "p99_us")),
        );
        assert!(md.contains(&row), "{row}\n{md}");
    }
    let rb4 = at(&pb, 4);
    let row4 = format!(
        "| 4 | (not tested) |  | {} | {} | — | — |",
        thousands(rb4.1),
        us_as_ms(us(&rb4.2, "p99_us"))
    );
    assert!(md.contains(&row4), "{row4}\n{md}");
    assert!(c.stdout.contains(&row4), "the wide table is printed too");
    assert!(
        md.contains(&format!("{a_name} did not test workloada at 4 threads")),
        "{md}"
    );

    // Maximum performance: each run's peak, read p99.99 there.
    let peak =
        |p: &[(u64, f64, Value)]| p.iter().max_by(|x, y| x.1.total_cmp(&y.1)).unwrap().clone();
    let (ka, kb) = (peak(&pa), peak(&pb));
    let max_row = format!(
        "| workloada | {b_name} | {} | {} | {} | {} | {} |",
        thousands(kb.1),
        kb.0,
        better(kb.1 / ka.1),
        us_as_ms(us(&kb.2, "p9999_us")),
        lower(us(&ka.2, "p9999_us"), us(&kb.2, "p9999_us"))
    );
    assert!(md.contains(&max_row), "{max_row}\n{md}");

    // The charts, as SVG files beside compare.md (which shows them) and inline in the HTML.
    let rel = std::fs::read_to_string(file_with(&out, "relative-performance")).unwrap();
    for t in [1, 2] {
        let cat = format!("a {t}t");
        assert_eq!(bar(&rel, &a_name, &cat), Ok(1.0));
        let v = bar(&rel, &b_name, &cat).unwrap();
        assert!(close(v, at(&pb, t).1 / at(&pa, t).1), "{cat}: {v}");
    }
    assert_eq!(bar(&rel, &a_name, "a 4t"), Err("not tested".into()));
    assert_eq!(bar(&rel, &b_name, "a 4t"), Err("no baseline".into()));
    assert_eq!(rel.matches("<rect data-series").count(), 4, "2 × 2 bars");

    for (part, key) in [
        ("relative-p99-read", "p99_us"),
        ("relative-p99-99-read", "p9999_us"),
    ] {
        let svg = std::fs::read_to_string(file_with(&out, part)).unwrap();
        for t in [1, 2] {
            let v = bar(&svg, &b_name, &format!("a {t}t")).unwrap();
            let want = us(&at(&pb, t).2, key) / us(&at(&pa, t).2, key);
            assert!(close(v, want), "{part} {t}: {v} vs {want}");
        }
    }
    let p999 = std::fs::read_to_string(file_with(&out, "p99-9-read")).unwrap();
    let v = bar(&p999, &b_name, "a 4t").unwrap();
    assert!(close(v, us(&rb4.2, "p999_us") / 1000.0), "{v}");
    assert_eq!(bar(&p999, &a_name, "a 4t"), Err("not tested".into()));

    let max = std::fs::read_to_string(file_with(&out, "maximum-performance")).unwrap();
    assert!(close(bar(&max, &a_name, "workloada").unwrap(), ka.1));
    assert!(close(bar(&max, &b_name, "workloada").unwrap(), kb.1));
    assert!(max.contains(&better(kb.1 / ka.1)), "the bar says its ratio");

    let workers = std::fs::read_to_string(file_with(&out, "average-read-latency-by")).unwrap();
    assert!(workers.contains("rotate(90)"), "a second y axis");
    assert_eq!(
        workers.matches("<circle").count(),
        2 * (2 + 3),
        "ops/s and avg read latency per tested point"
    );
    // The chart's mean comes from the step's HDR histogram (3 significant digits), run.json's
    // from the exact sum: they agree to 0.1 % (exactly, unless a read took over 2 ms).
    let avg_ms = us(&at(&pa, 2).2, "mean_us") / 1000.0;
    let drawn = bar(&workers, &format!("{a_name} avg read ms"), "2").unwrap();
    assert!(
        (drawn - avg_ms).abs() <= 1e-3 * avg_ms,
        "{drawn} vs {avg_ms}"
    );

    let svgs = std::fs::read_dir(&out)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "svg")
        })
        .count();
    assert_eq!(svgs, 7, "max, 3 relative, p99.9, curves, workers");
    assert_eq!(md.matches("](compare-").count(), 7, "compare.md shows each");
    let html = std::fs::read_to_string(out.join("compare.html")).unwrap();
    assert_eq!(html.matches("<svg ").count(), 7);
}

#[test]
fn a_stop_rule_ends_the_sweep_and_the_rest_reads_not_tested() {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    // Any real read takes a microsecond or more: the first step meets the rule.
    let r = rocksdb_run(
        &tmp.path().join("s"),
        "1,2,4",
        &["--stop-when", "read.p99 > 1us"],
    );
    let run = r.run_json();
    assert_eq!(run["config"]["stop_when"], "read.p99 > 1us");
    let steps: Vec<&Value> = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["phase"] == "run")
        .collect();
    assert_eq!(steps.len(), 1, "2 and 4 threads not run");
    let p99 = us_as_ms(steps[0]["series"]["READ"]["p99_us"].as_f64().unwrap());
    let reason = format!("read.p99 {p99} ms > 1us");
    assert_eq!(steps[0]["sweep_stop"]["reason"], reason.as_str());
    assert_eq!(steps[0]["sweep_stop"]["skipped"], serde_json::json!([2, 4]));
    assert!(
        r.stderr.contains(&format!(
            "stop rule met by workloada at 1 threads ({reason}): not testing 2, 4 threads"
        )),
        "{}",
        r.stderr
    );
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    let index = steps[0]["index"].as_u64().unwrap();
    for t in [2, 4] {
        let row = format!(
            "| {t} | (not tested) |  |  |  |  |  |  |  |  | stopped at 1 threads (step {index}): {reason} |"
        );
        assert!(md.contains(&row), "{row}\n{md}");
    }
    assert!(md.contains("| stop rule | read.p99 > 1us"), "{md}");
    let csv = std::fs::read_to_string(r.run_dir().join("report-ops.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.starts_with("workloada,4,0,") && l.contains("not tested: stopped at 1")),
        "{csv}"
    );

    // Compared with a full sweep, the stopped run's thread counts read "(not tested)".
    let full = rocksdb_run(&tmp.path().join("f"), "1,2", &[]);
    let out = tmp.path().join("cmp");
    let c = run_iodig(&[
        "compare",
        full.run_dir().to_str().unwrap(),
        r.run_dir().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let full_2 = at(&points(&full.run_json()), 2).clone();
    let row = format!(
        "| 2 | {} | {} | (not tested) |  | — | — |",
        thousands(full_2.1),
        us_as_ms(us(&full_2.2, "p99_us"))
    );
    assert!(md.contains(&row), "{row}\n{md}");
    assert!(
        md.contains("| 4 | (not tested) |  | (not tested) |  | — | — |"),
        "{md}"
    );
    assert!(md.contains("its sweep stopped at 1 threads"), "{md}");
}

/// The brief's drive comparison on real runs: the same workload with its data on two devices
/// (the VM's disk and a loop device; a tmpfs without root), each run labelled like the briefs'
/// drives, compared by label.
#[test]
fn a_drive_comparison_of_labelled_runs_names_them_everywhere_and_shows_what_differs() {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let (micron, solidigm) = ("Micron 9300", "Solidigm D5-P5316");
    // The other device: a loop device over a file in memory, or a tmpfs directory.
    let loop_fs = is_root().then(|| loopfs::LoopFs::new(Path::new("/dev/shm"), "1G"));
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    let other = loop_fs.as_ref().map_or(shm.path(), |fs| fs.mnt.as_path());
    let db = other.join("db");
    let a = rocksdb_run(&tmp.path().join("a"), "1,2", &["--label", micron]);
    let b = rocksdb_run(
        &tmp.path().join("b"),
        "1,2",
        &[
            "--label",
            solidigm,
            "-p",
            &format!("rocksdb.dir={}", db.display()),
        ],
    );
    let (ja, jb) = (a.run_json(), b.run_json());
    assert_eq!(ja["config"]["label"], micron);
    assert_eq!(jb["config"]["label"], solidigm);
    let device = |j: &Value| {
        j["environment"]["storage"]["device"]
            .as_str()
            .map(String::from)
    };
    let (dev_a, dev_b) = (device(&ja), device(&jb));
    assert_ne!(dev_a, dev_b, "the two data directories are on two devices");

    let (a_dir, b_dir) = (a.run_dir(), b.run_dir());
    let out = tmp.path().join("cmp");
    let c = run_iodig(&[
        "compare",
        a_dir.to_str().unwrap(),
        b_dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let dir_names = [a_dir.file_name().unwrap(), b_dir.file_name().unwrap()]
        .map(|n| n.to_string_lossy().into_owned());

    // Every table header names the runs by label; the directories appear only where the runs
    // are listed with their paths.
    assert!(md.starts_with(&format!("# iodig compare: {micron} vs {solidigm}\n")));
    let lines: Vec<&str> = md.lines().collect();
    let headers: Vec<&str> = lines
        .windows(2)
        .filter(|w| w[0].starts_with('|') && w[1].starts_with("|-"))
        .map(|w| w[0])
        .collect();
    assert!(headers.len() >= 6, "{md}");
    for h in &headers {
        for d in &dir_names {
            assert!(!h.contains(d.as_str()), "{h}");
        }
    }
    for want in [
        format!("| configuration | {micron} | {solidigm} |"),
        format!("| threads | {micron} ops/s | {micron} read p99 ms | {solidigm} ops/s | {solidigm} read p99 ms | {solidigm} advantage | {solidigm} read p99 |"),
    ] {
        assert!(headers.contains(&want.as_str()), "{want}\n{headers:#?}");
    }
    for l in lines
        .iter()
        .filter(|l| dir_names.iter().any(|d| l.contains(d.as_str())))
    {
        assert!(
            l.starts_with(&format!("| {micron} (baseline) | "))
                || l.starts_with(&format!("| {solidigm} | ")),
            "a directory name outside the run list: {l}"
        );
    }
    // Rows that name a run name it by label.
    assert!(md.contains(&format!("| 1 | {solidigm} | ")), "{md}");
    assert!(md.contains(&format!("| workloada | {micron} | ")), "{md}");
    assert!(
        c.stdout.contains(&format!("{solidigm} advantage")),
        "{}",
        c.stdout
    );

    // Every chart's legend: the labels, never the directories.
    for e in std::fs::read_dir(&out).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "svg") {
            let svg = std::fs::read_to_string(&p).unwrap();
            assert!(
                svg.contains(micron) && svg.contains(solidigm),
                "{}",
                p.display()
            );
            assert!(
                dir_names.iter().all(|d| !svg.contains(d.as_str())),
                "{}",
                p.display()
            );
        }
    }

    // The data directory changed on purpose: configuration, not "different work".
    assert!(!md.contains("different work"), "{md}");
    // The configuration table: the differing devices first, the data directory among the
    // differences, the kernel (the same machine) folded with what is equal.
    let config = md.split("## Configuration\n").nth(1).unwrap();
    let (differ, equal) = config.split_once("<details>").unwrap();
    let rows: Vec<&str> = differ.lines().filter(|l| l.starts_with("| ")).collect();
    let dash = |d: &Option<String>| d.clone().unwrap_or_else(|| "–".into());
    assert_eq!(
        rows[1],
        format!("| device | {} | {} |", dash(&dev_a), dash(&dev_b)),
        "{config}"
    );
    assert!(
        differ.contains(&format!(
            "| rocksdb.dir | {} |",
            a_dir.parent().unwrap().join("data/rocksdb").display()
        )),
        "{differ}"
    );
    assert!(equal.contains("| kernel | "), "{equal}");

    // One repetition each: the ratios say why they carry no interval.
    assert!(
        md.contains("Ratios without a 95% interval (one repetition each)"),
        "{md}"
    );
    assert!(md.contains("| no interval: one repetition each |"), "{md}");
    assert!(!md.contains("(95% CI "), "{md}");

    // The CSV names them alike.
    let csv = std::fs::read_to_string(out.join("compare-ops.csv")).unwrap();
    assert!(
        csv.lines()
            .any(|l| l.starts_with(&format!("workloada,1,{micron},true,"))),
        "{csv}"
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with(&format!("workloada,2,{solidigm},false,"))),
        "{csv}"
    );

    // The report of a labelled run is titled by its label.
    let r = run_iodig(&["report", b_dir.to_str().unwrap()]);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let report = std::fs::read_to_string(b_dir.join("report.md")).unwrap();
    assert!(
        report.starts_with(&format!("# iodig report: {solidigm}\n")),
        "{report}"
    );

    // LABEL=RUN_DIR on the command line wins over the recorded label.
    let out2 = tmp.path().join("cmp2");
    let c = run_iodig(&[
        "compare",
        &format!("9300 NVMe={}", a_dir.display()),
        &format!("Enterprise SATA={}", b_dir.display()),
        "--out",
        out2.to_str().unwrap(),
    ]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    let md = std::fs::read_to_string(out2.join("compare.md")).unwrap();
    assert!(md.contains("| Enterprise SATA advantage |"), "{md}");
    assert!(!md.contains(micron) && !md.contains(solidigm), "{md}");

    // Bad names exit 2 naming the argument.
    let (a_s, b_s) = (a_dir.to_str().unwrap(), b_dir.to_str().unwrap());
    let o = out2.to_str().unwrap();
    let empty = format!("={b_s}");
    expect_usage_error(&["compare", a_s, &empty, "--out", o], &[&empty, "empty"]);
    let nowhere = format!("Fast={}", tmp.path().join("nowhere").display());
    expect_usage_error(
        &["compare", a_s, &nowhere, "--out", o],
        &[&format!("{nowhere}: not a run")],
    );
    let (s1, s2) = (format!("Same={a_s}"), format!("Same={b_s}"));
    expect_usage_error(
        &["compare", &s1, &s2, "--out", o],
        &[&format!("{s1} and {s2}"), "both runs are named \"Same\""],
    );
    // `run` refuses an empty label or one with a control character before it starts.
    let (_d, out_s) = out_dir();
    for (label, says) in [("", "empty"), ("two\nlines", "control character")] {
        IodigArgs::run_basic("workloada", &out_s)
            .args(&["--label", label])
            .usage_error(&["--label", says]);
    }
}

/// Real runs with repetitions (an experiment file labelling its configuration): the advantage
/// and the p99 ratio carry a 95% interval that holds the ratio, and the CSV gives its bounds.
#[test]
fn repeated_real_runs_give_ratios_with_their_intervals() {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let run = |name: &str, label: &str| {
        let file = tmp.path().join(format!("{name}.toml"));
        std::fs::write(
            &file,
            format!(
                "repetitions = 3\nlabel = \"{label}\"\n[[workload]]\nfile = \"workloadb\"\nthreads = [1]\n"
            ),
        )
        .unwrap();
        let r = IodigArgs::run()
            .experiment(&file)
            .p("recordcount=1000")
            .duration("1s")
            .warmup("0s")
            .trace("off")
            .out(tmp.path().join(name))
            .output();
        assert_eq!(r.code(), 0, "{}", r.stderr);
        assert_eq!(r.run_json()["config"]["label"], label);
        r
    };
    let (a, b) = (run("a", "9300 NVMe"), run("b", "Enterprise SATA"));
    let out = tmp.path().join("cmp");
    let c = run_iodig(&[
        "compare",
        a.run_dir().to_str().unwrap(),
        b.run_dir().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| 1 | ") && l.contains("(95% CI "))
        .unwrap_or_else(|| panic!("{md}"));
    assert_eq!(row.matches("(95% CI ").count(), 2, "{row}");
    assert!(!md.contains("Ratios without a 95% interval"), "{md}");
    let csv = std::fs::read_to_string(out.join("compare-ops.csv")).unwrap();
    let line = csv
        .lines()
        .find(|l| l.starts_with("workloadb,1,Enterprise SATA,false,"))
        .unwrap_or_else(|| panic!("{csv}"));
    let f: Vec<f64> = line
        .split(',')
        .skip(7)
        .take(6)
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(
        f[1] <= f[0] && f[0] <= f[2],
        "ops ratio inside its interval: {line}"
    );
    assert!(f[4] > 0.0 && f[4] <= f[5], "p99 interval: {line}");
    // Every ratio and its interval come from one estimator: each point lies inside its own
    // interval, in the CSV and in every "(95% CI lo–hi)" the document prints.
    assert!(
        f[4] <= f[3] && f[3] <= f[5],
        "p99 ratio inside its interval: {line}"
    );
    let printed = findings::ratios_inside_their_intervals(&md);
    assert!(printed >= 2, "{md}");
    // A point of a sweep with repetitions is their mean: its ops/s is the mean of the
    // three steps' own.
    for (r, name) in [(&a, "9300 NVMe"), (&b, "Enterprise SATA")] {
        let steps = r.run_json()["steps"].as_array().unwrap().clone();
        let reps: Vec<f64> = steps
            .iter()
            .filter(|s| s["phase"] == "run")
            .map(|s| s["throughput_ops_per_sec"].as_f64().unwrap())
            .collect();
        assert_eq!(reps.len(), 3);
        let mean = reps.iter().sum::<f64>() / 3.0;
        let line = csv
            .lines()
            .find(|l| l.starts_with(&format!("workloadb,1,{name},")))
            .unwrap();
        let point: f64 = line.split(',').nth(4).unwrap().parse().unwrap();
        assert!(
            (point - mean).abs() <= 0.001 + 1e-9 * mean,
            "{point} vs {mean}: {line}"
        );
    }
}
