//! Slow, failing and full devices under embedded RocksDB inside a step (`--fault 3s:slow=20ms:device`
//! and kin): iodig mounts a disk of its own on the data directory (ext4 on a loop device over a
//! file it serves through FUSE); the kernel's trace of that device and the client's latency and
//! errors show each fault in exactly its window, and nothing of the disk is left afterwards.

mod common;

use common::faultydisk::{assert_nothing_left, device_of};
use common::*;
use serde_json::Value;
use std::path::Path;

/// The workload C run of the read test: reads that go to the device (4 MiB memtables flushed
/// to SST files, a 1 MiB block cache), with the given faults.
fn read_run(dir: &Path, faults: &[&str]) -> Run {
    let args = IodigArgs::run()
        .workload("workloads/workloadc")
        .props(&[
            "recordcount=50000",
            "rocksdb.writebuffersize=4M",
            "rocksdb.blockcachesize=1M",
            "faultdisk.size=512MiB",
        ])
        .threads("4")
        .duration("10s")
        .warmup("1s")
        .trace("ebpf")
        .out(dir);
    faults.iter().fold(args, |a, f| a.fault(f)).output()
}

/// Workload A on 20,000 records, 2 threads, on a 256 MiB faulty disk, into `dir`.
fn update_run(dir: &Path) -> IodigArgs {
    IodigArgs::run()
        .workload("workloads/workloada")
        .props(&["recordcount=20000", "faultdisk.size=256MiB"])
        .threads("2")
        .out(dir)
}

/// Per whole second of the client's series: (second's end, value) of a READ field.
fn read_series(step_dir: &Path, field: &str) -> Vec<(u64, f64)> {
    let series = read_json(&step_dir.join("timeseries.json"));
    series
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let v = &s["series"]["READ"][field];
            Some((s["unix_ms"].as_u64()?, v.as_f64()?))
        })
        .collect()
}

/// Upper bound of the latency bucket that holds a second's median IO.
fn median_bucket_upper(hist: &Value) -> u64 {
    let buckets = hist.as_array().unwrap();
    let total: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    let mut seen = 0;
    for b in buckets {
        seen += b["count"].as_u64().unwrap();
        if 2 * seen >= total {
            return b["upper"].as_u64().unwrap();
        }
    }
    panic!("an empty latency histogram: {hist}")
}

#[test]
fn a_slow_then_failing_disk_shows_in_its_windows_and_heals() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "device faults need root");
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let r = read_run(
        dir.path(),
        &[
            "3s:slow-reads=20ms:device",
            "5s:heal:device",
            "6s:fail-reads:device",
            "8s:heal:device",
        ],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("FUSE"),
        "says which mechanism ran: {}",
        r.stderr
    );
    let run = r.run_json();
    let step_dir = r.run_dir().join(run["steps"][1]["dir"].as_str().unwrap());
    let faults = fault_events(&step_dir);
    assert_eq!(faults.len(), 4, "{faults:?}");
    assert!(
        faults[0].1.contains("reads of loop") && faults[0].1.contains("20 ms longer"),
        "{faults:?}"
    );
    assert!(faults[2].1.contains("fail with EIO"), "{faults:?}");
    assert!(
        faults[3].1.contains("failed") && !faults[3].1.contains(" 0 failed"),
        "the heal counts the failed IOs: {faults:?}"
    );
    let (slow_at, healed_at, fail_at, fail_healed_at) =
        (faults[0].0, faults[1].0, faults[2].0, faults[3].0);

    // The kernel saw the delay on the device: every read it completed in a whole second
    // inside the window took at least the 20 ms added (the lowest latency bucket that second
    // starts at 16.8 ms or above), against a healthy device before it.
    let trace = read_json(&step_dir.join("trace.json"));
    let device = device_of(&trace);
    let seconds_in = |from: u64, to: u64| -> Vec<&Value> {
        device["seconds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| {
                let t = s["unix_ms"].as_u64().unwrap();
                t >= from && t + 1000 <= to && s["ops"]["read"]["ios"].as_u64() > Some(0)
            })
            .map(|s| &s["ops"]["read"])
            .collect()
    };
    let slow: Vec<u64> = seconds_in(slow_at, healed_at)
        .iter()
        .map(|r| r["lat_hist"][0]["lower"].as_u64().unwrap())
        .collect();
    // Before it, the median: a loaded CI machine stretches a healthy second's p99 to 8 ms
    // (the disk is served by iodig's FUSE process, which waits for a CPU), not its median.
    let before: Vec<u64> = seconds_in(trace["start_unix_ms"].as_u64().unwrap(), slow_at)
        .iter()
        .map(|r| median_bucket_upper(&r["lat_hist"]))
        .collect();
    assert!(!slow.is_empty() && !before.is_empty(), "{device}");
    assert!(
        slow.iter().all(|ns| *ns >= 16_000_000),
        "fastest device reads per second in the slow window: {slow:?} ns"
    );
    assert!(
        before.iter().all(|ns| *ns < 4_000_000),
        "device read median per second before: {before:?} ns"
    );

    // The client felt it: read p50 in the slow window above the delay, far above before.
    let p50 = read_series(&step_dir, "p50_us");
    let client_slow: Vec<f64> = p50
        .iter()
        .filter(|(t, _)| *t > slow_at + 1000 && *t <= healed_at)
        .map(|(_, v)| *v)
        .collect();
    let client_before: Vec<f64> = p50
        .iter()
        .filter(|(t, _)| *t + 1000 <= slow_at)
        .map(|(_, v)| *v)
        .collect();
    assert!(
        !client_slow.is_empty() && !client_before.is_empty(),
        "{p50:?}"
    );
    assert!(
        client_slow.iter().all(|us| *us >= 20_000.0),
        "client read p50 in the slow window {client_slow:?} µs"
    );

    // Reads failed while the disk failed them, and only then; they work again after the heal.
    let errors = read_json(&step_dir.join("timeseries.json"));
    let mut failed_inside = 0.0;
    let mut failed_outside = 0.0;
    let mut ok_after = 0.0;
    for s in errors.as_array().unwrap() {
        let t = s["unix_ms"].as_u64().unwrap();
        let errs = s["series"]["READ-FAILED"]["count"].as_f64().unwrap_or(0.0);
        if t > fail_at && t <= fail_healed_at + 1000 {
            failed_inside += errs;
        } else {
            failed_outside += errs;
        }
        if t > fail_healed_at + 1000 {
            ok_after += s["series"]["READ"]["count"].as_f64().unwrap_or(0.0);
        }
    }
    assert!(failed_inside > 0.0, "no failed reads in the fail window");
    assert_eq!(failed_outside, 0.0, "reads failed outside the window");
    assert!(ok_after > 0.0, "reads work again after the heal");

    let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(
        report.contains("Faults injected"),
        "on the report's time line"
    );
    assert_nothing_left(dir.path());
}

#[test]
fn a_full_file_system_fails_the_writes_and_the_run_goes_on() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "device faults need root");
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let r = update_run(dir.path())
        .p("rocksdb.writebuffersize=1M")
        .target("4000")
        .duration("8s")
        .warmup("1s")
        .trace("ebpf")
        .fault("3s:full:device")
        .output();
    assert_eq!(r.code(), 0, "the run goes on past the fault: {}", r.stderr);
    let run = r.run_json();
    let step_dir = r.run_dir().join(run["steps"][1]["dir"].as_str().unwrap());
    let faults = fault_events(&step_dir);
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].1.contains("filled"), "{faults:?}");
    let full_at = faults[0].0;
    let series = read_json(&step_dir.join("timeseries.json"));
    let (mut before, mut after) = (0.0, 0.0);
    for s in series.as_array().unwrap() {
        let errs = s["series"]["UPDATE-FAILED"]["count"]
            .as_f64()
            .unwrap_or(0.0);
        if s["unix_ms"].as_u64().unwrap() <= full_at {
            before += errs;
        } else {
            after += errs;
        }
    }
    assert_eq!(before, 0.0, "updates failed before the fill");
    assert!(after > 0.0, "no update failed on the full file system");
    assert!(
        r.stderr.contains("healed"),
        "the fill is lifted at the step's end: {}",
        r.stderr
    );
    assert_nothing_left(dir.path());
}

#[test]
fn a_step_whose_database_became_unusable_ends_with_that_reason() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "device faults need root");
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    // Updates only, each synced: once the disk fails writes, every one fails.
    let r = update_run(dir.path())
        .props(&[
            "readproportion=0",
            "updateproportion=1",
            "rocksdb.sync=true",
            "unusableafter=3",
        ])
        .duration("30s")
        .warmup("0s")
        .trace("off")
        .fault("2s:fail-writes:device")
        .output();
    assert_eq!(r.code(), 0, "the run goes on: {}", r.stderr);
    let run = r.run_json();
    let step = &run["steps"][1];
    let why = step["ended_early"]
        .as_str()
        .unwrap_or_else(|| panic!("{step}"));
    assert!(
        why.contains("database unusable: every operation failed for 3 s (UPDATE-FAILED"),
        "{why}"
    );
    let runtime = step["runtime_ms"].as_u64().unwrap();
    assert!(
        (5_000..15_000).contains(&runtime),
        "ended 3 s after the writes began to fail at 2 s, not at 30 s: {runtime} ms"
    );
    assert_eq!(run["status"], "completed");
    let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(report.contains("It ended after"), "the report says why");
    assert_nothing_left(dir.path());
}
