//! Embedded databases: RocksDB in a data directory iodig may wipe and reload when it made it
//! (on a faulty disk of iodig's own when the fault schedule makes the device slow, failing or
//! full), and the no-op `basic` binding, which has no data to keep.

use super::{mount_faulty_disk, on_faulty_disk, sweep, Deployment, Restore, Sweeper};
use crate::dataset::{self, MarkerState};
use crate::errors::db_error;
use crate::errors::UsageError;
use crate::fault::{cap_done, Fault, FaultAction, FaultHandler, IoLimit};
use crate::plan::{Plan, ResolvedWorkload};
use crate::request::{LoadPolicy, RunOutcome};
use crate::resume::ResumeFrom;
use crate::step_plan::Phase;
use anyhow::{Context, Result};
use iodig_db::{BasicFactory, DbFactory};
use iodig_faultdisk::FaultyDisk;
use iodig_sysstat::cgroup;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// A database in a local data directory that carries iodig's dataset marker.
pub struct DataDir {
    dir: Option<PathBuf>,
    /// A cap on the data device in force (`--fault …:cap=RATE:device`), lifted at the step's end.
    cap: Arc<Mutex<Option<DeviceCap>>>,
    /// The disk mounted on the data directory for slow, failing and full device faults.
    disk: Option<Arc<FaultyDisk>>,
    /// `--restore-each-step`: whether this process has its checkpoint (taken, or found from
    /// the run's earlier invocation when resumed).
    checkpointed: Mutex<bool>,
}

/// Where `--restore-each-step` keeps the data directory's checkpoint: beside it, on the same
/// file system, so the table files are hard links, not copies.
fn checkpoint_dir(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".iodig-checkpoint");
    dir.with_file_name(name)
}

/// Written into a checkpoint once it is whole: one without it (a crash while taking it) is
/// taken again.
const CHECKPOINT_DONE: &str = "iodig-checkpoint-done";

impl<F: DbFactory> Deployment<F> for DataDir {
    fn marker_dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    fn after_load(&self, plan: &Plan) -> Result<()> {
        let Some(dir) = self.dir.as_deref() else {
            return Ok(());
        };
        dataset::mark_loaded(dir, &plan.props)?;
        // A load makes a new dataset: an earlier run's checkpoint is not of it.
        let kept = checkpoint_dir(dir);
        if kept.exists() {
            std::fs::remove_dir_all(&kept)
                .with_context(|| format!("cannot remove the old checkpoint {}", kept.display()))?;
        }
        Ok(())
    }

    /// `--restore-each-step`: the dataset as the run's first run step finds it (right after
    /// the load) is kept in a RocksDB checkpoint, and put back before every later run step.
    fn before_run_step(&self, plan: &Plan, factory: &F) -> Result<Restore> {
        if !plan.req.restore_each_step {
            return Ok(Restore::NotAsked);
        }
        let dir = self
            .dir
            .as_deref()
            .context("--restore-each-step needs the data directory (-p rocksdb.dir)")?;
        let kept = checkpoint_dir(dir);
        let whole = kept.join(CHECKPOINT_DONE).exists();
        let mut have = lock(&self.checkpointed);
        // The checkpoint the run's earlier invocation took, when resumed.
        let earlier = plan.req.resume.is_some() && whole;
        if !(*have || earlier) {
            // A new run (or one resumed before its first run step): the restore point is now.
            factory.checkpoint(&kept).map_err(db_error)?;
            std::fs::write(kept.join(CHECKPOINT_DONE), b"")
                .with_context(|| format!("cannot finish the checkpoint {}", kept.display()))?;
            *have = true;
            iodig_model::eprintln_lossy!(
                "note: --restore-each-step: the dataset kept in {} (a RocksDB checkpoint) to be put back before each run step",
                kept.display()
            );
            return Ok(Restore::Done);
        }
        *have = true;
        let started = std::time::Instant::now();
        factory.restore(&kept).map_err(db_error)?;
        // The data directory holds the dataset as loaded again.
        dataset::mark_loaded(dir, &plan.props)?;
        iodig_model::eprintln_lossy!(
            "note: --restore-each-step: the dataset put back from {} in {:.1} s",
            kept.display(),
            started.elapsed().as_secs_f64()
        );
        Ok(Restore::Done)
    }

    fn after_run_step(&self, plan: &Plan, step: &str, workload: &ResolvedWorkload) -> Result<()> {
        // A cap, a delay, a failure or a fill never outlives its step.
        drop(lock(&self.cap).take());
        if let Some(disk) = self.disk.as_ref().filter(|d| d.faulted()) {
            iodig_model::eprintln_lossy!("note: at the end of step {step}: {}", disk.heal());
        }
        super::mark_grown_by(self.dir.as_deref(), plan, step, workload)
    }

    fn fault_handler(&self) -> Option<FaultHandler> {
        let dir = self.dir.clone()?;
        let cap = Arc::clone(&self.cap);
        let disk = self.disk.clone();
        Some(Arc::new(move |f: &Fault| {
            if f.action.needs_faulty_disk() {
                let disk = disk
                    .as_ref()
                    .ok_or("no faulty disk was set up for this run")?;
                return on_faulty_disk(disk, &f.action);
            }
            let mut held = lock(&cap);
            match f.action {
                FaultAction::Cap(limit) => {
                    if held.is_none() {
                        *held = Some(DeviceCap::new(&dir)?);
                    }
                    let c = held.as_ref().expect("just made");
                    let how = cgroup::limit_io(&c.cgroup, &c.dev, limit)?;
                    Ok((
                        format!("device {}", c.name),
                        format!("{} for iodig's own IO ({how})", cap_done(limit)),
                    ))
                }
                FaultAction::Uncap => match held.take() {
                    Some(c) => Ok((format!("device {}", c.name), "uncapped".into())),
                    None => Err("no cap to lift".into()),
                },
                _ => Err(format!("{} needs a server process", f.action.name())),
            }
        }))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// iodig itself moved into a cgroup of its own whose block IO on the data device is throttled;
/// dropping it lifts the limit, moves iodig back and removes the cgroup.
struct DeviceCap {
    cgroup: PathBuf,
    /// The cgroup iodig came from, relative to the IO hierarchy's root.
    original: String,
    /// `MAJ:MIN` and name of the whole disk under the data directory.
    dev: String,
    name: String,
}

impl DeviceCap {
    fn new(data_dir: &Path) -> Result<DeviceCap, String> {
        let disk = iodig_iotrace::devices::resolve_path(data_dir).map_err(|e| format!("{e:#}"))?;
        let pid = std::process::id();
        let original = cgroup::of_process(pid)
            .ok_or("cannot tell which cgroup iodig's block IO is charged to")?;
        let cgroup = cgroup::place(&format!("fault-{pid}"), pid)?;
        Ok(DeviceCap {
            cgroup,
            original,
            dev: disk.dev,
            name: disk.name,
        })
    }
}

impl Drop for DeviceCap {
    fn drop(&mut self) {
        let _ = cgroup::limit_io(&self.cgroup, &self.dev, IoLimit::None);
        let _ = cgroup::move_back(&self.original, std::process::id());
        let _ = cgroup::remove(&self.cgroup);
    }
}

/// The `basic` binding: nothing is stored, so a load runs only when asked for.
pub struct NoData;

impl<F: DbFactory> Deployment<F> for NoData {}

/// RocksDB in `rocksdb.dir`: decides the load (wiping a directory iodig made when it holds
/// another dataset) before the database is opened on it.
#[cfg(feature = "rocksdb")]
pub fn run_rocksdb(plan: &Plan, sweeper: &impl Sweeper, stop: &AtomicBool) -> Result<RunOutcome> {
    let dir = plan.props.get("rocksdb.dir").map(PathBuf::from);
    let deployment = DataDir {
        disk: faulty_disk(plan, dir.as_deref())?.map(Arc::new),
        dir,
        cap: Arc::default(),
        checkpointed: Mutex::new(false),
    };
    let load = deployment.prepare(plan)?;
    let factory = iodig_db::rocks::RocksFactory::open(&plan.props).map_err(db_error)?;
    // The database closes (factory dropped) before its disk is unmounted (deployment dropped).
    let outcome = sweep(sweeper, plan, &factory, &deployment, load, stop);
    drop(factory);
    outcome
}

/// The disk the schedule's slow, failing and full faults act on, mounted on the data directory
/// before the database opens; none when the schedule has no such fault.
#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
fn faulty_disk(plan: &Plan, dir: Option<&Path>) -> Result<Option<FaultyDisk>> {
    if !plan.faults.iter().any(|f| f.action.needs_faulty_disk()) {
        return Ok(None);
    }
    let dir = dir.context("device faults need -p rocksdb.dir")?;
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(UsageError(format!(
            "-p rocksdb.dir={}: not empty, and the slow, failing and full device faults mount a disk of their own there; give an empty or new directory",
            dir.display()
        ))
        .into());
    }
    mount_faulty_disk(plan, dir).map(Some)
}

/// The no-op binding.
pub fn run_basic(plan: &Plan, sweeper: &impl Sweeper, stop: &AtomicBool) -> Result<RunOutcome> {
    let factory = BasicFactory::open(&plan.props).map_err(db_error)?;
    // A resumed run whose load (or first run step) finished does not load again.
    let load = (plan.req.phase == Phase::Load || plan.req.load == LoadPolicy::Always)
        && !plan
            .req
            .resume
            .as_ref()
            .is_some_and(ResumeFrom::dataset_settled);
    sweep(sweeper, plan, &factory, &NoData, load, stop)
}

impl DataDir {
    /// Decides whether to load, wiping a data directory that holds another dataset when it is
    /// safe to (iodig made it) and refusing otherwise.
    #[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
    fn prepare(&self, plan: &Plan) -> Result<bool> {
        let Some(dir) = self.dir.clone() else {
            return Ok(plan.req.phase == Phase::Load);
        };
        if let Some(from) = &plan.req.resume {
            if plan.req.load != LoadPolicy::Never
                && dataset::resume_keeps_dataset(&dir, &plan.props, from)?
            {
                iodig_model::eprintln_lossy!(
                    "note: {} holds the dataset the run's finished steps ran on; not loading again",
                    dir.display()
                );
                return Ok(false);
            }
        }
        let marker = dataset::state(&dir, &plan.props);
        let same = marker == MarkerState::Same;
        let has_data = std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        let wipe_ok = marker != MarkerState::Missing || !has_data;
        let load = match (plan.req.phase, plan.req.load) {
            (Phase::Load, _) => Ok(true),
            (_, LoadPolicy::Never) => Ok(false),
            (_, LoadPolicy::Auto) if same => {
                iodig_model::eprintln_lossy!("note: {} already holds this dataset; not loading again (--reload to force)", dir.display());
                Ok(false)
            }
            (_, policy) if has_data && !wipe_ok && policy == LoadPolicy::Auto => Err(UsageError(format!(
                "{} holds data that iodig did not load; use --reload to wipe it and load, or --no-load to run on it as it is",
                dir.display()
            ))
            .into()),
            _ => {
                if has_data {
                    wipe(&dir, &marker)?;
                }
                Ok(true)
            }
        };
        if let Ok(true) = load {
            // A load killed halfway then leaves data the next run knows as iodig's own.
            dataset::mark_loading(&dir)?;
        }
        load
    }
}

/// Wipes a data directory before a load, unless a live process holds the database in it.
fn wipe(dir: &Path, marker: &MarkerState) -> Result<()> {
    #[cfg(feature = "rocksdb")]
    if let Some(pid) = iodig_db::rocks::lock_holder(dir) {
        return Err(UsageError(format!(
            "{} is in use by process {pid} (it holds the database's LOCK); wait for it to finish, or give this run its own -p rocksdb.dir or --out",
            dir.display()
        ))
        .into());
    }
    let holds = match marker {
        MarkerState::Same => "this dataset (--reload)".to_string(),
        MarkerState::Grown(step) => {
            format!("this dataset grown by the inserts of step {step} of an earlier run")
        }
        _ => "another dataset".to_string(),
    };
    iodig_model::eprintln_lossy!(
        "note: {} holds {holds}; wiping it and loading",
        dir.display()
    );
    std::fs::remove_dir_all(dir).with_context(|| format!("cannot wipe {}", dir.display()))
}
