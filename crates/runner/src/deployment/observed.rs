//! Hosts observed over SSH (`--observe`) around any other deployment: the database runs where
//! the inner deployment says (external hosts, managed nodes, or none for `basic`), and iodig's
//! agent on each observed host traces its devices, samples its system and reads its node's
//! events during every step, and takes the faults aimed at that node.

use super::Deployment;
use crate::fault::FaultHandler;
use crate::plan::{Plan, ResolvedWorkload};
use crate::remote::{RemoteHosts, RemoteOptions};
use anyhow::Result;
use iodig_db::DbFactory;
use iodig_iotrace::TraceOptions;
use iodig_model::cluster::ClusterDoc;
use iodig_model::events::DbEvent;
use iodig_model::integrity::NodeIntegrity;
use iodig_workload::integrity::Ledger;
use std::path::Path;
use std::sync::Mutex;

/// The inner deployment, with an agent on every observed host for the whole run.
pub struct Observed<'a, D> {
    inner: &'a D,
    /// Locked by the sweep for a step at a time: the agents are driven from one thread.
    hosts: Mutex<RemoteHosts>,
}

impl<'a, D> Observed<'a, D> {
    /// Reaches the `--observe` hosts and starts their agents, telling each which node
    /// addresses the database has (`cluster`, when the binding knows its nodes).
    pub fn connect<F: DbFactory>(
        plan: &Plan,
        inner: &'a D,
        cluster: Option<&ClusterDoc>,
    ) -> Result<Self> {
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
        };
        Ok(Self {
            inner,
            hosts: Mutex::new(RemoteHosts::connect(&opts)?),
        })
    }
}

impl<F: DbFactory, D: Deployment<F>> Deployment<F> for Observed<'_, D> {
    fn marker_dir(&self) -> Option<&Path> {
        self.inner.marker_dir()
    }

    fn after_load(&self, plan: &Plan) -> Result<()> {
        self.inner.after_load(plan)
    }

    fn before_run_step(&self, plan: &Plan, factory: &F) -> Result<()> {
        self.inner.before_run_step(plan, factory)
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
