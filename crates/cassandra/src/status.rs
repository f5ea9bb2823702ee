//! The ownership table of a managed cluster (`nodetool status`, asked of a running node), with
//! the nodes nodetool does not list marked down.

use crate::error::Result;
use crate::nodetool::{self, NodeStatus};
use crate::state::Cluster;
use crate::{dist, proc};
use std::path::Path;

/// The ownership table of a managed cluster, asked of the first running node through nodetool
/// (from the same jars). With `keyspace`, ownership is effective ownership for its replication.
pub fn status(dir: &Path, keyspace: Option<&str>) -> Result<Vec<NodeStatus>> {
    let cluster = Cluster::load(dir)?;
    let java = dist::find_java()?;
    let mut rows = match cluster.nodes.iter().find(|n| proc::node_alive(n)) {
        Some(node) => {
            let mut args = vec!["status".to_string()];
            if let Some(ks) = keyspace {
                args.push(ks.to_string());
            }
            let out = nodetool::run(&java, &cluster.lib_dir, node, &args)?;
            nodetool::parse_status(&out)
        }
        None => Vec::new(),
    };
    // Nodes nodetool does not list (all down) still appear, marked down.
    for node in &cluster.nodes {
        let alive = proc::node_alive(node);
        match rows.iter_mut().find(|r| r.address == node.address) {
            Some(r) => {
                r.pid = Some(node.pid);
                r.running = alive;
            }
            None => rows.push(NodeStatus {
                address: node.address.clone(),
                state: "DN".into(),
                load: "?".into(),
                tokens: cluster.options.num_tokens,
                owns_percent: None,
                host_id: "?".into(),
                rack: "?".into(),
                pid: Some(node.pid),
                running: alive,
            }),
        }
    }
    // Node order (127.0.0.1, .2, …), not nodetool's token order.
    rows.sort_by_key(|r| {
        r.address
            .rsplit('.')
            .next()
            .and_then(|o| o.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    Ok(rows)
}
