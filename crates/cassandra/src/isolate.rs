//! One managed node alone: every other node paused (SIGSTOP) until the node's own failure
//! detector has marked them down, so a read it coordinates at consistency ONE can only be
//! answered from its own data (no other replica to ask, no read repair, no speculative retry);
//! the others resume (SIGCONT) when the isolation is dropped. `iodig verify` reads each node
//! this way to tell which replica is behind.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::dist;
use crate::error::{Error, Result};
use crate::nodetool::{self, NodeStatus};
use crate::proc::{frozen, node_alive, signal};
use crate::state::{Cluster, NodeInfo};

/// The other nodes, paused while this lives.
pub struct Isolated {
    paused: Vec<NodeInfo>,
}

/// Pauses every running node of the cluster in `dir` but `address`, and waits (up to
/// `within`) until `address` sees each of them down.
pub fn isolate(dir: &Path, address: &str, within: Duration) -> Result<Isolated> {
    let cluster = Cluster::load(dir)?;
    let node = cluster
        .nodes
        .iter()
        .find(|n| n.address == address)
        .ok_or_else(|| Error::Other(format!("no managed node {address} in {}", dir.display())))?;
    if !node_alive(node) {
        return Err(Error::Other(format!("node {address} is not running")));
    }
    let java = dist::find_java()?;
    let isolated = Isolated {
        paused: cluster
            .nodes
            .iter()
            .filter(|n| n.address != address && node_alive(n))
            .cloned()
            .collect(),
    };
    for other in &isolated.paused {
        signal(other.pid, libc::SIGSTOP);
    }
    let deadline = Instant::now() + within;
    loop {
        let seen = seen_by(&java, &cluster, node);
        if let Ok(rows) = &seen {
            let all_down = isolated.paused.iter().all(|p| {
                rows.iter()
                    .any(|r| r.address == p.address && r.state.starts_with('D'))
            });
            if all_down {
                return Ok(isolated);
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::Other(format!(
                "node {address} did not see the paused nodes down within {} s ({})",
                within.as_secs(),
                match seen {
                    Ok(rows) => rows
                        .iter()
                        .map(|r| format!("{} {}", r.address, r.state))
                        .collect::<Vec<_>>()
                        .join(", "),
                    Err(e) => e.to_string(),
                }
            )));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

impl Drop for Isolated {
    fn drop(&mut self) {
        for p in &self.paused {
            if node_alive(p) {
                signal(p.pid, libc::SIGCONT);
            }
        }
    }
}

/// Lets every frozen node of the cluster in `dir` go on (SIGCONT): what a killed iodig left
/// paused. The addresses thawed.
pub fn thaw(dir: &Path) -> Result<Vec<String>> {
    let cluster = Cluster::load(dir)?;
    let mut thawed = Vec::new();
    for node in cluster.nodes.iter().filter(|n| frozen(n)) {
        signal(node.pid, libc::SIGCONT);
        thawed.push(node.address.clone());
    }
    Ok(thawed)
}

/// Waits (up to `within`) until every running node sees every node of the cluster up, as
/// after an isolation, so what follows meets a whole cluster again.
pub fn await_all_up(dir: &Path, within: Duration) -> Result<()> {
    let cluster = Cluster::load(dir)?;
    let java = dist::find_java()?;
    let deadline = Instant::now() + within;
    for node in cluster.nodes.iter().filter(|n| node_alive(n)) {
        loop {
            let seen = seen_by(&java, &cluster, node);
            let whole = seen.as_ref().is_ok_and(|rows| {
                cluster.nodes.iter().all(|n| {
                    rows.iter()
                        .any(|r| r.address == n.address && r.state == "UN")
                })
            });
            if whole {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Error::Other(format!(
                    "node {} does not see every node up after {} s",
                    node.address,
                    within.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    Ok(())
}

/// The cluster as `node` sees it (`nodetool status` against it).
fn seen_by(java: &Path, cluster: &Cluster, node: &NodeInfo) -> Result<Vec<NodeStatus>> {
    nodetool::run(java, &cluster.lib_dir, node, &["status".into()])
        .map(|text| nodetool::parse_status(&text))
}
