//! Faults to a node on an observed host, through a real sshd: part of the test that has a
//! node of its own running (`cassandra_cli::workloads_a_to_f_run_against_a_real_node`), last
//! because it kills the node.

use crate::common::*;
use std::path::Path;

/// Last, as it kills the node: the node seen as on a host of its own (through a real sshd),
/// paused and then killed mid-step over SSH (`--fault …:127.0.0.1` with `--observe 127.0.0.1`);
/// the run goes on and both faults and what they did are on its time line.
///
/// `on_the_node` completes a command line with the test's node, dataset and output.
pub fn faults_reach_a_node_on_an_observed_host(on_the_node: impl Fn(IodigArgs) -> IodigArgs) {
    let sshd = sshd::Sshd::start(&["127.0.0.1"]);
    let run = IodigArgs::run()
        .no_load()
        .workload("workloads/workloadc")
        .props(&["operationcount=100000000", &sshd.property()])
        .observe("127.0.0.1")
        .threads("8")
        .duration("8s")
        .warmup("0s")
        .fault("1s:pause=2s:127.0.0.1")
        .fault("5s:kill:127.0.0.1");
    let r = on_the_node(run).output();
    assert_eq!(r.code(), 0, "the run goes on past the faults: {}", r.stderr);
    let run = r.run_json();
    let pid = run["cluster"]["observed"][0]["node"]["pid"]
        .as_u64()
        .unwrap();
    let step_dir = r.run_dir().join(run["steps"][0]["dir"].as_str().unwrap());
    let faults = fault_events(&step_dir);
    assert_eq!(faults.len(), 2, "{faults:?}");
    assert!(
        faults[0].1.contains("paused (SIGSTOP") && faults[0].1.contains("over ssh"),
        "{faults:?}"
    );
    assert!(
        faults[1]
            .1
            .contains(&format!("killed (SIGKILL) pid {pid} over ssh")),
        "{faults:?}"
    );
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the node's JVM {pid} is gone"
    );
    // The pause held the reads in flight for its 2 s; after the kill, reads fail.
    let series = read_json(&step_dir.join("timeseries.json"));
    let slowest_us = series
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["series"]["READ"]["max_us"].as_u64())
        .max()
        .unwrap();
    assert!(
        slowest_us >= 1_500_000,
        "the slowest read took {slowest_us} µs across a 2 s pause"
    );
    let killed_at = faults[1].0;
    let failed_after: u64 = series
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["unix_ms"].as_u64().unwrap() > killed_at + 1000)
        .filter_map(|s| s["series"]["READ-FAILED"]["count"].as_u64())
        .sum();
    assert!(failed_after > 0, "no read failed after the kill");
}
