//! What the report says, computed from a loaded run directory and independent of any output
//! format. [`analyse`] gathers it; each concern has its module:
//!
//! - [`sweep`]: per-workload curves over thread counts (repetitions merged exactly) and the peak;
//! - [`bend`]: where a sweep stops scaling (the latency bend, the plateau);
//! - [`step`]: one step's series on one unix-ms time axis, its IO as measured at one place;
//! - [`story`]: whose IO tells the step's story (each database node's view, the cluster
//!   roll-up, the client host apart);
//! - [`io`]: the block-IO profile of a step (rates, latency, queue depth, IO summary, sizes);
//! - [`attribution`]: who issued the IO (activity classes, nodes) and what background writes
//!   did to the reads' per-second device latency;
//! - [`background`]: the client's latency and each class's queue and device time with and
//!   without flush/compaction IO, and the depth each class held;
//! - [`per_io`]: every IO of the per-IO stream by size (latency per size class, IOs to draw);
//! - [`levels`]: system level vs device level (per-second OS and device time of reads, writes);
//! - [`slow`]: why the slowest seconds were slow (each stand-out second's most likely cause);
//! - [`storage`]: storage-bound or not (device reads per database read, page cache, memory);
//! - [`device_stats`]: what each traced disk counted itself (NVMe SMART, OCP latency monitor)
//!   beside what the trace counted, or why it has no such figures;
//! - [`findings`]: every findings rule — a new finding goes there (its module doc says how).

pub mod attribution;
pub mod background;
pub mod bend;
pub mod cluster;
pub mod device_stats;
pub mod findings;
pub mod headlines;
pub mod io;
pub mod levels;
pub mod op;
pub mod per_io;
pub mod slow;
pub mod step;
pub mod storage;
pub mod story;
pub mod sweep;

pub use bend::{find_bend, gain_pct, Bend, BEND_OPS_GAIN, BEND_P99_FACTOR};
pub use findings::{lat_ms, rate};
pub use io::{io_rows, pow2_bin, IoLines, IoRow, OpBands, SizeHist};
pub use levels::LevelRow;
pub use op::{measured_ops, LatencyOp, OP_CHOICES};
pub use step::StepView;
pub use sweep::{sweeps, sweeps_of, NotTested, Point, WorkloadSweep};

use crate::data::RunData;

/// Series merged into "all ops": every device-facing op once. READ-MODIFY-WRITE is left out
/// because its inner read and update are already recorded as READ and UPDATE.
pub const ALL_OPS_SERIES: [&str; 5] = ["READ", "UPDATE", "INSERT", "SCAN", "DELETE"];
/// Series shown per op in tables (YCSB's names, service time).
pub const OP_SERIES: [&str; 6] = [
    "READ",
    "UPDATE",
    "INSERT",
    "SCAN",
    "READ-MODIFY-WRITE",
    "DELETE",
];

/// One per-second series: (unix ms at the middle of the interval, value).
pub type Line = Vec<(f64, f64)>;

/// "step 3" or "steps 3, 5".
pub fn steps_list(steps: &[usize]) -> String {
    let list = steps
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if steps.len() == 1 {
        format!("step {list}")
    } else {
        format!("steps {list}")
    }
}

/// A factor in a finding: "4.7×", or "683×" from 10 on, where a decimal says nothing.
pub fn times(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.1}×")
    }
}

/// A status cell: "ok" when there is nothing to say.
pub fn status_text(caveats: &[String]) -> String {
    if caveats.is_empty() {
        "ok".into()
    } else {
        caveats.join("; ")
    }
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct Report {
    /// The run directory's name ([`RunData::name`]).
    pub run_name: String,
    /// The latency op asked for (a sweep without it uses all ops, see its `op`).
    pub op: LatencyOp,
    /// One sweep per workload, in the order the workloads first ran.
    pub sweeps: Vec<WorkloadSweep>,
    /// Every step, the load included, in run order.
    pub steps: Vec<StepView>,
    /// The database's nodes, when the run read cluster facts or observed hosts.
    pub cluster: Option<cluster::ClusterView>,
    /// The front page: at most eight headline findings, each the worst case of its topic with
    /// the node and step where it is worst.
    pub headlines: Vec<headlines::Headline>,
    /// Run-level findings: the steps' warnings (failed operations), the sweeps', then each
    /// step's (short runs only), prefixed with the step.
    pub findings: Vec<String>,
    /// run.json's notes, then what limits the figures: a workload drawn with all ops instead of
    /// the op asked for, approximate percentiles, raw events the tracer lost.
    pub notes: Vec<String>,
}

fn is_primary_series(name: &str) -> bool {
    OP_SERIES.contains(&name)
}

/// Computes the report of a run, its sweeps drawn with READ latency.
pub fn analyse(run: &RunData) -> Report {
    analyse_with(run, &LatencyOp::Read)
}

/// One step's view, from the step's own files (its series in memory) and run.json: what
/// [`load_run_streaming`](crate::data::load_run_streaming) computes for each step as it reads it.
pub fn step_view_of(run: &RunData, step: &crate::data::StepData) -> StepView {
    let mut v = story::step_story(run, step);
    v.cluster_nodes = cluster::step_nodes(run, step);
    v.findings.extend(cluster::node_findings(&v.cluster_nodes));
    v
}

/// Computes the report of a run, its sweeps drawn with `op`'s latency: from the step views
/// the run was read with when it was read step by step, else from its steps.
pub fn analyse_with(run: &RunData, op: &LatencyOp) -> Report {
    let steps = if run.step_views.len() == run.steps.len() && !run.steps.is_empty() {
        run.step_views.clone()
    } else {
        run.steps.iter().map(|s| step_view_of(run, s)).collect()
    };
    analyse_views(run, op, steps)
}

/// The report of a run from its steps' views (one per step, in order).
pub fn analyse_views(run: &RunData, op: &LatencyOp, steps: Vec<StepView>) -> Report {
    let sweeps = sweeps_of(run, op);
    let mut findings = findings::run_findings(&steps, &sweeps);
    // A run that did not complete says so before anything it measured.
    if let Some(state) = &run.state {
        findings.insert(0, state.clone());
    }
    // Lost acknowledged writes come before any performance figure.
    if let Some(i) = &run.doc.integrity {
        let at = usize::from(run.state.is_some());
        findings.insert(
            at.min(findings.len()),
            if i.clean() {
                format!(
                    "Integrity: no acknowledged write was lost. {}.",
                    i.summary()
                )
            } else if i.lost_or_damaged() {
                format!(
                    "Integrity FAILED: acknowledged writes were lost or damaged. {}.",
                    i.summary()
                )
            } else {
                format!(
                    "Integrity not proven: {} of {} keys could not be read back, and nothing was found lost among the rest. {}.",
                    i.unreadable,
                    i.keys,
                    i.summary()
                )
            },
        );
    }
    Report {
        headlines: headlines::headlines(&steps, &sweeps),
        run_name: run.name(),
        op: op.clone(),
        notes: notes(run, &sweeps),
        sweeps,
        steps,
        cluster: cluster::cluster_view(run),
        findings,
    }
}

/// run.json's notes, then what limits the figures: approximate percentiles, lost trace events.
fn notes(run: &RunData, sweeps: &[WorkloadSweep]) -> Vec<String> {
    let mut notes = run.doc.notes.clone();
    notes.extend(sweeps.iter().filter_map(|s| s.op_note.clone()));
    if sweeps.iter().flat_map(|s| &s.points).any(|p| !p.exact) {
        notes.push(
            "Some latency figures combine steps or ops without histograms.json: their percentiles are count-weighted means, not exact merges."
                .into(),
        );
    }
    for s in &run.steps {
        let here = s.trace.iter().map(|t| (String::new(), t));
        let there = s
            .nodes
            .iter()
            .filter_map(|n| Some((format!(" on {}", n.step.host), n.trace.as_ref()?)));
        for (place, t) in here.chain(there) {
            if t.self_check.lost_events > 0 {
                notes.push(format!(
                    "{}: the tracer{place} lost {} raw events (ring buffer full); totals are unaffected.",
                    findings::capitalise(&s.label()),
                    t.self_check.lost_events
                ));
            }
        }
    }
    notes
}
