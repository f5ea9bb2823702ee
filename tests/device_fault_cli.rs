//! A cap on the device under embedded RocksDB inside a step (`--fault 2s:cap=200iops:device`):
//! the kernel's trace shows iodig's reads held to the cap in exactly the window, the client's
//! latency shows what it cost, and nothing of the cap is left afterwards.

mod common;

use common::*;
use std::collections::BTreeMap;

#[test]
fn a_device_capped_mid_step_shows_in_the_trace_and_the_latency_and_is_lifted() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "device faults need root");
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let r = IodigArgs::run()
        .workload("workloads/workloadc")
        .p("recordcount=50000")
        // Flushed to SST files and a 1 MiB block cache: reads go to the device.
        .props(&["rocksdb.writebuffersize=4M", "rocksdb.blockcachesize=1M"])
        .threads("4")
        .duration("8s")
        .warmup("1s")
        .trace("ebpf")
        // At 3 s: a whole second of client samples (they end on wall-clock seconds, the first
        // 0.5-1.5 s into the step) comes before the cap.
        .fault("3s:cap=200iops:device")
        .fault("6s:uncap:device")
        .out(dir.path())
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "capped at 200 IOPS each way for iodig's own IO (cgroup v1 blkio throttling)"
        ) || r.stderr.contains("(cgroup v2 io.max)"),
        "the fault says which mechanism ran: {}",
        r.stderr
    );
    let run = r.run_json();
    let step = &run["steps"][1];
    let step_dir = r.run_dir().join(step["dir"].as_str().unwrap());
    let faults = fault_events(&step_dir);
    assert_eq!(faults.len(), 2, "{faults:?}");
    let (capped, uncapped) = (faults[0].0, faults[1].0);

    // iodig's own reads per second, as the kernel attributed them.
    let trace = read_json(&step_dir.join("trace.json"));
    let mut reads = BTreeMap::<u64, u64>::new();
    for row in trace["self_check"]["attribution"]["rows"]
        .as_array()
        .unwrap()
    {
        if row["op"] == "read" && row["process"] == "iodig" {
            for s in row["seconds"].as_array().unwrap() {
                *reads.entry(s["unix_ms"].as_u64().unwrap()).or_default() +=
                    s["ios"].as_u64().unwrap();
            }
        }
    }
    let inside: Vec<u64> = reads
        .iter()
        .filter(|(t, _)| **t >= capped && **t + 1000 <= uncapped)
        .map(|(_, n)| *n)
        .collect();
    let before: Vec<u64> = reads
        .iter()
        .filter(|(t, _)| **t + 1000 <= capped && **t >= trace["start_unix_ms"].as_u64().unwrap())
        .map(|(_, n)| *n)
        .collect();
    assert!(!inside.is_empty() && !before.is_empty(), "{reads:?}");
    // The throttle lets a slice's worth through at most: 200/s with a little slack.
    assert!(
        inside.iter().all(|n| *n <= 240),
        "capped seconds: {inside:?}"
    );
    assert!(
        before.iter().all(|n| *n >= 1000),
        "uncapped seconds read freely: {before:?}"
    );

    // The client felt it: read p99 in a capped second against one before.
    let series = read_json(&step_dir.join("timeseries.json"));
    let p99_at = |pick: &dyn Fn(u64) -> bool| -> Vec<f64> {
        series
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| pick(s["unix_ms"].as_u64().unwrap()))
            .filter_map(|s| s["series"]["READ"]["p99_us"].as_f64())
            .collect()
    };
    let slow = p99_at(&|t| t > capped + 1000 && t <= uncapped);
    let fast = p99_at(&|t| t + 1000 <= capped);
    assert!(!slow.is_empty() && !fast.is_empty());
    let (slow_min, fast_max) = (
        slow.iter().copied().fold(f64::MAX, f64::min),
        fast.iter().copied().fold(0.0, f64::max),
    );
    assert!(
        slow_min >= 10.0 * fast_max,
        "read p99 under the cap {slow:?} µs against {fast:?} µs before"
    );

    let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(
        report.contains("Faults injected"),
        "on the report's time line"
    );
    let leftovers: Vec<_> = std::fs::read_dir("/sys/fs/cgroup/blkio/iodig")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("fault-"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "cgroups left behind: {leftovers:?}");
}
