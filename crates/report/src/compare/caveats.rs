//! What makes the runs unlike, said before any ratio: database, target rate, workloads,
//! dataset, step length, warm-up and other workload properties, runs that did not complete,
//! interrupted or all-failed steps, runs not storage-bound, and thread counts a later run lacks.
//! Where the data or nodes live and the database's settings are not caveats: they are the
//! configuration compared (see the `config` module).

use super::config::{is_location, is_setting, step_secs};
use super::Runs;
use crate::analysis::story::database_storage_bound;
use crate::analysis::LatencyOp;
use crate::data::RunData;
use crate::doc::{distinct, target_rate, Doc};
use crate::outcome::Outcome;

/// The caveats section ("the runs agree…" when there is none), `first` (the latency compared,
/// when it is not the one asked for) leading; returns the caveats.
pub(super) fn section(doc: &mut Doc, runs: &Runs, first: Option<&str>) -> Vec<String> {
    let mut c: Vec<String> = first.map(String::from).into_iter().collect();
    c.extend(run_differences(runs.runs));
    c.extend(latency_differences(runs));
    c.extend(runs.runs.iter().flat_map(step_problems));
    c.extend(runs.runs.iter().filter_map(not_storage_bound));
    c.extend(missing_points(runs));
    doc.h(2, "Caveats");
    if c.is_empty() {
        doc.p("The runs agree on database, target rate, workloads, dataset, workload properties, step length and warm-up; every step completed with successful operations, and no run's reads were mostly served from memory. How their configurations differ is under Configuration.");
    } else {
        doc.list(c.clone());
    }
    c
}

/// The dataset's properties: another value loads other data.
const DATASET_KEYS: [&str; 12] = iodig_model::props::DATASET_PROPERTIES;
/// Properties said elsewhere (target, database) or meant to vary (threads, seed).
const IGNORED_KEYS: [&str; 4] = ["target", "threadcount", "db", "seed"];
/// Properties that set how long a step runs (`--duration` sets `maxexecutiontime`).
const LENGTH_KEYS: [&str; 2] = ["maxexecutiontime", "operationcount"];

/// "5000 in a, 20000 in b" when the runs do not all agree on `value`.
fn differing(runs: &[RunData], value: impl Fn(&RunData) -> String) -> Option<String> {
    let values: Vec<String> = runs.iter().map(value).collect();
    if values.iter().all(|v| *v == values[0]) {
        return None;
    }
    Some(
        runs.iter()
            .zip(&values)
            .map(|(r, v)| format!("{v} in {}", r.name()))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// "recordcount 5000 in a, 20000 in b" for each of `keys` the runs disagree on.
fn property_differences<'a>(
    runs: &[RunData],
    keys: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    keys.into_iter()
        .filter_map(|k| {
            differing(runs, |r| {
                r.doc
                    .config
                    .properties
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| "unset".into())
            })
            .map(|d| format!("{k} {d}"))
        })
        .collect()
}

/// The target rate(s) the run's measured steps ran at.
pub(super) fn run_targets(r: &RunData) -> String {
    let t = distinct(
        r.run_steps()
            .map(|s| target_rate(s.summary.target_ops_per_sec)),
    );
    if t.is_empty() {
        target_rate(r.doc.config.target_ops_per_sec)
    } else {
        t.join(", ")
    }
}

/// How the runs' configurations differ (database, target, workloads, properties).
pub(super) fn run_differences(runs: &[RunData]) -> Vec<String> {
    let mut c = Vec::new();
    if let Some(d) = differing(runs, |r| r.doc.config.db.clone()) {
        c.push(format!("Databases differ: {d}."));
    }
    if let Some(d) = differing(runs, run_targets) {
        c.push(format!(
            "Target rates differ: {d}. A target caps ops/s, so ratios against another rate do not compare capacity; thread counts whose targets differ are not checked for regressions."
        ));
    }
    if let Some(d) = differing(runs, |r| {
        distinct(r.run_steps().map(|s| s.summary.workload.as_str())).join(" + ")
    }) {
        c.push(format!(
            "Workloads differ: {d}; only the baseline's workloads are compared."
        ));
    }
    if let Some(d) = differing(runs, |r| match &r.doc.cluster {
        Some(c) if !c.nodes.is_empty() => format!("{} nodes", c.nodes.len()),
        Some(c) if !c.observed.is_empty() => format!("{} observed nodes", c.observed.len()),
        _ => "1 node".into(),
    }) {
        c.push(format!(
            "Node counts differ: {d}. More nodes share the load and the data: the ratios compare clusters of different sizes, not only what the configuration table shows differing."
        ));
    }
    let dataset = property_differences(runs, DATASET_KEYS);
    if !dataset.is_empty() {
        c.push(format!(
            "Dataset properties differ: {}. Another dataset changes what is cached and what reaches the device: the ratios compare different data.",
            dataset.join("; ")
        ));
    }
    if let Some(d) = differing(runs, |r| format!("{} s", r.doc.config.warmup_secs)) {
        c.push(format!(
            "Warm-ups differ: {d}. A shorter warm-up measures more of the caches filling: the ratios compare different work."
        ));
    }
    let mut length = property_differences(runs, LENGTH_KEYS);
    let secs: Vec<Option<f64>> = runs.iter().map(step_secs).collect();
    let known: Vec<f64> = secs.iter().flatten().copied().collect();
    let (lo, hi) = known.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), s| {
        (lo.min(*s), hi.max(*s))
    });
    // Measured lengths wander by milliseconds; a tenth apart is another duration.
    if known.len() > 1 && hi > lo * 1.1 {
        let list: Vec<String> = runs
            .iter()
            .zip(&secs)
            .filter_map(|(r, s)| s.map(|s| format!("{s:.1} s in {}", r.name())))
            .collect();
        length.insert(0, format!("measured {}", list.join(", ")));
    }
    if !length.is_empty() {
        c.push(format!(
            "Step lengths differ: {}. A longer step reaches more compactions, flushes and cache turnover: the ratios compare different work.",
            length.join("; ")
        ));
    }
    // Where the data and nodes live and how the database is set up are the configuration being
    // compared (the Configuration table shows them); only what changes the work asked for is a
    // caveat here.
    let said: Vec<&str> = DATASET_KEYS
        .iter()
        .chain(&IGNORED_KEYS)
        .chain(&LENGTH_KEYS)
        .copied()
        .collect();
    let others = distinct(
        runs.iter()
            .flat_map(|r| r.doc.config.properties.keys())
            .map(String::as_str)
            .filter(|k| !said.contains(k) && !is_location(k) && !is_setting(k)),
    );
    let others = property_differences(runs, others);
    if !others.is_empty() {
        c.push(format!(
            "Workload and other properties differ: {}. The op mix, key choice or settings differ: the ratios compare different work.",
            others.join("; ")
        ));
    }
    c
}

/// Steps whose reads were mostly served from memory (under 0.1 device reads per database
/// read over 1,000 or more reads): there a comparison of devices measures the caches. Where
/// the database runs on observed nodes, their devices' reads count, not the client host's.
fn not_storage_bound(r: &RunData) -> Option<String> {
    let steps: Vec<(String, f64)> = r
        .run_steps()
        .filter_map(|s| database_storage_bound(r, s).map(|b| (s, b)))
        .filter(|(_, b)| b.served_from_memory())
        .map(|(s, b)| (s.label(), b.ratio()))
        .collect();
    if steps.is_empty() {
        return None;
    }
    let list: Vec<String> = steps
        .iter()
        .map(|(l, ratio)| format!("{l}: {ratio:.3}"))
        .collect();
    Some(format!(
        "{}: not storage-bound (device reads per database read: {}): its reads were mostly served from memory, so its ratios there compare caches more than storage.",
        r.name(),
        list.join(", ")
    ))
}

/// A run that did not complete, and its steps whose figures are partial (interrupted) or
/// measure failures (no operation succeeded).
fn step_problems(r: &RunData) -> Vec<String> {
    let mut c = Vec::new();
    if r.doc.status != "completed" {
        c.push(match &r.state {
            Some(state) => format!(
                "{}: {state} Steps it did not run are missing from the comparison.",
                r.name()
            ),
            None => format!(
                "{} ended {} (not completed): steps it did not run are missing from the comparison.",
                r.name(),
                r.doc.status
            ),
        });
    }
    let interrupted: Vec<String> = r
        .steps
        .iter()
        .filter(|s| s.summary.interrupted)
        .map(super::super::data::StepData::label)
        .collect();
    if !interrupted.is_empty() {
        c.push(format!(
            "{}: {} ended early (interrupted): its figures cover part of the step; marked in the tables and not checked for regressions.",
            r.name(),
            interrupted.join(", ")
        ));
    }
    let failed: Vec<(String, Outcome)> = r
        .steps
        .iter()
        .map(|s| (s.label(), Outcome::of(&s.summary)))
        .filter(|(_, o)| o.all_failed())
        .collect();
    if !failed.is_empty() {
        c.push(format!(
            "{}: no operation of {} succeeded ({}): left out of the ratios and peaks.",
            r.name(),
            failed
                .iter()
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            Outcome::merged(failed.iter().map(|(_, o)| o)).failure_list()
        ));
    }
    c
}

/// A workload whose runs' sweeps fell back to different latencies (one measured the op compared,
/// another did not).
fn latency_differences(runs: &Runs) -> Vec<String> {
    let mut c = Vec::new();
    for w in runs.base_sweeps() {
        let ops: Vec<(String, &LatencyOp)> = runs
            .runs
            .iter()
            .enumerate()
            .filter_map(|(ri, r)| runs.sweep(ri, &w.workload).map(|o| (r.name(), &o.op)))
            .collect();
        if ops.iter().any(|(_, op)| **op != w.op) {
            let list: Vec<String> = ops
                .iter()
                .map(|(name, op)| format!("{} in {name}", op.words()))
                .collect();
            c.push(format!(
                "{}: the runs' latencies are not of the same ops ({}): its latency ratios compare different operations.",
                w.workload,
                list.join(", ")
            ));
        }
    }
    c
}

/// Thread counts of the baseline's workloads that some run did not test (another run did, or
/// the stop rule left them out), with the rule's reason where it fired.
fn missing_points(runs: &Runs) -> Vec<String> {
    let mut c = Vec::new();
    for w in runs.base_sweeps() {
        let union = runs.thread_union(&w.workload);
        for (ri, r) in runs.runs.iter().enumerate() {
            let Some(o) = runs.sweep(ri, &w.workload) else {
                continue;
            };
            let missing: Vec<u64> = union
                .iter()
                .copied()
                .filter(|&t| o.at(t).is_none())
                .collect();
            if missing.is_empty() {
                continue;
            }
            let list = missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let why = distinct(
                missing
                    .iter()
                    .filter_map(|&t| o.not_tested_at(t))
                    .map(|n| n.why.clone()),
            );
            let why = if why.is_empty() {
                String::new()
            } else {
                format!(" (its sweep {})", why.join("; "))
            };
            c.push(format!(
                "{} did not test {} at {list} threads{why}, which another run did or planned: \"(not tested)\" in the tables, no ratio there.",
                r.name(),
                w.workload,
            ));
        }
    }
    c
}
