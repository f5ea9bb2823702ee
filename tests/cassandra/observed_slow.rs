//! Why the slowest seconds were slow, on a real Cassandra node observed over a real sshd:
//! its CPUs taken by real-time spinners, its JVM made to stop the world (full collections
//! asked for with `jcmd`), its drive flooded by another process and its process stopped
//! (SIGSTOP), at moments iodig is not told about. Part of the test that has
//! a node running (`cassandra_cli::workloads_a_to_f_run_against_a_real_node`).

use crate::common::*;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// `mnt` is the node's own file system (its data and commit log); `on_the_node` completes a
/// command line with the node, its dataset and the output directory.
pub fn a_starved_cpu_a_jvm_pause_and_a_flooded_drive_are_named_on_the_node(
    nodes: &Path,
    mnt: &Path,
    on_the_node: impl Fn(IodigArgs) -> IodigArgs,
) {
    let sshd = sshd::Sshd::start(&["127.0.0.1"]);
    let pids = super::java_pids_with(nodes);
    assert_eq!(pids.len(), 1, "one node runs: {pids:?}");
    let pid = pids[0].clone();
    let run = IodigArgs::run()
        .no_load()
        .workload("workloads/workloada")
        .props(&["operationcount=100000000", &sshd.property()])
        .observe("127.0.0.1")
        .threads("8")
        .duration("30s")
        .warmup("0s")
        .trace("ebpf");
    let child = on_the_node(run)
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // The CPUs taken by real-time spinners for 2 s.
    sleep_until(started, 6);
    let cpu_from = now_ms();
    starve_cpus(2);
    let cpu_to = now_ms();
    // The world stopped: three full collections asked for one after another, then a heap
    // dump, a safepoint long enough to hold most of a second's requests (a collection of a
    // small heap stops eight closed-loop clients for too short a share of the second to
    // move its p99: each waits once).
    sleep_until(started, 13);
    let gc_from = now_ms();
    for _ in 0..3 {
        let out = Command::new("jcmd")
            .args([&pid, "GC.run"])
            .output()
            .unwrap();
        assert!(out.status.success(), "jcmd: {out:?}");
    }
    let dump = tempfile::Builder::new()
        .suffix(".hprof")
        .tempfile_in("/dev/shm")
        .unwrap()
        .into_temp_path();
    std::fs::remove_file(&dump).unwrap();
    let out = Command::new("jcmd")
        .args([&pid, "GC.heap_dump", "-all"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.success(), "jcmd GC.heap_dump: {out:?}");
    drop(dump);
    let gc_to = now_ms();
    // The drive flooded for 3 s by four processes' direct 16 MiB writes (as in
    // tests/slow_seconds_cli.rs), so the node's own IO waits behind them.
    sleep_until(started, 19);
    let io_from = now_ms();
    // 1.5 GB at most: the node's file system is 3 GB.
    let flood = flood_drive(mnt, 4, 3, 24);
    for mut d in flood {
        let _ = d.wait();
    }
    let io_to = now_ms();
    for i in 0..4 {
        let _ = std::fs::remove_file(mnt.join(format!("flood{i}")));
    }
    // The process stopped for 2 s: no safepoint, no CPU, every request waits.
    sleep_until(started, 25);
    let stop_from = now_ms();
    let signal = |sig: &str| {
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success(), "kill {sig} {pid}");
    };
    signal("-STOP");
    std::thread::sleep(std::time::Duration::from_secs(2));
    signal("-CONT");
    let stop_to = now_ms();
    let r = Run::of(child.wait_with_output().unwrap());
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let run = r.run_json();
    let step = run_step(&run);
    let node_dir = r.run_dir().join(step["nodes"][0]["dir"].as_str().unwrap());

    // The node's own account: the agent probed its JVM and saw the full collections asked for.
    let doc = read_json(&node_dir.join("jvm-pauses.json"));
    let jvm = &doc["processes"][0];
    assert_eq!(jvm["probed"], true, "{doc:#}");
    assert_eq!(jvm["pid"].as_u64().unwrap().to_string(), pid, "{doc:#}");
    let full: Vec<(u64, u64)> = jvm["pauses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "gc" && p["full"] == true)
        .map(|p| {
            let start = p["start_unix_us"].as_u64().unwrap() / 1000;
            (start, start + p["duration_us"].as_u64().unwrap() / 1000)
        })
        .collect();
    let asked: Vec<_> = full
        .iter()
        .filter(|(a, b)| *a + 50 >= gc_from && *b <= gc_to + 50)
        .collect();
    assert!(
        asked.len() >= 3,
        "the three collections asked for in {gc_from}..{gc_to}: {full:?}"
    );

    // The slow seconds: the collections' seconds are the node's JVM pause, in its numbers.
    let csv = std::fs::read_to_string(r.run_dir().join("slow-seconds.csv")).unwrap();
    let rows: Vec<Vec<String>> = csv
        .lines()
        .skip(1)
        .map(|l| l.splitn(12, ',').map(str::to_string).collect())
        .collect();
    let second = |r: &Vec<String>| r[4].parse::<u64>().unwrap();
    let in_gc: Vec<_> = rows
        .iter()
        .filter(|r| second(r) + 1000 > gc_from && second(r) <= gc_to + 1000)
        .collect();
    assert!(
        in_gc.iter().any(|r| r[10] == "jvm-pause"
            && r[9] == "127.0.0.1"
            && r[11].contains("ms of safepoints")),
        "a second of the collections is the node's jvm-pause:\n{csv}"
    );
    // A second of the starved CPUs is the node's threads waiting for one.
    assert!(
        rows.iter().any(|r| second(r) + 1000 > cpu_from
            && second(r) <= cpu_to + 1000
            && r[10] == "cpu-runqueue"
            && r[11].contains("waited")),
        "a second of the spinners ({cpu_from}..{cpu_to}) is cpu-runqueue:\n{csv}"
    );
    // A second of the flood is other-io naming the flooding process, and every such second
    // names it.
    let flood: Vec<_> = rows
        .iter()
        .filter(|r| second(r) + 1000 > io_from && second(r) <= io_to + 1000)
        .filter(|r| r[10] == "other-io")
        .collect();
    assert!(
        !flood.is_empty(),
        "a second of the flood ({io_from}..{io_to}) is other-io:\n{csv}"
    );
    for r in flood {
        assert!(r[11].contains("dd (pid "), "{r:?}");
    }
    // A second of the stopped process is the node standing still.
    assert!(
        rows.iter().any(|r| second(r) + 1000 > stop_from
            && second(r) <= stop_to + 1000
            && r[10] == "jvm-pause"
            && r[9] == "127.0.0.1"
            && r[11].contains("the process stood still")),
        "a second of the stop ({stop_from}..{stop_to}) is the node standing still:\n{csv}"
    );
    // The front page says it too.
    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(md.contains("## Why the slowest seconds were slow") && md.contains("jvm-pause"));
}
