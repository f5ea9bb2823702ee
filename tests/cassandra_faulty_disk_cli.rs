//! A slow drive under a managed Apache Cassandra node (`--fault 3s:slow-writes=20ms:node1`):
//! iodig starts the node on a disk of its own (its data, commit log and hints; ext4 on a loop
//! device over a file iodig serves through FUSE), the kernel's trace of that disk shows every
//! write in the window slowed and names the node's commit log as their writer, and neither the
//! node nor its disk outlives the run.

mod common;

use common::faultydisk::{assert_nothing_left, device_of};
use common::*;

#[test]
fn a_slow_drive_under_a_managed_node_slows_its_commit_log_in_the_window() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "device faults need root");
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let managed = dir.path().join("data").join("cassandra");
    let _nodes = Nodes(&managed);
    // Longer than the node's 10 s periodic commit-log sync, so the window holds at least one.
    let r = IodigArgs::run()
        .db("cassandra")
        .nodes("1")
        .workload("workloads/workloada")
        .props(&["recordcount=5000", "faultdisk.size=1GiB"])
        .threads("4")
        .duration("16s")
        .warmup("1s")
        .trace("ebpf")
        .fault("3s:slow-writes=20ms:node1")
        .fault("14s:heal:node1")
        .out(dir.path())
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("node1/disk is on loop"),
        "says where the node's disk is: {}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("fault 3s:slow-writes=20ms:node1: 127.0.0.1 writes of loop"),
        "the fault names the node and its disk: {}",
        r.stderr
    );
    let run = r.run_json();
    let step_dir = r.run_dir().join(run["steps"][1]["dir"].as_str().unwrap());
    let faults = fault_events(&step_dir);
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(
        faults[0].1.contains("writes of loop") && faults[0].1.contains("20 ms longer"),
        "{faults:?}"
    );
    assert!(
        faults[1].1.contains("healed") && !faults[1].1.contains(" 0 IOs delayed"),
        "the heal counts the delayed IOs: {faults:?}"
    );
    let (slow_at, healed_at) = (faults[0].0, faults[1].0);

    // Every write the kernel completed on the node's disk in a whole second of the window took
    // the 20 ms added: the lowest latency bucket of each such second starts at 16.8 ms or more.
    let trace = read_json(&step_dir.join("trace.json"));
    let device = device_of(&trace);
    let loop_name = device["name"].as_str().unwrap();
    let slow: Vec<u64> = device["seconds"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            let t = s["unix_ms"].as_u64().unwrap();
            t >= slow_at && t + 1000 <= healed_at && s["ops"]["write"]["ios"].as_u64() > Some(0)
        })
        .map(|s| s["ops"]["write"]["lat_hist"][0]["lower"].as_u64().unwrap())
        .collect();
    assert!(!slow.is_empty(), "no write in the window: {device}");
    assert!(
        slow.iter().all(|ns| *ns >= 16_000_000),
        "fastest device writes per second in the slow window: {slow:?} ns"
    );

    // Who wrote them, as the kernel saw it: the node's commit log (Cassandra's periodic syncer
    // thread) in the node's own cgroup, on the faulty disk.
    let attr = &trace["self_check"]["attribution"];
    assert_eq!(
        trace["self_check"]["attribution_match"], true,
        "{}",
        attr["check"]
    );
    let commit_log_bytes: u64 = attr["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| {
            row["device"] == loop_name
                && row["op"] == "write"
                && row["class"] == "cassandra.commitlog"
                && row["cgroup"]
                    .as_str()
                    .is_some_and(|c| c.ends_with("cassandra-127.0.0.1"))
        })
        .map(|row| row["bytes"].as_u64().unwrap())
        .sum();
    assert!(
        commit_log_bytes > 0,
        "the node's commit log wrote on {loop_name}: {}",
        attr["rows"]
    );

    // The node stopped, then its disk went, and with it the managed cluster's directory.
    assert!(
        r.stderr.contains("note: removed the managed nodes in"),
        "{}",
        r.stderr
    );
    assert!(!managed.exists(), "{} is left", managed.display());
    assert_nothing_left(dir.path());
}
