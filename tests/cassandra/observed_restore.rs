//! `--restore-each-step` on a node iodig did not start, observed over a real sshd: its agent
//! snapshots the keyspace after the load and, before each run step, stops the node, links the
//! snapshot back and starts the node again as it was. Part of the test that has a node running
//! (`cassandra_cli::workloads_a_to_f_run_against_a_real_node`), before the faults, which end
//! whatever node runs there.

use crate::common::*;
use std::path::Path;

/// The keyspace of this test alone: the other parts' dataset stays as they left it.
const KEYSPACE: &str = "restored";

/// Load, then two steps of update-heavy workload A with versioned writes, each after a
/// restore, then `--verify`. The ledger goes back with each restore to the writes of the load,
/// so the second step's reads of keys the first step updated find what the ledger expects (no
/// stale read), and the read-back at the end finds every key at the version of the load or of
/// the last step: none of the first step's updates, which would read back newer than every
/// write the rewound ledger holds (unacknowledged) had the node not been restored, and stale
/// had the ledger not been rewound. The restores are on each step's node notes and the
/// terminal, and the node, started again under a new pid, serves.
pub fn each_step_starts_from_the_snapshot_of_the_load(
    nodes: &Path,
    on_the_node: impl Fn(IodigArgs) -> IodigArgs,
) {
    let pid_before = super::java_pids_with(nodes);
    assert_eq!(pid_before.len(), 1, "the test's node runs: {pid_before:?}");
    // A failed assertion must not leave a JVM that no `cassandra down` knows of (the restore
    // started it); a passing test leaves it to the parts after this one.
    struct EndOnPanic<'a>(&'a Path);
    impl Drop for EndOnPanic<'_> {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                return;
            }
            let pids = super::java_pids_with(self.0);
            for pid in &pids {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            // Gone before the node's loop device is unmounted, which a JVM still tearing
            // down keeps busy.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while pids
                .iter()
                .any(|p| Path::new(&format!("/proc/{p}/exe")).exists())
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
    let _end = EndOnPanic(nodes);
    let sshd = sshd::Sshd::start(&["127.0.0.1"]);
    let restoring = |args: IodigArgs| {
        on_the_node(args)
            .props(&[
                &sshd.property(),
                &format!("cassandra.keyspace={KEYSPACE}"),
                "versionedwrites=true",
            ])
            .observe("127.0.0.1")
            .arg("--restore-each-step")
    };
    let r = restoring(
        IodigArgs::run()
            .workload("workloads/workloada")
            .p("operationcount=100000000")
            .threads("4,8")
            .duration("4s")
            .warmup("0s")
            .arg("--verify"),
    )
    .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("holds none of this dataset's")
            && r.stderr.contains(&format!(
                "note: 127.0.0.1: snapshot iodig-loaded of keyspace {KEYSPACE}: 1 table(s)"
            )),
        "loaded, then snapshotted on the node's host:\n{}",
        r.stderr
    );
    assert_eq!(
        r.stderr
            .matches("restored snapshot iodig-loaded in")
            .count(),
        2,
        "one restore before each run step:\n{}",
        r.stderr
    );
    for line in r.stderr.lines().filter(|l| l.contains("restore")) {
        eprintln!("{line}");
    }
    let run = r.run_json();
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3, "load + two run steps");
    for step in &steps[1..] {
        let notes = step["nodes"][0]["notes"].as_array().unwrap();
        let restored = notes
            .iter()
            .filter_map(|n| n.as_str())
            .find(|n| n.starts_with("--restore-each-step: restored before the step in"))
            .unwrap_or_else(|| panic!("no restore on the step's node: {step}"));
        assert!(
            restored.contains(&format!("table(s) of {KEYSPACE} hard-linked back"))
                && restored.contains("started again as pid")
                && restored.contains("serving on 127.0.0.1:9042"),
            "{restored}"
        );
        let updates = step["returns"]["UPDATE"]["OK"].as_u64().unwrap_or(0);
        assert!(updates > 0, "the step updated records: {step}");
    }
    // The second step's reads found the loaded versions of the keys the first step had
    // updated, as the rewound ledger expects; the read-back at the end found none of the
    // first step's updates.
    let integrity = &run["integrity"];
    let count = |k: &str| integrity[k].as_u64().unwrap_or(u64::MAX);
    assert_eq!(integrity["during_run"]["stale"], 0, "{integrity}");
    assert!(
        integrity["during_run"]["checked"].as_u64().unwrap_or(0) > 0,
        "the run's reads were judged: {integrity}"
    );
    assert!(count("keys") > 0, "{integrity}");
    assert_eq!(
        count("ok"),
        count("keys"),
        "every key as the ledger says: {integrity}"
    );
    assert_eq!(
        (
            count("stale"),
            count("unacknowledged"),
            count("missing"),
            count("corrupt")
        ),
        (0, 0, 0, 0),
        "no update of the first step survived the restore, and the ledger forgot them: {integrity}"
    );
    assert!(
        r.run_dir()
            .join("integrity/ledger-at-restore-point.bin")
            .is_file(),
        "the restore point's ledger is kept for a resumed run"
    );

    // The node runs again under a new pid, with its command line, and serves CQL.
    let pid_after = super::java_pids_with(nodes);
    assert_eq!(pid_after.len(), 1, "{pid_after:?}");
    assert_ne!(pid_after, pid_before, "the node was started again");
    let c = restoring(
        IodigArgs::run()
            .no_load()
            .workload("workloads/workloadc")
            .p("operationcount=200")
            .threads("2")
            .warmup("0s"),
    );
    // Without a load of its own there is no snapshot of this run to go back to.
    c.usage_error(&["--restore-each-step", "--no-load", "--reload"]);
    let served = on_the_node(
        IodigArgs::run()
            .no_load()
            .workload("workloads/workloadc")
            .props(&[
                &format!("cassandra.keyspace={KEYSPACE}"),
                "operationcount=200",
            ])
            .threads("2")
            .warmup("0s"),
    )
    .output();
    assert_eq!(served.code(), 0, "{}", served.stderr);
    assert_eq!(
        ycsb_value(&parse_ycsb(&served.stdout), "READ", "Return=OK"),
        Some(200.0),
        "{}",
        served.stdout
    );
}
