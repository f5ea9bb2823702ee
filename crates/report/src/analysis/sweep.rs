//! Sweep curves: one point per workload × thread count, repetitions merged (ops/s as their mean
//! with a 95% interval, latency from the exact merge of their HDR histograms), the latency the
//! curves use (READ unless told otherwise, see [`LatencyOp`]), the peak, steps whose operations
//! all failed kept out of the figures, and the thread counts a stop rule left untested.

use super::bend::{find_bend, Bend};
use super::op::LatencyOp;
use super::{is_primary_series, status_text, steps_list, ALL_OPS_SERIES};
use crate::data::{RunData, StepData};
use crate::outcome::Outcome;
use iodig_model::SeriesSummary;
use iodig_stats::{summarize, SeriesSet};
use std::collections::BTreeMap;

/// One workload × thread count, repetitions aggregated.
#[derive(Debug, Clone)]
pub struct Point {
    /// Client threads of the point's steps.
    pub threads: u64,
    /// Step indexes of the repetitions.
    pub steps: Vec<usize>,
    /// Mean of the repetitions' throughputs.
    pub ops_per_sec: f64,
    /// Half-width of the 95% confidence interval of that mean (two or more repetitions).
    pub ops_ci95: Option<f64>,
    /// Each repetition's throughput.
    pub rep_ops: Vec<f64>,
    /// Full per-second ops/s samples of every repetition (partial seconds left out).
    pub second_ops: Vec<f64>,
    /// All ops merged (see [`ALL_OPS_SERIES`]), in µs.
    pub all: SeriesSummary,
    /// The latency the sweep is drawn with (its [`WorkloadSweep::op`]), in µs; empty (count 0)
    /// when the point measured none of that op.
    pub lat: SeriesSummary,
    /// Per op series, repetitions merged, in µs.
    pub per_op: BTreeMap<String, SeriesSummary>,
    /// False when repetitions or ops had to be combined without histograms (percentiles are
    /// then count-weighted means of the per-step percentiles, not exact).
    pub exact: bool,
    /// iodig's own CPU per operation over the repetitions, in µs (when every one measured it).
    pub client_cpu_us_per_op: Option<f64>,
    /// Return codes of every step of the point, left-out ones included.
    pub outcome: Outcome,
    /// Steps left out of the figures because none of their operations succeeded.
    pub excluded: Vec<usize>,
    /// No step of the point had a successful operation: its figures measure failures, so it is
    /// never a peak, a bend or a term of a comparison.
    pub all_failed: bool,
    /// Steps of the point that ended early (their figures cover part of the step).
    pub interrupted: Vec<usize>,
    /// Target rate of the point's steps; none = as fast as possible.
    pub target_ops_per_sec: Option<f64>,
}

impl Point {
    /// What a reader must know before trusting the point's figures; empty when nothing.
    pub fn caveats(&self) -> Vec<String> {
        let mut c = Vec::new();
        if self.all_failed {
            c.push("all failed".to_string());
        } else if !self.excluded.is_empty() {
            c.push(format!(
                "{} left out: all failed",
                steps_list(&self.excluded)
            ));
        }
        c.extend(self.outcome.not_found_mark());
        if !self.interrupted.is_empty() {
            c.push(format!("{} interrupted", steps_list(&self.interrupted)));
        }
        c
    }

    /// [`Self::caveats`] as one table cell.
    pub fn status(&self) -> String {
        status_text(&self.caveats())
    }
}

/// A thread count of the sweep that was not run, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct NotTested {
    /// The thread count left out.
    pub threads: u64,
    /// "stopped at 8 threads (step 3): read.p99 62.345 ms > 50ms".
    pub why: String,
}

/// One workload's points over thread counts: the curves, the OPS table, the peak and the bend.
#[derive(Debug, Clone)]
pub struct WorkloadSweep {
    /// Workload label (`workloada`, …), as the run's steps name it.
    pub workload: String,
    /// Whose latency the curves, tables, peak and bend use: the one asked for, or all ops when
    /// the workload measured none of it (then `op_note` says so).
    pub op: LatencyOp,
    /// Why `op` is not the latency asked for, when it is not (also among the report's notes).
    pub op_note: Option<String>,
    /// Ascending thread counts.
    pub points: Vec<Point>,
    /// Thread counts the run's stop rule left out (ascending), none of which has a point.
    pub not_tested: Vec<NotTested>,
    /// Index into `points` of the highest throughput among points whose operations succeeded;
    /// none when every point failed.
    pub peak: Option<usize>,
    /// Where latency bends (docs/report.md, "The bend"); none when it never does.
    pub bend: Option<Bend>,
    /// First step where throughput grows by less than [`super::BEND_OPS_GAIN`] (the plateau).
    pub plateau: Option<Bend>,
}

impl WorkloadSweep {
    /// The point of highest throughput among those whose operations succeeded.
    pub fn peak_point(&self) -> Option<&Point> {
        self.peak.map(|i| &self.points[i])
    }

    /// Points whose figures measure the database (not failures), for curves and ratios.
    pub fn usable_points(&self) -> impl Iterator<Item = &Point> {
        self.points.iter().filter(|p| !p.all_failed)
    }

    /// Usable points that measured the sweep's latency op, for latency curves.
    pub fn latency_points(&self) -> impl Iterator<Item = &Point> {
        self.usable_points().filter(|p| p.lat.count > 0)
    }

    /// The point at `threads`, when the sweep ran it.
    pub fn at(&self, threads: u64) -> Option<&Point> {
        self.points.iter().find(|p| p.threads == threads)
    }

    /// Why `threads` was not run, when the stop rule left it out.
    pub fn not_tested_at(&self, threads: u64) -> Option<&NotTested> {
        self.not_tested.iter().find(|n| n.threads == threads)
    }

    /// Every thread count of the sweep, tested or not, ascending.
    pub fn thread_counts(&self) -> Vec<u64> {
        let mut t: Vec<u64> = self.points.iter().map(|p| p.threads).collect();
        t.extend(self.not_tested.iter().map(|n| n.threads));
        t.sort_unstable();
        t.dedup();
        t
    }
}

/// Total client CPU over total operations of the repetitions, if each measured it.
fn client_cpu_per_op(steps: &[&StepData]) -> Option<f64> {
    let cpu: Option<f64> = steps.iter().map(|s| s.summary.client_cpu_s).sum();
    let ops: u64 = steps.iter().map(|s| s.summary.operations).sum();
    cpu.filter(|_| ops > 0).map(|c| c * 1e6 / ops as f64)
}

/// The point of one workload × threads: steps whose operations all failed are left out of the
/// figures when another repetition succeeded, and make the point "all failed" when none did.
fn group_point(threads: u64, steps: &[&StepData]) -> Point {
    let outcomes: Vec<Outcome> = steps.iter().map(|s| Outcome::of(&s.summary)).collect();
    let (failed, used): (Vec<_>, Vec<_>) = steps
        .iter()
        .zip(&outcomes)
        .partition(|(_, o)| o.all_failed());
    let all_failed = used.is_empty();
    let used: Vec<&StepData> = if all_failed {
        steps.to_vec()
    } else {
        used.into_iter().map(|(s, _)| *s).collect()
    };
    let mut p = point(threads, &used);
    p.outcome = Outcome::merged(&outcomes);
    p.all_failed = all_failed;
    if !all_failed {
        p.excluded = failed.iter().map(|(s, _)| s.summary.index).collect();
    }
    p.interrupted = used
        .iter()
        .filter(|s| s.summary.interrupted)
        .map(|s| s.summary.index)
        .collect();
    p.target_ops_per_sec = steps.first().and_then(|s| s.summary.target_ops_per_sec);
    p
}

/// Aggregates the run steps of one workload × threads.
fn point(threads: u64, steps: &[&StepData]) -> Point {
    let rep_ops: Vec<f64> = steps
        .iter()
        .map(|s| s.summary.throughput_ops_per_sec)
        .collect();
    let n = rep_ops.len() as f64;
    let mean = rep_ops.iter().sum::<f64>() / n;
    let ops_ci95 = (rep_ops.len() >= 2).then(|| {
        let var = rep_ops.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        crate::stat::t_quantile_975(n - 1.0) * (var / n).sqrt()
    });
    let second_ops = steps
        .iter()
        .flat_map(|s| {
            s.timeseries
                .iter()
                .filter(|x| x.secs >= 0.999)
                .map(|x| x.ops_per_sec)
        })
        .collect();
    let Latency { all, per_op, exact } = latency(steps);
    Point {
        threads,
        steps: steps.iter().map(|s| s.summary.index).collect(),
        ops_per_sec: mean,
        ops_ci95,
        rep_ops,
        second_ops,
        all,
        lat: SeriesSummary::default(),
        per_op,
        exact,
        client_cpu_us_per_op: client_cpu_per_op(steps),
        outcome: Outcome::default(),
        excluded: Vec::new(),
        all_failed: false,
        interrupted: Vec::new(),
        target_ops_per_sec: None,
    }
}

/// A point's latency: all ops merged, each op, and whether the percentiles are exact.
struct Latency {
    all: SeriesSummary,
    per_op: BTreeMap<String, SeriesSummary>,
    exact: bool,
}

/// Exact when every step has histograms (merged); otherwise count-weighted summaries.
fn latency(steps: &[&StepData]) -> Latency {
    let sets: Option<Vec<SeriesSet>> = steps
        .iter()
        .map(|s| {
            s.histograms
                .as_ref()
                .and_then(|h| SeriesSet::from_encoded(&h.series).ok())
        })
        .collect();
    match sets {
        Some(sets) if !sets.is_empty() => merged_latency(&sets),
        _ => weighted_latency(steps),
    }
}

/// Merges the HDR histograms of every repetition (and every op for "all").
fn merged_latency(sets: &[SeriesSet]) -> Latency {
    let mut merged = SeriesSet::new();
    for s in sets {
        merged.merge(s);
    }
    let mut all = iodig_stats::new_histogram();
    let mut per_op = BTreeMap::new();
    for (id, h) in merged.histograms() {
        let name = iodig_stats::series_name(id);
        if ALL_OPS_SERIES.contains(&name.as_str()) {
            all.add(h).expect("histograms share bounds");
        }
        if is_primary_series(&name) {
            per_op.insert(name, summarize(h));
        }
    }
    Latency {
        all: summarize(&all),
        per_op,
        exact: true,
    }
}

/// Without histograms only a single step and a single op are exact.
fn weighted_latency(steps: &[&StepData]) -> Latency {
    let mut parts: Vec<&SeriesSummary> = Vec::new();
    let mut by_op: BTreeMap<String, Vec<&SeriesSummary>> = BTreeMap::new();
    for s in steps {
        for (name, sum) in &s.summary.series {
            if ALL_OPS_SERIES.contains(&name.as_str()) && sum.count > 0 {
                parts.push(sum);
            }
            if is_primary_series(name) && sum.count > 0 {
                by_op.entry(name.clone()).or_default().push(sum);
            }
        }
    }
    let exact = parts.len() <= 1 && by_op.values().all(|v| v.len() <= 1);
    let per_op = by_op
        .into_iter()
        .map(|(name, v)| (name, weighted(&v)))
        .collect();
    Latency {
        all: weighted(&parts),
        per_op,
        exact,
    }
}

/// Count-weighted combination of summaries (exact for count, mean, min, max; approximate for
/// percentiles); a single summary is returned unchanged.
fn weighted(parts: &[&SeriesSummary]) -> SeriesSummary {
    match parts {
        [] => SeriesSummary::default(),
        [one] => (*one).clone(),
        _ => {
            let n: u64 = parts.iter().map(|p| p.count).sum();
            let w = |f: &dyn Fn(&SeriesSummary) -> f64| -> f64 {
                parts.iter().map(|p| f(p) * p.count as f64).sum::<f64>() / n.max(1) as f64
            };
            SeriesSummary {
                count: n,
                mean_us: w(&|p| p.mean_us),
                min_us: parts.iter().map(|p| p.min_us).min().unwrap_or(0),
                max_us: parts.iter().map(|p| p.max_us).max().unwrap_or(0),
                p50_us: w(&|p| p.p50_us as f64).round() as u64,
                p90_us: w(&|p| p.p90_us as f64).round() as u64,
                p95_us: w(&|p| p.p95_us as f64).round() as u64,
                p99_us: w(&|p| p.p99_us as f64).round() as u64,
                p999_us: w(&|p| p.p999_us as f64).round() as u64,
                p9999_us: w(&|p| p.p9999_us as f64).round() as u64,
            }
        }
    }
}

/// Thread counts of `workload`'s sweep that steps meeting the stop rule left out, without
/// those another repetition ran.
fn not_tested(run: &RunData, workload: &str, points: &[Point]) -> Vec<NotTested> {
    let mut out: Vec<NotTested> = Vec::new();
    for s in run.run_steps().filter(|s| s.summary.workload == workload) {
        let Some(stop) = &s.summary.sweep_stop else {
            continue;
        };
        for &t in &stop.skipped {
            if points.iter().any(|p| p.threads == t) || out.iter().any(|n| n.threads == t) {
                continue;
            }
            out.push(NotTested {
                threads: t,
                why: format!(
                    "stopped at {} threads (step {}): {}",
                    s.summary.threads, s.summary.index, stop.reason
                ),
            });
        }
    }
    out.sort_by_key(|n| n.threads);
    out
}

/// Sweeps of every workload, in the order workloads first ran, drawn with READ latency.
pub fn sweeps(run: &RunData) -> Vec<WorkloadSweep> {
    sweeps_of(run, &LatencyOp::Read)
}

/// Sweeps of every workload with `op`'s latency (all ops for a workload that has none of it).
pub fn sweeps_of(run: &RunData, op: &LatencyOp) -> Vec<WorkloadSweep> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<(String, u64), Vec<&StepData>> = BTreeMap::new();
    for s in run.run_steps() {
        if !order.contains(&s.summary.workload) {
            order.push(s.summary.workload.clone());
        }
        groups
            .entry((s.summary.workload.clone(), s.summary.threads))
            .or_default()
            .push(s);
    }
    order
        .into_iter()
        .map(|w| {
            let mut points: Vec<Point> = groups
                .iter()
                .filter(|((gw, _), _)| *gw == w)
                .map(|((_, t), steps)| group_point(*t, steps))
                .collect();
            let (op, op_note) = if op.measured_in(points.iter()) {
                (op.clone(), None)
            } else {
                (
                    LatencyOp::All,
                    Some(format!(
                        "{w} measured no {} operation: its curves, tables, peak and bend use all ops.",
                        op.words()
                    )),
                )
            };
            for p in &mut points {
                p.lat = op.of(p).cloned().unwrap_or_default();
            }
            let peak = (0..points.len())
                .filter(|&i| !points[i].all_failed)
                .max_by(|&a, &b| points[a].ops_per_sec.total_cmp(&points[b].ops_per_sec));
            let (bend, plateau) = find_bend(&points);
            WorkloadSweep {
                not_tested: not_tested(run, &w, &points),
                workload: w,
                op,
                op_note,
                points,
                peak,
                bend,
                plateau,
            }
        })
        .collect()
}
