//! Real Apache Cassandra through the real binary: `iodig cassandra up`, a load, workloads A–F,
//! status; and `iodig run --db cassandra` without hosts, which starts and stops a managed node.

mod common;
#[path = "cassandra/observed_faults.rs"]
mod observed_faults;
#[path = "cassandra/observed_restore.rs"]
mod observed_restore;
#[path = "cassandra/observed_slow.rs"]
mod observed_slow;
#[path = "cassandra/observed_story.rs"]
mod observed_story;
#[path = "cassandra/per_node.rs"]
mod per_node;

use common::*;
use std::path::Path;

/// Tests here start nodes on the same loopback ports: one at a time.
static PORTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn java_pids_with(dir: &Path) -> Vec<String> {
    let needle = dir.to_str().unwrap().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains("CassandraDaemon") && cmd.contains(&needle))
                .then(|| e.file_name().to_string_lossy().to_string())
        })
        .collect()
}

#[test]
fn workloads_a_to_f_run_against_a_real_node() {
    let _ports = PORTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let tmp = tempfile::tempdir().unwrap();
    // The node's data and commit log on a device of their own, iodig's run directory on the
    // VM's disk, as a database server and its load generator are in the briefs. Declared
    // first, so it is unmounted after the node's guard has stopped the node.
    assert!(
        is_root(),
        "the node's own device is a loop device: run the tests as root"
    );
    let disk = loopfs::LoopFs::direct(tmp.path(), "3G");
    let nodes = disk.mnt.join("nodes");
    let out = tmp.path().join("runs");
    let _guard = Nodes(&nodes);
    let up = run_iodig(&[
        "cassandra",
        "up",
        "--nodes",
        "1",
        "--heap",
        "1G",
        // Small memtables: the observed step below sees the node flush (and compact) with its
        // real threads within seconds, as the briefs' nodes do over minutes.
        "--memtable-space",
        "8MiB",
        "--dir",
        nodes.to_str().unwrap(),
    ]);
    assert_eq!(up.code(), 0, "{}\n{}", up.stdout, up.stderr);
    // Every command line here: against the node `up` started, on 2,000 records, untraced.
    let on_the_node = |args: IodigArgs| {
        args.db("cassandra")
            .props(&["hosts=127.0.0.1", "recordcount=2000"])
            .trace("off")
            .out(&out)
    };
    // Hosts iodig did not start carry no dataset marker: `run` probes a few keys and loads
    // only when none is there, skips the load when all are, and refuses to guess otherwise.
    let auto_run = |extra: &[&str]| {
        let run = IodigArgs::run()
            .workload("workloads/workloadc")
            .p("operationcount=300")
            .threads("8")
            .warmup("0s");
        on_the_node(run).args(extra).output()
    };
    let first = auto_run(&[]);
    assert_eq!(first.code(), 0, "{}", first.stderr);
    assert!(
        first
            .stderr
            .contains("holds none of this dataset's 5 probed keys; loading 2000 records"),
        "{}",
        first.stderr
    );
    let p = parse_ycsb(&first.stdout);
    assert_eq!(
        ycsb_value(&p, "INSERT", "Return=OK"),
        Some(2000.0),
        "{}",
        first.stdout
    );
    assert_eq!(
        ycsb_value(&p, "READ", "Return=OK"),
        Some(300.0),
        "{}",
        first.stdout
    );
    let again = auto_run(&[]);
    assert_eq!(again.code(), 0, "{}", again.stderr);
    assert!(
        again
            .stderr
            .contains("already holds this dataset (5 of 5 probed keys found); not loading"),
        "{}",
        again.stderr
    );
    assert_eq!(
        ycsb_value(&parse_ycsb(&again.stdout), "INSERT", "Operations"),
        None
    );
    let bigger = auto_run(&["-p", "recordcount=4000"]);
    assert_eq!(bigger.code(), 2, "{}", bigger.stderr);
    assert!(
        bigger
            .stderr
            .contains("holds 3 of this dataset's 5 probed keys")
            && bigger.stderr.contains("--reload")
            && bigger.stderr.contains("--no-load"),
        "{}",
        bigger.stderr
    );
    let load = IodigArgs::load()
        .workload("workloads/workloada")
        .threads("8");
    let load = on_the_node(load).output();
    assert_eq!(load.code(), 0, "{}", load.stderr);
    assert_eq!(
        ycsb_value(&parse_ycsb(&load.stdout), "INSERT", "Return=OK"),
        Some(2000.0)
    );
    for w in ["a", "b", "c", "d", "e", "f"] {
        let file = format!("workloads/workload{w}");
        let run = IodigArgs::run()
            .no_load()
            .workload(&file)
            .p("operationcount=1000")
            .threads("16")
            .warmup("0s");
        let r = on_the_node(run).output();
        assert_eq!(r.code(), 0, "workload {w}: {}", r.stderr);
        let p = parse_ycsb(&r.stdout);
        let failed: f64 = p
            .iter()
            .filter(|(m, _, _)| m.ends_with("-FAILED"))
            .map(|(m, _, _)| ycsb_value(&p, m, "Operations").unwrap())
            .sum();
        assert_eq!(failed, 0.0, "workload {w} had failures:\n{}", r.stdout);
        let main_op = match w {
            "e" => "SCAN",
            "f" => "READ-MODIFY-WRITE",
            _ => "READ",
        };
        assert!(
            ycsb_value(&p, main_op, "Operations").unwrap() > 0.0,
            "workload {w}:\n{}",
            r.stdout
        );
        if w != "e" {
            // Every key read was loaded (or acknowledged): no NOT_FOUND.
            assert_eq!(
                ycsb_value(&p, "READ", "Return=NOT_FOUND"),
                None,
                "workload {w}:\n{}",
                r.stdout
            );
        }
    }
    let status = run_iodig(&[
        "cassandra",
        "status",
        "--json",
        "--dir",
        nodes.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), 0, "{}", status.stderr);
    let rows: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    let owns: f64 = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["owns_percent"].as_f64().unwrap_or(0.0))
        .sum();
    assert!(
        (owns - 100.0).abs() < 0.5,
        "ownership sums to {owns}% for RF 1"
    );
    observed_story::the_story_is_the_nodes_device(disk.name(), |args: IodigArgs| {
        args.db("cassandra")
            .props(&["hosts=127.0.0.1", "recordcount=2000"])
            .out(&out)
    });
    observed_slow::a_starved_cpu_a_jvm_pause_and_a_flooded_drive_are_named_on_the_node(
        &nodes,
        &disk.mnt,
        |args: IodigArgs| {
            args.db("cassandra")
                .props(&["hosts=127.0.0.1", "recordcount=2000"])
                .out(&out)
        },
    );
    observed_restore::each_step_starts_from_the_snapshot_of_the_load(&nodes, on_the_node);
    observed_faults::a_killed_iodig_leaves_no_cap_on_an_observed_node(&nodes, on_the_node);
    observed_faults::faults_reach_a_node_on_an_observed_host(&nodes, on_the_node);
}

#[test]
fn run_without_hosts_starts_and_stops_a_managed_node_and_restores_a_grown_dataset() {
    let _ports = PORTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let managed = out.join("data").join("cassandra");
    let _guard = Nodes(&managed);
    // A workload on 1,000 records of the node `run` manages, untraced, into `out`.
    let on_managed = |workload: &str| {
        IodigArgs::run()
            .db("cassandra")
            .workload(workload)
            .p("recordcount=1000")
            .warmup("0s")
            .trace("off")
            .out(&out)
    };
    let r = on_managed("workloads/workloadc")
        .threads("4,8")
        // Up to eight requests in flight on one runtime thread.
        .args(&["--io-threads", "1"])
        // The briefs' method: every step starts from the loaded snapshot. The node restarts,
        // and the client must be connected again before the step begins.
        .arg("--restore-each-step")
        .duration("2s")
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("starting a managed Apache Cassandra node"),
        "{}",
        r.stderr
    );
    let run = r.run_json();
    assert_eq!(run["status"], "completed");
    assert_eq!(run["steps"].as_array().unwrap().len(), 3, "load + two runs");
    assert_eq!(
        r.stderr.matches("restoring snapshot").count(),
        2,
        "{}",
        r.stderr
    );
    for step in &run["steps"].as_array().unwrap()[1..] {
        let reads = &step["returns"]["READ"];
        assert!(reads["OK"].as_u64().unwrap_or(0) > 0, "{step}");
        assert_eq!(reads.as_object().unwrap().len(), 1, "only OK reads: {step}");
        assert!(step["client_cpu_s"].as_f64().unwrap() > 0.0);
    }
    assert!(
        java_pids_with(&managed).is_empty(),
        "the managed node must be stopped after the run"
    );

    // The next runs restart the node with its data. Workload D runs on the loaded dataset and
    // inserts; the run after it must not take the grown table for the load.
    let again = |workload: &str| {
        let r = on_managed(workload).threads("4").duration("2s").output();
        assert_eq!(r.code(), 0, "{}", r.stderr);
        assert!(
            r.stderr.contains("restarting the managed Cassandra node"),
            "{}",
            r.stderr
        );
        r
    };
    let grow = again("workloads/workloadd");
    let steps = grow.run_json()["steps"].as_array().unwrap().clone();
    assert_eq!(steps.len(), 1, "no load: {}", grow.stderr);
    assert!(steps[0]["returns"]["INSERT"]["OK"].as_u64().unwrap_or(0) > 0);
    let back = again("workloads/workloadc");
    assert!(
        back.stderr.contains(
            "step workloadd-t4 of an earlier run inserted records; restoring snapshot iodig-loaded"
        ),
        "{}",
        back.stderr
    );
    let steps = back.run_json()["steps"].as_array().unwrap().clone();
    assert_eq!(steps.len(), 1, "restored, not loaded: {}", back.stderr);
    let reads = &steps[0]["returns"]["READ"];
    assert_eq!(
        reads.as_object().unwrap().len(),
        1,
        "only OK reads: {reads}"
    );
    assert!(java_pids_with(&managed).is_empty());

    // Faults inside a step: the node stalls, then crashes and comes back; the run goes on, the
    // outage shows in the returns, and each fault is an event on the step's time line.
    let faulted = on_managed("workloads/workloadc")
        .p("cassandra.readtimeoutmillis=1000")
        .threads("4")
        .duration("8s")
        .fault("1s:pause=1500ms:node1")
        .fault("4s:kill:node1")
        .fault("5s:restart:node1")
        .output();
    assert_eq!(faulted.code(), 0, "{}", faulted.stderr);
    for f in [
        "fault 1s:pause=1500ms:node1: 127.0.0.1 paused",
        "fault 4s:kill:node1: 127.0.0.1 killed (SIGKILL)",
        "fault 5s:restart:node1: 127.0.0.1 restarted as pid",
    ] {
        assert!(faulted.stderr.contains(f), "{f}: {}", faulted.stderr);
    }
    let run = faulted.run_json();
    let step = run["steps"].as_array().unwrap().last().unwrap().clone();
    let reads = step["returns"]["READ"].as_object().unwrap().clone();
    assert!(
        reads
            .get("OK")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
            > 0,
        "{reads:?}"
    );
    assert!(
        reads.keys().any(|k| k != "OK"),
        "the outage shows as failed reads: {reads:?}"
    );
    let events = read_json(
        &faulted
            .run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("db-events.json"),
    );
    let faults: Vec<&serde_json::Value> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "fault")
        .collect();
    assert_eq!(faults.len(), 3, "{events}");
    let started = step["started_unix_ms"].as_u64().unwrap();
    let at: Vec<u64> = faults
        .iter()
        .map(|e| e["start_unix_ms"].as_u64().unwrap() - started)
        .collect();
    // Each at its offset (the pause holds the schedule for 1.5 s, so the kill is not early).
    assert!(at[0] >= 1000 && at[0] < 2000, "{at:?}");
    assert!(at[1] >= 4000 && at[1] < 5000, "{at:?}");
    assert!(at[2] >= 5000, "{at:?}");
    let report = std::fs::read_to_string(faulted.run_dir().join("report.md")).unwrap();
    assert!(
        report.contains("Faults injected: 127.0.0.1 at"),
        "the report's time line names them"
    );
    assert!(
        java_pids_with(&managed).is_empty(),
        "the restarted node is stopped too"
    );
}

#[test]
fn run_with_nodes_3_runs_the_cluster_example_end_to_end() {
    let _ports = PORTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let managed = out.join("data").join("cassandra");
    let _guard = Nodes(&managed);
    // Each node observed "remotely" through a real sshd on its own loopback address, as on a
    // cluster of separate machines.
    let sshd = sshd::Sshd::start(&["127.0.0.1", "127.0.0.2", "127.0.0.3"]);
    // The example as written, shortened by flags (which win over the file).
    let r = IodigArgs::run()
        .experiment("examples/cluster-rf3.toml")
        .observe("127.0.0.1,127.0.0.2,127.0.0.3")
        .props(&[&sshd.property(), "recordcount=2000"])
        // The workloads' operationcount (1,000) would end each step in a few seconds.
        .p("operationcount=100000000")
        .threads("8")
        // Longer than the nodes' 10 s periodic commit-log sync, so every node writes in a step.
        .duration("11s")
        .warmup("0s")
        .out(&out)
        .output();
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("starting 3 managed Apache Cassandra nodes on 127.0.0.1-3"),
        "{}",
        r.stderr
    );
    let run = r.run_json();
    assert_eq!(run["status"], "completed");
    assert_eq!(
        run["config"]["properties"]["hosts"],
        "127.0.0.1,127.0.0.2,127.0.0.3"
    );
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6, "load + A, B, C, D, F");
    let mut coordinators = std::collections::BTreeSet::new();
    for step in &steps[1..] {
        // RF 3 at QUORUM with every node up: nothing fails.
        for (op, returns) in step["returns"].as_object().unwrap() {
            let returns = returns.as_object().unwrap();
            assert!(returns.keys().all(|k| k == "OK"), "{op}: {step}");
        }
        per_node::every_request_and_read_is_counted_by_node(&r.run_dir(), step, &mut coordinators);
        // Every node's JVM is sampled beside iodig.
        let sys = read_json(
            &r.run_dir()
                .join(step["dir"].as_str().unwrap())
                .join("sys.json"),
        );
        let labels: Vec<String> = sys["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["label"].as_str().unwrap_or("").to_string())
            .collect();
        for n in 1..=3 {
            assert!(
                labels.contains(&format!("cassandra 127.0.0.{n}")),
                "{labels:?}"
            );
        }
    }
    // The driver routes by token: with RF 3 every node coordinates some requests.
    assert_eq!(coordinators.len(), 3, "{coordinators:?}");
    // Each node runs in a cgroup of its own: the kernel's attribution tells their writes apart,
    // and the per-class rows add up to the device totals in every step.
    let mut node_writes = std::collections::BTreeMap::<String, u64>::new();
    for step in steps {
        let dir = r.run_dir().join(step["dir"].as_str().unwrap());
        let trace = read_json(&dir.join("trace.json"));
        if trace["mode"] != "ebpf" {
            continue;
        }
        let attr = &trace["self_check"]["attribution"];
        assert_eq!(
            trace["self_check"]["attribution_match"], true,
            "{}",
            attr["check"]
        );
        for row in attr["rows"].as_array().unwrap() {
            let cg = row["cgroup"].as_str().unwrap_or("");
            if let Some(node) = cg.split("iodig/cassandra-").nth(1) {
                if row["op"] == "write" {
                    *node_writes.entry(node.to_string()).or_default() +=
                        row["bytes"].as_u64().unwrap();
                }
            }
        }
    }
    if Path::new("/sys/fs/cgroup/blkio/cgroup.procs").exists() && is_root() {
        for n in 1..=3 {
            let node = format!("127.0.0.{n}");
            assert!(
                node_writes.get(&node).copied().unwrap_or(0) > 0,
                "node {node} wrote nothing of its own: {node_writes:?}"
            );
        }
        let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
        assert!(
            report.contains("Who issued the IO"),
            "report names the submitters"
        );
        assert!(report.contains("127.0.0.2"), "report names the nodes");
    }
    // The database's version as its nodes report it, and where client and nodes ran: the
    // observed hosts share this machine's kernel (its boot id).
    let version = run["environment"]["database_version"].as_str().unwrap();
    assert!(version.starts_with("Apache Cassandra 5."), "{version}");
    let report = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    assert!(
        report.contains(&format!("| database | cassandra ({version}) |")),
        "{report}"
    );
    let machines = report
        .lines()
        .find(|l| l.starts_with("| machines | "))
        .unwrap();
    assert!(machines.contains("; 3 node(s): "), "{machines}");
    assert_eq!(
        machines.matches("on the client's machine").count(),
        3,
        "{machines}"
    );
    observed_nodes_match_the_local_trace(&r.run_dir(), &run);
    assert!(
        java_pids_with(&managed).is_empty(),
        "all three nodes stopped"
    );
    for n in 1..=3 {
        let cg = format!("/sys/fs/cgroup/blkio/iodig/cassandra-127.0.0.{n}");
        assert!(!Path::new(&cg).exists(), "{cg} removed with its node");
    }

    // Another node count on the same directory is refused before anything starts.
    let other = IodigArgs::run()
        .experiment("examples/cluster-rf3.toml")
        .nodes("2")
        .out(&out)
        .output();
    assert_eq!(other.code(), 2, "{}", other.stderr);
    assert!(
        other.stderr.contains("has 3 node(s); run with --nodes 3"),
        "{}",
        other.stderr
    );
}

/// What `--observe` recorded for the 3-node cluster: the ring's ownership at RF 3, each host's
/// node found from the node itself, per-node files in every step, and each observer's share of
/// its own node equal to what the local trace attributed to that node's cgroup.
fn observed_nodes_match_the_local_trace(run_dir: &Path, run: &serde_json::Value) {
    let cluster = &run["cluster"];
    let nodes = cluster["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{cluster}");
    let owns: f64 = nodes.iter().map(|n| n["owns_pct"].as_f64().unwrap()).sum();
    assert!(
        (owns - 300.0).abs() < 0.01,
        "ownership at RF 3 sums to {owns}: {cluster}"
    );
    for n in nodes {
        assert!(n["tokens"].as_u64().unwrap() >= 1, "{n}");
        assert!(
            n["version"].as_str().is_some_and(|v| v.starts_with('5')),
            "{n}"
        );
    }
    let observed = cluster["observed"].as_array().unwrap();
    for (i, host) in observed.iter().enumerate() {
        let addr = format!("127.0.0.{}", i + 1);
        assert_eq!(host["host"], addr.as_str(), "{host}");
        assert_eq!(host["node"]["address"], format!("{addr}:9042"), "{host}");
        assert!(
            host["node"]["data_dirs"][0]
                .as_str()
                .unwrap()
                .contains(&format!("node{}", i + 1))
                || host["node"]["data_dirs"][0]
                    .as_str()
                    .unwrap()
                    .contains(&addr),
            "{host}"
        );
    }
    let whole_cgroup_bytes = |trace: &serde_json::Value, cgroup: &str| {
        let whole: std::collections::BTreeSet<u64> = trace["devices"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|d| d["seconds"].as_array().unwrap().iter())
            .filter(|s| s["covered_ms"].as_u64() == Some(1000))
            .map(|s| s["unix_ms"].as_u64().unwrap())
            .collect();
        let mut m = std::collections::BTreeMap::<u64, u64>::new();
        for row in trace["self_check"]["attribution"]["rows"]
            .as_array()
            .unwrap()
        {
            if row["cgroup"].as_str() != Some(cgroup) {
                continue;
            }
            for s in row["seconds"].as_array().unwrap() {
                let t = s["unix_ms"].as_u64().unwrap();
                if whole.contains(&t) {
                    *m.entry(t).or_default() += s["bytes"].as_u64().unwrap();
                }
            }
        }
        m
    };
    let mut compared = [0; 3];
    let mut seen = Vec::new();
    for step in run["steps"].as_array().unwrap() {
        let local = read_json(
            &run_dir
                .join(step["dir"].as_str().unwrap())
                .join("trace.json"),
        );
        let step_nodes = step["nodes"].as_array().unwrap();
        assert_eq!(step_nodes.len(), 3, "{step}");
        for (i, node) in step_nodes.iter().enumerate() {
            let addr = format!("127.0.0.{}", i + 1);
            assert!(node["partial"].is_null(), "{node}");
            assert!(
                node["clock_before"]["rtt_ms"].as_f64().unwrap() > 0.0,
                "{node}"
            );
            assert_eq!(
                node["applied_offset_ms"], 0,
                "one machine, one clock: {node}"
            );
            let dir = run_dir.join(node["dir"].as_str().unwrap());
            let events = read_json(&dir.join("db-events.json"));
            for e in events.as_array().unwrap() {
                assert_eq!(e["node"], addr.as_str(), "only its own node's events: {e}");
            }
            let remote = read_json(&dir.join("trace.json"));
            // The tracers were loaded before the step and attach at its start: both windows
            // cover the step (loaded at the start, they opened seconds late on this VM).
            let runtime = step["runtime_ms"].as_u64().unwrap();
            for t in [&remote, &local] {
                let start = t["start_unix_ms"].as_u64().unwrap();
                let late = start.saturating_sub(step["started_unix_ms"].as_u64().unwrap());
                assert!(
                    late < 1000 && late * 10 < runtime,
                    "{addr} {}: trace opened {late} ms into a {runtime} ms step",
                    step["dir"]
                );
            }
            if remote["mode"] != "ebpf" || local["mode"] != "ebpf" {
                seen.push(format!(
                    "{} {addr}: modes remote {} local {}",
                    step["dir"], remote["mode"], local["mode"]
                ));
                continue;
            }
            let cgroup = observed[i]["node"]["cgroup"].as_str().unwrap();
            let watched = &remote["self_check"]["attribution"]["watched"][0];
            assert!(
                watched["name"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("cassandra-{addr}")),
                "{watched}"
            );
            let mine = whole_cgroup_bytes(&remote, cgroup);
            let theirs = whole_cgroup_bytes(&local, cgroup);
            let totals = |t: &serde_json::Value| {
                format!(
                    "{}..{} w{} r{}",
                    t["start_unix_ms"],
                    t["end_unix_ms"],
                    t["devices"][0]["ops"]["write"]["ios"],
                    t["devices"][0]["ops"]["read"]["ios"]
                )
            };
            seen.push(format!(
                "{} {addr}: windows remote {} local {}; seconds with its IO remote {:?} local {:?}",
                step["dir"],
                totals(&remote),
                totals(&local),
                mine.keys().collect::<Vec<_>>(),
                theirs.keys().collect::<Vec<_>>()
            ));
            for (t, bytes) in &mine {
                if let Some(local_bytes) = theirs.get(t) {
                    assert_eq!(
                        bytes, local_bytes,
                        "{addr} at {t}: remote {bytes} B, local {local_bytes} B"
                    );
                    compared[i] += 1;
                }
            }
        }
    }
    assert!(
        compared.iter().all(|c| *c > 0),
        "seconds of node IO compared per node: {compared:?}; seconds with node IO:\n{}",
        seen.join("\n")
    );
    // The report lays the cluster out: ownership, the observed hosts, and each step's nodes.
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(report.contains("## Cluster"), "no cluster section");
    assert!(report.contains("owns (effective)"), "no ownership table");
    for n in 1..=3 {
        assert!(
            report.contains(&format!("| 127.0.0.{n} | datacenter1 / rack1 |")),
            "node {n} row"
        );
    }
    let steps_with_nodes = report.matches("### Nodes").count();
    assert_eq!(
        steps_with_nodes,
        run["steps"].as_array().unwrap().len(),
        "a node table per step"
    );
}
