//! Faults to a node on an observed host, through a real sshd: part of the test that has a
//! node of its own running (`cassandra_cli::workloads_a_to_f_run_against_a_real_node`), last
//! because it kills the node (and restarts it, and ends the restarted one).

use crate::common::*;
use std::path::Path;

/// Last, as it kills the node: the node seen as on a host of its own (through a real sshd),
/// paused, killed and restarted mid-step over SSH (`--fault …:127.0.0.1` with `--observe
/// 127.0.0.1`); the run goes on, the faults and what they did are on its time line, and the
/// restarted node is the same node (command line, cgroup) and serves CQL again.
///
/// `on_the_node` completes a command line with the test's node, dataset and output; `nodes` is
/// the node's directory, whose restarted JVM this test ends whatever happens.
pub fn faults_reach_a_node_on_an_observed_host(
    nodes: &Path,
    on_the_node: impl Fn(IodigArgs) -> IodigArgs,
) {
    let sshd = sshd::Sshd::start(&["127.0.0.1"]);
    // 14 s, not the 7 the schedule needs: the faults run one after another, each over a new
    // SSH connection. On a two-CPU machine loaded with more JVMs than this test's (two test
    // runs at once, by mistake), the pause's SSH command took 4.4 s, the kill started 2.6 s
    // late and the step ended 0.4 s after it, with no second left to see reads fail.
    let run = IodigArgs::run()
        .no_load()
        .workload("workloads/workloadc")
        .props(&["operationcount=100000000", &sshd.property()])
        .observe("127.0.0.1")
        .threads("8")
        .duration("14s")
        .warmup("0s")
        .fault("1s:pause=2s:127.0.0.1")
        .fault("5s:kill:127.0.0.1")
        .fault("6s:restart:127.0.0.1")
        // Lifted at the step's end, with no uncap: a cap never outlives its step.
        .fault("8s:cap=1MB/s:127.0.0.1");
    // The restart starts a JVM that no `cassandra down` knows of: ended here, by pid, even
    // when an assertion below fails, and waited for, so the next test finds its ports free.
    struct EndRestarted<'a>(&'a Path);
    impl Drop for EndRestarted<'_> {
        fn drop(&mut self) {
            let pids = super::java_pids_with(self.0);
            for pid in &pids {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
            // Gone, and its CQL port bindable again: the killed server's sockets can linger in
            // the kernel after the process (FIN_WAIT), and block the next test's node.
            let bindable = || std::net::TcpListener::bind("127.0.0.1:9042").is_ok();
            while (pids.iter().any(running) || !bindable()) && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
    let _end = EndRestarted(nodes);
    let r = on_the_node(run).output();
    assert_eq!(r.code(), 0, "the run goes on past the faults: {}", r.stderr);
    let run = r.run_json();
    let pid = run["cluster"]["observed"][0]["node"]["pid"]
        .as_u64()
        .unwrap();
    let step_dir = r.run_dir().join(run["steps"][0]["dir"].as_str().unwrap());
    let faults = fault_events(&step_dir);
    assert_eq!(faults.len(), 4, "{faults:?}");
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
    // SIGKILL is final, but a JVM with a large heap takes a moment to tear down and be reaped.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while running(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(!running(pid), "the node's JVM {pid} is gone");
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
    let per_second: Vec<String> = series
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}: {} ok, {} failed",
                s["unix_ms"], s["series"]["READ"]["count"], s["series"]["READ-FAILED"]["count"]
            )
        })
        .collect();
    assert!(
        failed_after > 0,
        "no read failed after the kill at {killed_at}: {faults:?}\n{per_second:#?}"
    );
    let restarted = new_pid(&faults[2].1);
    // The agent samples the node on under its new pid until the step ends.
    let host_dirs: Vec<_> = std::fs::read_dir(step_dir.join("nodes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(host_dirs.len(), 1, "{host_dirs:?}");
    let sys = read_json(&host_dirs[0].join("sys.json"));
    let node = &sys["processes"][0];
    assert_eq!(node["pid"], pid, "{node}");
    assert_eq!(node["restarts"][0]["pid"], restarted, "{node}");
    assert!(
        sys["samples"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["procs"][0]["pid"] == restarted && s["procs"][0]["stats"].is_object()),
        "no sample of the restarted node: {sys}"
    );
    node_was_capped_then_freed(&faults[3].1, &run["cluster"]["observed"][0]);
    restarted_node_serves_again(restarted, &run["cluster"]["observed"][0]["node"]);
}

/// iodig killed with SIGKILL while its cap is on the node of an observed host: the agent there,
/// its stdin closed, lifts the cap from the record the cap script left, so the node is not left
/// throttled by a run that no longer exists.
pub fn a_killed_iodig_leaves_no_cap_on_an_observed_node(
    nodes: &Path,
    on_the_node: impl Fn(IodigArgs) -> IodigArgs,
) {
    let pid = super::java_pids_with(nodes)
        .first()
        .and_then(|p| p.parse::<u32>().ok())
        .expect("the test's node runs");
    let limits = || node_limits(pid);
    assert_eq!(limits(), "", "the node starts unthrottled");
    let sshd = sshd::Sshd::start(&["127.0.0.1"]);
    let log = tempfile::NamedTempFile::new().unwrap();
    // Killed here whatever happens, so a failed assertion leaves no run going.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let iodig = Killed(
        on_the_node(
            IodigArgs::run()
                .no_load()
                .workload("workloads/workloadc")
                .props(&["operationcount=100000000", &sshd.property()])
                .observe("127.0.0.1")
                .threads("2")
                .duration("60s")
                .warmup("0s")
                .fault("1s:cap=1MB/s:127.0.0.1"),
        )
        .command()
        .stdout(std::process::Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap(),
    );
    let waited = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what} within 90 s; iodig said:\n{}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    };
    waited("the cap on the node", &|| !limits().is_empty());
    let capped = limits();
    // SIGKILL: iodig gets no chance to lift the cap itself.
    drop(iodig);
    waited("the agent lifting the cap after iodig was killed", &|| {
        limits().is_empty()
    });
    assert!(
        capped.contains("1000000"),
        "the cap was 1 MB/s on the node's disk: {capped}"
    );
}

/// The throttle limits in the node's cgroup (v1 blkio byte limits, or v2 `io.max`), empty
/// when it is not throttled.
fn node_limits(pid: u32) -> String {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    if Path::new("/sys/fs/cgroup/blkio/cgroup.procs").exists() {
        let cg = cgroups
            .lines()
            .find_map(|l| l.split_once(":blkio:").map(|(_, cg)| cg.to_string()))
            .expect("the node has a blkio cgroup");
        ["read_bps_device", "write_bps_device"]
            .iter()
            .map(|f| {
                std::fs::read_to_string(format!("/sys/fs/cgroup/blkio{cg}/blkio.throttle.{f}"))
                    .unwrap_or_default()
            })
            .collect::<String>()
            .trim()
            .to_string()
    } else {
        let cg = cgroups
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("the node has a v2 cgroup")
            .to_string();
        let io_max =
            std::fs::read_to_string(format!("/sys/fs/cgroup{cg}/io.max")).unwrap_or_default();
        // An uncapped io.max line reads "MAJ:MIN rbps=max wbps=max riops=max wiops=max".
        io_max
            .lines()
            .filter(|l| l.contains("bps=") && !l.contains("rbps=max wbps=max riops=max wiops=max"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The cap went to the node's own cgroup on its disk, and was lifted when the step ended.
fn node_was_capped_then_freed(event: &str, host: &serde_json::Value) {
    let disk = host["devices"][0].as_str().unwrap();
    assert!(
        event.contains(&format!("capped at 1.0 MB/s each way on {disk}"))
            && event.contains("over ssh"),
        "{event}"
    );
    let cg = host["node"]["cgroup"].as_str().expect("a node in a cgroup");
    if event.contains("(cgroup v1 blkio throttling)") {
        let dir = format!("/sys/fs/cgroup/blkio{cg}");
        for f in ["read_bps_device", "write_bps_device"] {
            let limits = std::fs::read_to_string(format!("{dir}/blkio.throttle.{f}")).unwrap();
            assert!(limits.trim().is_empty(), "{f} still limited: {limits}");
        }
    } else {
        assert!(event.contains("(cgroup v2 io.max)"), "{event}");
    }
}

/// The pid a restart's event says the node started again as.
fn new_pid(event: &str) -> u32 {
    event
        .split("started again as pid ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no new pid in {event:?}"))
}

/// The node the restart started: the same command line as the killed one, in its cgroup,
/// answering on the CQL port within a JVM's start.
fn restarted_node_serves_again(pid: u32, before: &serde_json::Value) {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("CassandraDaemon"),
        "pid {pid} is a Cassandra node"
    );
    if let Some(cg) = before["cgroup"].as_str().filter(|c| *c != "/") {
        let now = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        assert!(
            now.lines().any(|l| l.ends_with(cg)),
            "the restarted node is back in {cg}: {now}"
        );
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while std::net::TcpStream::connect("127.0.0.1:9042").is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the restarted node did not open its CQL port in 180 s"
        );
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "the restarted node {pid} exited"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The process is there and not a zombie (a zombie's sockets and memory are gone already).
fn running(pid: impl std::fmt::Display) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}
