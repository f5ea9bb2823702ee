//! What one step is to do: its phase, workers, target rate, bound and latency mode. The sweep
//! decides it; the step, the progress bar, `--start-at`'s schedule and the recorder read it.

use iodig_stats::IntervalMode;
use std::time::Duration;

/// Which phase a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// YCSB's load: insert the dataset (`iodig load`, or before `iodig run` when needed).
    Load,
    /// YCSB's transactions: the workload's operation mix.
    Run,
}

impl Phase {
    /// `load` or `run`, as run.json's steps and the progress lines name it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Run => "run",
        }
    }
}

/// What one step does.
#[derive(Debug, Clone)]
pub struct StepPlan {
    /// Load (inserts) or run (the operation mix).
    pub phase: Phase,
    /// Workers (YCSB threads): OS threads or async tasks, as the binding runs.
    pub threads: u64,
    /// Whole-client target rate (YCSB's `-target`).
    pub target_ops_per_sec: Option<f64>,
    /// Total operations over all workers; 0 = until the time limit.
    pub operation_count: u64,
    /// Measured duration limit (YCSB's `maxexecutiontime`).
    pub max_execution: Option<Duration>,
    /// Unmeasured time before the window: operations whose intended start falls in it are
    /// neither counted nor logged, and do not use up `operation_count`.
    pub warmup: Duration,
    /// How latency is recorded: service time (`op`), time from the intended start
    /// (`intended`), or both, the latter as `Intended-<OP>` (YCSB's `measurement.interval`).
    pub interval_mode: IntervalMode,
    /// End the step when every operation of this many whole seconds in a row failed (the
    /// database became unusable); `None` never does.
    pub unusable_after: Option<u64>,
}
