//! What a command asked the runner for: the request of `iodig run` / `iodig load`, as flags and
//! experiment files give it, before anything is resolved or checked.

use crate::step_plan::Phase;
use iodig_iotrace::{TraceOptions, WatchOptions};
use std::path::PathBuf;
use std::time::Duration;

/// Whether to load before running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadPolicy {
    /// Load when the data directory does not already hold this dataset.
    Auto,
    /// Always load (wiping an iodig-managed data directory first).
    Always,
    /// Never load before a run (`--no-load`): run on what the database holds. `iodig load`
    /// loads regardless.
    Never,
}

/// Everything the command line asked for.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Load only (`iodig load`) or load-if-needed and run (`iodig run`).
    pub phase: Phase,
    /// Binding name (`--db`: `rocksdb`, `cassandra`, `basic`), checked by [`crate::plan`].
    pub db: String,
    /// Workloads run one after another on the same dataset (one from the command line, or
    /// several from an experiment file), each over its thread sweep.
    pub workloads: Vec<WorkloadRun>,
    /// Each workload × thread count is run this many times; the report merges repetitions.
    pub repetitions: u32,
    /// `--load-threads`: threads of the load inside `iodig run`; None is twice the cores, at
    /// least 4.
    pub load_threads: Option<u64>,
    /// `--target`: operations per second for the whole client, over all its threads; None
    /// runs as fast as the database goes (unless YCSB's `target` property gives a rate).
    pub target: Option<f64>,
    /// `--duration`: measured time of each run step; None leaves it to `maxexecutiontime`,
    /// `operationcount`, else 10 s.
    pub duration: Option<Duration>,
    /// `--warmup`: unmeasured time at the start of each run step (a load has none).
    pub warmup: Duration,
    /// `--out`: where the run directory is made, and the data directories by default.
    pub out_dir: PathBuf,
    /// `--trace`, `--device`, `--slot-ms`: how block IO is traced during each step.
    pub trace: TraceOptions,
    /// Cgroups and processes whose IO the trace names (`--cgroup`, `--pid`).
    pub watch: WatchOptions,
    /// `--reload` (Always), `--no-load` (Never), else Auto.
    pub load: LoadPolicy,
    /// `-s`: YCSB-style status lines on stderr even in CI.
    pub status: bool,
    /// `--seed`: the workers' PRNG seed; None takes the `seed` property, else one from the
    /// clock and pid (recorded in run.json either way).
    pub seed: Option<u64>,
    /// Restore the loaded dataset's snapshot before every run step (managed Cassandra nodes).
    pub restore_each_step: bool,
    /// `--drop-caches`: empty the page cache here and on every observed host before every
    /// run step (after any restore).
    pub drop_caches: bool,
    /// `--nodes N`: managed database nodes to start (Cassandra without `hosts`).
    pub nodes: Option<u32>,
    /// `--fault AT:ACTION:TARGET`: faults injected into every run step, as written.
    pub faults: Vec<String>,
    /// `--observe HOST,…`: hosts whose database node iodig observes over SSH.
    pub observe: Vec<String>,
    /// `--client I/N`: this client's slice of the key space (1-based I).
    pub client: Option<(u64, u64)>,
    /// `--start-at`: the first step begins then, and the following ones on the schedule of
    /// [`crate::start_at`], so clients on several machines run their steps together.
    pub start_at: Option<std::time::SystemTime>,
    /// `--stop-when`: a workload's sweep ends at the first step that meets it.
    pub stop_when: Option<crate::stop_rule::StopRule>,
    /// `--verify`: read back every acknowledged versioned write after the last step.
    pub verify: bool,
    /// `--events`: every traced IO of each step into its `io-events.csv`.
    pub io_events: bool,
    /// `--metrics ADDR:PORT`: serve the run's live figures at `/metrics` there.
    pub metrics: Option<String>,
    /// `iodig verify RUN_DIR`: no step runs; the run's ledger is checked against the database
    /// and the result written into that run directory.
    pub verify_only: Option<PathBuf>,
    /// `iodig run --resume RUN_DIR`: the run this request continues (the rest of the request
    /// is its recorded command line, resolved again); its finished steps are kept.
    pub resume: Option<crate::resume::ResumeFrom>,
    /// `--label` (or an experiment file's `label`): the configuration's name, recorded as
    /// run.json's `config.label`; checked by [`crate::plan`].
    pub label: Option<String>,
    /// The command as given, for run.json's `tool.command_line` (secrets redacted by the plan).
    pub command_line: Vec<String>,
    /// Git revision of the binary, recorded in run.json.
    pub revision: Option<String>,
}

/// One workload of a run: its property files, overrides and thread sweep.
#[derive(Debug, Clone, Default)]
pub struct WorkloadRun {
    /// `-P` files or built-in names (`workloada`), loaded in order; none runs YCSB workload A
    /// on iodig's default dataset.
    pub property_files: Vec<String>,
    /// `key=value` properties over the files, later ones winning (`-p`).
    pub overrides: Vec<String>,
    /// Thread counts of the sweep; empty = default.
    pub threads: Vec<u64>,
}

/// Where the finished run is.
pub struct RunOutcome {
    /// The run directory written (its run.json and `steps/`).
    pub run_dir: PathBuf,
    /// Ctrl-C or SIGTERM ended the run early (exit code 130).
    pub interrupted: bool,
    /// The read-back of the versioned writes, when one was asked for.
    pub integrity: Option<iodig_model::integrity::IntegrityDoc>,
}

impl RunOutcome {
    /// 130 for an interrupted run, 1 when the read-back found a lost or damaged write or could
    /// not read every key back, else 0.
    pub fn exit_code(&self) -> std::process::ExitCode {
        if self.interrupted {
            std::process::ExitCode::from(130)
        } else if self.integrity.as_ref().is_some_and(|i| !i.clean()) {
            std::process::ExitCode::FAILURE
        } else {
            std::process::ExitCode::SUCCESS
        }
    }
}
