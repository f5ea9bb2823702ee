//! A request resolved once, before anything runs: property files, overrides and defaults merged
//! and checked, every workload's spec parsed, the seed and the sweep decided. The sweep, the
//! deployments and the recorder all read this one [`Plan`].

mod faults;
mod restore;
mod resume;
mod steps;

use crate::errors::UsageError;
use crate::fault::Fault;
use crate::remote::{
    self,
    ssh::{Ssh, SshHost},
};
use crate::request::{RunRequest, WorkloadRun};
use crate::step_plan::Phase;
use crate::utc::unix_ms;
use anyhow::Result;
use iodig_model::props::{nearest, Properties, DATASET_PROPERTIES};
use iodig_model::secret::redact_args;
use iodig_model::RunConfig;
use iodig_report::ycsb;
use iodig_stats::IntervalMode;
use iodig_workload::{WorkloadSpec, BUILTIN_WORKLOADS, CORE_PROPERTIES};
use std::path::Path;
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
const RUNNER_PROPERTIES: &[&str] = &[
    "hdrhistogram.percentiles",
    "ssh.config",
    "faultdisk.size",
    "faultdisk.mechanism",
    "unusableafter",
    "verify.eachnode",
];

/// A workload with its properties resolved and its spec parsed.
pub struct ResolvedWorkload {
    /// The workload file's name (`workloada`), which names its steps and messages.
    pub label: String,
    /// Its effective properties: its files, then the overrides (experiment `[properties]`,
    /// its own, `-p`), then what the flags imply (target, `--duration`, `--client` slice).
    pub props: Properties,
    /// YCSB's CoreWorkload settings parsed from `props`.
    pub spec: WorkloadSpec,
    /// Its thread sweep (`--threads`, `threads = […]`, else YCSB's `threadcount`); empty
    /// means the default ([`Plan::sweep`]).
    pub threads: Vec<u64>,
    /// `maxexecutiontime` in seconds, 0 = none; parsed once, when the run starts.
    pub max_execution_secs: u64,
}

/// The request with everything resolved that can be resolved before a database is touched.
pub struct Plan {
    /// The request, with YCSB's `target` property applied when `--target` was not given.
    pub req: RunRequest,
    /// The first workload's properties: they define the dataset and the binding's settings.
    pub props: Properties,
    /// Seed of every worker's PRNG: `--seed`, else the `seed` property, else from the clock and
    /// pid; set as `seed` in `props` and recorded in run.json, so a run can be repeated.
    pub seed: u64,
    /// Run directory label: the workload's name, or `experiment` for several.
    pub label: String,
    /// Every workload in run order; the first defines the dataset, the others must match it.
    pub workloads: Vec<ResolvedWorkload>,
    /// `hdrhistogram.percentiles`, or the default.
    pub percentiles: Vec<f64>,
    /// Hosts observed over SSH (`--observe`), checked.
    pub observe: Vec<SshHost>,
    /// How ssh is called (`ssh.config`).
    pub ssh: Ssh,
    /// Faults injected into every run step (`--fault`), checked.
    pub faults: Vec<Fault>,
    /// `-p verify.eachnode=true`: the verify reads every node alone too.
    pub verify_each_node: bool,
    /// The run's one live sink: the terminal line and `--metrics` read it; every source of live
    /// figures (the collector, the tracer, the observed hosts' agents, the faults) publishes to
    /// it.
    pub live: Arc<crate::live::LiveHub>,
    /// `-p metrics.linger`: how long `--metrics` serves on after the run.
    pub metrics_linger: Duration,
}

impl Plan {
    /// Resolves and checks the request: every bad flag or property is refused here, before
    /// a node starts or a load begins.
    pub fn resolve(req: &RunRequest) -> Result<Plan> {
        check_flags(req)?;
        // Asked for explicitly, so refused before anything starts rather than warned about
        // at every step (observed hosts that cannot are warned about: their agent may not be
        // root).
        if req.drop_caches && !crate::page_cache::can_drop() {
            return Err(crate::errors::PrivilegeError(
                "--drop-caches: cannot write /proc/sys/vm/drop_caches here; run iodig as root or leave the flag out".into(),
            )
            .into());
        }
        let mut workloads = req
            .workloads
            .iter()
            .map(|w| resolve_workload(req, w))
            .collect::<Result<Vec<_>>>()?;
        let mut req = with_target_property(req, &workloads[0])?;
        // The command line is recorded (run.json, reports): a `-p cassandra.password=…` must not.
        req.command_line = redact_args(&req.command_line);
        let mut props = workloads[0].props.clone();
        let label = if workloads.len() == 1 {
            workloads[0].label.clone()
        } else {
            "experiment".to_string()
        };
        let seed = match (req.seed, props.get("seed")) {
            (Some(s), _) => s,
            (None, Some(_)) => props.get_u64("seed", 0).map_err(|e| UsageError(e.0))?,
            (None, None) => unix_ms(SystemTime::now()) ^ (u64::from(std::process::id()) << 32),
        };
        props.set("seed", seed.to_string());
        let percentiles = match props.get("hdrhistogram.percentiles") {
            Some(p) => ycsb::parse_percentiles(p).map_err(UsageError)?,
            None => ycsb::DEFAULT_PERCENTILES.to_vec(),
        };
        layout_defaults(&req.db, &mut props, &req.out_dir);
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
        check_same_dataset(&workloads)?;
        check_versioned_writes(&req, &workloads)?;
        let verify_each_node = verify_each_node(&req, &workloads)?;
        check_nodes(&req, &props)?;
        restore::check_restore(&req, &props)?;
        let observe = remote::parse_hosts("--observe", &req.observe)?;
        let faults = faults::check_faults(&req, &props, &workloads)?;
        let metrics_linger = Duration::from_secs(
            props
                .get_u64("metrics.linger", 0)
                .map_err(|e| UsageError(e.0))?,
        );
        let ssh = Ssh {
            config: match props.get("ssh.config") {
                Some(p) if !Path::new(p).is_file() => {
                    return Err(UsageError(format!(
                        "property ssh.config={p}: no such file; give an ssh_config file, or leave it out to use ~/.ssh/config"
                    ))
                    .into())
                }
                p => p.map(std::path::PathBuf::from),
            },
        };
        Ok(Plan {
            req,
            props,
            seed,
            label,
            workloads,
            percentiles,
            observe,
            ssh,
            faults,
            verify_each_node,
            live: Arc::new(crate::live::LiveHub::new()),
            metrics_linger,
        })
    }

    /// The dataset's spec: the first workload's.
    pub fn spec(&self) -> &WorkloadSpec {
        &self.workloads[0].spec
    }

    /// The thread counts a workload's steps run with.
    pub fn sweep(&self, w: &ResolvedWorkload) -> Vec<u64> {
        match (w.threads.is_empty(), self.req.phase) {
            (false, _) => w.threads.clone(),
            (true, Phase::Load) => vec![self.load_threads()],
            (true, Phase::Run) => DEFAULT_THREADS.to_vec(),
        }
    }

    /// Threads of a load inside `run` (a `load`'s threads are its sweep).
    pub fn load_threads(&self) -> u64 {
        self.req.load_threads.unwrap_or_else(default_load_threads)
    }

    /// How long a workload's run steps last: `--duration`, else `maxexecutiontime`, else the
    /// default when no operation count ends them either.
    pub fn step_duration(&self, w: &ResolvedWorkload) -> Option<Duration> {
        self.req
            .duration
            .or(match (w.max_execution_secs, w.spec.operation_count) {
                (0, 0) => Some(Duration::from_secs(DEFAULT_STEP_SECS)),
                (0, _) => None,
                (s, _) => Some(Duration::from_secs(s)),
            })
    }

    /// `unusableafter` (seconds, default 10; 0 never): a step ends when every operation of that
    /// many whole seconds in a row failed.
    pub fn unusable_after(&self) -> Result<Option<u64>> {
        let n = self
            .props
            .get_secs("unusableafter", 10)
            .map_err(|e| UsageError(e.0))?;
        Ok((n > 0).then_some(n))
    }

    /// YCSB's `measurement.interval`; by default intended-start latency is kept only for steps
    /// that run to a target rate (without one, the intended start is the actual start).
    pub fn interval_mode(&self, target: Option<f64>) -> Result<IntervalMode> {
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

    /// The configuration as run.json records it.
    pub fn run_config(&self, threads: &[u64]) -> RunConfig {
        RunConfig {
            db: self.req.db.clone(),
            property_files: self
                .req
                .workloads
                .iter()
                .flat_map(|w| w.property_files.clone())
                .collect(),
            properties: self.props.to_redacted_map(),
            threads: threads.to_vec(),
            target_ops_per_sec: self.req.target,
            warmup_secs: self.req.warmup.as_secs_f64(),
            seed: self.seed,
            trace: format!("{:?}", self.req.trace.mode).to_lowercase(),
            stop_when: self.req.stop_when.as_ref().map(ToString::to_string),
            label: self.req.label.clone(),
        }
    }
}

/// Flags that are wrong whatever the properties say.
fn check_flags(req: &RunRequest) -> Result<()> {
    if let Some(label) = &req.label {
        iodig_model::check_label(label)
            .map_err(|e| UsageError(format!("--label {label:?}: {e}")))?;
    }
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
    if let Some(w) = req.workloads.iter().find(|w| w.threads.len() > 1) {
        if req.phase == Phase::Load {
            let list: Vec<String> = w.threads.iter().map(u64::to_string).collect();
            return Err(UsageError(format!(
                "--threads {}: iodig load runs one load with one thread count; give one (e.g. --threads {}), or sweep thread counts with iodig run",
                list.join(","),
                w.threads[w.threads.len() - 1]
            ))
            .into());
        }
    }
    if req.workloads.is_empty() {
        return Err(UsageError(
            "no workload to run; give -P FILE or a [[workload]] in the experiment file".into(),
        )
        .into());
    }
    Ok(())
}

/// Versioned writes are all or nothing within a run (an unversioned write would leave values
/// the check must call corrupt), come from one client, and are what `--verify` checks.
fn check_versioned_writes(req: &RunRequest, workloads: &[ResolvedWorkload]) -> Result<()> {
    let versioned = workloads.iter().filter(|w| w.spec.versioned_writes).count();
    if versioned > 0 && versioned < workloads.len() {
        let plain = workloads.iter().find(|w| !w.spec.versioned_writes);
        return Err(UsageError(format!(
            "versionedwrites=true in some workloads only ({} has none): give it in the experiment's [properties] so every write carries its version",
            plain.map_or("one", |w| w.label.as_str())
        ))
        .into());
    }
    if versioned == 0 && req.verify && req.verify_only.is_none() {
        return Err(UsageError(
            "--verify checks versioned writes; add -p versionedwrites=true (or verify = true needs versionedwrites = true in [properties])".into(),
        )
        .into());
    }
    if req.verify && req.db == "basic" {
        return Err(UsageError(
            "--verify with --db basic: the basic binding keeps nothing to read back; verify a rocksdb or cassandra run".into(),
        )
        .into());
    }
    if let (Some((i, n)), true) = (req.client, versioned > 0) {
        return Err(UsageError(format!(
            "versionedwrites=true with --client {i}/{n}: keys written by several clients cannot be judged from one client's ledger; run versioned writes from a single client"
        ))
        .into());
    }
    Ok(())
}

/// `verify.eachnode`: read once here, refused where there is no verify or no nodes.
fn verify_each_node(req: &RunRequest, workloads: &[ResolvedWorkload]) -> Result<bool> {
    let each_node = workloads.first().map_or(Ok(false), |w| {
        w.props
            .get_bool("verify.eachnode", false)
            .map_err(|e| UsageError(e.0))
    })?;
    if each_node && (!req.verify || req.db != "cassandra") {
        return Err(UsageError(format!(
            "verify.eachnode=true reads every Cassandra node alone when the run is verified; {}",
            if req.db != "cassandra" {
                format!("--db {} has no nodes to read one by one", req.db)
            } else {
                "add --verify (with -p versionedwrites=true), or give it to iodig verify".into()
            }
        ))
        .into());
    }
    Ok(each_node)
}

/// One workload's properties, spec, sweep and time limit, checked.
fn resolve_workload(req: &RunRequest, w: &WorkloadRun) -> Result<ResolvedWorkload> {
    let (props, label) = resolve_properties(req, w)?;
    let spec = WorkloadSpec::from_properties(&props)
        .map_err(|e| UsageError(format!("{label}: {}", e.0)))?;
    for note in &spec.notes {
        iodig_model::eprintln_lossy!("note: {label}: {note}");
    }
    // Parsed now, not when the first run step reaches it after a long load.
    let max_execution_secs = props
        .get_secs("maxexecutiontime", 0)
        .map_err(|e| UsageError(format!("{label}: {}", e.0)))?;
    let threads = match (w.threads.is_empty(), props.get("threadcount")) {
        (true, Some(list)) => {
            parse_threadcount(list).map_err(|e| UsageError(format!("{label}: {e}")))?
        }
        _ => w.threads.clone(),
    };
    Ok(ResolvedWorkload {
        label,
        props,
        spec,
        threads,
        max_execution_secs,
    })
}

/// YCSB's `target` property is `-target`: the first workload's applies when --target is not
/// given, like the dataset and binding settings.
fn with_target_property(req: &RunRequest, first: &ResolvedWorkload) -> Result<RunRequest> {
    let mut req = req.clone();
    if let (None, Some(t)) = (req.target, first.props.get("target")) {
        let rate = first
            .props
            .get_f64("target", 0.0)
            .ok()
            .filter(|t| *t > 0.0)
            .ok_or_else(|| {
                UsageError(format!(
                    "property target={t}: expected a rate above 0 ops/s, e.g. target=5000"
                ))
            })?;
        req.target = Some(rate);
    }
    Ok(req)
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
    let start = (u128::from(records) * u128::from(i - 1) / u128::from(n)) as u64;
    let end = (u128::from(records) * u128::from(i) / u128::from(n)) as u64;
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

/// Every workload of the run must describe the dataset that is loaded once.
fn check_same_dataset(workloads: &[ResolvedWorkload]) -> Result<()> {
    let first = &workloads[0];
    for w in &workloads[1..] {
        let differs = DATASET_PROPERTIES
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

/// `--nodes` starts managed nodes: it needs a binding with servers and no `hosts`.
fn check_nodes(req: &RunRequest, props: &Properties) -> Result<()> {
    let Some(n) = req.nodes else { return Ok(()) };
    if n == 0 || n > 254 {
        return Err(UsageError(format!(
            "--nodes {n}: give between 1 and 254 nodes (one loopback address each)"
        ))
        .into());
    }
    if req.db != "cassandra" {
        return Err(UsageError(format!(
            "--nodes {n}: --db {} runs embedded; managed nodes are for --db cassandra",
            req.db
        ))
        .into());
    }
    if let Some(hosts) = props.get("hosts") {
        return Err(UsageError(format!(
            "--nodes {n} starts managed nodes, but hosts={hosts} names servers to use; give one or the other"
        ))
        .into());
    }
    Ok(())
}

/// Load threads when none are given: twice the cores, at least 4.
fn default_load_threads() -> u64 {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(2);
    (cores * 2).max(4)
}

/// Layout properties settled before anything runs, so run.json records them and
/// every workload sees them: RocksDB's data directory under `--out`.
fn layout_defaults(db: &str, props: &mut Properties, out_dir: &Path) {
    if db == "rocksdb" && !props.contains("rocksdb.dir") {
        props.set(
            "rocksdb.dir",
            out_dir.join("data").join("rocksdb").display().to_string(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::secret::is_secret_name;

    /// The secret rule goes by name: no property iodig knows may be caught by it by accident
    /// (its value would vanish from run.json), and the password must be.
    #[test]
    fn only_secret_properties_look_like_secrets() {
        let mut known: Vec<&str> = CORE_PROPERTIES.to_vec();
        known.extend(iodig_db::known_properties());
        known.extend_from_slice(RUNNER_PROPERTIES);
        let secrets: Vec<&str> = known.into_iter().filter(|k| is_secret_name(k)).collect();
        assert!(
            secrets.iter().all(|k| *k == "cassandra.password"),
            "{secrets:?}"
        );
        assert!(is_secret_name("cassandra.password"));
    }
}
