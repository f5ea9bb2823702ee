//! `iodig run --resume`: a sweep killed with SIGKILL (in its second step, in its load) and
//! resumed ends as a clean run would, in the same structure and with the same per-step seeds,
//! its finished steps byte for byte as they were; runs that cannot be resumed, and flags that
//! would change the experiment, are refused with exit 2 and the reason.

mod common;

use common::{expect_usage_error, kill_seed, read_json, run_iodig, IodigArgs, Run};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The run directories in `out`, oldest first (they are named by their start time).
fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("run.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Every file under `dir`, relative, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Resumes the run to its end and returns its steps' directories as run.json lists them
/// (quoted), after checking it completed.
fn resumed_step_dirs(run_dir: &Path) -> Vec<String> {
    let r = resume(run_dir);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let (status, steps, _) = structure(run_dir);
    assert_eq!(status, "completed");
    steps
        .iter()
        .map(|s| s.split(' ').nth(1).unwrap().to_string())
        .collect()
}

/// What a run is made of, whatever was measured: its status, each step's place, phase,
/// workload and threads, and the names of every file in the run directory.
fn structure(run_dir: &Path) -> (String, Vec<String>, Vec<String>) {
    let run = read_json(&run_dir.join("run.json"));
    let steps = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{} {} {} {} t{}",
                s["index"], s["dir"], s["phase"], s["workload"], s["threads"]
            )
        })
        .collect();
    (
        run["status"].as_str().unwrap().to_string(),
        steps,
        files(run_dir).into_keys().collect(),
    )
}

/// Starts `args`, and SIGKILLs it `after` once `due` says so (given the run directory, when
/// there is one); returns the run directory it made. Panics if the run ended first.
fn run_and_kill(
    args: &IodigArgs,
    out: &Path,
    due: impl Fn(Option<&Path>) -> bool,
    after: Duration,
) -> PathBuf {
    let mut child = args
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        let dir = run_dirs(out).pop();
        if due(dir.as_deref()) {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its kill"
        );
        assert!(t.elapsed() < Duration::from_secs(120), "never due");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(after);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before its kill"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    run_dirs(out).pop().expect("a run directory")
}

/// The number of steps run.json lists.
fn steps_listed(run_dir: &Path) -> usize {
    std::fs::read(run_dir.join("run.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|r| r["steps"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Each step's operations per series, the figures the seed decides when every worker runs a
/// fixed count of operations.
fn ops_per_step(run_dir: &Path) -> Vec<BTreeMap<String, u64>> {
    let run = read_json(&run_dir.join("run.json"));
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["series"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v["count"].as_u64().unwrap()))
                .collect()
        })
        .collect()
}

fn resume(dir: &Path) -> Run {
    run_iodig(&["run", "--resume", dir.to_str().unwrap()])
}

/// A basic sweep of 1, 2 and 4 threads, each step a fixed count of operations at a target rate
/// (about 1.5 s): which operations a worker draws depends only on the seed and its index.
fn paced_sweep(out: &Path) -> IodigArgs {
    IodigArgs::run_basic("workloada", out)
        .threads("1,2,4")
        .target("2000")
        .warmup("0s")
        .props(&["recordcount=1000", "operationcount=3000"])
}

#[test]
fn a_sweep_killed_in_its_second_step_and_resumed_equals_a_clean_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("killed");
    std::fs::create_dir_all(&out).unwrap();
    // No --seed: the seed comes from the clock and pid, and only run.json knows it.
    // 0.7 s into the second step (1.5 s long).
    let run_dir = run_and_kill(
        &paced_sweep(&out),
        &out,
        |d| d.is_some_and(|d| steps_listed(d) == 1),
        Duration::from_millis(700),
    );
    let before = files(&run_dir.join("steps/00-workloada-t1"));
    assert!(before.contains_key("summary.json"), "{:?}", before.keys());
    assert_eq!(steps_listed(&run_dir), 1);

    let r = resume(&run_dir);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("resuming {} at step 1", run_dir.display())),
        "{}",
        r.stderr
    );
    assert_eq!(r.run_dir(), run_dir);
    // The finished step, byte for byte as before the kill.
    assert_eq!(files(&run_dir.join("steps/00-workloada-t1")), before);

    let run = read_json(&run_dir.join("run.json"));
    let seed = run["config"]["seed"].as_u64().unwrap();
    let notes: Vec<&str> = run["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes.iter().any(|n| n.starts_with("Resumed at ")
            && n.contains("killed during step 1")
            && n.contains("step 0 was kept as it was")),
        "{notes:?}"
    );
    assert!(
        !notes.iter().any(|n| n.contains("The run was killed")),
        "{notes:?}"
    );

    // A clean run of the same command with the recorded seed.
    let clean_out = dir.path().join("clean");
    let clean = paced_sweep(&clean_out)
        .arg("--seed")
        .arg(seed.to_string())
        .output();
    assert_eq!(clean.code(), 0, "{}", clean.stderr);
    let clean_dir = clean.run_dir();
    assert_eq!(structure(&run_dir), structure(&clean_dir));
    assert_eq!(
        read_json(&run_dir.join("run.json"))["config"],
        read_json(&clean_dir.join("run.json"))["config"]
    );
    // The same seed per step: every step drew the same operations as the clean run's.
    assert_eq!(ops_per_step(&run_dir), ops_per_step(&clean_dir));

    // Now it is finished: resuming it again is refused.
    expect_usage_error(
        &["run", "--resume", run_dir.to_str().unwrap()],
        &["already completed"],
    );
}

#[test]
fn a_sweep_interrupted_with_sigterm_runs_its_interrupted_step_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let mut child = paced_sweep(&out)
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let run_dir = loop {
        if let Some(d) = run_dirs(&out).pop().filter(|d| steps_listed(d) == 1) {
            break d;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "step 0 never ended");
        std::thread::sleep(Duration::from_millis(5));
    };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let run = read_json(&run_dir.join("run.json"));
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["steps"][1]["interrupted"], true);
    let step0 = files(&run_dir.join("steps/00-workloada-t1"));

    let r = resume(&run_dir);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(files(&run_dir.join("steps/00-workloada-t1")), step0);
    let run = read_json(&run_dir.join("run.json"));
    assert_eq!(run["status"], "completed");
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert!(steps.iter().all(|s| s["interrupted"] == false), "{steps:?}");
    assert_eq!(steps[1]["operations"], 3000);
    assert!(
        run["notes"]
            .to_string()
            .contains("interrupted during step 1"),
        "{}",
        run["notes"]
    );
}

/// `iodig run --db rocksdb` of 20,000 records with 1-second steps, untraced.
fn rocksdb_sweep(out: &Path, records: &str) -> IodigArgs {
    IodigArgs::run()
        .db("rocksdb")
        .p(format!("recordcount={records}"))
        .threads("1,2")
        .duration("1s")
        .warmup("0s")
        .trace("off")
        .out(out)
}

#[test]
fn a_rocksdb_sweep_killed_in_its_load_or_after_it_resumes_and_refuses_another_dataset() {
    let dir = tempfile::Builder::new()
        .prefix("iodig-resume-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let out = dir.path();

    // Killed in its load, as soon as the run directory appears: the load runs again.
    let run_dir = run_and_kill(
        &rocksdb_sweep(out, "20000"),
        out,
        |d| d.is_some(),
        Duration::ZERO,
    );
    assert_eq!(steps_listed(&run_dir), 0);
    let dirs = resumed_step_dirs(&run_dir);
    assert_eq!(
        dirs,
        [
            "\"steps/00-load\"",
            "\"steps/01-workloada-t1\"",
            "\"steps/02-workloada-t2\""
        ]
    );

    // Killed in its first run step after a load of its own: the load is kept, not redone.
    let out2 = dir.path().join("second");
    let run_dir = run_and_kill(
        &rocksdb_sweep(&out2, "20000").arg("--reload"),
        &out2,
        |d| d.is_some_and(|d| steps_listed(d) == 1),
        Duration::from_millis(400),
    );
    let load = files(&run_dir.join("steps/00-load"));
    let r = resume(&run_dir);
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("holds the dataset the run's finished steps ran on"),
        "{}",
        r.stderr
    );
    assert_eq!(files(&run_dir.join("steps/00-load")), load);
    assert_eq!(structure(&run_dir).1.len(), 3);

    // Killed again after its load; then another dataset is loaded into its data directory:
    // the rest of the sweep would not run on the data its steps ran on.
    let run_dir = run_and_kill(
        &rocksdb_sweep(&out2, "20000").arg("--reload"),
        &out2,
        |d| d.is_some_and(|d| steps_listed(d) == 1),
        Duration::from_millis(400),
    );
    let other = IodigArgs::load()
        .db("rocksdb")
        .p("recordcount=500")
        .threads("1")
        .trace("off")
        .out(&out2)
        .output();
    assert_eq!(other.code(), 0, "{}", other.stderr);
    let before = files(&run_dir);
    expect_usage_error(
        &["run", "--resume", run_dir.to_str().unwrap()],
        &["dataset no longer matches", "another dataset"],
    );
    // A refusal changes nothing.
    assert_eq!(files(&run_dir), before);
}

#[test]
fn sigkill_at_any_moment_of_a_run_or_of_its_resumes_leaves_a_run_that_resumes() {
    let dir = tempfile::Builder::new()
        .prefix("iodig-resume-kill-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let out = dir.path();
    let mut x = kill_seed();
    let mut run_dir: Option<PathBuf> = None;
    // Each finished step's files as first seen: no later resume may change them.
    let mut finished: BTreeMap<String, BTreeMap<String, Vec<u8>>> = BTreeMap::new();
    for i in 0..5 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(x % 2500);
        let args = match &run_dir {
            None => rocksdb_sweep(out, "20000"),
            Some(d) => IodigArgs::verbatim(&["run", "--resume", d.to_str().unwrap()]),
        };
        let mut child = args
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        while t.elapsed() < delay && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let killed = child.try_wait().unwrap().is_none();
        if killed {
            child.kill().unwrap(); // SIGKILL
        }
        let o = child.wait_with_output().unwrap();
        eprintln!("run {i}: killed {killed} after {delay:?}");
        // One that ended on its own completed: a kill never leaves a run it refuses.
        assert!(
            killed || o.status.success(),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        if run_dir.is_none() {
            run_dir = run_dirs(out).pop();
        }
        let Some(d) = &run_dir else { continue };
        let run = read_json(&d.join("run.json"));
        for s in run["steps"].as_array().unwrap() {
            let rel = s["dir"].as_str().unwrap().to_string();
            let now = files(&d.join(&rel));
            let then = finished.entry(rel.clone()).or_insert_with(|| now.clone());
            assert_eq!(*then, now, "{rel} changed after it finished");
        }
        if run["status"] == "completed" {
            break;
        }
    }
    let d = run_dir.expect("a run directory");
    if read_json(&d.join("run.json"))["status"] != "completed" {
        let r = resume(&d);
        assert_eq!(r.code(), 0, "{}", r.stderr);
    }
    let (status, steps, names) = structure(&d);
    assert_eq!(status, "completed");
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert!(steps[0].contains("steps/00-load"), "{steps:?}");
    assert!(
        !names
            .iter()
            .any(|n| n.rsplit('/').next().unwrap().starts_with('.')),
        "temporary files left: {names:?}"
    );
    for (rel, then) in &finished {
        assert_eq!(
            *then,
            files(&d.join(rel)),
            "{rel} changed after it finished"
        );
    }
}

#[test]
fn versioned_writes_killed_and_resumed_still_verify_clean() {
    let dir = tempfile::Builder::new()
        .prefix("iodig-resume-verify-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let out = dir.path();
    let args = rocksdb_sweep(out, "5000")
        .p("versionedwrites=true")
        .verify();
    let run_dir = run_and_kill(
        &args,
        out,
        |d| d.is_some_and(|d| steps_listed(d) == 2),
        Duration::from_millis(400),
    );
    let r = resume(&run_dir);
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    let run = read_json(&run_dir.join("run.json"));
    assert_eq!(run["status"], "completed");
    let integrity = &run["integrity"];
    assert_eq!(integrity["checked_by"], "run", "{integrity}");
    for verdict in ["missing", "stale", "corrupt", "unreadable"] {
        assert_eq!(integrity[verdict], 0, "{verdict}: {integrity}");
    }
    assert!(integrity["ok"].as_u64().unwrap() > 0, "{integrity}");
}

#[test]
fn a_stop_rule_met_before_the_kill_still_leaves_its_thread_counts_out() {
    let dir = tempfile::tempdir().unwrap();
    // Met by every step: each repetition's sweep ends at its first thread count.
    let file = dir.path().join("exp.toml");
    std::fs::write(
        &file,
        "db = \"basic\"\nrepetitions = 2\nwarmup = \"0s\"\ntrace = \"off\"\ntarget = 2000\nstop_when = \"read.p99 < 100s\"\n\n[properties]\nrecordcount = 1000\noperationcount = 3000\n\n[[workload]]\nfile = \"workloada\"\nthreads = [1, 2, 4]\n",
    )
    .unwrap();
    let out = dir.path().join("runs");
    let run_dir = run_and_kill(
        &IodigArgs::run().experiment(&file).out(&out),
        &out,
        |d| d.is_some_and(|d| steps_listed(d) == 1),
        Duration::from_millis(500),
    );
    let dirs = resumed_step_dirs(&run_dir);
    assert_eq!(
        dirs,
        [
            "\"steps/00-workloada-t1-r1\"",
            "\"steps/01-workloada-t1-r2\""
        ]
    );
}

#[test]
fn a_run_with_a_relative_out_resumes_from_the_directory_it_was_started_in() {
    let dir = tempfile::tempdir().unwrap();
    let started_in = dir.path().join("here");
    std::fs::create_dir_all(&started_in).unwrap();
    let args = IodigArgs::run_basic("workloada", "runs")
        .threads("1,2")
        .target("2000")
        .warmup("0s")
        .props(&["recordcount=1000", "operationcount=3000"]);
    let mut child = args
        .command()
        .current_dir(&started_in)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = started_in.join("runs");
    let t = Instant::now();
    let run_dir = loop {
        if let Some(d) = run_dirs(&out).pop().filter(|d| steps_listed(d) == 1) {
            break d;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "step 0 never ended");
        std::thread::sleep(Duration::from_millis(5));
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let run = run_dir.to_str().unwrap();
    // From elsewhere, `--out runs` names another directory.
    let elsewhere = common::iodig()
        .args(["run", "--resume", run])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&elsewhere.stderr);
    assert_eq!(elsewhere.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("resume from the directory the run was started in"),
        "{stderr}"
    );
    let there = common::iodig()
        .args(["run", "--resume"])
        .arg(Path::new("runs").join(run_dir.file_name().unwrap()))
        .current_dir(&started_in)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&there.stderr);
    assert_eq!(there.status.code(), Some(0), "{stderr}");
    assert_eq!(structure(&run_dir).1.len(), 2);
}

#[test]
fn what_cannot_be_resumed_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // Another schema version names both.
    let other = dir.path().join("other-schema");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("run.json"),
        r#"{"schema_version": 7, "tool": {"version": "9.0.0"}}"#,
    )
    .unwrap();
    expect_usage_error(
        &["run", "--resume", other.to_str().unwrap()],
        &["--resume", "schema version 7"],
    );
    // A run of schema 1 (series inline) is read, but not continued in schema 2.
    let old =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/report/tests/fixtures/schema1-run");
    expect_usage_error(
        &["run", "--resume", old.to_str().unwrap()],
        &["--resume", "schema version 1", "writes schema version 2"],
    );
    expect_usage_error(
        &["run", "--resume", d],
        &["--resume", "not a run directory"],
    );
    expect_usage_error(
        &["run", "--resume", &format!("{d}/nothing-here")],
        &["no such directory"],
    );

    // A run killed in its second step, then asked to go on with something else.
    let out = dir.path().join("runs");
    std::fs::create_dir_all(&out).unwrap();
    let workload = dir.path().join("mine");
    std::fs::write(&workload, "workload=site.ycsb.workloads.CoreWorkload\nreadproportion=0.5\nupdateproportion=0.5\nrecordcount=1000\noperationcount=3000\n").unwrap();
    let args = IodigArgs::run_basic(workload.to_str().unwrap(), &out)
        .threads("1,2")
        .target("2000")
        .warmup("0s");
    let run_dir = run_and_kill(
        &args,
        &out,
        |d| d.is_some_and(|d| steps_listed(d) == 1),
        Duration::from_millis(500),
    );
    let run = run_dir.to_str().unwrap();
    let before = files(&run_dir);
    expect_usage_error(
        &["run", "--resume", run, "--threads", "8"],
        &["--threads with --resume", "would change the experiment"],
    );
    expect_usage_error(
        &["run", "--resume", run, "-p", "recordcount=5"],
        &[
            "-p recordcount=5 with --resume",
            "would change the experiment",
        ],
    );
    expect_usage_error(&["load", "--resume", run], &["iodig load --resume"]);
    // The workload file changed since the run started.
    std::fs::write(&workload, "workload=site.ycsb.workloads.CoreWorkload\nreadproportion=0.9\nupdateproportion=0.1\nrecordcount=1000\noperationcount=3000\n").unwrap();
    expect_usage_error(
        &["run", "--resume", run],
        &[
            "no longer resolves to the one the run recorded",
            "readproportion was",
        ],
    );
    // Refusals leave the run as the kill left it.
    assert_eq!(files(&run_dir), before);
}
