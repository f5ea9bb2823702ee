//! One `iodig run` / `iodig load`: resolve properties, open the binding, load if needed, sweep
//! the thread counts, observe each step (block IO, system) and write the run directory.

use crate::dataset::{self, MarkerState};
use crate::environment;
use crate::errors::{PrivilegeError, UsageError};
use crate::probe::{probe_dataset, Presence};
use crate::progress::{Progress, ProgressMode};
use crate::rundir::RunDir;
use crate::step::{run_step, unix_ms, Phase, StepObserver, StepPlan, StepResult};
use anyhow::{Context, Result};
use iodig_db::{BasicFactory, DbError, DbFactory, Status};
use iodig_iotrace::{TraceError, TraceMode, TraceOptions, TraceSession};
use iodig_model::props::{nearest, Properties};
use iodig_model::{
    files, RunConfig, RunDoc, StepHistograms, StepSummary, ToolInfo, SCHEMA_VERSION,
};
use iodig_report::outcome::Outcome;
use iodig_report::ycsb;
use iodig_stats::IntervalMode;
use iodig_sysstat::{Sampler, SysOptions};
use iodig_workload::{CoreWorkload, WorkloadSpec, BUILTIN_WORKLOADS, CORE_PROPERTIES};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Records in the dataset of `iodig run` without `-P`: large enough to leave memory-resident
/// caches (with the storage-bound RocksDB defaults), small enough to load in seconds.
pub const DEFAULT_RECORDS: u64 = 200_000;
/// Measured seconds per step when neither a duration nor an operation count is given.
pub const DEFAULT_STEP_SECS: u64 = 10;
/// Thread sweep of `iodig run` without `--threads`.
pub const DEFAULT_THREADS: &[u64] = &[1, 4, 16];

/// Properties of the runner itself, besides the workload's and the bindings'.
const RUNNER_PROPERTIES: &[&str] = &["hdrhistogram.percentiles"];

/// Whether to load before running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPolicy {
    /// Load when the data directory does not already hold this dataset.
    Auto,
    /// Always load (wiping an iodig-managed data directory first).
    Always,
    Never,
}

/// Everything the command line asked for.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Load only (`iodig load`) or load-if-needed and run (`iodig run`).
    pub phase: Phase,
    pub db: String,
    /// Workloads run one after another on the same dataset (one from the command line, or
    /// several from an experiment file), each over its thread sweep.
    pub workloads: Vec<WorkloadRun>,
    /// Each workload × thread count is run this many times; the report merges repetitions.
    pub repetitions: u32,
    pub load_threads: Option<u64>,
    pub target: Option<f64>,
    pub duration: Option<Duration>,
    pub warmup: Duration,
    pub out_dir: PathBuf,
    pub trace: TraceOptions,
    pub load: LoadPolicy,
    pub status: bool,
    pub seed: Option<u64>,
    /// Restore the loaded dataset's snapshot before every run step (managed Cassandra nodes).
    pub restore_each_step: bool,
    /// `--client I/N`: this client's slice of the key space (1-based I).
    pub client: Option<(u64, u64)>,
    pub command_line: Vec<String>,
}

/// One workload of a run: its property files, overrides and thread sweep.
#[derive(Debug, Clone, Default)]
pub struct WorkloadRun {
    pub property_files: Vec<String>,
    pub overrides: Vec<String>,
    /// Thread counts of the sweep; empty = default.
    pub threads: Vec<u64>,
}

/// A workload with its properties resolved and checked.
struct ResolvedWorkload {
    label: String,
    props: Properties,
    threads: Vec<u64>,
    /// `maxexecutiontime` in seconds, 0 = none; parsed once, when the run starts.
    max_execution_secs: u64,
}

/// Where the finished run is.
pub struct RunOutcome {
    pub run_dir: PathBuf,
    pub interrupted: bool,
}

/// Resolves files, overrides and defaults into the effective properties of one workload.
fn resolve_properties(req: &RunRequest, w: &WorkloadRun) -> Result<(Properties, String)> {
    let mut props = Properties::new();
    let mut label = String::from("workload");
    for f in &w.property_files {
        let path = Path::new(f);
        match BUILTIN_WORKLOADS
            .iter()
            .find(|(name, _)| *name == f.as_str())
        {
            Some((name, text)) if !path.exists() => {
                props.load_str(text, name);
            }
            _ => props.load_file(path).map_err(|e| UsageError(e.0))?,
        }
        label = path
            .file_name()
            .map_or(f.clone(), |n| n.to_string_lossy().to_string());
    }
    if w.property_files.is_empty() {
        // `iodig run` with no workload: YCSB workload A on iodig's default dataset, timed steps.
        let (name, text) = BUILTIN_WORKLOADS[0];
        props.load_str(text, name);
        props.set("recordcount", DEFAULT_RECORDS.to_string());
        props.remove("operationcount");
        label = name.to_string();
    }
    for o in &w.overrides {
        props.apply_override(o).map_err(|e| UsageError(e.0))?;
    }
    if let Some(t) = req.target {
        props.set("target", t.to_string());
    }
    // `--duration` makes steps time-bound: a workload file's placeholder operationcount (1000 in
    // YCSB's files) would otherwise end them after a few milliseconds. An explicit -p wins.
    if req.duration.is_some() && props.origin("operationcount") != Some("-p") {
        props.set("operationcount", "0");
    }
    if let Some((i, n)) = req.client {
        apply_client_slice(&mut props, i, n)?;
    }
    check_known(&props, &req.db)?;
    Ok((props, label))
}

/// YCSB's `threadcount` property (`-threads`); a comma list sweeps, as `--threads` does.
fn parse_threadcount(list: &str) -> std::result::Result<Vec<u64>, String> {
    list.split(',')
        .map(|t| match t.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "property threadcount={list}: expected thread counts of at least 1, e.g. threadcount=16 or 1,4,16"
            )),
        })
        .collect()
}

/// `--client I/N`: YCSB's insertstart/insertcount for the I-th of N equal slices.
fn apply_client_slice(props: &mut Properties, i: u64, n: u64) -> Result<()> {
    if n == 0 || i == 0 || i > n {
        return Err(UsageError(format!(
            "--client {i}/{n}: write I/N with 1 ≤ I ≤ N, e.g. --client 2/4"
        ))
        .into());
    }
    if props.contains("insertstart") || props.contains("insertcount") {
        return Err(UsageError(format!(
            "--client {i}/{n} sets insertstart and insertcount itself; leave those properties out"
        ))
        .into());
    }
    let records = props
        .get_u64("recordcount", 0)
        .map_err(|e| UsageError(e.0))?;
    let start = (records as u128 * (i - 1) as u128 / n as u128) as u64;
    let end = (records as u128 * i as u128 / n as u128) as u64;
    props.set("insertstart", start.to_string());
    props.set("insertcount", (end - start).to_string());
    Ok(())
}

/// Every property must be one iodig knows: a typo would otherwise silently change nothing.
fn check_known(props: &Properties, db: &str) -> Result<()> {
    let mut known: Vec<&str> = CORE_PROPERTIES.to_vec();
    known.extend(iodig_db::known_properties());
    known.extend_from_slice(RUNNER_PROPERTIES);
    for (key, _) in props.iter() {
        if !known.contains(&key) {
            let hint = match nearest(key, &known) {
                Some(n) => format!("did you mean {n}?"),
                None => format!("see docs/properties.md for the properties of --db {db}"),
            };
            return Err(UsageError(format!(
                "unknown property {key} (from {}); {hint}",
                props.origin(key).unwrap_or("?")
            ))
            .into());
        }
    }
    Ok(())
}

/// Runs the request end to end.
pub fn execute(req: &RunRequest, stop: &AtomicBool) -> Result<RunOutcome> {
    if !iodig_db::binding_names().contains(&req.db.as_str()) {
        return Err(UsageError(format!(
            "--db {}: unknown database binding; use one of {}",
            req.db,
            iodig_db::binding_names().join(", ")
        ))
        .into());
    }
    let threads = req.workloads.iter().flat_map(|w| &w.threads);
    if let Some(t) = threads.chain(&req.load_threads).find(|t| **t == 0) {
        return Err(UsageError(format!("--threads {t}: a thread count must be at least 1")).into());
    }
    if req.workloads.is_empty() {
        return Err(UsageError(
            "no workload to run; give -P FILE or a [[workload]] in the experiment file".into(),
        )
        .into());
    }
    let mut workloads = Vec::new();
    for w in &req.workloads {
        let (props, label) = resolve_properties(req, w)?;
        let spec = WorkloadSpec::from_properties(&props)
            .map_err(|e| UsageError(format!("{label}: {}", e.0)))?;
        for note in &spec.notes {
            iodig_model::eprintln_lossy!("note: {label}: {note}");
        }
        // Parsed now, not when the first run step reaches it after a long load.
        let max_execution_secs = props
            .get_u64("maxexecutiontime", 0)
            .map_err(|e| UsageError(format!("{label}: {}", e.0)))?;
        let threads = match (w.threads.is_empty(), props.get("threadcount")) {
            (true, Some(list)) => {
                parse_threadcount(list).map_err(|e| UsageError(format!("{label}: {e}")))?
            }
            _ => w.threads.clone(),
        };
        workloads.push(ResolvedWorkload {
            label,
            props,
            threads,
            max_execution_secs,
        });
    }
    // YCSB's `target` property is `-target`: the first workload's applies when --target is
    // not given, like the dataset and binding settings below.
    let with_target;
    let req = match (req.target, workloads[0].props.get("target")) {
        (None, Some(t)) => {
            let t = workloads[0]
                .props
                .get_f64("target", 0.0)
                .ok()
                .filter(|t| *t > 0.0)
                .ok_or_else(|| {
                    UsageError(format!(
                        "property target={t}: expected a rate above 0 ops/s, e.g. target=5000"
                    ))
                })?;
            with_target = RunRequest {
                target: Some(t),
                ..req.clone()
            };
            &with_target
        }
        _ => req,
    };
    // The first workload defines the dataset and the binding's settings; the others must use the
    // same dataset, since they run on what was loaded once.
    let mut props = workloads[0].props.clone();
    let label = if workloads.len() == 1 {
        workloads[0].label.clone()
    } else {
        "experiment".to_string()
    };
    let spec = WorkloadSpec::from_properties(&props).map_err(|e| UsageError(e.0))?;
    let seed = match (req.seed, props.get("seed")) {
        (Some(s), _) => s,
        (None, Some(_)) => props.get_u64("seed", 0).map_err(|e| UsageError(e.0))?,
        (None, None) => unix_ms(SystemTime::now()) ^ (u64::from(std::process::id()) << 32),
    };
    props.set("seed", seed.to_string());
    if let Some(p) = props.get("hdrhistogram.percentiles") {
        ycsb::parse_percentiles(p).map_err(UsageError)?;
    }
    if req.db == "rocksdb" && !props.contains("rocksdb.dir") {
        props.set(
            "rocksdb.dir",
            req.out_dir
                .join("data")
                .join("rocksdb")
                .display()
                .to_string(),
        );
    }
    std::fs::create_dir_all(&req.out_dir).map_err(|e| {
        UsageError(format!(
            "--out {}: cannot create the output directory ({e}); choose a writable directory with --out DIR",
            req.out_dir.display()
        ))
    })?;
    for w in &mut workloads {
        for key in ["seed", "rocksdb.dir", "hosts"] {
            if let Some(v) = props.get(key) {
                w.props.set_default(key, v.to_string());
            }
        }
    }
    let mut ctx = Experiment {
        req,
        props,
        spec,
        seed,
        label,
        managed: None,
        workloads,
    };
    ctx.check_same_dataset()?;
    match req.db.as_str() {
        #[cfg(feature = "cassandra")]
        "cassandra" => {
            let _guard = ctx.start_managed_cassandra()?;
            let handle = crate::step::async_runtime()?.handle().clone();
            let factory =
                iodig_db::cassandra::open_with_handle(&ctx.props, &handle).map_err(db_error)?;
            let load = ctx.cassandra_load_decision(&factory)?;
            ctx.run_with(&factory, load, stop)
        }
        #[cfg(feature = "rocksdb")]
        "rocksdb" => {
            let load = ctx.prepare_data_dir(ctx.props.get("rocksdb.dir").map(PathBuf::from))?;
            let factory = iodig_db::rocks::RocksFactory::open(&ctx.props).map_err(db_error)?;
            ctx.run_with(&factory, load, stop)
        }
        _ => {
            let factory = BasicFactory::open(&ctx.props).map_err(db_error)?;
            let load = req.phase == Phase::Load || req.load == LoadPolicy::Always;
            ctx.run_with(&factory, load, stop)
        }
    }
}

/// A binding's configuration error is a usage error (exit 2); anything else is a failure.
fn db_error(e: DbError) -> anyhow::Error {
    match e {
        DbError::Config(m) => UsageError(m).into(),
        DbError::Unavailable(m) => anyhow::anyhow!(m),
    }
}

struct Experiment<'a> {
    req: &'a RunRequest,
    props: Properties,
    spec: WorkloadSpec,
    seed: u64,
    label: String,
    /// Directory of the Cassandra nodes iodig manages for this run, if any.
    managed: Option<PathBuf>,
    workloads: Vec<ResolvedWorkload>,
}

/// Snapshot tag of the loaded dataset on managed nodes.
#[cfg(feature = "cassandra")]
const LOADED_SNAPSHOT: &str = "iodig-loaded";

impl Experiment<'_> {
    /// Without `hosts`, runs against a managed node under `<out>/data/cassandra`: reused if
    /// running, restarted with its data if stopped, started fresh otherwise. The guard stops
    /// what this run started.
    #[cfg(feature = "cassandra")]
    fn start_managed_cassandra(&mut self) -> Result<Option<iodig_cassandra::Guard>> {
        if self.props.contains("hosts") {
            if self.req.restore_each_step {
                return Err(UsageError(
                    "--restore-each-step needs nodes iodig manages; leave out the hosts property"
                        .into(),
                )
                .into());
            }
            return Ok(None);
        }
        let dir = self.req.out_dir.join("data").join("cassandra");
        let existing = iodig_cassandra::Cluster::load(&dir).ok();
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
                (c, Some(iodig_cassandra::Guard { dir: dir.clone() }))
            }
            None => {
                iodig_model::eprintln_lossy!("note: no hosts given; starting a managed Apache Cassandra node in {} (about a minute)", dir.display());
                let opts = iodig_cassandra::UpOptions {
                    nodes: 1,
                    dir: dir.clone(),
                    ..Default::default()
                };
                let c =
                    iodig_cassandra::up(&opts).context("cannot start a managed Cassandra node")?;
                (c, Some(iodig_cassandra::Guard { dir: dir.clone() }))
            }
        };
        self.props.set("hosts", cluster.hosts());
        self.managed = Some(dir);
        Ok(guard)
    }

    /// Managed nodes keep a dataset marker like RocksDB's data directory; a dataset an earlier
    /// run grew by inserts is put back from the snapshot of its load rather than loaded over
    /// (which would keep the inserted rows). External hosts have no marker: they are probed
    /// ([`Self::load_unless_probed`]).
    #[cfg(feature = "cassandra")]
    fn cassandra_load_decision<F: DbFactory>(&self, factory: &F) -> Result<bool> {
        let dir = match (self.req.phase, self.req.load, &self.managed) {
            (Phase::Load, _, _) | (_, LoadPolicy::Always, _) => return Ok(true),
            (_, LoadPolicy::Never, _) => return Ok(false),
            (_, LoadPolicy::Auto, None) => return self.load_unless_probed(factory),
            (_, LoadPolicy::Auto, Some(dir)) => dir,
        };
        match dataset::state(dir, &self.props) {
            MarkerState::Same => Ok(false),
            MarkerState::Grown(step) => {
                iodig_model::eprintln_lossy!("note: step {step} of an earlier run inserted records; restoring snapshot {LOADED_SNAPSHOT} of the load");
                match iodig_cassandra::restore(dir, LOADED_SNAPSHOT, self.keyspace()) {
                    Ok(_) => {
                        self.after_restore(dir, factory)?;
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

    /// For a database iodig did not start: load when none of the dataset's probe keys is
    /// there, skip the load when all are, and refuse to guess when only some are.
    #[cfg_attr(not(feature = "cassandra"), allow(dead_code))]
    fn load_unless_probed<F: DbFactory>(&self, factory: &F) -> Result<bool> {
        match probe_dataset(factory, &self.spec)? {
            Presence::Loaded { probed } => {
                iodig_model::eprintln_lossy!(
                    "note: the database already holds this dataset ({probed} of {probed} probed keys found); not loading again (--reload to force)"
                );
                Ok(false)
            }
            Presence::Empty { probed } => {
                iodig_model::eprintln_lossy!(
                    "note: the database holds none of this dataset's {probed} probed keys; loading {} records",
                    self.spec.insert_count
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

    /// After a load on managed nodes: snapshot it, so steps can start from the same state.
    fn after_load(&self) -> Result<()> {
        #[cfg(feature = "cassandra")]
        if let Some(dir) = &self.managed {
            iodig_cassandra::snapshot(dir, LOADED_SNAPSHOT, self.keyspace())
                .context("cannot snapshot the loaded dataset")?;
        }
        Ok(())
    }

    /// The keyspace the Cassandra binding loads into, snapshots and restores.
    #[cfg(feature = "cassandra")]
    fn keyspace(&self) -> &str {
        self.props.get_str("cassandra.keyspace", "ycsb")
    }

    /// After managed nodes were put back to the load's snapshot: wait until the binding is
    /// connected again, and mark the dataset as loaded (no longer grown by inserts).
    #[cfg(feature = "cassandra")]
    fn after_restore<F: DbFactory>(&self, dir: &Path, factory: &F) -> Result<()> {
        factory
            .await_ready(Duration::from_secs(120))
            .map_err(db_error)?;
        dataset::mark_loaded(dir, &self.props)
    }

    /// Before a run step with `--restore-each-step`: put the loaded dataset back, and wait until
    /// the binding is connected again.
    fn before_run_step<F: DbFactory>(&self, factory: &F) -> Result<()> {
        if !self.req.restore_each_step {
            return Ok(());
        }
        #[cfg(feature = "cassandra")]
        if let Some(dir) = &self.managed {
            iodig_model::eprintln_lossy!(
                "note: restoring snapshot {LOADED_SNAPSHOT} before the step"
            );
            iodig_cassandra::restore(dir, LOADED_SNAPSHOT, self.keyspace())
                .context("cannot restore the loaded dataset")?;
            return self.after_restore(dir, factory);
        }
        Err(UsageError(format!(
            "--restore-each-step: restoring is supported on managed Cassandra nodes; --db {} cannot restore yet",
            self.req.db
        ))
        .into())
    }

    /// Processes whose CPU and memory the system sampler follows: iodig itself (with an
    /// embedded database inside) and the managed database nodes.
    fn observed_processes(&self) -> Vec<(String, u32)> {
        #[allow(unused_mut)]
        let mut pids = vec![("iodig".to_string(), std::process::id())];
        #[cfg(feature = "cassandra")]
        if let Some(cluster) = self
            .managed
            .as_deref()
            .and_then(|d| iodig_cassandra::Cluster::load(d).ok())
        {
            pids.extend(
                cluster
                    .nodes
                    .iter()
                    .map(|n| (format!("cassandra {}", n.address), n.pid)),
            );
        }
        pids
    }

    /// Flushes and compactions of the step, from the binding and from managed nodes.
    fn db_events(
        &self,
        factory_events: Vec<iodig_model::events::DbEvent>,
        since_unix_ms: u64,
    ) -> Vec<iodig_model::events::DbEvent> {
        #[allow(unused_mut)]
        let mut all = factory_events;
        #[cfg(feature = "cassandra")]
        if let Some(dir) = &self.managed {
            all.extend(iodig_cassandra::events(dir, Some(since_unix_ms)).unwrap_or_default());
        }
        #[cfg(not(feature = "cassandra"))]
        let _ = since_unix_ms; // only managed Cassandra nodes need the start time
        all.sort_by_key(|e| e.start_unix_ms);
        all
    }

    /// Every workload of the run must describe the dataset that is loaded once.
    fn check_same_dataset(&self) -> Result<()> {
        let first = &self.workloads[0];
        for w in &self.workloads[1..] {
            let differs = iodig_model::props::DATASET_PROPERTIES
                .iter()
                .find(|k| w.props.get(k) != first.props.get(k));
            if let Some(k) = differs {
                let value = |p: &Properties| p.get(k).unwrap_or("unset").to_string();
                return Err(UsageError(format!(
                    "workload {} describes another dataset than {} ({k} {} vs {}); put the dataset properties in the experiment's [properties]",
                    w.label,
                    first.label,
                    value(&w.props),
                    value(&first.props)
                ))
                .into());
            }
        }
        Ok(())
    }

    /// Decides whether to load, wiping a data directory that holds another dataset when it is
    /// safe to (iodig made it) and refusing otherwise.
    #[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
    fn prepare_data_dir(&self, dir: Option<PathBuf>) -> Result<bool> {
        let Some(dir) = dir else {
            return Ok(self.req.phase == Phase::Load);
        };
        let marker = dataset::state(&dir, &self.props);
        let same = marker == MarkerState::Same;
        let has_data = std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        let wipe_ok = marker != MarkerState::Missing || !has_data;
        match (self.req.phase, self.req.load) {
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
                    if let Some(pid) = iodig_db::rocks::lock_holder(&dir) {
                        return Err(UsageError(format!(
                            "{} is in use by process {pid} (it holds the database's LOCK); wait for it to finish, or give this run its own -p rocksdb.dir or --out",
                            dir.display()
                        ))
                        .into());
                    }
                    let holds = match &marker {
                        MarkerState::Same => "this dataset (--reload)".to_string(),
                        MarkerState::Grown(step) => format!(
                            "this dataset grown by the inserts of step {step} of an earlier run"
                        ),
                        _ => "another dataset".to_string(),
                    };
                    iodig_model::eprintln_lossy!(
                        "note: {} holds {holds}; wiping it and loading",
                        dir.display()
                    );
                    std::fs::remove_dir_all(&dir).with_context(|| format!("cannot wipe {}", dir.display()))?;
                }
                Ok(true)
            }
        }
    }

    fn run_config(&self, threads: &[u64]) -> RunConfig {
        RunConfig {
            db: self.req.db.clone(),
            property_files: self
                .req
                .workloads
                .iter()
                .flat_map(|w| w.property_files.clone())
                .collect(),
            properties: self.props.to_map(),
            threads: threads.to_vec(),
            target_ops_per_sec: self.req.target,
            warmup_secs: self.req.warmup.as_secs_f64(),
            seed: self.seed,
            trace: format!("{:?}", self.req.trace.mode).to_lowercase(),
        }
    }

    /// YCSB's `measurement.interval`; by default intended-start latency is kept only for steps
    /// that run to a target rate (without one, the intended start is the actual start).
    fn interval_mode(&self, target: Option<f64>) -> Result<IntervalMode> {
        let default = if target.is_some() { "both" } else { "op" };
        Ok(
            match self
                .props
                .get_choice("measurement.interval", default, &["op", "intended", "both"])
                .map_err(|e| UsageError(e.0))?
            {
                "op" => IntervalMode::Op,
                "intended" => IntervalMode::Intended,
                _ => IntervalMode::Both,
            },
        )
    }

    fn run_with<F: DbFactory>(
        &self,
        factory: &F,
        load: bool,
        stop: &AtomicBool,
    ) -> Result<RunOutcome> {
        let sweep = |w: &ResolvedWorkload| -> Vec<u64> {
            match (w.threads.is_empty(), self.req.phase) {
                (false, _) => w.threads.clone(),
                (true, Phase::Load) => {
                    vec![self.req.load_threads.unwrap_or(default_load_threads())]
                }
                (true, Phase::Run) => DEFAULT_THREADS.to_vec(),
            }
        };
        let threads = sweep(&self.workloads[0]);
        let data_dir = factory.data_dir();
        let trace_probe = self.preflight_trace(data_dir.as_deref())?;
        let now = unix_ms(SystemTime::now());
        let mut notes = self.spec.notes.clone();
        notes.extend(trace_probe.clone());
        let doc = RunDoc {
            schema_version: SCHEMA_VERSION,
            tool: ToolInfo {
                name: "iodig".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                command_line: self.req.command_line.clone(),
            },
            started_unix_ms: now,
            updated_unix_ms: now,
            status: "running".into(),
            config: self.run_config(&threads),
            environment: environment::describe(data_dir.as_deref()),
            steps: Vec::new(),
            notes,
        };
        let mut run = RunDir::create(
            &self.req.out_dir,
            &format!("{}-{}", self.label, F::NAME),
            doc,
        )?;
        iodig_model::eprintln_lossy!("run directory: {}", run.path.display());
        let mode = ProgressMode::detect(
            self.req.status,
            self.props
                .get_u64("status.interval", 10)
                .map_err(|e| UsageError(e.0))?,
        );
        let mut progress = Progress::new(mode);
        let mut interrupted = false;
        if load {
            let load_threads = match self.req.phase {
                Phase::Load => threads[0],
                Phase::Run => self.req.load_threads.unwrap_or(default_load_threads()),
            };
            // The target rate is the run's; a load inside `run` goes as fast as it can.
            let target = match self.req.phase {
                Phase::Load => self.req.target,
                Phase::Run => None,
            };
            let plan = StepPlan {
                phase: Phase::Load,
                threads: load_threads,
                target_ops_per_sec: target,
                operation_count: self.spec.insert_count,
                max_execution: None,
                warmup: Duration::ZERO,
                interval_mode: self.interval_mode(target)?,
            };
            progress.set_label(format!("{} t={load_threads}", self.label));
            let step = StepRun {
                workload: &self.workloads[0],
                plan: &plan,
                name: "load",
            };
            interrupted = self.run_one(
                factory,
                &mut run,
                &step,
                &mut progress,
                stop,
                data_dir.as_deref(),
            )?;
            if !interrupted {
                if let Some(dir) = data_dir.as_ref().or(self.managed.as_ref()) {
                    dataset::mark_loaded(dir, &self.props)?;
                }
                self.after_load()?;
            }
        }
        if self.req.phase == Phase::Run && !interrupted {
            'sweep: for rep in 0..self.req.repetitions.max(1) {
                for w in &self.workloads {
                    let workload_spec =
                        WorkloadSpec::from_properties(&w.props).map_err(|e| UsageError(e.0))?;
                    let duration = self.req.duration.or(
                        match (w.max_execution_secs, workload_spec.operation_count) {
                            (0, 0) => Some(Duration::from_secs(DEFAULT_STEP_SECS)),
                            (0, _) => None,
                            (s, _) => Some(Duration::from_secs(s)),
                        },
                    );
                    for t in sweep(w) {
                        let plan = StepPlan {
                            phase: Phase::Run,
                            threads: t,
                            target_ops_per_sec: self.req.target,
                            operation_count: workload_spec.operation_count,
                            max_execution: duration,
                            warmup: self.req.warmup,
                            interval_mode: self.interval_mode(self.req.target)?,
                        };
                        self.before_run_step(factory)?;
                        progress.set_label(format!("{} t={t}", w.label));
                        let name = if self.req.repetitions > 1 {
                            format!("{}-t{t}-r{}", w.label, rep + 1)
                        } else {
                            format!("{}-t{t}", w.label)
                        };
                        let step = StepRun {
                            workload: w,
                            plan: &plan,
                            name: &name,
                        };
                        let stopped = self.run_one(
                            factory,
                            &mut run,
                            &step,
                            &mut progress,
                            stop,
                            data_dir.as_deref(),
                        )?;
                        if workload_spec.run_inserts() {
                            if let Some(dir) = data_dir.as_ref().or(self.managed.as_ref()) {
                                dataset::mark_grown(dir, &self.props, &name)?;
                            }
                        }
                        if stopped {
                            interrupted = true;
                            break 'sweep;
                        }
                    }
                }
            }
        }
        let closed = factory.close();
        run.finish(if interrupted {
            "interrupted"
        } else {
            "completed"
        })?;
        closed.map_err(db_error)?;
        match iodig_report::write_report(&run.path) {
            Ok(report) => {
                for finding in &report.findings {
                    iodig_model::eprintln_lossy!("finding: {finding}");
                }
                iodig_model::eprintln_lossy!("report: {}", run.path.join("report.html").display());
            }
            Err(e) => {
                iodig_model::eprintln_lossy!("warning: the report could not be written: {e:#}")
            }
        }
        iodig_model::eprintln_lossy!("results: {}", run.path.display());
        Ok(RunOutcome {
            run_dir: run.path.clone(),
            interrupted,
        })
    }

    /// Checks the tracer once before anything runs: an explicit `--trace ebpf` that cannot work
    /// fails now (exit 3), not after the load; a fallback is said once.
    fn preflight_trace(&self, data_dir: Option<&Path>) -> Result<Option<String>> {
        if self.req.trace.mode == TraceMode::Off {
            return Ok(None);
        }
        match iodig_iotrace::start(&self.trace_options(data_dir)) {
            Ok(session) => {
                let note = session.note().map(str::to_string);
                drop(session);
                if let Some(n) = &note {
                    iodig_model::eprintln_lossy!("note: {n}");
                }
                Ok(note)
            }
            Err(TraceError::Privilege { reason }) => {
                Err(PrivilegeError(format!("--trace ebpf: {reason}")).into())
            }
            Err(e @ TraceError::UnknownDevice { .. }) => {
                Err(UsageError(format!("--device: {e}")).into())
            }
            Err(TraceError::Other(e)) => Err(e.context("cannot start block-IO tracing")),
        }
    }

    /// The trace covers the devices named with `--device` and the one under the data directory.
    fn trace_options(&self, data_dir: Option<&Path>) -> TraceOptions {
        let mut opts = self.req.trace.clone();
        if let Some(dev) = data_dir
            .and_then(environment::storage_of)
            .and_then(|s| s.device)
        {
            if !opts.devices.contains(&dev) {
                opts.devices.push(dev);
            }
        }
        opts
    }

    fn run_one<F: DbFactory>(
        &self,
        factory: &F,
        run: &mut RunDir,
        step: &StepRun<'_>,
        progress: &mut Progress,
        stop: &AtomicBool,
        data_dir: Option<&Path>,
    ) -> Result<bool> {
        let StepRun {
            workload: w,
            plan,
            name,
        } = *step;
        let mut props = w.props.clone();
        props.set("threadcount", plan.threads.to_string());
        let workload = CoreWorkload::new(
            WorkloadSpec::from_properties(&props).map_err(|e| UsageError(e.0))?,
            self.seed,
        );
        let mut observer = Observer {
            trace_opts: (self.req.trace.mode != TraceMode::Off)
                .then(|| self.trace_options(data_dir)),
            pids: self.observed_processes(),
            trace: None,
            sys: None,
            trace_error: None,
        };
        let result = run_step(factory, &workload, plan, stop, progress, &mut observer)?;
        let index = run.doc.steps.len();
        let (dir, rel) = run.step_dir(index, name)?;
        let (trace_doc, sys_doc) = observer.finish();
        let summary = self.summarize(index, &rel, &w.label, plan, &result, trace_doc.as_ref());
        let percentiles = match self.props.get("hdrhistogram.percentiles") {
            Some(p) => ycsb::parse_percentiles(p).map_err(UsageError)?,
            None => ycsb::DEFAULT_PERCENTILES.to_vec(),
        };
        let text = ycsb::step_text(&summary, &percentiles);
        {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        }
        run.write_bytes(&dir, files::YCSB_TEXT, text.as_bytes())?;
        run.write_json(&dir, files::TIMESERIES, &result.samples)?;
        run.write_json(
            &dir,
            files::HISTOGRAMS,
            &StepHistograms {
                unit: "us".into(),
                series: result.totals.to_encoded()?,
            },
        )?;
        run.write_bytes(&dir, files::HDR_LOG, &result.hlog)?;
        if let Some(t) = &trace_doc {
            run.write_json(&dir, files::TRACE, t)?;
        }
        if let Some(s) = &sys_doc {
            run.write_json(&dir, files::SYSSTAT, s)?;
        }
        let since = result
            .started_unix_ms
            .saturating_sub(plan.warmup.as_millis() as u64);
        let events = self.db_events(factory.events_since(since), since);
        run.write_json(&dir, files::EVENTS, &events)?;
        if let Some(e) = &observer.trace_error {
            iodig_model::eprintln_lossy!("warning: block-IO trace of step {name} failed: {e}");
        }
        // The report words failed steps from their return codes; say it here too, where the
        // run is being watched.
        for w in Outcome::of(&summary).findings(summary.operations) {
            iodig_model::eprintln_lossy!("warning: step {name}: {w}");
        }
        if summary.operations == 0 && !result.interrupted {
            let w = format!("step {name} measured no operation; give a longer --duration or a larger operationcount");
            iodig_model::eprintln_lossy!("warning: {w}");
            run.doc.notes.push(w);
        }
        run.write_json(&dir, files::STEP_SUMMARY, &summary)?;
        run.push_step(summary)?;
        if let Some(e) = &result.error {
            return Err(anyhow::anyhow!("step {name} failed: {e}"));
        }
        Ok(result.interrupted || stop.load(Ordering::Relaxed))
    }

    #[allow(clippy::too_many_arguments)]
    fn summarize(
        &self,
        index: usize,
        rel: &str,
        label: &str,
        plan: &StepPlan,
        r: &StepResult,
        trace: Option<&iodig_model::trace::TraceDoc>,
    ) -> StepSummary {
        let status_names: Vec<&str> = Status::ALL.iter().map(|s| s.name()).collect();
        let runtime_ms = r.runtime.as_millis() as u64;
        StepSummary {
            index,
            phase: plan.phase.name().into(),
            dir: rel.into(),
            workload: label.to_string(),
            threads: plan.threads,
            target_ops_per_sec: plan.target_ops_per_sec,
            started_unix_ms: r.started_unix_ms,
            runtime_ms,
            operations: r.operations,
            throughput_ops_per_sec: if runtime_ms > 0 {
                1000.0 * r.operations as f64 / runtime_ms as f64
            } else {
                0.0
            },
            interrupted: r.interrupted,
            series: r.totals.summaries(),
            returns: r.totals.returns(&status_names),
            trace_mode: trace.map(|t| t.mode.clone()),
            trace_note: trace.and_then(|t| t.note.clone()),
            client_cpu_s: Some(r.client_cpu.as_secs_f64()),
        }
    }
}

/// One step to run: which workload, how, under which name.
#[derive(Clone, Copy)]
struct StepRun<'a> {
    workload: &'a ResolvedWorkload,
    plan: &'a StepPlan,
    name: &'a str,
}

fn default_load_threads() -> u64 {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(2);
    (cores * 2).max(4)
}

/// Starts the block-IO tracer and the system sampler when measurement starts, stops them after.
struct Observer {
    trace_opts: Option<TraceOptions>,
    pids: Vec<(String, u32)>,
    trace: Option<TraceSession>,
    sys: Option<Sampler>,
    trace_error: Option<String>,
}

impl StepObserver for Observer {
    fn measurement_started(&mut self) {
        if let Some(opts) = &self.trace_opts {
            match iodig_iotrace::start(opts) {
                Ok(s) => self.trace = Some(s),
                Err(e) => self.trace_error = Some(e.to_string()),
            }
        }
        let opts = SysOptions {
            interval: Duration::from_secs(1),
            pids: self.pids.clone(),
            per_cpu: true,
        };
        self.sys = Sampler::start(opts).ok();
    }
}

impl Observer {
    fn finish(
        &mut self,
    ) -> (
        Option<iodig_model::trace::TraceDoc>,
        Option<iodig_model::sys::SysDoc>,
    ) {
        let trace = self.trace.take().and_then(|t| match t.stop() {
            Ok(doc) => Some(doc),
            Err(e) => {
                self.trace_error = Some(format!("{e:#}"));
                None
            }
        });
        (trace, self.sys.take().map(Sampler::stop))
    }
}

/// Installs Ctrl-C / SIGTERM handling: the first signal ends the current step cleanly (the run
/// directory says `interrupted` and the report is written); another one at least a second later
/// exits at once. Signals within that second are the same request delivered twice — a terminal's
/// Ctrl-C or `timeout` reach both iodig and its process group — and must not cut the clean stop
/// short.
pub fn install_stop_handler() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .context("cannot install the Ctrl-C handler")?;
    let stop = Arc::clone(&flag);
    std::thread::Builder::new()
        .name("iodig-signals".into())
        .spawn(move || {
            let mut first: Option<std::time::Instant> = None;
            for _ in signals.forever() {
                match first {
                    None => {
                        first = Some(std::time::Instant::now());
                        stop.store(true, Ordering::SeqCst);
                        iodig_model::eprintln_lossy!("iodig: stopping after the current step's clean-up (again in a second or more to quit at once)");
                    }
                    Some(t) if t.elapsed() >= Duration::from_secs(1) => std::process::exit(130),
                    Some(_) => {}
                }
            }
        })
        .context("cannot start the signal thread")?;
    Ok(flag)
}
