//! The run as it happens: what the measurement publishes while a step runs (the client's
//! seconds, each place's IO seconds and system samples, the run's events) to whoever watches it
//! live (the terminal line, the `--metrics` endpoint). Publishing never blocks the measurement:
//! a sink takes a copy and returns.

use iodig_model::sys::SysSample;
use iodig_model::trace::LiveSecond;
use iodig_model::Sample;

/// Where a live figure was measured: the client host (`client`) or a database node (its
/// address, as run.json names it).
pub type PlaceName = str;

/// What a step is, for labels: set when a step starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveStep {
    /// The step's directory name (`step-003`).
    pub step: String,
    /// `load` or the workload's name.
    pub workload: String,
    /// Client threads.
    pub threads: u32,
    /// `--target` ops/s, when paced.
    pub target: Option<f64>,
}

/// Something that happened, told when it happens.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveEvent {
    /// When (unix ms).
    pub unix_ms: u64,
    /// The place it concerns (a node's address, or `client`).
    pub place: String,
    /// `flush`, `compaction`, `fault`, `node_down`, `step_start`, `step_end`, `finding`, …
    pub kind: String,
    /// The line a user reads.
    pub text: String,
}

/// A watcher of the run. Every method has a default that ignores the figure, so a sink takes
/// only what it shows. Called from the measurement's threads: return at once.
pub trait LiveSink: Send + Sync {
    /// A step starts (its warm-up included).
    fn step_started(&self, _step: &LiveStep) {}
    /// A step ended.
    fn step_ended(&self, _step: &LiveStep) {}
    /// One second of the client's measurements, as `timeseries.json` will hold it.
    fn client_second(&self, _sample: &Sample) {}
    /// One traced second of a place's devices.
    fn io_second(&self, _place: &PlaceName, _second: &LiveSecond) {}
    /// One system sample of a place.
    fn sys_sample(&self, _place: &PlaceName, _sample: &SysSample) {}
    /// An event, as it happens.
    fn event(&self, _event: &LiveEvent) {}
}

/// The sink of a run nobody watches live.
pub struct NoLive;

impl LiveSink for NoLive {}
