//! The report's findings on a RocksDB run on a loop device: write bursts, the queue-depth
//! spike under them, and reads slower while a flush or a compaction runs, each against the
//! run's own data.

mod common;

use common::findings::{burst_and_queue_depth_findings_match, run_step_section};
use common::loopfs::LoopFs;
use common::*;

#[test]
fn burst_queue_depth_and_flush_latency_findings_on_a_loop_device_match_the_data() {
    use iodig_report::analysis::findings::lat_ms;
    assert!(is_root(), "this test sets up a loop device and needs root");
    let fs = LoopFs::new("1G");
    let db = fs.mnt.join("db");
    let out = tempfile::tempdir_in("/var/tmp").unwrap();
    // Reads from the device (direct, a small block cache), updates at a steady rate into 4 MiB
    // memtables: a flush every few seconds, quiet seconds between them, and reads that queue
    // behind the flush's and the compactions' writes on the loop device.
    let r = IodigArgs::run()
        .db("rocksdb")
        .workload("workloads/workloada")
        .p(format!("rocksdb.dir={}", db.display()))
        .props(&[
            "recordcount=50000",
            "operationcount=100000000",
            "requestdistribution=uniform",
            "rocksdb.writebuffersize=4M",
            "rocksdb.directreads=true",
            "rocksdb.blockcachesize=8M",
        ])
        .target("4000")
        .threads("4")
        .duration("20s")
        .warmup("0s")
        .trace("ebpf")
        .out(out.path())
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let step = &run["steps"][1];
    let dir = r.run_dir().join(step["dir"].as_str().unwrap());
    let trace = read_json(&dir.join("trace.json"));
    assert_eq!(trace["mode"], "ebpf");
    let loop_dev = trace["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == fs.name())
        .unwrap_or_else(|| panic!("{} traced: {}", fs.name(), trace["devices"]));
    assert!(
        loop_dev["ops"]["read"]["ios"].as_u64().unwrap() > 1000,
        "reads hit the device"
    );
    assert!(
        loop_dev["ops"]["write"]["ios"].as_u64().unwrap() > 0,
        "flushes hit the device"
    );
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    let section = run_step_section(&md);
    // Flushes and compactions write in bursts onto a device otherwise busy with single reads.
    assert!(
        burst_and_queue_depth_findings_match(section, &trace),
        "the queue-depth spike under the bursts:\n{section}"
    );

    // The rule, recomputed per kind of background work: the per-second client p99 in seconds
    // that overlap a flush (or a compaction) in RocksDB's own LOG against the others, means
    // over each side.
    let events = read_json(&dir.join("db-events.json"));
    let end = step["started_unix_ms"].as_u64().unwrap() + step["runtime_ms"].as_u64().unwrap();
    let spans = |kind: &str| -> Vec<(u64, u64)> {
        events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| {
                (
                    e["start_unix_ms"].as_u64().unwrap(),
                    e["end_unix_ms"].as_u64().unwrap_or(end),
                )
            })
            .collect()
    };
    let flushes = spans("flush");
    assert!(flushes.len() >= 2, "flushes inside the step: {flushes:?}");
    let timeseries = read_json(&dir.join("timeseries.json"));
    // The series' per-second p99 (ms) in seconds that overlap one of `busy`, and in the others.
    let inside_outside = |busy: &[(u64, u64)], series: &str| {
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        for s in timeseries.as_array().unwrap() {
            let sum = &s["series"][series];
            if sum["count"].as_u64().unwrap_or(0) == 0 {
                continue;
            }
            let b = s["unix_ms"].as_u64().unwrap();
            let a = b.saturating_sub((s["secs"].as_f64().unwrap() * 1000.0) as u64);
            let p99 = sum["p99_us"].as_f64().unwrap() / 1000.0;
            if busy.iter().any(|(s, e)| *s < b && *e > a) {
                inside.push(p99);
            } else {
                outside.push(p99);
            }
        }
        (inside, outside)
    };
    let mut fired = Vec::new();
    let mut seen = Vec::new();
    for (kind, what) in [
        ("flush", "a flush runs"),
        ("compaction", "a compaction runs"),
    ] {
        let busy = spans(kind);
        if busy.is_empty() {
            continue;
        }
        for series in ["READ", "UPDATE"] {
            let (inside, outside) = inside_outside(&busy, series);
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let finding = format!("P99 {} latency is", series.to_lowercase());
            seen.push(format!("{series} while {what}: {inside:?} vs {outside:?}"));
            if inside.len() >= 3 && outside.len() >= 3 && mean(&inside) >= 1.5 * mean(&outside) {
                let (mi, mo) = (mean(&inside), mean(&outside));
                let want = format!(
                    "P99 {} latency is {:.1}× higher while {what} ({} vs {}, means of per-second p99 over {} and {} s).",
                    series.to_lowercase(),
                    mi / mo,
                    lat_ms(mi),
                    lat_ms(mo),
                    inside.len(),
                    outside.len()
                );
                assert!(section.contains(&want), "{want} not in:\n{section}");
                fired.push(series);
            } else {
                assert!(
                    !section
                        .lines()
                        .any(|l| l.contains(&finding) && l.contains(&format!("while {what}"))),
                    "{series}: no finding while {what} when the series says none ({inside:?} vs {outside:?}):\n{section}"
                );
            }
        }
    }
    // Reads queue behind the background writes on the loop device: the finding this run is
    // for. The briefs blame the flush; with 4 MiB memtables a flush is over in well under a
    // second on a fast host, and the compactions that follow it write longer, so either counts.
    assert!(
        fired.contains(&"READ"),
        "reads slower while a flush or a compaction runs, as the briefs found (per-second p99, ms: {seen:#?}):\n{section}"
    );
}
