//! Why the slowest seconds were slow, on a real RocksDB run on a loop device: the CPU taken
//! from the database for a few seconds, then another process flooding its drive, at moments
//! iodig is not told about; `slow-seconds.csv` must name each cause in its own seconds.

mod common;

use common::*;
use std::process::Child;
use std::time::{Duration, Instant};

/// Ends the children even when an assertion fails, so no spinner outlives the test.
struct Reaped(Vec<Child>);
impl Drop for Reaped {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One row of slow-seconds.csv: (unix ms, op, cause, evidence); the evidence is the last
/// field, quoted when it holds a comma.
fn rows(csv: &str) -> Vec<(u64, String, String, String)> {
    csv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.splitn(12, ',').collect();
            (
                f[4].parse().unwrap(),
                f[5].to_string(),
                f[10].to_string(),
                f[11].trim_matches('"').to_string(),
            )
        })
        .collect()
}

#[test]
fn a_starved_cpu_and_a_flooded_drive_are_named_in_their_own_seconds() {
    assert!(
        is_root(),
        "this test traces with eBPF and starts real-time spinners: run as root"
    );
    // A loop device in memory under the database: nothing else on it, so each injection's
    // effect stands out against quiet seconds that are alike.
    let fs = loopfs::LoopFs::new(std::path::Path::new("/dev/shm"), "4G");
    let db = fs.mnt.join("db");
    let out = tempfile::tempdir_in("/var/tmp").unwrap();
    // Reads from the device (direct, a small block cache) at a steady, low rate: quiet seconds
    // are alike, so what the injections do stands out against the step's typical second.
    let child = IodigArgs::run()
        .db("rocksdb")
        .workload("workloads/workloadc")
        .p(format!("rocksdb.dir={}", db.display()))
        .props(&[
            "recordcount=50000",
            "operationcount=100000000",
            "requestdistribution=uniform",
            "rocksdb.directreads=true",
            "rocksdb.blockcachesize=8M",
        ])
        .target("500")
        .threads("4")
        .duration("34s")
        .warmup("0s")
        .trace("ebpf")
        .out(out.path())
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // The CPU taken: a real-time spinner on each CPU for 2 s.
    sleep_until(started, 12);
    let cpu_from = now_ms();
    starve_cpus(2);
    let cpu_to = now_ms();
    // The drive flooded: four processes' direct 16 MiB writes for 3 s, so a read waits behind
    // dozens of megabytes in the loop device's queue.
    sleep_until(started, 22);
    let io_from = now_ms();
    let flood = Reaped(flood_drive(&fs.mnt, 4, 3, 40));
    std::thread::sleep(Duration::from_secs(3));
    drop(flood);
    let io_to = now_ms();
    let r = Run::of(child.wait_with_output().unwrap());
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let step = run_step(&run);
    let (from, runtime) = (
        step["started_unix_ms"].as_u64().unwrap(),
        step["runtime_ms"].as_u64().unwrap(),
    );
    assert!(
        from < cpu_from && io_to < from + runtime,
        "both injections fall in the measured window ({from} + {runtime} ms): CPU {cpu_from}–{cpu_to}, IO {io_from}–{io_to}"
    );
    let csv = std::fs::read_to_string(r.run_dir().join("slow-seconds.csv")).unwrap();
    let rows = rows(&csv);
    // Seconds whose operations ended in or just after each injection.
    let within = |a: u64, b: u64| {
        rows.iter()
            .filter(move |r| r.0 + 1000 > a && r.0 <= b + 1000 && r.1.ends_with("READ"))
            .collect::<Vec<_>>()
    };
    let cpu = within(cpu_from, cpu_to);
    assert!(
        !cpu.is_empty(),
        "the starved seconds ({cpu_from}–{cpu_to}) are slow:\n{csv}"
    );
    assert!(
        cpu.iter()
            .any(|r| r.2 == "cpu-runqueue" && r.3.contains("waited")),
        "a starved second is cpu-runqueue:\n{csv}"
    );
    let io = within(io_from, io_to);
    assert!(
        !io.is_empty(),
        "the flooded seconds ({io_from}–{io_to}) are slow:\n{csv}"
    );
    assert!(
        io.iter()
            .any(|r| r.2 == "other-io" && r.3.contains("dd (pid ")),
        "a flooded second is other-io, naming dd:\n{csv}"
    );
    // Neither cause is claimed far from its injection: a quiet second is never blamed on them.
    for r in &rows {
        let near = |a: u64, b: u64| r.0 + 2000 > a && r.0 <= b + 2000;
        if r.2 == "other-io" {
            assert!(
                near(io_from, io_to),
                "other-io away from the flood: {r:?}\n{csv}"
            );
        }
    }
    // The front page shows them too.
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(md.contains("## Why the slowest seconds were slow"), "{md}");
    assert!(
        md.contains("cpu-runqueue") && md.contains("other-io"),
        "{md}"
    );
}
