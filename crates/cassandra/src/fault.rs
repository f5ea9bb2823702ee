//! Faults injected into one managed node while a run goes on (`run --fault`): a crash
//! (SIGKILL), a stall (SIGSTOP/SIGCONT), a graceful stop, and a restart with the node's data.

use std::path::Path;
use std::time::Duration;

use crate::dist::{self, Distribution};
use crate::error::{Error, Result};
use crate::lifecycle::{start_node, wait_ready};
use crate::proc;
use crate::state::Cluster;

/// A fault to inject into one managed node during a run.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeFault {
    /// SIGKILL: a crash; the node stays down until restarted.
    Kill,
    /// SIGSTOP for the duration, then SIGCONT: a stall.
    Pause(Duration),
    /// SIGTERM with Cassandra's drain, SIGKILL after 30 s: a graceful stop.
    Stop,
    /// Start a node that is down again, with its data, and wait until it serves CQL.
    Restart,
}

/// Injects `fault` into the node at `address` of the cluster in `dir`; returns what was done.
pub fn inject(dir: &Path, address: &str, fault: &NodeFault) -> Result<String> {
    let mut cluster = Cluster::load(dir)?;
    let Some(pos) = cluster.nodes.iter().position(|n| n.address == address) else {
        return Err(Error::Other(format!(
            "no managed node {address} in {} (nodes: {})",
            dir.display(),
            cluster.hosts()
        )));
    };
    let node = cluster.nodes[pos].clone();
    let done = match fault {
        NodeFault::Kill => format!("{} pid {}", proc::kill(&node), node.pid),
        NodeFault::Pause(d) => format!(
            "{} pid {} for {:.1} s",
            proc::pause(&node, *d),
            node.pid,
            d.as_secs_f64()
        ),
        NodeFault::Stop => format!(
            "stopped ({}) pid {}",
            proc::stop(&node, Duration::from_secs(30)),
            node.pid
        ),
        NodeFault::Restart => {
            if proc::node_alive(&node) {
                return Err(Error::Other(format!(
                    "node {address} (pid {}) is running; a restart follows a kill or stop",
                    node.pid
                )));
            }
            let java = dist::find_java()?;
            let dist = Distribution {
                lib_dir: cluster.lib_dir.clone(),
                version: cluster.options.cassandra_version.clone(),
            };
            let started = start_node(&java, &dist, &cluster.options, node.index)?;
            cluster.nodes[pos] = started.clone();
            cluster.save()?;
            wait_ready(&started, cluster.options.ready_timeout)?;
            format!("restarted as pid {} (was {})", started.pid, node.pid)
        }
    };
    Ok(done)
}
