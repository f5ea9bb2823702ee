//! What the report says, computed from a loaded run directory and independent of any output
//! format: sweep curves per workload (repetitions merged exactly), the latency bend, per-step
//! time series on one unix-ms axis, the IO summary, size histograms and the findings.

use crate::data::{DbEvent, RunData, StepData};
use crate::outcome::Outcome;
use iodig_model::trace::{merge_buckets, Bucket, TraceDoc};
use iodig_model::SeriesSummary;
use iodig_stats::{summarize, SeriesSet};
use std::collections::BTreeMap;

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

/// Bend rule: latency bends at the first thread step where p99 grows more than this factor…
pub const BEND_P99_FACTOR: f64 = 2.0;
/// …while ops/s grows by less than this fraction.
pub const BEND_OPS_GAIN: f64 = 0.10;

/// One workload × thread count, repetitions aggregated.
#[derive(Debug, Clone)]
pub struct Point {
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

/// "step 3" or "steps 3, 5".
pub fn steps_list(steps: &[usize]) -> String {
    let list = steps
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if steps.len() == 1 {
        format!("step {list}")
    } else {
        format!("steps {list}")
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

/// Where a sweep stops scaling.
#[derive(Debug, Clone, PartialEq)]
pub struct Bend {
    /// Last thread count before the bend and the one where it shows.
    pub before: u64,
    pub at: u64,
    pub ops_gain_pct: f64,
    pub p99_ratio: f64,
    pub p9999_ratio: f64,
}

#[derive(Debug, Clone)]
pub struct WorkloadSweep {
    pub workload: String,
    /// Ascending thread counts.
    pub points: Vec<Point>,
    /// Index into `points` of the highest throughput among points whose operations succeeded;
    /// none when every point failed.
    pub peak: Option<usize>,
    pub bend: Option<Bend>,
    /// First step where throughput grows by less than [`BEND_OPS_GAIN`] (the plateau).
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
}

/// One per-second series: (unix ms at the middle of the interval, value).
pub type Line = Vec<(f64, f64)>;

/// An op's figures on the step's time axis, summed (rates, depth) or maxed (latency) over devices.
#[derive(Debug, Clone, Default)]
pub struct IoLines {
    pub mb_s: Line,
    pub mb_s_max: Line,
    pub iops: Line,
    pub lat_max_ms: Line,
    pub lat_p99_ms: Line,
}

/// One row of the blog's IO summary.
#[derive(Debug, Clone, PartialEq)]
pub struct IoRow {
    pub op: String,
    pub band: String,
    pub gb: f64,
    pub pct_ios: f64,
    pub pct_bytes: f64,
    pub ios: u64,
    pub bytes: u64,
}

/// Size histogram of one op in power-of-two bins (upper bound in bytes → share %).
#[derive(Debug, Clone, PartialEq)]
pub struct SizeHist {
    pub op: String,
    pub by_count_pct: BTreeMap<u64, f64>,
    pub by_bytes_pct: BTreeMap<u64, f64>,
}

/// Everything shown for one step.
#[derive(Debug, Clone)]
pub struct StepView {
    pub index: usize,
    /// Section heading ([`StepData::title`]) and the name in sentences ([`StepData::label`]).
    pub title: String,
    pub label: String,
    /// `load` or `run`.
    pub phase: String,
    pub workload: String,
    pub threads: u64,
    pub target_ops_per_sec: Option<f64>,
    pub operations: u64,
    pub throughput_ops_per_sec: f64,
    pub interrupted: bool,
    pub outcome: Outcome,
    pub start_ms: f64,
    pub end_ms: f64,
    pub ops_per_sec: Line,
    /// Per op series name: per-second p99 and mean latency in ms.
    pub lat_p99_ms: BTreeMap<String, Line>,
    pub lat_mean_ms: BTreeMap<String, Line>,
    /// By op name (`read`, `write`, `discard`, `flush`, `other`), only ops with IO.
    pub io: BTreeMap<String, IoLines>,
    pub qd_mean: Line,
    pub qd_max: Line,
    pub cpu_busy: Line,
    pub cpu_iowait: Line,
    pub dirty_mb: Line,
    pub writeback_mb: Line,
    pub events: Vec<DbEvent>,
    pub io_rows: Vec<IoRow>,
    pub size_hists: Vec<SizeHist>,
    pub trace_mode: String,
    pub trace_note: Option<String>,
    /// What the return codes say (all failed, NOT_FOUND): listed up front whatever the run's length.
    pub warnings: Vec<String>,
    pub findings: Vec<String>,
}

impl StepView {
    /// What a reader must know before trusting the step's figures; empty when nothing.
    pub fn caveats(&self) -> Vec<String> {
        let mut c = Vec::new();
        if self.outcome.all_failed() {
            c.push("all failed".to_string());
        }
        c.extend(self.outcome.not_found_mark());
        if self.interrupted {
            c.push("interrupted".to_string());
        }
        c
    }
}

/// The whole report.
#[derive(Debug, Clone)]
pub struct Report {
    pub run_name: String,
    pub sweeps: Vec<WorkloadSweep>,
    pub steps: Vec<StepView>,
    /// Run-level findings: the steps' warnings (failed operations), the sweeps', then each
    /// step's (short runs only), prefixed with the step.
    pub findings: Vec<String>,
    pub notes: Vec<String>,
}

fn is_primary_series(name: &str) -> bool {
    OP_SERIES.contains(&name)
}

fn ms(us: f64) -> f64 {
    us / 1000.0
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
    // Exact: merge the HDR histograms of every repetition (and every op for "all").
    let sets: Option<Vec<SeriesSet>> = steps
        .iter()
        .map(|s| {
            s.histograms
                .as_ref()
                .and_then(|h| SeriesSet::from_encoded(&h.series).ok())
        })
        .collect();
    let mut per_op = BTreeMap::new();
    let (all, exact) = match sets {
        Some(sets) if !sets.is_empty() => {
            let mut merged = SeriesSet::new();
            for s in &sets {
                merged.merge(s);
            }
            let mut all = iodig_stats::new_histogram();
            for (id, h) in merged.histograms() {
                let name = iodig_stats::series_name(id);
                if ALL_OPS_SERIES.contains(&name.as_str()) {
                    all.add(h).expect("histograms share bounds");
                }
                if is_primary_series(&name) {
                    per_op.insert(name, summarize(h));
                }
            }
            (summarize(&all), true)
        }
        _ => {
            // Without histograms only a single step and a single op are exact.
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
            for (name, v) in by_op {
                per_op.insert(name, weighted(&v));
            }
            (weighted(&parts), exact)
        }
    };
    Point {
        threads,
        steps: steps.iter().map(|s| s.summary.index).collect(),
        ops_per_sec: mean,
        ops_ci95,
        rep_ops,
        second_ops,
        all,
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

/// Sweeps of every workload, in the order workloads first ran.
pub fn sweeps(run: &RunData) -> Vec<WorkloadSweep> {
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
            let points: Vec<Point> = groups
                .iter()
                .filter(|((gw, _), _)| *gw == w)
                .map(|((_, t), steps)| group_point(*t, steps))
                .collect();
            let peak = (0..points.len())
                .filter(|&i| !points[i].all_failed)
                .max_by(|&a, &b| points[a].ops_per_sec.total_cmp(&points[b].ops_per_sec));
            let (bend, plateau) = find_bend(&points);
            WorkloadSweep {
                workload: w,
                points,
                peak,
                bend,
                plateau,
            }
        })
        .collect()
}

/// The bend: first step where p99 grows > [`BEND_P99_FACTOR`]× while ops/s grows <
/// [`BEND_OPS_GAIN`]; the plateau: first step where ops/s grows < [`BEND_OPS_GAIN`]. Points
/// whose operations all failed are skipped: their figures measure failures.
pub fn find_bend(points: &[Point]) -> (Option<Bend>, Option<Bend>) {
    let mut bend = None;
    let mut plateau = None;
    let usable: Vec<&Point> = points.iter().filter(|p| !p.all_failed).collect();
    for w in usable.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a.ops_per_sec <= 0.0 || a.all.p99_us == 0 {
            continue;
        }
        let gain = b.ops_per_sec / a.ops_per_sec - 1.0;
        let r = Bend {
            before: a.threads,
            at: b.threads,
            ops_gain_pct: gain * 100.0,
            p99_ratio: b.all.p99_us as f64 / a.all.p99_us as f64,
            p9999_ratio: b.all.p9999_us as f64 / a.all.p9999_us.max(1) as f64,
        };
        if gain < BEND_OPS_GAIN {
            if plateau.is_none() {
                plateau = Some(r.clone());
            }
            if bend.is_none() && r.p99_ratio > BEND_P99_FACTOR {
                bend = Some(r);
            }
        }
    }
    (bend, plateau)
}

/// Adds `value` at `x` in a map of lines keyed by x (to sum over devices).
fn add_at(m: &mut BTreeMap<u64, f64>, x: u64, v: f64) {
    *m.entry(x).or_default() += v;
}

fn max_at(m: &mut BTreeMap<u64, f64>, x: u64, v: f64) {
    let e = m.entry(x).or_insert(v);
    *e = e.max(v);
}

fn line(m: BTreeMap<u64, f64>) -> Line {
    m.into_iter().map(|(x, y)| (x as f64, y)).collect()
}

/// Per-op lines of a trace. Device seconds start at `unix_ms`; they are drawn at mid-second.
fn io_lines(trace: &TraceDoc) -> (BTreeMap<String, IoLines>, Line, Line) {
    let mut out = BTreeMap::new();
    for op in iodig_model::trace::OPS {
        if trace.op_totals(op).0 == 0 {
            continue;
        }
        let (mut mb, mut mbmax, mut iops, mut lmax, mut lp99) = (
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
            BTreeMap::new(),
        );
        for d in &trace.devices {
            for s in &d.seconds {
                let x = s.unix_ms + 500;
                let Some(o) = s.ops.get(op) else { continue };
                add_at(&mut mb, x, o.mb_s);
                // Sum of each device's busiest slot: exact for one device, an upper bound for several.
                add_at(&mut mbmax, x, o.mb_s_max);
                add_at(&mut iops, x, o.iops);
                if let Some(v) = o.lat_max_ns.or(o.await_ms.map(|a| (a * 1e6) as u64)) {
                    max_at(&mut lmax, x, v as f64 / 1e6);
                }
                if let Some(v) = o.lat_p99_ns {
                    max_at(&mut lp99, x, v as f64 / 1e6);
                }
            }
        }
        out.insert(
            op.to_string(),
            IoLines {
                mb_s: line(mb),
                mb_s_max: line(mbmax),
                iops: line(iops),
                lat_max_ms: line(lmax),
                lat_p99_ms: line(lp99),
            },
        );
    }
    let (mut qm, mut qx) = (BTreeMap::new(), BTreeMap::new());
    for d in &trace.devices {
        for s in &d.seconds {
            if let Some(q) = s.qd_mean {
                add_at(&mut qm, s.unix_ms + 500, q);
            }
            if let Some(q) = s.qd_max {
                add_at(&mut qx, s.unix_ms + 500, q as f64);
            }
        }
    }
    (out, line(qm), line(qx))
}

/// Groups sizes into power-of-two bins by their upper bound (4 KiB, 8 KiB, …).
pub fn pow2_bin(upper: u64) -> u64 {
    upper.max(1).next_power_of_two()
}

fn size_hists(trace: &TraceDoc) -> Vec<SizeHist> {
    let mut out = Vec::new();
    for op in iodig_model::trace::OPS {
        let by_count = trace.size_hist(op);
        let by_bytes: Vec<Bucket> = merge_buckets(
            trace
                .devices
                .iter()
                .filter_map(|d| d.ops.get(op))
                .map(|o| o.size_bytes_hist.as_slice()),
        );
        let pct = |h: &[Bucket]| {
            let total: u64 = h.iter().map(|b| b.count).sum();
            let mut m = BTreeMap::new();
            for b in h {
                *m.entry(pow2_bin(b.upper)).or_insert(0.0) +=
                    100.0 * b.count as f64 / total.max(1) as f64;
            }
            m
        };
        if by_count.iter().any(|b| b.count > 0) {
            out.push(SizeHist {
                op: op.to_string(),
                by_count_pct: pct(&by_count),
                by_bytes_pct: pct(&by_bytes),
            });
        }
    }
    out
}

/// The blog's summary table rows.
pub fn io_rows(trace: &TraceDoc) -> Vec<IoRow> {
    trace
        .op_mix()
        .into_iter()
        .map(|m| IoRow {
            band: trace
                .dominant_band(&m.op)
                .map(|b| b.label)
                .unwrap_or_else(|| "–".into()),
            gb: m.bytes as f64 / 1e9,
            pct_ios: m.pct_ios,
            pct_bytes: m.pct_bytes,
            ios: m.ios,
            bytes: m.bytes,
            op: m.op,
        })
        .collect()
}

/// "5.6 GB/s" or "136 MB/s" (decimal, as iostat and the briefs print them).
pub fn rate(mb_s: f64) -> String {
    if mb_s >= 1000.0 {
        format!("{:.1} GB/s", mb_s / 1000.0)
    } else if mb_s >= 10.0 {
        format!("{mb_s:.0} MB/s")
    } else {
        format!("{mb_s:.2} MB/s")
    }
}

/// Latency in ms with sensible digits.
pub fn lat_ms(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

/// `interval` of a sample overlaps one of `events` (of `kind`).
fn overlaps(events: &[DbEvent], kind: &str, a: u64, b: u64, step_end: u64) -> bool {
    events
        .iter()
        .any(|e| e.kind == kind && e.start_unix_ms < b && e.end_unix_ms.unwrap_or(step_end) > a)
}

fn step_findings(step: &StepData, v: &StepView) -> Vec<String> {
    let mut f = Vec::new();
    let end = step.end_unix_ms();
    if let Some(trace) = &step.trace {
        // Bursts: the busiest slot against the mean over the traced window.
        let secs = (trace.end_unix_ms.saturating_sub(trace.start_unix_ms)) as f64 / 1000.0;
        for op in ["write", "read", "discard"] {
            let (_, bytes) = trace.op_totals(op);
            let Some(l) = v.io.get(op) else { continue };
            if secs <= 0.0 || bytes == 0 {
                continue;
            }
            let mean = bytes as f64 / 1e6 / secs;
            let Some(&(_, peak)) = l.mb_s_max.iter().max_by(|a, b| a.1.total_cmp(&b.1)) else {
                continue;
            };
            let ratio = peak / mean;
            // Tiny rates make big ratios that mean nothing: a burst must reach 10 MB/s.
            if ratio >= 5.0 && peak >= 10.0 {
                let mut s = format!(
                    "{} bursts reach {ratio:.0}× the mean {op} throughput ({} vs {})",
                    capitalise(op),
                    rate(peak),
                    rate(mean)
                );
                if !step.events.is_empty() {
                    let burst: Vec<f64> = l
                        .mb_s_max
                        .iter()
                        .filter(|p| p.1 >= 0.5 * peak)
                        .map(|p| p.0)
                        .collect();
                    let inside = burst
                        .iter()
                        .filter(|x| {
                            let a = **x as u64 - 500;
                            overlaps(&step.events, "flush", a, a + 1000, end)
                                || overlaps(&step.events, "compaction", a, a + 1000, end)
                        })
                        .count();
                    if inside == burst.len() {
                        s.push_str(", all inside flushes or compactions");
                    } else {
                        s.push_str(&format!(
                            ", {inside} of {} burst seconds inside flushes or compactions",
                            burst.len()
                        ));
                    }
                }
                f.push(s + ".");
            }
        }
        // Queue depth: the peak against the mean, on the device with the highest peak.
        let busiest = trace
            .devices
            .iter()
            .filter_map(|d| {
                let means: Vec<f64> = d.seconds.iter().filter_map(|s| s.qd_mean).collect();
                let max = d.seconds.iter().filter_map(|s| s.qd_max).max()?;
                (!means.is_empty())
                    .then(|| (d, max, means.iter().sum::<f64>() / means.len() as f64))
            })
            .max_by_key(|x| x.1);
        if let Some((d, max, mean)) = busiest {
            if max >= 8 && max as f64 >= 4.0 * mean {
                let of = if trace.devices.len() > 1 {
                    format!(" (busiest of {} devices)", trace.devices.len())
                } else {
                    String::new()
                };
                f.push(format!(
                    "Queue depth on {}{of} peaks at {max} against a mean of {mean:.1}.",
                    d.name
                ));
            }
        }
        // Device latency outliers against the op's own p99.
        for op in ["read", "write"] {
            let p99 = trace
                .devices
                .iter()
                .filter_map(|d| d.ops.get(op)?.latency.get("device").map(|l| l.p99_ns))
                .max()
                .unwrap_or(0);
            let max = trace
                .devices
                .iter()
                .filter_map(|d| d.ops.get(op)?.latency.get("device").map(|l| l.max_ns))
                .max()
                .unwrap_or(0);
            if p99 > 0 && max >= 1_000_000 && max >= 10 * p99 {
                f.push(format!(
                    "Device {op} latency peaks at {} while its p99 is {} ({:.0}×).",
                    lat_ms(max as f64 / 1e6),
                    lat_ms(p99 as f64 / 1e6),
                    max as f64 / p99 as f64
                ));
            }
        }
    }
    // Client latency while the database flushes or compacts.
    for (kind, what) in [
        ("flush", "a flush runs"),
        ("compaction", "a compaction runs"),
    ] {
        if !step.events.iter().any(|e| e.kind == kind) {
            continue;
        }
        for (series, _) in v.lat_p99_ms.iter() {
            let (mut inside, mut outside) = (Vec::new(), Vec::new());
            for s in &step.timeseries {
                let Some(sum) = s.series.get(series) else {
                    continue;
                };
                if sum.count == 0 {
                    continue;
                }
                let b = s.unix_ms;
                let a = b.saturating_sub((s.secs * 1000.0) as u64);
                let v = sum.p99_us as f64 / 1000.0;
                if overlaps(&step.events, kind, a, b, end) {
                    inside.push(v);
                } else {
                    outside.push(v);
                }
            }
            if inside.len() >= 3 && outside.len() >= 3 {
                let mi = inside.iter().sum::<f64>() / inside.len() as f64;
                let mo = outside.iter().sum::<f64>() / outside.len() as f64;
                if mo > 0.0 && mi / mo >= 1.5 {
                    f.push(format!(
                        "P99 {} latency is {:.1}× higher while {what} ({} vs {}, means of per-second p99 over {} and {} s).",
                        series.to_lowercase(),
                        mi / mo,
                        lat_ms(mi),
                        lat_ms(mo),
                        inside.len(),
                        outside.len()
                    ));
                }
            }
        }
    }
    if let Some(sys) = &step.sys {
        let s = sys.summary();
        if s.cpu_iowait_pct.mean >= 5.0 {
            f.push(format!(
                "CPU iowait averages {:.0}% (max {:.0}%): threads wait on the device.",
                s.cpu_iowait_pct.mean, s.cpu_iowait_pct.max
            ));
        }
        if s.cpu_busy_pct.mean >= 90.0 {
            f.push(format!(
                "CPUs are {:.0}% busy on average: the client or the database is CPU-bound.",
                s.cpu_busy_pct.mean
            ));
        }
    }
    f
}

fn sweep_findings(s: &WorkloadSweep) -> Vec<String> {
    let mut f = Vec::new();
    if let Some(p) = s.peak_point() {
        if s.usable_points().count() > 1 {
            f.push(format!(
                "{}: peak throughput is {} ops/s at {} threads (p99 {}, p99.99 {}).",
                s.workload,
                crate::doc::thousands(p.ops_per_sec),
                p.threads,
                lat_ms(ms(p.all.p99_us as f64)),
                lat_ms(ms(p.all.p9999_us as f64))
            ));
        }
    }
    if let Some(p) = &s.plateau {
        if p.p9999_ratio >= 1.5 {
            f.push(format!(
                "{}: throughput stops growing after {} threads ({:+.0}% at {}) while p99.99 grows {:.1}×.",
                s.workload, p.before, p.ops_gain_pct, p.at, p.p9999_ratio
            ));
        }
    }
    if let Some(b) = &s.bend {
        f.push(format!(
            "{}: latency bends at {} threads: p99 grows {:.1}× for {:+.0}% ops/s.",
            s.workload, b.at, b.p99_ratio, b.ops_gain_pct
        ));
    }
    f
}

fn step_view(step: &StepData) -> StepView {
    let sum = &step.summary;
    let mut lat_p99 = BTreeMap::new();
    let mut lat_mean = BTreeMap::new();
    let mut ops = Vec::with_capacity(step.timeseries.len());
    for s in &step.timeseries {
        // Client samples end at unix_ms; draw them at the middle of their interval.
        let x = s.unix_ms as f64 - s.secs * 500.0;
        ops.push((x, s.ops_per_sec));
        for (name, v) in &s.series {
            if is_primary_series(name) && v.count > 0 {
                lat_p99
                    .entry(name.clone())
                    .or_insert_with(Vec::new)
                    .push((x, v.p99_us as f64 / 1000.0));
                lat_mean
                    .entry(name.clone())
                    .or_insert_with(Vec::new)
                    .push((x, v.mean_us / 1000.0));
            }
        }
    }
    let (io, qd_mean, qd_max) = step.trace.as_ref().map(io_lines).unwrap_or_default();
    let (mut busy, mut iowait, mut dirty, mut wb) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    if let Some(sys) = &step.sys {
        for s in &sys.samples {
            let x = s.unix_ms as f64 - s.secs * 500.0;
            busy.push((x, s.cpu.busy()));
            iowait.push((x, s.cpu.iowait));
            dirty.push((x, s.mem.dirty_bytes as f64 / 1e6));
            wb.push((x, s.mem.writeback_bytes as f64 / 1e6));
        }
    }
    let (trace_mode, trace_note) = match (&step.trace, &sum.trace_mode) {
        (Some(t), _) => (t.mode.clone(), t.note.clone().or(sum.trace_note.clone())),
        (None, Some(m)) => (m.clone(), sum.trace_note.clone()),
        (None, None) => ("off".into(), sum.trace_note.clone()),
    };
    let outcome = Outcome::of(sum);
    let mut v = StepView {
        index: sum.index,
        title: step.title(),
        label: step.label(),
        phase: sum.phase.clone(),
        workload: sum.workload.clone(),
        threads: sum.threads,
        target_ops_per_sec: sum.target_ops_per_sec,
        operations: sum.operations,
        throughput_ops_per_sec: sum.throughput_ops_per_sec,
        interrupted: sum.interrupted,
        warnings: outcome.findings(sum.operations),
        outcome,
        start_ms: sum.started_unix_ms as f64,
        end_ms: step.end_unix_ms() as f64,
        ops_per_sec: ops,
        lat_p99_ms: lat_p99,
        lat_mean_ms: lat_mean,
        io,
        qd_mean,
        qd_max,
        cpu_busy: busy,
        cpu_iowait: iowait,
        dirty_mb: dirty,
        writeback_mb: wb,
        events: step.events.clone(),
        io_rows: step.trace.as_ref().map(io_rows).unwrap_or_default(),
        size_hists: step
            .trace
            .as_ref()
            .filter(|t| t.histograms)
            .map(size_hists)
            .unwrap_or_default(),
        trace_mode,
        trace_note,
        findings: Vec::new(),
    };
    v.findings = step_findings(step, &v);
    v
}

/// Computes the report of a run.
pub fn analyse(run: &RunData) -> Report {
    let sweeps = sweeps(run);
    let steps: Vec<StepView> = run.steps.iter().map(step_view).collect();
    // Failed operations come first whatever the run's length: every other figure of such a
    // step misleads.
    let mut findings: Vec<String> = steps
        .iter()
        .flat_map(|s| s.warnings.iter().map(|f| step_sentence(s, f)))
        .collect();
    findings.extend(sweeps.iter().flat_map(sweep_findings));
    // With a long sweep the per-step findings stay in their sections; a short run (the blog's
    // single traced step) lists them up front.
    for s in steps.iter().filter(|_| run.steps.len() <= 3) {
        findings.extend(s.findings.iter().map(|f| step_sentence(s, f)));
    }
    let mut notes = run.doc.notes.clone();
    if sweeps.iter().flat_map(|s| &s.points).any(|p| !p.exact) {
        notes.push(
            "Some latency figures combine steps or ops without histograms.json: their percentiles are count-weighted means, not exact merges."
                .into(),
        );
    }
    for s in &run.steps {
        if let Some(t) = &s.trace {
            if t.self_check.lost_events > 0 {
                notes.push(format!(
                    "{}: the tracer lost {} raw events (ring buffer full); totals are unaffected.",
                    capitalise(&s.label()),
                    t.self_check.lost_events
                ));
            }
        }
    }
    Report {
        run_name: run.name(),
        sweeps,
        steps,
        findings,
        notes,
    }
}

/// "Step 3 (workloada × 8 threads): …", "Load (workloadb × 4 threads): …".
fn step_sentence(s: &StepView, sentence: &str) -> String {
    format!("{}: {sentence}", capitalise(&s.label))
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
