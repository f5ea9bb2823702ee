//! The database's IO is the story: a real Cassandra node whose data and commit log live on a
//! loop device of their own, observed over a real sshd as a host of its own, while iodig and
//! its run directory sit on the VM's disk. Part of the test that has a node running
//! (`cassandra_cli::workloads_a_to_f_run_against_a_real_node`).

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// The rows of the first `| op | block size | total GB | … | IOs |` table after `heading` in
/// `md`: op → (IOs, GB as printed).
fn io_summary_after(md: &str, heading: &str) -> BTreeMap<String, (u64, String)> {
    let at = md
        .find(heading)
        .unwrap_or_else(|| panic!("{heading} not in:\n{md}"));
    let rest = &md[at..];
    let table = &rest[rest
        .find("| op | block size | total GB")
        .expect("an IO summary")..];
    table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            (
                cells[0].to_string(),
                (
                    cells[5].replace(',', "").parse().unwrap(),
                    cells[2].to_string(),
                ),
            )
        })
        .collect()
}

/// Per op, the IOs and bytes of a trace.json, summed over its devices.
fn trace_totals(trace: &Value) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for d in trace["devices"].as_array().unwrap() {
        for (op, o) in d["ops"].as_object().unwrap() {
            let e: &mut (u64, u64) = m.entry(op.clone()).or_default();
            e.0 += o["ios"].as_u64().unwrap();
            e.1 += o["bytes"].as_u64().unwrap();
        }
    }
    m.retain(|_, v| v.0 > 0);
    m
}

/// A traced step observing the node over SSH: the node's section tells its loop device's IO,
/// equal to the node's trace.json; the client host is shown apart, without that device.
pub fn the_story_is_the_nodes_device(
    node_device: &str,
    on_the_node: impl Fn(IodigArgs) -> IodigArgs,
) {
    let sshd = sshd::Sshd::start(&["127.0.0.1"]);
    // Longer than the node's 10 s periodic commit-log sync, so the node writes in the step.
    let observed_run = |extra: &[&str]| {
        let run = IodigArgs::run()
            .no_load()
            .workload("workloads/workloada")
            .props(&["operationcount=100000000", &sshd.property()])
            .observe("127.0.0.1")
            .threads("8")
            .duration("12s")
            .warmup("0s")
            .args(extra);
        let r = on_the_node(run).output();
        assert_eq!(r.code(), 0, "{}", r.stderr);
        r
    };
    // With every IO of the node's host streamed too (`--events`), written per node.
    let r = observed_run(&["--events"]);
    let run = r.run_json();
    let observed = &run["cluster"]["observed"][0];
    assert_eq!(observed["node"]["address"], "127.0.0.1:9042", "{observed}");
    let devices: Vec<&str> = observed["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        devices,
        [node_device],
        "the node's data and commit log device"
    );
    let step = &run["steps"][0];
    let node_dir = r.run_dir().join(step["nodes"][0]["dir"].as_str().unwrap());
    let node_trace = read_json(&node_dir.join("trace.json"));
    assert_eq!(node_trace["mode"], "ebpf", "{node_trace:#}");
    let node_io = trace_totals(&node_trace);
    assert!(
        node_io.get("write").is_some_and(|w| w.0 > 0),
        "the node wrote its commit log in 12 s: {node_io:?}"
    );

    // The node's memtables flushed in the step (8 MiB memtables), by its real threads: the
    // kernel attributes the flush writes to cassandra.flush on the node's own trace, and the
    // node's log, read by the agent on the host, puts each flush on its time line.
    let events = read_json(&node_dir.join("db-events.json"));
    let flushes = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "flush")
        .count();
    assert!(flushes > 0, "the node flushed in 12 s: {events:#}");
    let mut class_writes = BTreeMap::<String, u64>::new();
    for row in node_trace["self_check"]["attribution"]["rows"]
        .as_array()
        .unwrap()
    {
        if row["op"] == "write" {
            *class_writes
                .entry(row["class"].as_str().unwrap().to_string())
                .or_default() += row["bytes"].as_u64().unwrap();
        }
    }
    assert!(
        class_writes.get("cassandra.flush").is_some_and(|b| *b > 0),
        "the flush writes are the node's MemtableFlushWriter's: {class_writes:?}"
    );
    let compactions = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "compaction")
        .count();
    if compactions > 0 {
        assert!(
            class_writes.contains_key("cassandra.compaction"),
            "{compactions} compactions logged, none attributed: {class_writes:?}"
        );
    }

    assert_eq!(node_trace["events_file"], "io-events.csv", "{node_trace:#}");
    let streamed = std::fs::read_to_string(node_dir.join("io-events.csv")).unwrap();
    assert_eq!(node_trace["self_check"]["lost_events"], 0);
    // One line per IO the node's tracer counted at its completion, as on iodig's own host.
    let rows = streamed.lines().count() as u64 - 1;
    let traced: u64 = node_io.values().map(|v| v.0).sum();
    let unseen = node_trace["self_check"]["completions_unseen"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(rows, traced - unseen, "streamed IOs against traced");

    let md = std::fs::read_to_string(r.run_dir().join("report.md")).unwrap();
    let section = findings::run_step_section(&md);
    let node_part = &section[section.find("### Node 127.0.0.1").unwrap()..];
    assert!(
        node_part.contains("cassandra.flush")
            && node_part.contains(&format!("{flushes} flushes"))
            && node_part.contains("Every IO by size (io-events.csv)"),
        "the node's section names its flushes and who wrote them:\n{node_part}"
    );
    let node_heading = "### Node 127.0.0.1";
    let host_heading = "### The client host (not the database's IO)";
    assert!(
        section.find(node_heading) < section.find(host_heading),
        "the node's part, then the client host's apart:\n{section}"
    );
    // The node's IO summary is its own trace's, op by op: IOs exactly, GB as printed.
    let shown = io_summary_after(section, node_heading);
    let want: BTreeMap<String, (u64, String)> = node_io
        .iter()
        .map(|(op, (ios, bytes))| (op.clone(), (*ios, format!("{:.2}", *bytes as f64 / 1e9))))
        .collect();
    assert_eq!(shown, want, "{section}");
    // The client host's part names none of the node's device.
    let host_part = &section[section.find(host_heading).unwrap()..];
    assert!(
        !host_part.contains(node_device),
        "the node's {node_device} is not the client host's IO:\n{host_part}"
    );
    // Every IO finding of the step names the node it is about.
    let findings = &section[..section.find(node_heading).unwrap()];
    let unnamed: Vec<&str> = findings
        .lines()
        .filter(|l| {
            ["Write bursts", "Queue depth", "Device read", "Device write"]
                .iter()
                .any(|w| l.contains(w))
        })
        .collect();
    assert!(
        unnamed.is_empty(),
        "IO findings without their node: {unnamed:?}"
    );
    // The front page names the node and step of each IO headline it draws.
    let summary = &md[md.find("## Summary").expect("a summary")..md.find("## Steps").unwrap()];
    for line in summary
        .lines()
        .filter(|l| !l.starts_with(['*', '|']))
        .filter(|l| l.contains("bursts") || l.contains("queue depth"))
    {
        assert!(line.starts_with("127.0.0.1 in step"), "{line}");
    }

    // The node's configuration as the briefs print it, read by its agent on its host.
    let config = &md[md
        .find("### Each node's configuration")
        .unwrap_or_else(|| panic!("no configuration table:\n{md}"))..];
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    for row in [
        format!("| kernel | {} |", kernel.trim()),
        "| memtable_heap_space | 8MiB |".to_string(),
        "| commitlog_sync | periodic |".to_string(),
        "| jvm.heap | 1G |".to_string(),
        format!("| data drive | {node_device} (no model reported) |"),
    ] {
        assert!(config.contains(&row), "{row} not in:\n{config}");
    }
    assert!(
        config.contains("| vm.max_map_count |") && config.contains("| limits.open_files |"),
        "{config}"
    );

    // The briefs' drive comparison: the same step with the node's device capped, compared;
    // the nodes' IO stands side by side, each run's figures its node's own trace's.
    // Each step starts cold, as the briefs' did after their restore: the page cache is
    // dropped here and on the node's host before it.
    let slowed = observed_run(&["--fault", "0s:cap=4MB/s:127.0.0.1", "--drop-caches"]);
    let dropped = slowed
        .stderr
        .lines()
        .find(|l| l.starts_with("note: page cache dropped before the step: here (page cache "))
        .unwrap_or_else(|| panic!("no drop said:\n{}", slowed.stderr));
    assert!(dropped.contains("; on 127.0.0.1 (page cache "), "{dropped}");
    assert!(
        slowed.run_json()["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("--drop-caches:")),
        "the run says its steps started cold"
    );
    let cmp = r.run_dir().parent().unwrap().join("comparison");
    let c = run_iodig(&[
        "compare",
        r.run_dir().to_str().unwrap(),
        slowed.run_dir().to_str().unwrap(),
        "--out",
        cmp.to_str().unwrap(),
    ]);
    assert_eq!(c.code(), 0, "{}", c.stderr);
    let md = std::fs::read_to_string(cmp.join("compare.md")).unwrap();
    let side = &md[md
        .find("## The database's IO, side by side")
        .unwrap_or_else(|| panic!("no IO section:\n{md}"))..];
    let row = |measure: &str| -> Vec<String> {
        side.lines()
            .find(|l| l.starts_with(&format!("| 8 | {measure} |")))
            .unwrap_or_else(|| panic!("{measure} not in:\n{side}"))
            .trim_matches('|')
            .split('|')
            .skip(2)
            .map(|c| c.trim().to_string())
            .collect()
    };
    let gb = |run: &Run| {
        let run_json = run.run_json();
        let dir = run
            .run_dir()
            .join(run_json["steps"][0]["nodes"][0]["dir"].as_str().unwrap());
        let io = trace_totals(&read_json(&dir.join("trace.json")));
        let bytes = |op: &str| io.get(op).map_or(0, |v| v.1) as f64 / 1e9;
        format!("{:.2} / {:.2}", bytes("read"), bytes("write"))
    };
    assert_eq!(row("GB read / written"), [gb(&r), gb(&slowed)], "{side}");
    for measure in [
        "peak queue depth",
        "write burst, busiest slot",
        "client ops/s",
    ] {
        assert!(
            row(measure).iter().all(|v| v != "–"),
            "{measure} for both runs:\n{side}"
        );
    }
}
