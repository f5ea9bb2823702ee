//! Embedded databases: RocksDB in a data directory iodig may wipe and reload when it made it,
//! and the no-op `basic` binding, which has no data to keep.

use super::{db_error, Deployment};
use crate::dataset::{self, MarkerState};
use crate::errors::UsageError;
use crate::experiment::sweep;
use crate::plan::Plan;
use crate::request::{LoadPolicy, RunOutcome};
use crate::step::Phase;
use anyhow::{Context, Result};
use iodig_db::{BasicFactory, DbFactory};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// A database in a local data directory that carries iodig's dataset marker.
pub struct DataDir {
    dir: Option<PathBuf>,
}

impl<F: DbFactory> Deployment<F> for DataDir {
    fn marker_dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

/// The `basic` binding: nothing is stored, so a load runs only when asked for.
pub struct NoData;

impl<F: DbFactory> Deployment<F> for NoData {}

/// RocksDB in `rocksdb.dir`: decides the load (wiping a directory iodig made when it holds
/// another dataset) before the database is opened on it.
#[cfg(feature = "rocksdb")]
pub fn run_rocksdb(plan: &Plan, stop: &AtomicBool) -> Result<RunOutcome> {
    let deployment = DataDir {
        dir: plan.props.get("rocksdb.dir").map(PathBuf::from),
    };
    let load = deployment.prepare(plan)?;
    let factory = iodig_db::rocks::RocksFactory::open(&plan.props).map_err(db_error)?;
    sweep(plan, &factory, &deployment, load, stop)
}

/// The no-op binding.
pub fn run_basic(plan: &Plan, stop: &AtomicBool) -> Result<RunOutcome> {
    let factory = BasicFactory::open(&plan.props).map_err(db_error)?;
    let load = plan.req.phase == Phase::Load || plan.req.load == LoadPolicy::Always;
    sweep(plan, &factory, &NoData, load, stop)
}

impl DataDir {
    /// Decides whether to load, wiping a data directory that holds another dataset when it is
    /// safe to (iodig made it) and refusing otherwise.
    #[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
    fn prepare(&self, plan: &Plan) -> Result<bool> {
        let Some(dir) = self.dir.clone() else {
            return Ok(plan.req.phase == Phase::Load);
        };
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
