//! The run as it happens: what the measurement publishes while a step runs (the client's
//! seconds, each place's IO seconds and system samples, the run's events) to whoever watches it
//! live (the terminal line, the `--metrics` endpoint). Publishing never blocks the measurement:
//! a sink takes a copy and returns.

use iodig_model::sys::SysSample;
use iodig_model::trace::LiveSecond;
use iodig_model::Sample;

mod exposition;
mod hub;
mod server;

pub use exposition::render;
pub use hub::{LiveHub, PlaceLine};
pub use server::MetricsServer;

/// Upper bounds (µs) of the client latency buckets published live: 10 µs to 10 s, about three
/// a decade, the range a storage benchmark's operations fall in. Latencies above the last are
/// only in the `+Inf` bucket.
pub const LATENCY_BOUNDS_US: [u64; 19] = [
    10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// One series' latencies of one second of the client, in the live buckets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencyBuckets {
    /// The series, as YCSB names it (`READ`, `UPDATE-FAILED`, `Intended-READ`).
    pub series: String,
    /// Operations per bucket of [`LATENCY_BOUNDS_US`] (not cumulative), and one more for those
    /// above the last bound.
    pub counts: Vec<u64>,
    /// Sum of the latencies, in µs (HDR's bucket values: within 0.1 %).
    pub sum_us: f64,
}

impl LatencyBuckets {
    /// The histogram's values counted into the live buckets.
    pub fn of(series: String, h: &iodig_stats::Histogram) -> Self {
        let mut counts = vec![0u64; LATENCY_BOUNDS_US.len() + 1];
        let mut sum_us = 0.0;
        for v in h.iter_recorded() {
            let value = h.highest_equivalent(v.value_iterated_to());
            let n = v.count_at_value();
            counts[LATENCY_BOUNDS_US.partition_point(|b| *b < value)] += n;
            sum_us += value as f64 * n as f64;
        }
        Self {
            series,
            counts,
            sum_us,
        }
    }
}

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
    /// Whether [`LiveSink::client_latency`] is wanted: counting the buckets is skipped if not.
    fn wants_client_latency(&self) -> bool {
        false
    }
    /// The latency histograms of one second of the client, each series in the live buckets;
    /// called just before [`LiveSink::client_second`] of the same second.
    fn client_latency(&self, _latency: &[LatencyBuckets]) {}
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
