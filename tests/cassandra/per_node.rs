//! What the client and each node counted of a step, node by node: every request under the
//! coordinator that answered it, once, and the reads each node served itself.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::Path;

/// Checks one run step of a cluster of 127.0.0.1–3 at QUORUM, adding the step's coordinators
/// to `coordinators`.
pub fn every_request_and_read_is_counted_by_node(
    run_dir: &Path,
    step: &serde_json::Value,
    coordinators: &mut BTreeSet<String>,
) {
    // The client's latency per coordinator: every request of an op is counted under the
    // node that answered it, once.
    let by_node = read_json(
        &run_dir
            .join(step["dir"].as_str().unwrap())
            .join("client-by-node.json"),
    );
    let mut counted = std::collections::BTreeMap::<String, u64>::new();
    for row in by_node["seconds"].as_array().unwrap() {
        let node = row["node"].as_str().unwrap();
        assert!(
            ["127.0.0.1", "127.0.0.2", "127.0.0.3"].contains(&node),
            "{row}"
        );
        assert!(row["p99_us"].as_u64().unwrap() <= row["max_us"].as_u64().unwrap());
        coordinators.insert(node.to_string());
        *counted
            .entry(row["op"].as_str().unwrap().into())
            .or_default() += row["count"].as_u64().unwrap();
    }
    // Each node's own reads in the window, from its own counters: at QUORUM every client
    // read is served by two replicas (a data and a digest read), less the few in flight as
    // the counters were read at the window's edges.
    let client_reads: u64 = ["READ", "SCAN"]
        .iter()
        .filter_map(|op| step["series"][op]["count"].as_u64())
        .sum();
    let node_reads = step["node_reads"].as_object().unwrap_or_else(|| {
        panic!(
            "node_reads in {}: {}",
            step["dir"], step["node_reads_notes"]
        )
    });
    assert_eq!(node_reads.len(), 3, "{node_reads:?}");
    let served: u64 = node_reads.values().map(|v| v.as_u64().unwrap()).sum();
    assert!(
        served as f64 >= 1.8 * client_reads as f64
            && (client_reads == 0 || node_reads.values().all(|v| v.as_u64() > Some(0))),
        "{served} reads served for {client_reads} client reads: {node_reads:?}"
    );
    for (op, series) in step["series"].as_object().unwrap() {
        if ["READ", "UPDATE", "INSERT", "SCAN", "DELETE"].contains(&op.as_str()) {
            assert_eq!(
                counted.get(op).copied().unwrap_or(0),
                series["count"].as_u64().unwrap(),
                "{op} in {}",
                step["dir"]
            );
        }
    }
}
