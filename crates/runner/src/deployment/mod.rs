//! Where the database runs and what iodig owns of it. A deployment decides whether to load,
//! how to put a dataset back, which processes and database logs to observe; the [`Sweeper`]
//! handed in (the sweep in `crate::sweep`) stays the same for all of them.
//!
//! The deployments today: [`embedded`] (RocksDB's data directory, and the no-op `basic`
//! binding), [`cassandra`] (managed local nodes iodig starts, or external hosts), and
//! [`observed`], which puts agents on the `--observe` hosts around any of them. A new one (a new
//! database's managed servers) is a new file here implementing [`Deployment`] and one arm in
//! [`run`]; this is the only module with binding feature gates.

pub mod embedded;
pub mod observed;

#[cfg(feature = "cassandra")]
pub mod cassandra;
#[cfg(feature = "cassandra-host")]
pub mod cassandra_host;

use crate::dataset;
use crate::errors::UsageError;
use crate::fault::FaultAction;
use crate::plan::{Plan, ResolvedWorkload};
use crate::remote::RemoteHosts;
use crate::request::RunOutcome;
use anyhow::Result;
use iodig_db::DbFactory;
use iodig_faultdisk::FaultyDisk;
use iodig_model::events::DbEvent;
use iodig_model::integrity::NodeIntegrity;
use iodig_workload::integrity::Ledger;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// What the generic sweep asks of the place the database runs in, between steps.
pub trait Deployment<F: DbFactory> {
    /// Where the dataset marker lives (a data directory, the managed nodes' directory), if
    /// this deployment keeps one.
    fn marker_dir(&self) -> Option<&Path> {
        None
    }

    /// After a load finished: remember what was loaded.
    fn after_load(&self, plan: &Plan) -> Result<()> {
        match self.marker_dir() {
            Some(dir) => dataset::mark_loaded(dir, &plan.props),
            None => Ok(()),
        }
    }

    /// Before each run step (`--restore-each-step` puts the loaded dataset back here): what
    /// was done to the dataset.
    fn before_run_step(&self, plan: &Plan, _factory: &F) -> Result<Restore> {
        if !plan.req.restore_each_step {
            return Ok(Restore::NotAsked);
        }
        Err(UsageError(format!(
            "--restore-each-step: restoring is supported on managed Cassandra nodes; --db {} cannot restore yet",
            plan.req.db
        ))
        .into())
    }

    /// After each run step: a workload that inserts grew the dataset, and the next run must
    /// not take it for the loaded one.
    fn after_run_step(&self, plan: &Plan, step: &str, workload: &ResolvedWorkload) -> Result<()> {
        mark_grown_by(self.marker_dir(), plan, step, workload)
    }

    /// Processes the system sampler follows besides iodig itself (database servers).
    fn processes(&self) -> Vec<(String, u32)> {
        Vec::new()
    }

    /// What does a `--fault` to a node of this deployment (managed nodes only).
    fn fault_handler(&self) -> Option<crate::fault::FaultHandler> {
        None
    }

    /// Flushes and compactions the deployment reads itself (managed nodes' logs), besides the
    /// binding's own.
    fn events_since(&self, _since_unix_ms: u64) -> Vec<DbEvent> {
        Vec::new()
    }

    /// The agents on the hosts observed over SSH, driven around each step ([`observed`]).
    fn observed_hosts(&self) -> Option<&Mutex<RemoteHosts>> {
        None
    }

    /// `--restore-each-step` on nodes this deployment cannot restore itself (nodes it did not
    /// start): the dataset (Cassandra's keyspace) that each observed host's agent snapshots
    /// after the load and puts back before each run step ([`observed`]).
    fn restore_on_observed_hosts(&self, _plan: &Plan) -> Option<String> {
        None
    }

    /// After the check through the cluster (`-p verify.eachnode=true`): every key of `ledger`
    /// read from each node alone, where this deployment can make one node the only replica
    /// that answers; none where it cannot.
    fn check_each_node(
        &self,
        _plan: &Plan,
        _ledger: &std::sync::Arc<Ledger>,
    ) -> Result<Vec<NodeIntegrity>> {
        Ok(Vec::new())
    }
}

/// What [`Deployment::before_run_step`] did to the dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restore {
    /// Nothing: `--restore-each-step` was not asked for, or another layer restores.
    NotAsked,
    /// Every node (or the data directory) holds the snapshot again.
    Done,
    /// Some nodes were put back and some not: why, per node, said already on stderr.
    Incomplete(String),
}

/// What runs over the database once a deployment has opened it: the generic sweep
/// ([`crate::sweep`]). [`crate::execute`] hands it in, so a deployment never names what runs
/// over it and the runner's imports run one way (`execute` → `sweep` → `deployment`).
pub trait Sweeper {
    /// Loads when `load` says so, runs the plan's steps over the open `factory` in
    /// `deployment`, and finishes the run.
    fn sweep<F: DbFactory, D: Deployment<F>>(
        &self,
        plan: &Plan,
        factory: &F,
        deployment: &D,
        load: bool,
        stop: &AtomicBool,
    ) -> Result<RunOutcome>;
}

/// The sweep over `deployment`, inside an [`observed::Observed`] when `--observe` names hosts.
/// Every binding's `run` ends here.
pub(crate) fn sweep<F: DbFactory, D: Deployment<F>>(
    sweeper: &impl Sweeper,
    plan: &Plan,
    factory: &F,
    deployment: &D,
    load: bool,
    stop: &AtomicBool,
) -> Result<RunOutcome> {
    if plan.observe.is_empty() || plan.req.verify_only.is_some() {
        return sweeper.sweep(plan, factory, deployment, load, stop);
    }
    let cluster = factory.cluster_facts();
    let observed = observed::Observed::connect::<F>(plan, deployment, cluster.as_ref())?;
    sweeper.sweep(plan, factory, &observed, load, stop)
}

/// A workload that inserts grew the dataset: its marker says so, so the next run does not take
/// it for the loaded one.
pub(crate) fn mark_grown_by(
    marker_dir: Option<&Path>,
    plan: &Plan,
    step: &str,
    workload: &ResolvedWorkload,
) -> Result<()> {
    match marker_dir {
        Some(dir) if workload.spec.run_inserts() => dataset::mark_grown(dir, &plan.props, step),
        _ => Ok(()),
    }
}

/// Opens the binding in its deployment and runs the plan's steps over it with `sweeper`.
pub fn run(plan: Plan, sweeper: &impl Sweeper, stop: &AtomicBool) -> Result<RunOutcome> {
    match plan.req.db.as_str() {
        #[cfg(feature = "cassandra")]
        "cassandra" => cassandra::run(plan, sweeper, stop),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => embedded::run_rocksdb(&plan, sweeper, stop),
        _ => embedded::run_basic(&plan, sweeper, stop),
    }
}

/// Finds the node of `db` running on this host, for `iodig agent` on an observed host.
#[cfg_attr(not(feature = "cassandra-host"), allow(unused_variables))]
pub fn node_on_host(
    db: &str,
    address: Option<&str>,
) -> Result<Box<dyn crate::remote::node::NodeOnHost>, String> {
    match db {
        #[cfg(feature = "cassandra-host")]
        "cassandra" => cassandra_host::node_on_host(address),
        other => Err(format!("--db {other} has no server process to look for")),
    }
}

/// A faulty disk made and mounted on `dir` (empty or absent) for the schedule's slow, failing
/// and full device faults, of `-p faultdisk.size` by `-p faultdisk.mechanism`; said on stderr.
pub(crate) fn mount_faulty_disk(plan: &Plan, dir: &Path) -> Result<FaultyDisk> {
    let size =
        crate::fault::faulty_disk_size(plan.props.get("faultdisk.size")).map_err(UsageError)?;
    let mechanism = iodig_faultdisk::Mechanism::parse(plan.props.get("faultdisk.mechanism"))
        .map_err(UsageError)?;
    let disk = FaultyDisk::create(dir, size, mechanism)
        .map_err(|e| anyhow::anyhow!("cannot make the faulty disk for the device faults: {e}"))?;
    iodig_model::eprintln_lossy!(
        "note: {} is on {}, a {:.1} GB disk iodig made for the device faults ({})",
        dir.display(),
        disk.device_name(),
        size as f64 / 1e9,
        disk.mechanism()
    );
    Ok(disk)
}

/// Slow, failing, full and healed: what the disk under the database now does.
pub(crate) fn on_faulty_disk(
    disk: &FaultyDisk,
    action: &FaultAction,
) -> Result<(String, String), String> {
    let done = match action {
        FaultAction::Slow(d, which) => disk.slow(*d, *which)?,
        FaultAction::Fail(which) => disk.fail(*which)?,
        FaultAction::Fill => disk.fill()?,
        FaultAction::Heal => disk.heal(),
        other => return Err(format!("{} is not a fault of the disk", other.name())),
    };
    Ok((format!("device {}", disk.device_name()), done))
}
