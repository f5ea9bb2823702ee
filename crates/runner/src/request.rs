//! What a command asked the runner for: the request of `iodig run` / `iodig load`, as flags and
//! experiment files give it, before anything is resolved or checked.

use crate::step::Phase;
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
    /// Cgroups and processes whose IO the trace names (`--cgroup`, `--pid`).
    pub watch: WatchOptions,
    pub load: LoadPolicy,
    pub status: bool,
    pub seed: Option<u64>,
    /// Restore the loaded dataset's snapshot before every run step (managed Cassandra nodes).
    pub restore_each_step: bool,
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
    /// `iodig verify RUN_DIR`: no step runs; the run's ledger is checked against the database
    /// and the result written into that run directory.
    pub verify_only: Option<PathBuf>,
    pub command_line: Vec<String>,
    /// Git revision of the binary, recorded in run.json.
    pub revision: Option<String>,
}

/// One workload of a run: its property files, overrides and thread sweep.
#[derive(Debug, Clone, Default)]
pub struct WorkloadRun {
    pub property_files: Vec<String>,
    pub overrides: Vec<String>,
    /// Thread counts of the sweep; empty = default.
    pub threads: Vec<u64>,
}

/// Where the finished run is.
pub struct RunOutcome {
    pub run_dir: PathBuf,
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
