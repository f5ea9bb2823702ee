//! Hosts observed over SSH (`--observe`) around any other deployment: the database runs where
//! the inner deployment says (external hosts, managed nodes, or none for `basic`), and iodig's
//! agent on each observed host traces its devices, samples its system and reads its node's
//! events during every step, and takes the faults aimed at that node. With
//! `--restore-each-step` on nodes the inner deployment did not start, the agents snapshot the
//! loaded dataset and put it back before each run step (`remote::restore`).

use super::{Deployment, Restore};
use crate::errors::UsageError;
use crate::fault::FaultHandler;
use crate::plan::{Plan, ResolvedWorkload};
use crate::remote::{RemoteHosts, RemoteOptions};
use anyhow::{anyhow, Context, Result};
use iodig_db::DbFactory;
use iodig_iotrace::TraceOptions;
use iodig_model::cluster::{ClusterDoc, ObservedHost};
use iodig_model::events::DbEvent;
use iodig_model::integrity::NodeIntegrity;
use iodig_workload::integrity::Ledger;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The snapshot of the load on observed hosts' nodes (`--restore-each-step`).
const LOADED_SNAPSHOT: &str = "iodig-loaded";

/// How long the client may take to reach every restored node again (the driver reconnects
/// with back-off).
const READY_AFTER_RESTORE: Duration = Duration::from_secs(180);

/// The inner deployment, with an agent on every observed host for the whole run.
pub struct Observed<'a, D> {
    inner: &'a D,
    /// Locked by the sweep for a step at a time: the agents are driven from one thread.
    hosts: Mutex<RemoteHosts>,
    /// The dataset the agents snapshot after the load and put back before each run step,
    /// when the inner deployment leaves the restore to them.
    restored_dataset: Option<String>,
}

impl<'a, D> Observed<'a, D> {
    /// Reaches the `--observe` hosts and starts their agents, telling each which node
    /// addresses the database has (`cluster`, when the binding knows its nodes). With a
    /// restore left to the agents, every node must be observed and restartable: refused
    /// here, before the load, otherwise.
    pub fn connect<F: DbFactory>(
        plan: &Plan,
        inner: &'a D,
        cluster: Option<&ClusterDoc>,
    ) -> Result<Self>
    where
        D: Deployment<F>,
    {
        let opts = RemoteOptions {
            hosts: plan.observe.clone(),
            ssh: plan.ssh.clone(),
            db: F::NAME.to_string(),
            node_addresses: cluster
                .map(|c| c.nodes.iter().map(|n| n.address.clone()).collect())
                .unwrap_or_default(),
            // The hosts trace the devices under their own node's directories.
            trace: TraceOptions {
                mode: plan.req.trace.mode,
                slot_ms: plan.req.trace.slot_ms,
                ..Default::default()
            },
            io_events: plan.req.io_events,
            revision: plan.req.revision.clone(),
        };
        let mut hosts = RemoteHosts::connect(&opts)?;
        let restored_dataset = inner.restore_on_observed_hosts(plan);
        if let Some(dataset) = &restored_dataset {
            check_every_node_observed(cluster, hosts.facts())?;
            let ready = hosts.check_restorable(dataset).map_err(|why| {
                UsageError(format!(
                    "--restore-each-step: {why}; leave out --restore-each-step, or restore the nodes by the hosts' own means between runs"
                ))
            })?;
            for (host, how) in ready {
                iodig_model::eprintln_lossy!("note: --restore-each-step on {host}: {how}");
            }
        }
        Ok(Self {
            inner,
            hosts: Mutex::new(hosts),
            restored_dataset,
        })
    }

    fn hosts(&self) -> std::sync::MutexGuard<'_, RemoteHosts> {
        self.hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A restore of only some nodes leaves the others' replicas newer than the snapshot, and they
/// would hand the step's writes back: every node of the ring must be on an observed host.
fn check_every_node_observed(
    cluster: Option<&ClusterDoc>,
    observed: &[ObservedHost],
) -> Result<()> {
    let ip = |address: &str| {
        address
            .parse::<std::net::SocketAddr>()
            .map_or_else(|_| address.to_string(), |a| a.ip().to_string())
    };
    let seen: Vec<String> = observed
        .iter()
        .filter_map(|h| h.node.as_ref().map(|n| ip(&n.address)))
        .collect();
    let unobserved: Vec<String> = cluster
        .map(|c| c.nodes.iter().map(|n| ip(&n.address)).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|n| !seen.contains(n))
        .collect();
    if unobserved.is_empty() {
        return Ok(());
    }
    Err(UsageError(format!(
        "--restore-each-step: node(s) {} of the cluster are on no --observe host, and a restore of only some nodes leaves the others' replicas newer than the snapshot; add each node's host to --observe",
        unobserved.join(", ")
    ))
    .into())
}

impl<F: DbFactory, D: Deployment<F>> Deployment<F> for Observed<'_, D> {
    fn marker_dir(&self) -> Option<&Path> {
        self.inner.marker_dir()
    }

    /// With the restore left to the agents, each node snapshots the loaded dataset, all at
    /// once; a node that cannot fails the run, as every step after would start elsewhere.
    fn after_load(&self, plan: &Plan) -> Result<()> {
        self.inner.after_load(plan)?;
        let Some(dataset) = &self.restored_dataset else {
            return Ok(());
        };
        for (host, taken) in self.hosts().snapshot(dataset, LOADED_SNAPSHOT) {
            match taken {
                Ok(detail) => iodig_model::eprintln_lossy!("note: {host}: {detail}"),
                Err(e) => {
                    return Err(anyhow!(
                        "--restore-each-step: cannot snapshot the loaded dataset on {host}: {e}"
                    ))
                }
            }
        }
        Ok(())
    }

    /// Every observed node put back to the load's snapshot, all at once, then the client
    /// connected to them all again. A node whose restore failed is said (stderr and its part
    /// of the step) and the step goes on, as with any node that fails during a step.
    fn before_run_step(&self, plan: &Plan, factory: &F) -> Result<Restore> {
        let Some(dataset) = &self.restored_dataset else {
            return self.inner.before_run_step(plan, factory);
        };
        let started = Instant::now();
        let restored = self.hosts().restore(dataset, LOADED_SNAPSHOT);
        for (host, r) in &restored {
            match r {
                Ok(n) => iodig_model::eprintln_lossy!(
                    "note: {host}: restored snapshot {LOADED_SNAPSHOT} in {:.1} s ({})",
                    n.took.as_secs_f64(),
                    n.detail
                ),
                Err(e) => iodig_model::eprintln_lossy!(
                    "warning: {host}: the restore before the step failed ({e}); the step goes on, and this node's part says it did not start from the loaded dataset"
                ),
            }
        }
        factory
            .await_ready(READY_AFTER_RESTORE)
            .map_err(crate::errors::db_error)
            .context("--restore-each-step: the client could not reach the restored nodes")?;
        iodig_model::eprintln_lossy!(
            "note: --restore-each-step: {} of {} observed node(s) restored and serving the client {:.1} s after the restore began",
            restored.iter().filter(|(_, r)| r.is_ok()).count(),
            restored.len(),
            started.elapsed().as_secs_f64()
        );
        let failed: Vec<String> = (restored.iter())
            .filter_map(|(host, r)| r.as_ref().err().map(|e| format!("{host}: {e}")))
            .collect();
        Ok(if failed.is_empty() {
            Restore::Done
        } else {
            Restore::Incomplete(failed.join("; "))
        })
    }

    fn after_run_step(&self, plan: &Plan, step: &str, workload: &ResolvedWorkload) -> Result<()> {
        // A cap on an observed node never outlives its step.
        self.hosts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .lift_caps();
        self.inner.after_run_step(plan, step, workload)
    }

    fn processes(&self) -> Vec<(String, u32)> {
        self.inner.processes()
    }

    /// Nodes the inner deployment manages take their faults from it; otherwise the observed
    /// hosts' nodes are signalled over SSH.
    fn fault_handler(&self) -> Option<FaultHandler> {
        self.inner.fault_handler().or_else(|| {
            Some(
                self.hosts
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .fault_handler(),
            )
        })
    }

    fn events_since(&self, since_unix_ms: u64) -> Vec<DbEvent> {
        self.inner.events_since(since_unix_ms)
    }

    fn observed_hosts(&self) -> Option<&Mutex<RemoteHosts>> {
        Some(&self.hosts)
    }

    fn check_each_node(
        &self,
        plan: &Plan,
        ledger: &std::sync::Arc<Ledger>,
    ) -> Result<Vec<NodeIntegrity>> {
        self.inner.check_each_node(plan, ledger)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::cluster::{HostNode, NodeFacts};

    fn ring(addresses: &[&str]) -> ClusterDoc {
        ClusterDoc {
            nodes: addresses
                .iter()
                .map(|a| NodeFacts {
                    address: (*a).to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn observing(address: &str) -> ObservedHost {
        ObservedHost {
            node: Some(HostNode {
                address: address.to_string(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_restore_needs_every_node_of_the_ring_observed() {
        let hosts = [observing("127.0.0.1:9042"), observing("127.0.0.2:9042")];
        check_every_node_observed(Some(&ring(&["127.0.0.1", "127.0.0.2"])), &hosts).unwrap();
        let e = check_every_node_observed(
            Some(&ring(&["127.0.0.1", "127.0.0.2", "127.0.0.3"])),
            &hosts,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("node(s) 127.0.0.3 of the cluster are on no --observe host")
                && e.contains("add each node's host to --observe"),
            "{e}"
        );
        // A binding that knows no ring leaves the check to the agents.
        check_every_node_observed(None, &hosts).unwrap();
    }
}
