//! Versioned writes and `iodig verify` on real RocksDB: a clean run reads back every
//! acknowledged write, and a database that really loses acknowledged writes (no write-ahead
//! log, process killed) is caught key by key, while the same kill with the log loses nothing.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A versioned run on embedded RocksDB, 2 threads, untraced, into `out`.
fn rocksdb_run(out: &Path) -> IodigArgs {
    IodigArgs::run()
        .p("versionedwrites=true")
        .threads("2")
        .warmup("0s")
        .trace("off")
        .out(out)
}

fn verify(run_dir: &Path) -> (Run, serde_json::Value) {
    let r = run_iodig(&["verify", run_dir.to_str().unwrap()]);
    let integrity = read_json(&run_dir.join("run.json"))["integrity"].clone();
    (r, integrity)
}

#[test]
fn a_versioned_run_reads_back_every_acknowledged_write_and_the_report_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let r = rocksdb_run(tmp.path())
        .p("recordcount=1000")
        .duration("2s")
        .verify()
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(r.stderr.contains("integrity ok: 1000 keys"), "{}", r.stderr);
    let run = r.run_json();
    let i = &run["integrity"];
    assert_eq!(i["checked_by"], "run");
    assert_eq!(i["keys"], 1000, "every loaded key was acknowledged: {i}");
    assert_eq!(i["ok"], 1000, "{i}");
    for bad in ["missing", "stale", "corrupt", "unreadable"] {
        assert_eq!(i[bad], 0, "{bad}: {i}");
    }
    // Workload A's reads were judged as they returned: none saw an older value than allowed.
    assert!(i["during_run"]["checked"].as_u64().unwrap() > 100, "{i}");
    assert_eq!(i["during_run"]["stale"], 0, "{i}");
    assert_eq!(i["during_run"]["corrupt"], 0, "{i}");
    assert_eq!(
        i["during_run"]["missing"], 0,
        "a clean database lacks no field: {i}"
    );
    assert!(r.run_dir().join("integrity/ledger.bin").is_file());
    // Versioned values carry their version: the VERIFY op counts every judged read.
    let step = &run["steps"][1];
    assert_eq!(
        step["returns"]["VERIFY"]["OK"].as_u64(),
        i["during_run"]["checked"].as_u64(),
        "{step}"
    );
    let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(report.contains("## Integrity"), "report has the section");
    assert!(report.contains("no acknowledged write was lost"), "finding");

    // Later, from the run directory alone.
    let (v, i) = verify(&r.run_dir());
    assert_eq!(v.code(), 0, "{}", v.stderr);
    assert_eq!(i["checked_by"], "verify");
    assert_eq!(i["keys"], 1000);
    assert_eq!(i["ok"], 1000);
}

/// Starts a versioned run, waits until its load is recorded, then `after` more (4.5 s: the
/// first run step has saved the ledger twice), and kills it with SIGKILL. Returns the run
/// directory.
fn killed_mid_step(out: &Path, extra: &[&str], after: Duration) -> PathBuf {
    let mut child = rocksdb_run(out)
        .props(&["recordcount=2000", "rocksdb.writebuffersize=1G"])
        .duration("60s")
        .args(extra)
        .command()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let run_dir = loop {
        assert!(Instant::now() < deadline, "the load never finished");
        std::thread::sleep(Duration::from_millis(200));
        let found = std::fs::read_dir(out)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.join("run.json").is_file());
        if let Some(dir) = found {
            let steps = read_json(&dir.join("run.json"))["steps"]
                .as_array()
                .map_or(0, Vec::len);
            if steps >= 1 {
                break dir;
            }
        }
    };
    std::thread::sleep(after);
    child.kill().unwrap();
    child.wait().unwrap();
    run_dir
}

#[test]
fn a_kill_without_the_write_ahead_log_loses_acknowledged_writes_and_verify_counts_them() {
    // With the write-ahead log (the default), a killed process loses nothing it acknowledged:
    // the log is in the page cache, and RocksDB replays it on open.
    let tmp = tempfile::tempdir().unwrap();
    // The ledger is saved every 2 s during a step: two saves into the run step.
    let two_saves = Duration::from_millis(4500);
    let with_log = killed_mid_step(&tmp.path().join("wal"), &[], two_saves);
    let (v, i) = verify(&with_log);
    assert_eq!(v.code(), 0, "{}\n{i}", v.stderr);
    assert_eq!(i["keys"], 2000, "{i}");
    assert_eq!(i["missing"], 0, "{i}");
    assert_eq!(i["stale"], 0, "{i}");
    assert_eq!(i["corrupt"], 0, "{i}");

    // Without it, the acknowledged writes still in the memtable die with the process. Nothing
    // was flushed (a 1 GiB memtable), so every loaded key is gone.
    let no_log = killed_mid_step(
        &tmp.path().join("nowal"),
        &["-p", "rocksdb.disablewal=true"],
        two_saves,
    );
    let (v, i) = verify(&no_log);
    assert_eq!(v.code(), 1, "a lost write fails the check: {}", v.stderr);
    assert_eq!(i["keys"], 2000, "{i}");
    assert_eq!(i["missing"], 2000, "{i}");
    assert!(
        v.stderr.contains("integrity FAILED") && v.stderr.contains("2000 missing"),
        "{}",
        v.stderr
    );
    let examples = i["examples"].as_array().unwrap();
    assert_eq!(examples.len(), 10, "{i}");
    assert!(examples.iter().all(|e| e["verdict"] == "missing"));
    let report = std::fs::read_to_string(no_log.join("report.md")).unwrap();
    assert!(
        report.contains("Integrity FAILED"),
        "the report leads with it"
    );
}

#[test]
fn a_kill_at_any_moment_of_the_ledger_saves_never_reads_as_a_lost_write() {
    // Killed at random moments of the run step (saves every 2 s, the moments spread over
    // them): whatever the ledger's file holds reads back, and nothing the database kept (with
    // its write-ahead log it keeps everything) is judged lost, whether or not the last save
    // was whole.
    let mut seed = kill_seed();
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..2 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let after = Duration::from_millis(2000 + seed % 4000);
        let run_dir = killed_mid_step(&tmp.path().join(format!("r{round}")), &[], after);
        let ledger = std::fs::read(run_dir.join("integrity/ledger.bin")).unwrap();
        assert!(
            ledger.starts_with(b"iodig-ledger 2\n"),
            "the current format"
        );
        let (v, i) = verify(&run_dir);
        assert_eq!(v.code(), 0, "killed {after:?} in: {}\n{i}", v.stderr);
        assert_eq!(i["keys"], 2000, "{i}");
        for bad in ["missing", "stale", "corrupt", "unreadable"] {
            assert_eq!(i[bad], 0, "killed {after:?} in, {bad}: {i}");
        }
    }
}

/// `--restore-each-step` on the embedded RocksDB: the dataset as loaded is kept in a
/// checkpoint and put back before the second step, with the ledger rewound alike, so every
/// key reads back exactly what the ledger says: had the data not gone back with the ledger,
/// the first step's writes would read as values no acknowledged write explains.
#[test]
fn each_step_starts_from_the_loaded_dataset_and_verify_agrees() {
    let tmp = tempfile::tempdir().unwrap();
    let r = IodigArgs::run()
        .p("versionedwrites=true")
        .p("recordcount=1000")
        .threads("1,2")
        .warmup("0s")
        .trace("off")
        .out(tmp.path())
        .duration("2s")
        .arg("--restore-each-step")
        .verify()
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("a RocksDB checkpoint").count(),
        1,
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("the dataset put back from").count(),
        1,
        "{}",
        r.stderr
    );
    let run = r.run_json();
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "load + two run steps");
    for step in &steps[1..] {
        assert!(
            step["returns"]["UPDATE"]["OK"].as_u64().unwrap() > 0,
            "{step}"
        );
    }
    let i = &run["integrity"];
    assert_eq!(
        (i["keys"].as_u64(), i["ok"].as_u64()),
        (Some(1000), Some(1000)),
        "{i}"
    );
    assert_eq!(i["during_run"]["stale"], 0, "{i}");
    // The checkpoint sits beside the data directory, and the data directory holds the
    // dataset marker as loaded.
    let data = run["config"]["properties"]["rocksdb.dir"]
        .as_str()
        .unwrap()
        .to_string();
    let kept = format!("{data}.iodig-checkpoint");
    assert!(Path::new(&kept).join("CURRENT").is_file(), "{kept}");
}
