//! Apache Cassandra, in one of two places: nodes iodig manages on this machine (started,
//! reused or restarted under `<out>/data/cassandra`, with a dataset marker and a snapshot of the
//! load to restore), or external hosts given by `hosts`, which iodig only probes. The only
//! place in the runner that talks to the node manager (`iodig_cassandra`).

use super::{on_faulty_disk, sweep, Deployment, Restore, Sweeper};
use crate::dataset::{self, MarkerState};
use crate::errors::db_error;
use crate::errors::UsageError;
use crate::fault::{cap_done, Fault, FaultAction, FaultHandler, IoLimit};
use crate::plan::{Plan, ResolvedWorkload};
use crate::probe::{probe_dataset, Presence};
use crate::request::{LoadPolicy, RunOutcome};
use crate::step_plan::Phase;
use anyhow::{Context, Result};
use iodig_db::DbFactory;
use iodig_faultdisk::FaultyDisk;
use iodig_model::events::DbEvent;
use iodig_model::integrity::NodeIntegrity;
use iodig_workload::integrity::Ledger;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Snapshot tag of the loaded dataset on managed nodes.
const LOADED_SNAPSHOT: &str = "iodig-loaded";

/// Runs against external hosts when `hosts` is given, else against managed nodes.
pub fn run(mut plan: Plan, sweeper: &impl Sweeper, stop: &AtomicBool) -> Result<RunOutcome> {
    let handle = crate::step::async_runtime()?.handle().clone();
    let managed_before = verified_run_on_managed_nodes(&plan);
    if let Some(nodes) = managed_before {
        // `iodig verify` of a run on managed nodes: start them again, as that run did.
        plan.props.remove("hosts");
        plan.req.nodes = Some(nodes);
    }
    if plan.props.contains("hosts") {
        if plan.verify_each_node {
            return Err(UsageError(
                "verify.eachnode=true pauses every other node while one is read alone, which iodig does only to nodes it manages; leave out the hosts property (or verify.eachnode)"
                    .into(),
            )
            .into());
        }
        let factory =
            iodig_db::cassandra::open_with_handle(&plan.props, &handle).map_err(db_error)?;
        let load = ExternalHosts.load_decision(&plan, &factory)?;
        // The observed hosts restore the snapshot their agents take right after this run's
        // load; a snapshot left by an earlier run may be of another dataset.
        if plan.req.restore_each_step && !load && plan.req.resume.is_none() {
            let why = match plan.req.load {
                LoadPolicy::Never => "--no-load",
                _ => "the hosts already hold the dataset",
            };
            return Err(UsageError(format!(
                "--restore-each-step on observed hosts puts back the snapshot each node takes right after this run's load, and this run does not load ({why}), so there is no snapshot to restore from; add --reload to load the dataset again and snapshot it, or leave out --restore-each-step"
            ))
            .into());
        }
        return sweep(sweeper, &plan, &factory, &ExternalHosts, load, stop);
    }
    let wanted = plan.req.nodes.unwrap_or(1);
    // Declared before the binding, so dropped after it: the client goes before the nodes stop.
    let nodes = ManagedNodes::start(&plan, wanted)?;
    plan.props.set("hosts", nodes.hosts.clone());
    let factory = iodig_db::cassandra::open_with_handle(&plan.props, &handle).map_err(db_error)?;
    let load = nodes.load_decision(&plan, &factory)?;
    sweep(sweeper, &plan, &factory, &nodes, load, stop)
}

/// The node count when `iodig verify` checks a run whose `hosts` were the managed nodes under
/// its `--out` (run.json records the hosts the managed nodes had).
fn verified_run_on_managed_nodes(plan: &Plan) -> Option<u32> {
    plan.req.verify_only.as_ref()?;
    let dir = plan.req.out_dir.join("data").join("cassandra");
    let cluster = iodig_cassandra::Cluster::load(&dir).ok()?;
    (plan.props.get("hosts") == Some(cluster.hosts().as_str())).then_some(cluster.options.nodes)
}

/// How long a node may take to see the paused others down (the failure detector convicts in
/// about 10–20 s) and the cluster to be whole again after.
const ISOLATION_WAIT: Duration = Duration::from_secs(120);

/// Cassandra on hosts iodig did not start: no marker, no snapshot; the dataset is probed.
pub struct ExternalHosts;

impl<F: DbFactory> Deployment<F> for ExternalHosts {
    /// iodig restores nodes it did not start only through its agents on their hosts
    /// (`--observe`, checked in `plan`).
    fn restore_on_observed_hosts(&self, plan: &Plan) -> Option<String> {
        plan.req
            .restore_each_step
            .then(|| keyspace(plan).to_string())
    }

    /// The agents on the observed hosts restore before each step ([`super::observed`]).
    fn before_run_step(&self, _plan: &Plan, _factory: &F) -> Result<Restore> {
        Ok(Restore::NotAsked)
    }
}

impl ExternalHosts {
    /// Load when none of the dataset's probe keys is there, skip the load when all are, and
    /// refuse to guess when only some are.
    fn load_decision<F: DbFactory>(&self, plan: &Plan, factory: &F) -> Result<bool> {
        let resumed = plan.req.resume.as_ref().filter(|r| r.dataset_settled());
        match (plan.req.phase, plan.req.load) {
            (_, LoadPolicy::Never) => return Ok(false),
            // A resumed run whose load or first run step finished must find that dataset.
            _ if resumed.is_some() => {}
            (Phase::Load, _) | (_, LoadPolicy::Always) => return Ok(true),
            (_, LoadPolicy::Auto) => {}
        }
        if let Some(from) = resumed {
            return match probe_dataset(factory, plan.spec())? {
                Presence::Loaded { .. } => Ok(false),
                _ => Err(UsageError(format!(
                    "--resume {}: the dataset no longer matches the run's: the hosts do not hold every probed key of it; its finished steps ran on the dataset the run loaded, so the rest cannot continue on this one; start a new run",
                    from.dir.display()
                ))
                .into()),
            };
        }
        match probe_dataset(factory, plan.spec())? {
            Presence::Loaded { probed } => {
                iodig_model::eprintln_lossy!(
                    "note: the database already holds this dataset ({probed} of {probed} probed keys found); not loading again (--reload to force)"
                );
                Ok(false)
            }
            Presence::Empty { probed } => {
                iodig_model::eprintln_lossy!(
                    "note: the database holds none of this dataset's {probed} probed keys; loading {} records",
                    plan.spec().insert_count
                );
                Ok(true)
            }
            Presence::Partial {
                found,
                probed,
                missing,
            } => Err(UsageError(format!(
                "the database holds {found} of this dataset's {probed} probed keys ({missing} is missing): a partial load or another recordcount/insertstart; use --reload to load it, or --no-load to run on it as it is"
            ))
            .into()),
        }
    }
}

/// Nodes iodig manages under `<out>/data/cassandra`.
pub struct ManagedNodes {
    dir: PathBuf,
    hosts: String,
    /// Stops the nodes this run started. A field before `disks`, so it is dropped first: no
    /// node still holds a disk that is being taken away.
    _guard: Option<iodig_cassandra::Guard>,
    /// The faulty disks under the nodes the schedule makes slow, failing or full.
    disks: Option<NodeDisks>,
}

impl ManagedNodes {
    /// Reuses running nodes, restarts stopped ones with their data, or starts fresh ones (on
    /// faulty disks of their own where the schedule has device faults for them); what this run
    /// started is stopped when the value is dropped.
    fn start(plan: &Plan, wanted: u32) -> Result<ManagedNodes> {
        let dir = plan.req.out_dir.join("data").join("cassandra");
        let guard = || Some(iodig_cassandra::Guard { dir: dir.clone() });
        clear_killed_faulted_cluster(&dir)?;
        let existing = iodig_cassandra::Cluster::load(&dir).ok();
        if let Some(c) = existing.as_ref().filter(|c| c.options.nodes != wanted) {
            return Err(UsageError(format!(
                "--nodes {wanted}: the managed cluster in {} has {} node(s); run with --nodes {}, or stop it (iodig cassandra down --dir {}) and remove that directory to start {wanted}",
                dir.display(),
                c.options.nodes,
                c.options.nodes,
                dir.display()
            ))
            .into());
        }
        let faulted = faulted_nodes(plan);
        if !faulted.is_empty() && existing.is_some() {
            return Err(UsageError(format!(
                "--fault: the slow, failing and full device faults start fresh managed nodes on disks of their own, and {} holds a managed cluster already; stop it (iodig cassandra down --dir {}) and remove that directory, or give this run another --out",
                dir.display(),
                dir.display()
            ))
            .into());
        }
        // Nodes a killed iodig left frozen (in a pause, or while reading one node alone).
        if let Ok(thawed) = iodig_cassandra::thaw(&dir) {
            if !thawed.is_empty() {
                iodig_model::eprintln_lossy!(
                    "note: node(s) {} were left frozen (SIGSTOP) by an iodig that was killed; resumed them",
                    thawed.join(", ")
                );
            }
        }
        let disks = match faulted.is_empty() {
            true => None,
            false => Some(NodeDisks::create(plan, &dir, &faulted)?),
        };
        let (cluster, guard) = match existing {
            Some(c) if c.alive() => {
                iodig_model::eprintln_lossy!(
                    "note: using the running Cassandra node(s) in {}",
                    dir.display()
                );
                (c, None)
            }
            Some(_) => {
                iodig_model::eprintln_lossy!(
                    "note: restarting the managed Cassandra node in {}",
                    dir.display()
                );
                let c = iodig_cassandra::restart(&dir)
                    .context("cannot restart the managed Cassandra node")?;
                (c, guard())
            }
            None => {
                let what = match wanted {
                    1 => "a managed Apache Cassandra node".to_string(),
                    n => format!("{n} managed Apache Cassandra nodes on 127.0.0.1-{n}"),
                };
                iodig_model::eprintln_lossy!(
                    "note: no hosts given; starting {what} in {} (about a minute each)",
                    dir.display()
                );
                let opts = iodig_cassandra::UpOptions {
                    nodes: wanted,
                    dir: dir.clone(),
                    ..Default::default()
                };
                let c = match iodig_cassandra::up(&opts) {
                    Ok(c) => c,
                    Err(e) => {
                        // The nodes that did start let go of their disks before these go.
                        if disks.is_some() {
                            let _ = iodig_cassandra::down(&dir, Duration::from_secs(20));
                        }
                        return Err(
                            anyhow::Error::new(e).context("cannot start a managed Cassandra node")
                        );
                    }
                };
                (c, guard())
            }
        };
        let hosts = cluster.hosts();
        Ok(ManagedNodes {
            dir,
            hosts,
            _guard: guard,
            disks,
        })
    }

    /// Managed nodes keep a dataset marker like RocksDB's data directory; a dataset an earlier
    /// run grew by inserts is put back from the snapshot of its load rather than loaded over
    /// (which would keep the inserted rows).
    fn load_decision<F: DbFactory>(&self, plan: &Plan, factory: &F) -> Result<bool> {
        if let Some(from) = plan.req.resume.as_ref() {
            if plan.req.load != LoadPolicy::Never
                && dataset::resume_keeps_dataset(&self.dir, &plan.props, from)?
            {
                return Ok(false);
            }
        }
        match (plan.req.phase, plan.req.load) {
            (Phase::Load, _) | (_, LoadPolicy::Always) => return Ok(true),
            (_, LoadPolicy::Never) => return Ok(false),
            (_, LoadPolicy::Auto) => {}
        }
        match dataset::state(&self.dir, &plan.props) {
            MarkerState::Same => Ok(false),
            MarkerState::Grown(step) => {
                iodig_model::eprintln_lossy!("note: step {step} of an earlier run inserted records; restoring snapshot {LOADED_SNAPSHOT} of the load");
                match iodig_cassandra::restore(&self.dir, LOADED_SNAPSHOT, keyspace(plan)) {
                    Ok(_) => {
                        self.after_restore(plan, factory)?;
                        Ok(false)
                    }
                    Err(e) => {
                        iodig_model::eprintln_lossy!("note: cannot restore the load's snapshot ({e}); loading again over the table (the rows inserted after the load stay)");
                        Ok(true)
                    }
                }
            }
            MarkerState::Missing | MarkerState::Other => Ok(true),
        }
    }

    /// After the nodes were put back to the load's snapshot: wait until the binding is
    /// connected again, and mark the dataset as loaded (no longer grown by inserts).
    fn after_restore<F: DbFactory>(&self, plan: &Plan, factory: &F) -> Result<()> {
        factory
            .await_ready(Duration::from_secs(120))
            .map_err(db_error)?;
        dataset::mark_loaded(&self.dir, &plan.props)
    }
}

impl<F: DbFactory> Deployment<F> for ManagedNodes {
    fn marker_dir(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    /// Marks the dataset and snapshots it, so steps can start from the same state.
    fn after_load(&self, plan: &Plan) -> Result<()> {
        dataset::mark_loaded(&self.dir, &plan.props)?;
        iodig_cassandra::snapshot(&self.dir, LOADED_SNAPSHOT, keyspace(plan))
            .context("cannot snapshot the loaded dataset")
    }

    fn before_run_step(&self, plan: &Plan, factory: &F) -> Result<Restore> {
        if !plan.req.restore_each_step {
            return Ok(Restore::NotAsked);
        }
        iodig_model::eprintln_lossy!("note: restoring snapshot {LOADED_SNAPSHOT} before the step");
        iodig_cassandra::restore(&self.dir, LOADED_SNAPSHOT, keyspace(plan))
            .context("cannot restore the loaded dataset")?;
        self.after_restore(plan, factory)?;
        Ok(Restore::Done)
    }

    fn processes(&self) -> Vec<(String, u32)> {
        iodig_cassandra::Cluster::load(&self.dir)
            .map(|cluster| {
                cluster
                    .nodes
                    .iter()
                    .map(|n| (format!("cassandra {}", n.address), n.pid))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn events_since(&self, since_unix_ms: u64) -> Vec<DbEvent> {
        iodig_cassandra::events(&self.dir, Some(since_unix_ms)).unwrap_or_default()
    }

    /// Each node alone: the others paused until it sees them down, then every key read through
    /// it at ONE with the driver held to it, so only its own copy can answer.
    fn check_each_node(&self, plan: &Plan, ledger: &Arc<Ledger>) -> Result<Vec<NodeIntegrity>> {
        if !plan.verify_each_node {
            return Ok(Vec::new());
        }
        let cluster = iodig_cassandra::Cluster::load(&self.dir)?;
        if cluster.nodes.len() < 2 {
            iodig_model::eprintln_lossy!(
                "note: verify.eachnode: one node, which the check above read alone"
            );
            return Ok(Vec::new());
        }
        let handle = crate::step::async_runtime()?.handle().clone();
        let mut per_node = Vec::new();
        for node in &cluster.nodes {
            let address = &node.address;
            iodig_model::eprintln_lossy!(
                "verify: node {address} alone (the other nodes paused until it sees them down)"
            );
            let alone = iodig_cassandra::isolate(&self.dir, address, ISOLATION_WAIT)
                .with_context(|| format!("cannot read node {address} alone"))?;
            let mut props = plan.props.clone();
            props.set("hosts", address.clone());
            props.set("cassandra.hostsonly", "true");
            props.set("cassandra.readconsistencylevel", "ONE");
            let factory =
                iodig_db::cassandra::open_with_handle(&props, &handle).map_err(db_error)?;
            let read_with = format!("{address} alone at ONE (the other nodes paused)");
            let doc = crate::verify::check(&factory, plan.spec(), ledger, "verify", read_with);
            let _ = factory.close();
            drop(alone);
            // The next node's isolation starts from a cluster whose nodes see each other up
            // again: a node just resumed has no fresh heartbeat from the others, and paused at
            // once it was seen to keep a paused node up for minutes (verify of a 3-node run).
            iodig_cassandra::await_all_up(&self.dir, ISOLATION_WAIT)
                .context("the nodes did not all come back after a node was read alone")?;
            let one = crate::verify::node_integrity(address, &doc?);
            iodig_model::eprintln_lossy!(
                "  node {address}: {} keys, {} missing, {} stale, {} corrupt, {} unreadable",
                one.keys,
                one.missing,
                one.stale,
                one.corrupt,
                one.unreadable
            );
            per_node.push(one);
        }
        Ok(per_node)
    }

    fn after_run_step(&self, plan: &Plan, step: &str, workload: &ResolvedWorkload) -> Result<()> {
        // A cap, a delay, a failure or a fill never outlives its step.
        let caps = plan
            .faults
            .iter()
            .filter(|f| matches!(f.action, FaultAction::Cap(_)));
        for f in caps {
            let _ = cap_node(&self.dir, &node_address(&f.target), IoLimit::None);
        }
        for (address, disk) in self.disks.iter().flat_map(|d| &d.disks) {
            if disk.faulted() {
                iodig_model::eprintln_lossy!(
                    "note: at the end of step {step}, node {address}: {}",
                    disk.heal()
                );
            }
        }
        super::mark_grown_by(Some(&self.dir), plan, step, workload)
    }

    fn fault_handler(&self) -> Option<FaultHandler> {
        let dir = self.dir.clone();
        let disks = self
            .disks
            .as_ref()
            .map(|d| d.disks.clone())
            .unwrap_or_default();
        Some(Arc::new(move |f: &Fault| {
            let address = node_address(&f.target);
            let fault = match &f.action {
                FaultAction::Kill => iodig_cassandra::NodeFault::Kill,
                FaultAction::Pause(d) => iodig_cassandra::NodeFault::Pause(*d),
                FaultAction::Stop => iodig_cassandra::NodeFault::Stop,
                FaultAction::Restart => iodig_cassandra::NodeFault::Restart,
                FaultAction::Cap(limit) => return cap_node(&dir, &address, *limit),
                FaultAction::Uncap => return cap_node(&dir, &address, IoLimit::None),
                a @ (FaultAction::Slow(..)
                | FaultAction::Fail(_)
                | FaultAction::Fill
                | FaultAction::Heal) => {
                    let (_, disk) = disks.iter().find(|(n, _)| *n == address).ok_or_else(|| {
                        format!("node {address} has no faulty disk under it in this run")
                    })?;
                    return on_faulty_disk(disk, a).map(|(_, done)| (address, done));
                }
            };
            iodig_cassandra::inject(&dir, &address, &fault)
                .map(|done| (address, done))
                .map_err(|e| e.to_string())
        }))
    }
}

/// The node directories a faulty disk holds: everything Cassandra writes but its logs and conf,
/// as on a server whose data and commit log share a drive and whose logs are on the system's.
const ON_NODE_DISK: [&str; 5] = ["data", "commitlog", "hints", "saved_caches", "cdc_raw"];

/// The mount point of a node's faulty disk, under the node's directory.
const NODE_DISK: &str = "disk";

/// Faulty disks under managed nodes, made before the nodes start: `nodeN/disk` is the disk, and
/// the node's usual directories ([`ON_NODE_DISK`]) are links into it, so the node's layout,
/// snapshots and restores are as everywhere else. The data goes with the disks at the run's
/// end, and with it the whole managed cluster, so the next run starts afresh.
struct NodeDisks {
    cluster_dir: PathBuf,
    /// By node address.
    disks: Vec<(String, Arc<FaultyDisk>)>,
}

impl NodeDisks {
    fn create(plan: &Plan, cluster_dir: &Path, nodes: &[u32]) -> Result<NodeDisks> {
        let mut made = NodeDisks {
            cluster_dir: cluster_dir.to_path_buf(),
            disks: Vec::new(),
        };
        for &i in nodes {
            let node_dir = cluster_dir.join(format!("node{i}"));
            let disk = super::mount_faulty_disk(plan, &node_dir.join(NODE_DISK))?;
            made.disks.push((format!("127.0.0.{i}"), Arc::new(disk)));
            for sub in ON_NODE_DISK {
                let on_disk = node_dir.join(NODE_DISK).join(sub);
                std::fs::create_dir_all(&on_disk)
                    .with_context(|| format!("cannot create {}", on_disk.display()))?;
                let link = node_dir.join(sub);
                std::os::unix::fs::symlink(Path::new(NODE_DISK).join(sub), &link).with_context(
                    || format!("cannot link {} to the faulty disk", link.display()),
                )?;
            }
        }
        Ok(made)
    }
}

impl Drop for NodeDisks {
    fn drop(&mut self) {
        // Each disk unmounts when its last holder lets go; the handlers of the steps are gone.
        let held = self
            .disks
            .drain(..)
            .filter_map(|(_, d)| Arc::try_unwrap(d).err())
            .count();
        if held > 0 {
            iodig_model::eprintln_lossy!(
                "warning: {held} faulty disk(s) under the managed nodes are still in use; {} is left as it is",
                self.cluster_dir.display()
            );
            return;
        }
        match std::fs::remove_dir_all(&self.cluster_dir) {
            Ok(()) => iodig_model::eprintln_lossy!(
                "note: removed the managed nodes in {}: their data was on the faulty disks, which are gone",
                self.cluster_dir.display()
            ),
            Err(e) => iodig_model::eprintln_lossy!(
                "warning: cannot remove the managed nodes' directory {} ({e}); remove it before the next run there",
                self.cluster_dir.display()
            ),
        }
    }
}

/// The managed nodes the schedule's slow, failing and full faults are aimed at, by number.
fn faulted_nodes(plan: &Plan) -> Vec<u32> {
    let mut nodes: Vec<u32> = plan
        .faults
        .iter()
        .filter(|f| f.action.needs_faulty_disk())
        .filter_map(|f| node_number(&f.target))
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// A killed run's managed nodes on faulty disks: the disks' FUSE servers died with that run, so
/// the nodes' data is gone. Their disks are undone and the directory removed, so this run
/// starts afresh; refused while one of those nodes still runs.
fn clear_killed_faulted_cluster(dir: &Path) -> Result<()> {
    let disks: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(NODE_DISK))
        .filter(|disk| FaultyDisk::left_at(disk))
        .collect();
    if disks.is_empty() {
        return Ok(());
    }
    if iodig_cassandra::Cluster::load(dir).is_ok_and(|c| c.alive()) {
        return Err(UsageError(format!(
            "{} holds managed nodes on faulty disks that an iodig killed before the end left running; stop them (iodig cassandra down --dir {}) and run again",
            dir.display(),
            dir.display()
        ))
        .into());
    }
    for disk in &disks {
        FaultyDisk::remove_leftover(disk).map_err(|e| anyhow::anyhow!(e))?;
    }
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    iodig_model::eprintln_lossy!(
        "note: removed the managed nodes a killed iodig left on faulty disks in {} (their data went with the disks)",
        dir.display()
    );
    Ok(())
}

/// The number of a fault's target node: `node2` or `127.0.0.2` → 2.
fn node_number(target: &str) -> Option<u32> {
    target
        .strip_prefix("node")
        .or_else(|| target.strip_prefix("127.0.0."))?
        .parse()
        .ok()
}

/// The address of a fault's target node: `node2` or `127.0.0.2` → `127.0.0.2` (targets are
/// checked to name a node before the run, `plan::faults`).
fn node_address(target: &str) -> String {
    match node_number(target) {
        Some(n) => format!("127.0.0.{n}"),
        None => target.to_string(),
    }
}

/// Throttles a managed node's block IO on its data device in the node's own cgroup (each
/// node runs in one); the limit goes with the cgroup when the node stops.
fn cap_node(dir: &Path, address: &str, limit: IoLimit) -> Result<(String, String), String> {
    let cluster = iodig_cassandra::Cluster::load(dir).map_err(|e| e.to_string())?;
    let node = cluster
        .nodes
        .iter()
        .find(|n| n.address == address)
        .ok_or_else(|| format!("no managed node {address}"))?;
    let cg = node.cgroup.as_ref().ok_or_else(|| {
        format!("node {address} runs without a cgroup of its own, so its IO cannot be capped")
    })?;
    let disk =
        iodig_iotrace::devices::resolve_path(&node.data_dir()).map_err(|e| format!("{e:#}"))?;
    let how = iodig_sysstat::cgroup::limit_io(cg, &disk.dev, limit)?;
    Ok((
        address.to_string(),
        format!("{} on {} ({how})", cap_done(limit), disk.name),
    ))
}

/// The keyspace the Cassandra binding loads into, snapshots and restores.
fn keyspace(plan: &Plan) -> &str {
    plan.props.get_str("cassandra.keyspace", "ycsb")
}
