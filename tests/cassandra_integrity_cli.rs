//! The integrity proof on real Apache Cassandra: versioned writes on a 3-node managed cluster
//! while a node is killed and restarted and another's drive is capped, then every acknowledged
//! write read back (`--verify`, `iodig verify`), through the cluster and from each node alone.

mod common;

use common::*;

/// The integrity proof: 3 managed nodes at RF 3, workload A with versioned writes, one node
/// killed with SIGKILL mid-step and restarted (another one's drive capped for a second before
/// that); at QUORUM every acknowledged write is read back as acknowledged. The same at ONE may
/// read stale values and says how many.
#[test]
fn a_node_killed_mid_step_at_quorum_loses_no_acknowledged_write() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("runs");
    let managed = out.join("data").join("cassandra");
    let _guard = Nodes(&managed);
    let up = run_iodig(&[
        "cassandra",
        "up",
        "--nodes",
        "3",
        "--dir",
        managed.to_str().unwrap(),
    ]);
    assert_eq!(up.code(), 0, "{}", up.stderr);
    let run_at = |level: &str| {
        IodigArgs::run()
            .db("cassandra")
            .nodes("3")
            .workload("workloads/workloada")
            .props(&[
                "recordcount=2000",
                "fieldcount=4",
                "versionedwrites=true",
                "cassandra.replicationfactor=3",
            ])
            .p(format!("cassandra.readconsistencylevel={level}"))
            .p(format!("cassandra.writeconsistencylevel={level}"))
            .threads("8")
            .duration("10s")
            .warmup("0s")
            .trace("off")
            .fault("1s:cap=2MB/s:node3")
            .fault("2s:uncap:node3")
            .fault("3s:kill:node2")
            .fault("6s:restart:node2")
            .verify()
            .out(&out)
            .output()
    };

    let quorum = run_at("QUORUM");
    assert_eq!(quorum.code(), 0, "{}", quorum.stderr);
    assert!(
        quorum
            .stderr
            .contains("fault 3s:kill:node2: 127.0.0.2 killed (SIGKILL)"),
        "{}",
        quorum.stderr
    );
    // A slow drive under another node meanwhile: its cgroup throttled, then freed.
    assert!(
        quorum
            .stderr
            .contains("fault 1s:cap=2MB/s:node3: 127.0.0.3 capped at 2.0 MB/s each way on")
            && quorum
                .stderr
                .contains("fault 2s:uncap:node3: 127.0.0.3 uncapped on"),
        "{}",
        quorum.stderr
    );
    let run = quorum.run_json();
    let i = &run["integrity"];
    eprintln!("QUORUM: {i}");
    assert_eq!(i["read_with"], "cassandra at QUORUM", "{i}");
    assert_eq!(i["keys"], 2000, "every loaded key was acknowledged: {i}");
    for bad in ["missing", "stale", "corrupt"] {
        assert_eq!(i[bad], 0, "{bad} at QUORUM: {i}");
    }
    assert_eq!(i["during_run"]["stale"], 0, "{i}");
    assert_eq!(i["during_run"]["missing"], 0, "{i}");
    assert!(i["during_run"]["checked"].as_u64().unwrap() > 100, "{i}");
    // The outage is on the step's time line, with the step's writes acknowledged around it.
    let step = run["steps"].as_array().unwrap().last().unwrap().clone();
    let events = read_json(
        &quorum
            .run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("db-events.json"),
    );
    let faults = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "fault")
        .count();
    assert_eq!(faults, 4, "{events}");
    // The killed node's process is sampled on under the pid it was restarted as.
    let restarted_as: u64 = quorum
        .stderr
        .split("restarted as pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no restart line: {}", quorum.stderr));
    let sys = read_json(
        &quorum
            .run_dir()
            .join(step["dir"].as_str().unwrap())
            .join("sys.json"),
    );
    let node2 = sys["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"].as_str().unwrap().contains("127.0.0.2"))
        .unwrap_or_else(|| panic!("node 2 not sampled: {}", sys["processes"]));
    assert_eq!(node2["state"], "running", "{node2}");
    assert_eq!(node2["restarts"][0]["pid"], restarted_as, "{node2}");
    let sampled_again = sys["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["procs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["pid"] == restarted_as && p["stats"]["rss_bytes"].as_u64() > Some(0))
        })
        .count();
    assert!(sampled_again >= 2, "{node2}: {sampled_again} samples");
    assert!(
        step["returns"]["UPDATE"]["OK"].as_u64().unwrap() > 100,
        "{step}"
    );
    let report = std::fs::read_to_string(quorum.run_dir().join("report.md")).unwrap();
    assert!(report.contains("no acknowledged write was lost"), "finding");
    // The nodes' CPU on the report: node 2's line drops to 0 while it is down.
    let html = std::fs::read_to_string(quorum.run_dir().join("report.html")).unwrap();
    let cpu = html
        .split("<svg")
        .find(|c| c.contains("CPU of iodig and the database processes"))
        .expect("a chart of the processes' CPU");
    for node in ["iodig", "127.0.0.1", "127.0.0.2", "127.0.0.3"] {
        assert!(cpu.contains(node), "{node} on the processes' CPU chart");
    }

    // At ONE a read may reach the restarted node before it caught up: allowed, and counted.
    let one = run_at("ONE");
    assert!(
        one.code() == 0 || one.code() == 1,
        "a stale read at ONE fails the check, nothing else may: {}",
        one.stderr
    );
    let i = one.run_json()["integrity"].clone();
    eprintln!("ONE: {i}");
    assert_eq!(i["read_with"], "cassandra at ONE", "{i}");
    assert_eq!(i["corrupt"], 0, "{i}");
    assert_eq!(
        one.code() == 1,
        i["missing"].as_u64().unwrap() + i["stale"].as_u64().unwrap() > 0,
        "exit 1 exactly when a write was found lost: {i}"
    );
    assert!(
        one.stderr.contains("during the run") && one.stderr.contains("reads were stale"),
        "says how many: {}",
        one.stderr
    );

    // Later, `iodig verify` of the QUORUM run against the cluster as it is now: the ONE run's
    // newer writes are newer versions, not losses.
    let later = run_iodig(&["verify", quorum.run_dir().to_str().unwrap()]);
    assert_eq!(later.code(), 0, "{}", later.stderr);
    let i = read_json(&quorum.run_dir().join("run.json"))["integrity"].clone();
    assert_eq!(i["checked_by"], "verify", "{i}");
    assert_eq!(i["keys"], 2000, "{i}");
    assert_eq!(i["stale"], 0, "{i}");

    // Each node alone: the other two frozen (SIGSTOP) while every key is read through it at
    // ONE. A read that needed a frozen node would time out, so every key answered proves the
    // node's own copy answered; what each holds is counted per node.
    let alone = run_iodig(&[
        "verify",
        quorum.run_dir().to_str().unwrap(),
        "-p",
        "verify.eachnode=true",
    ]);
    assert_eq!(alone.code(), 0, "{}", alone.stderr);
    let i = read_json(&quorum.run_dir().join("run.json"))["integrity"].clone();
    eprintln!("each node: {}", i["per_node"]);
    let nodes = i["per_node"].as_array().expect("per_node");
    let names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(names, ["127.0.0.1", "127.0.0.2", "127.0.0.3"], "{i}");
    for n in nodes {
        assert_eq!(n["keys"], 2000, "{n}");
        assert_eq!(
            n["unreadable"], 0,
            "every key answered by the node alone: {n}"
        );
        let judged: u64 = ["ok", "missing", "stale", "corrupt"]
            .iter()
            .map(|k| n[*k].as_u64().unwrap())
            .sum();
        assert_eq!(judged, 2000, "{n}");
        assert!(
            n["read_with"].as_str().unwrap().contains("alone at ONE"),
            "{n}"
        );
    }
    assert!(
        alone.stderr.contains("each node read alone"),
        "{}",
        alone.stderr
    );
    let report = std::fs::read_to_string(quorum.run_dir().join("report.md")).unwrap();
    assert!(report.contains("Each node read alone"), "report");
    // The cluster is whole again: a QUORUM verify right after still reads every key.
    let again = run_iodig(&["verify", quorum.run_dir().to_str().unwrap()]);
    assert_eq!(again.code(), 0, "{}", again.stderr);
}
