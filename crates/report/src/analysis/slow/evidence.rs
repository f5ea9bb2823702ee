//! What each place measured in each second of a step: its samples (run-queue wait, CPU
//! pressure), its trace's devices and activity classes, its JVMs' pauses and its database's
//! stalls, and each figure's typical second there.

use crate::data::StepData;
use std::collections::BTreeMap;

/// What one place measured in one second, from its files (all optional: a place without a
/// trace has no device figures).
#[derive(Debug, Clone, Default)]
pub(super) struct Second {
    /// Stop-the-world time of the place's JVMs in the second (safepoints), ms; none where no
    /// JVM was probed. The longest pause touching it, ms, and whether a collection (full or
    /// not) was among them.
    pub(super) jvm_pause_ms: Option<f64>,
    pub(super) jvm_longest_ms: f64,
    pub(super) jvm_gc: Option<bool>,
    /// The pause time came from the database's log (Cassandra's GCInspector: collections over
    /// its threshold only), not from HotSpot's probes.
    pub(super) jvm_from_log: bool,
    /// The database's own write stalls logged in the second (RocksDB's words).
    pub(super) stalls: Vec<String>,
    /// A watched process that exited or started again under a new pid in the second.
    pub(super) restarts: Vec<String>,
    /// CPU of each watched database process (every one but iodig), percent of one CPU: near
    /// 0 in a second where it is typically busy, the process stood still.
    pub(super) proc_cpu_pct: BTreeMap<String, f64>,
    /// Run-queue wait of the watched processes' threads, ms, and the longest thread's.
    pub(super) run_queue_ms: Option<f64>,
    pub(super) run_queue_max_thread_ms: f64,
    /// Host-wide CPU busy percent and CPU pressure stall (ms).
    pub(super) cpu_busy_pct: Option<f64>,
    pub(super) cpu_pressure_ms: Option<f64>,
    /// The worst traced device's figures: deepest queue, device p99, OS-queue p99 (ms).
    pub(super) qd_max: Option<f64>,
    pub(super) device_p99_ms: Option<f64>,
    pub(super) queue_p99_ms: Option<f64>,
    pub(super) worst_device: String,
    /// Bytes by activity class, and by other process (`name (pid N)`), on the traced devices.
    pub(super) class_bytes: BTreeMap<String, u64>,
    pub(super) other_bytes: BTreeMap<String, u64>,
    pub(super) total_bytes: u64,
}

/// One place's seconds, keyed by the second's start in whole unix seconds.
pub(super) struct PlaceSeconds {
    pub(super) name: String,
    /// The client host while the database runs elsewhere: no IO evidence of its own disks.
    pub(super) client_only: bool,
    /// The database node whose machine (kernel) the client host is, when it is one's.
    pub(super) beside: Option<String>,
    pub(super) seconds: BTreeMap<i64, Second>,
    /// Each figure's typical (median) second in the step.
    pub(super) typical: Typical,
    /// Whose run-queue wait is measured (`iodig`, `node 127.0.0.2:9042`).
    pub(super) watched: String,
    /// Each watched database process's typical (median) CPU percent in the step.
    pub(super) typical_cpu: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Typical {
    pub(super) jvm_pause_ms: f64,
    pub(super) run_queue_ms: f64,
    pub(super) qd_max: f64,
    pub(super) device_p99_ms: f64,
    pub(super) queue_p99_ms: f64,
    pub(super) other_bytes: f64,
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The whole second a sample ending at `end_ms` after `secs` seconds covers, by its start.
pub(super) fn second_of_interval(end_ms: u64, secs: f64) -> i64 {
    let start = end_ms as f64 - secs * 1000.0;
    (start / 1000.0).round() as i64
}

/// The whole second a series point stamped with its second's start lies in.
pub(super) fn second_of_start(start_ms: u64) -> i64 {
    (start_ms as f64 / 1000.0).round() as i64
}

pub(super) fn place_seconds(step: &StepData, role: &super::Role) -> PlaceSeconds {
    let mut seconds: BTreeMap<i64, Second> = BTreeMap::new();
    let mut watched = Vec::new();
    if let Some(sys) = &step.sys {
        watched = sys.processes.iter().map(|p| p.label.clone()).collect();
        for p in &sys.processes {
            // Noticed by the sample that ended at `ms`: it happened in that sample's second.
            let at = |ms: u64| second_of_interval(ms, 1.0);
            if let Some(ms) = p.exited_unix_ms {
                let e = seconds.entry(at(ms)).or_default();
                e.restarts
                    .push(format!("{} (pid {}) exited", p.label, p.pid));
            }
            for r in &p.restarts {
                let e = seconds.entry(at(r.unix_ms)).or_default();
                e.restarts
                    .push(format!("{} runs again as pid {}", p.label, r.pid));
            }
        }
        for s in &sys.samples {
            if s.secs < 0.5 {
                continue;
            }
            let e = seconds
                .entry(second_of_interval(s.unix_ms, s.secs))
                .or_default();
            e.cpu_busy_pct = Some(s.cpu.busy());
            e.cpu_pressure_ms = s.pressure.map(|p| p.cpu_some_ms);
            for p in s.procs.iter().filter(|p| p.label != "iodig") {
                if let Some(st) = &p.stats {
                    e.proc_cpu_pct.insert(p.label.clone(), st.cpu_pct());
                }
            }
            let waits: Vec<_> = s
                .procs
                .iter()
                .filter_map(|p| p.stats.as_ref()?.run_queue)
                .collect();
            if !waits.is_empty() {
                e.run_queue_ms = Some(waits.iter().map(|w| w.wait_ms).sum());
                e.run_queue_max_thread_ms =
                    waits.iter().map(|w| w.max_thread_ms).fold(0.0, f64::max);
            }
        }
    }
    if let Some(t) = &step.trace {
        for d in &t.devices {
            for s in &d.seconds {
                let e = seconds.entry(second_of_start(s.unix_ms)).or_default();
                let ms = |ns: Option<u64>| ns.map(|n| n as f64 / 1e6);
                let dev = s
                    .ops
                    .values()
                    .filter_map(|o| ms(o.lat_p99_ns))
                    .fold(None, max_opt);
                let queue = s
                    .ops
                    .values()
                    .filter_map(|o| ms(o.queue_p99_ns))
                    .fold(None, max_opt);
                if dev.is_some_and(|d| e.device_p99_ms.is_none_or(|w| d > w)) {
                    e.worst_device = d.name.clone();
                }
                e.device_p99_ms = max_opt(e.device_p99_ms, dev);
                e.queue_p99_ms = max_opt(e.queue_p99_ms, queue);
                e.qd_max = max_opt(e.qd_max, s.qd_max.map(|q| q as f64));
                e.total_bytes += s.ops.values().map(|o| o.bytes).sum::<u64>();
            }
        }
        if let Some(a) = &t.self_check.attribution {
            for r in &a.rows {
                for s in &r.seconds {
                    let e = seconds.entry(second_of_start(s.unix_ms)).or_default();
                    *e.class_bytes.entry(r.class.clone()).or_default() += s.bytes;
                    if r.class == "other" {
                        let who = format!("{} (pid {})", r.process, r.pid);
                        *e.other_bytes.entry(who).or_default() += s.bytes;
                    }
                }
            }
        }
    }
    jvm_seconds(step, &mut seconds);
    for e in step.events.iter().filter(|e| e.kind == "stall") {
        let k = (e.start_unix_ms / 1000) as i64;
        seconds.entry(k).or_default().stalls.push(e.detail.clone());
    }
    let typical = {
        let all =
            |f: &dyn Fn(&Second) -> Option<f64>| median(seconds.values().filter_map(f).collect());
        Typical {
            jvm_pause_ms: all(&|s| s.jvm_pause_ms),
            run_queue_ms: all(&|s| s.run_queue_ms),
            qd_max: all(&|s| s.qd_max),
            device_p99_ms: all(&|s| s.device_p99_ms),
            queue_p99_ms: all(&|s| s.queue_p99_ms),
            other_bytes: all(&|s| Some(s.other_bytes.values().sum::<u64>() as f64)),
        }
    };
    let mut labels: Vec<&String> = seconds
        .values()
        .flat_map(|s| s.proc_cpu_pct.keys())
        .collect();
    labels.sort();
    labels.dedup();
    let typical_cpu: BTreeMap<String, f64> = labels
        .into_iter()
        .map(|l| {
            let v = median(
                seconds
                    .values()
                    .filter_map(|s| s.proc_cpu_pct.get(l).copied())
                    .collect(),
            );
            (l.clone(), v)
        })
        .collect();
    PlaceSeconds {
        typical_cpu,
        name: step.place.name(),
        client_only: *role != super::Role::Database,
        beside: match role {
            super::Role::ClientBeside(node) => Some(node.clone()),
            _ => None,
        },
        seconds,
        typical,
        watched: watched.join(", "),
    }
}

/// Each probed JVM's stop-the-world time spread over the seconds it covers: the watched
/// window's seconds at 0 ms first, so a quiet JVM counts as looked at. Only the step's own
/// seconds are looked at, whatever a file says of its window or of a pause's length.
pub(super) fn jvm_seconds(step: &StepData, seconds: &mut BTreeMap<i64, Second>) {
    let probed = step
        .jvm_pauses
        .as_ref()
        .is_some_and(|d| d.processes.iter().any(|p| p.probed));
    if !probed {
        return logged_gc_seconds(step, seconds);
    }
    let Some(doc) = &step.jvm_pauses else {
        return;
    };
    // A week of seconds at most: a run directory that claims more is not read second by
    // second here.
    let step_from = step.summary.started_unix_ms / 1000;
    let step_to = (step
        .summary
        .started_unix_ms
        .saturating_add(step.summary.runtime_ms))
    .div_ceil(1000)
    .min(step_from.saturating_add(7 * 86_400));
    for p in doc.processes.iter().filter(|p| p.probed) {
        let from = (p.started_unix_ms / 1000).max(step_from);
        let to = p.ended_unix_ms.div_ceil(1000).min(step_to);
        for k in from..to {
            let e = seconds.entry(k as i64).or_default();
            e.jvm_pause_ms.get_or_insert(0.0);
        }
        for pause in &p.pauses {
            let (a, b) = (pause.start_unix_us, pause.end_unix_us());
            let ms = pause.duration_us as f64 / 1000.0;
            let first = (a / 1_000_000).max(step_from);
            let last = (b / 1_000_000).min(step_to);
            for k in first..=last {
                let e = seconds.entry(k as i64).or_default();
                if pause.kind == "gc" {
                    e.jvm_gc = Some(e.jvm_gc.unwrap_or(false) || pause.full == Some(true));
                    continue;
                }
                let lo = a.max(k.saturating_mul(1_000_000));
                let hi = b.min(k.saturating_add(1).saturating_mul(1_000_000));
                *e.jvm_pause_ms.get_or_insert(0.0) += hi.saturating_sub(lo) as f64 / 1000.0;
                e.jvm_longest_ms = e.jvm_longest_ms.max(ms);
            }
        }
    }
}

/// Where no JVM was probed, the collections the database logged (Cassandra's GCInspector
/// lines): every second of the step looked at once one is logged, since the log would have
/// shown another (over its threshold) too.
fn logged_gc_seconds(step: &StepData, seconds: &mut BTreeMap<i64, Second>) {
    let gcs: Vec<_> = step.events.iter().filter(|e| e.kind == "gc").collect();
    if gcs.is_empty() {
        return;
    }
    let step_from = step.summary.started_unix_ms;
    let step_to = step_from.saturating_add(step.summary.runtime_ms.min(7 * 86_400_000));
    for k in step_from / 1000..step_to.div_ceil(1000) {
        let e = seconds.entry(k as i64).or_default();
        e.jvm_pause_ms.get_or_insert(0.0);
        e.jvm_from_log = true;
    }
    for gc in gcs {
        let (a, b) = (
            gc.start_unix_ms.max(step_from),
            gc.end_unix_ms.unwrap_or(gc.start_unix_ms).min(step_to),
        );
        let ms = gc
            .end_unix_ms
            .unwrap_or(gc.start_unix_ms)
            .saturating_sub(gc.start_unix_ms) as f64;
        for k in a / 1000..=b / 1000 {
            let lo = a.max(k * 1000);
            let hi = b.min((k + 1) * 1000);
            if hi <= lo && a != b {
                continue;
            }
            let e = seconds.entry(k as i64).or_default();
            *e.jvm_pause_ms.get_or_insert(0.0) += hi.saturating_sub(lo) as f64;
            e.jvm_longest_ms = e.jvm_longest_ms.max(ms);
            e.jvm_gc = Some(e.jvm_gc.unwrap_or(false));
            e.jvm_from_log = true;
        }
    }
}

pub(super) fn max_opt(a: Option<f64>, b: impl Into<Option<f64>>) -> Option<f64> {
    match (a, b.into()) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}
