//! Why the slowest seconds were slow: each step's seconds whose client p99 stands out, each set
//! against what every place measured in that second (the database's threads waiting for a CPU,
//! the device's queue and time, the OS queue, other processes' IO, iodig's own faults, and the
//! client host itself when the database runs elsewhere), with the most likely cause named.
//!
//! The rule (docs/report.md, "Why the slowest seconds were slow") judges each piece of evidence
//! against the same place's own typical second in the step, never against a fixed level alone,
//! and names a cause only when its evidence stands out; otherwise the second is `unexplained`,
//! with what was looked at. It reads only the run directory's files, like every analysis.

use crate::data::StepData;
use std::collections::BTreeMap;

/// A second is far above its step when its p99 is at least this many times the step's typical
/// (median) second's p99 for the op…
pub const FAR_ABOVE: f64 = 3.0;
/// …and at least this much higher, in ms, so a 40 µs → 130 µs wobble is no story.
pub const FAR_ABOVE_MIN_MS: f64 = 1.0;
/// The highest seconds of each op, listed whether or not they are far above…
pub const TOP_PER_OP: usize = 3;
/// …when they stand at least this many times over the typical second: in a step whose seconds
/// are all alike there is nothing to explain.
pub const TOP_MIN_FACTOR: f64 = 1.25;
/// Evidence stands out when it is at least this many times the place's typical (median) second
/// in the step, and over its own floor below.
pub const STANDS_OUT: f64 = 3.0;
/// Stop-the-world time of the database's JVM, ms in a second.
pub const JVM_PAUSE_FLOOR_MS: f64 = 20.0;
/// Run-queue wait of the watched process's threads, summed, ms in a second.
pub const RUN_QUEUE_FLOOR_MS: f64 = 100.0;
/// A device's p99 latency (device time or OS-queue time), ms.
pub const LATENCY_FLOOR_MS: f64 = 2.0;
/// Deepest queue of a second on a device.
pub const QUEUE_DEPTH_FLOOR: f64 = 8.0;
/// Bytes another process moved on the place's traced devices in a second…
pub const OTHER_IO_FLOOR_BYTES: f64 = 1e6;
/// …and their share of all bytes on those devices in that second.
pub const OTHER_IO_MIN_SHARE: f64 = 0.2;
/// The share of a second with some task waiting for a CPU (the host's CPU pressure) from
/// which CPU starvation is taken as upstream of a slow device or OS queue.
pub const CONTENDED_SHARE: f64 = 0.5;
/// The client host's CPU busy percent (all CPUs) at which it may itself have made the wait,
/// when the database runs elsewhere.
pub const CLIENT_BUSY_PCT: f64 = 95.0;

/// What most likely made a second slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    /// The database's process was stopped by its JVM (safepoints, GC).
    JvmPause,
    /// The database's threads were runnable but waited for a CPU.
    CpuRunqueue,
    /// The device was slow and its queue deep: the activity that filled it is named.
    DeviceQueue,
    /// IOs waited in the OS (scheduler, throttling) far longer than on the device.
    OsQueue,
    /// Another process's IO on the database's drives.
    OtherIo,
    /// The database throttled its own writers (RocksDB's write stall while flush or
    /// compaction catches up).
    DbStall,
    /// The load generator's own host (its CPU, iodig's threads waiting for a CPU).
    ClientHost,
    /// A fault iodig injected was in effect.
    Fault,
    /// Nothing measured stood out.
    Unexplained,
}

impl Cause {
    /// Every cause, in the order tables list them.
    pub const ALL: [Cause; 9] = [
        Cause::JvmPause,
        Cause::CpuRunqueue,
        Cause::DeviceQueue,
        Cause::OsQueue,
        Cause::OtherIo,
        Cause::DbStall,
        Cause::ClientHost,
        Cause::Fault,
        Cause::Unexplained,
    ];

    /// The name `slow-seconds.csv` and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Cause::JvmPause => "jvm-pause",
            Cause::CpuRunqueue => "cpu-runqueue",
            Cause::DeviceQueue => "device-queue",
            Cause::OsQueue => "os-queue",
            Cause::OtherIo => "other-io",
            Cause::DbStall => "db-stall",
            Cause::ClientHost => "client-host",
            Cause::Fault => "fault",
            Cause::Unexplained => "unexplained",
        }
    }
}

/// One slow second of one op, explained.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowSecond {
    /// The op's series (`READ`, `UPDATE`, …, or `Intended-READ`: the latency from each
    /// operation's scheduled start under `--target`).
    pub op: String,
    /// Start of the second, unix ms (a multiple of 1000).
    pub start_unix_ms: u64,
    /// The client's p99 in that second, ms.
    pub p99_ms: f64,
    /// The client's slowest operation of that second, ms.
    pub max_ms: f64,
    /// The step's typical second's p99 for the op (the median over its seconds), ms.
    pub typical_p99_ms: f64,
    /// The place the cause was found at (`127.0.0.2`, `the client host`); empty when none.
    pub place: String,
    /// The most likely cause.
    pub cause: Cause,
    /// The cause's numbers first, then any other evidence that stood out, or what was looked
    /// at when nothing did.
    pub evidence: String,
}

/// What one place measured in one second, from its files (all optional: a place without a
/// trace has no device figures).
#[derive(Debug, Clone, Default)]
struct Second {
    /// Stop-the-world time of the place's JVMs in the second (safepoints), ms; none where no
    /// JVM was probed. The longest pause touching it, ms, and whether a collection (full or
    /// not) was among them.
    jvm_pause_ms: Option<f64>,
    jvm_longest_ms: f64,
    jvm_gc: Option<bool>,
    /// The database's own write stalls logged in the second (RocksDB's words).
    stalls: Vec<String>,
    /// Run-queue wait of the watched processes' threads, ms, and the longest thread's.
    run_queue_ms: Option<f64>,
    run_queue_max_thread_ms: f64,
    /// Host-wide CPU busy percent and CPU pressure stall (ms).
    cpu_busy_pct: Option<f64>,
    cpu_pressure_ms: Option<f64>,
    /// The worst traced device's figures: deepest queue, device p99, OS-queue p99 (ms).
    qd_max: Option<f64>,
    device_p99_ms: Option<f64>,
    queue_p99_ms: Option<f64>,
    worst_device: String,
    /// Bytes by activity class, and by other process (`name (pid N)`), on the traced devices.
    class_bytes: BTreeMap<String, u64>,
    other_bytes: BTreeMap<String, u64>,
    total_bytes: u64,
}

/// One place's seconds, keyed by the second's start in whole unix seconds.
struct PlaceSeconds {
    name: String,
    /// The client host while the database runs elsewhere: its evidence is `client-host`.
    client_only: bool,
    seconds: BTreeMap<i64, Second>,
    /// Each figure's typical (median) second in the step.
    typical: Typical,
    /// Whose run-queue wait is measured (`iodig`, `node 127.0.0.2:9042`).
    watched: String,
}

#[derive(Debug, Clone, Copy, Default)]
struct Typical {
    jvm_pause_ms: f64,
    run_queue_ms: f64,
    qd_max: f64,
    device_p99_ms: f64,
    queue_p99_ms: f64,
    other_bytes: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The whole second a sample ending at `end_ms` after `secs` seconds covers, by its start.
fn second_of_interval(end_ms: u64, secs: f64) -> i64 {
    let start = end_ms as f64 - secs * 1000.0;
    (start / 1000.0).round() as i64
}

/// The whole second a series point stamped with its second's start lies in.
fn second_of_start(start_ms: u64) -> i64 {
    (start_ms as f64 / 1000.0).round() as i64
}

fn place_seconds(step: &StepData, client_only: bool) -> PlaceSeconds {
    let mut seconds: BTreeMap<i64, Second> = BTreeMap::new();
    let mut watched = Vec::new();
    if let Some(sys) = &step.sys {
        watched = sys.processes.iter().map(|p| p.label.clone()).collect();
        for s in &sys.samples {
            if s.secs < 0.5 {
                continue;
            }
            let e = seconds
                .entry(second_of_interval(s.unix_ms, s.secs))
                .or_default();
            e.cpu_busy_pct = Some(s.cpu.busy());
            e.cpu_pressure_ms = s.pressure.map(|p| p.cpu_some_ms);
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
    PlaceSeconds {
        name: step.place.name(),
        client_only,
        seconds,
        typical,
        watched: watched.join(", "),
    }
}

/// Each probed JVM's stop-the-world time spread over the seconds it covers: the watched
/// window's seconds at 0 ms first, so a quiet JVM counts as looked at.
fn jvm_seconds(step: &StepData, seconds: &mut BTreeMap<i64, Second>) {
    let Some(doc) = &step.jvm_pauses else {
        return;
    };
    for p in doc.processes.iter().filter(|p| p.probed) {
        let (from, to) = (p.started_unix_ms / 1000, p.ended_unix_ms.div_ceil(1000));
        for k in from..to {
            let e = seconds.entry(k as i64).or_default();
            e.jvm_pause_ms.get_or_insert(0.0);
        }
        for pause in &p.pauses {
            let (a, b) = (pause.start_unix_us, pause.end_unix_us());
            let ms = pause.duration_us as f64 / 1000.0;
            for k in a / 1_000_000..=b / 1_000_000 {
                let e = seconds.entry(k as i64).or_default();
                if pause.kind == "gc" {
                    e.jvm_gc = Some(e.jvm_gc.unwrap_or(false) || pause.full == Some(true));
                    continue;
                }
                let (lo, hi) = (a.max(k * 1_000_000), b.min((k + 1) * 1_000_000));
                *e.jvm_pause_ms.get_or_insert(0.0) += hi.saturating_sub(lo) as f64 / 1000.0;
                e.jvm_longest_ms = e.jvm_longest_ms.max(ms);
            }
        }
    }
}

fn max_opt(a: Option<f64>, b: impl Into<Option<f64>>) -> Option<f64> {
    match (a, b.into()) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// How far `value` stands out of its typical level, as a multiple of the bar it had to clear
/// (`STANDS_OUT` × typical, or the floor when that is higher); none when it does not clear it.
fn stands_out(value: f64, typical: f64, floor: f64) -> Option<f64> {
    let bar = (typical * STANDS_OUT).max(floor);
    (value >= bar).then(|| value / bar)
}

/// One piece of evidence that stood out: its cause, strength (how far over its bar) and words.
struct Clue {
    cause: Cause,
    /// Evidence upstream of the rest: a JVM pause long enough for the excess, or run-queue
    /// wait while the host's CPU pressure covered at least [`CONTENDED_SHARE`] of the second.
    upstream: bool,
    strength: f64,
    place: String,
    words: String,
}

fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

/// The clues a place gives for the second `k` (the second itself, or the one before it, where
/// a slow operation ending in `k` may have started waiting).
fn clues(p: &PlaceSeconds, k: i64, excess_ms: f64, writes: bool) -> Vec<Clue> {
    let mut out = Vec::new();
    let t = p.typical;
    for key in [k, k - 1] {
        let Some(s) = p.seconds.get(&key) else {
            continue;
        };
        let when = if key == k { "" } else { " (the second before)" };
        let contended = s
            .cpu_pressure_ms
            .is_some_and(|c| c >= CONTENDED_SHARE * 1000.0);
        let clue = |cause, strength, words: String| Clue {
            cause,
            upstream: contended && cause == Cause::CpuRunqueue,
            strength,
            place: p.name.clone(),
            words: format!("{}: {words}{when}", p.name),
        };
        if writes && !s.stalls.is_empty() {
            // Writers held back by the database itself: nothing below it needs to be slow.
            let mut c = clue(
                Cause::DbStall,
                1.0,
                format!("the database stalled its writes: {}", s.stalls.join("; ")),
            );
            c.upstream = true;
            out.push(c);
        }
        if let Some(pause) = s.jvm_pause_ms {
            if let Some(x) = stands_out(pause, t.jvm_pause_ms, JVM_PAUSE_FLOOR_MS) {
                let gc = match s.jvm_gc {
                    Some(true) => ", a full collection among them",
                    Some(false) => ", a collection among them",
                    None => "",
                };
                let mut c = clue(
                    Cause::JvmPause,
                    x,
                    format!(
                        "{pause:.0} ms of safepoints in this second (longest pause {:.0} ms{gc}; typically {:.0} ms)",
                        s.jvm_longest_ms, t.jvm_pause_ms
                    ),
                );
                // Every Java thread stood still: the client waited at least that long.
                c.upstream = s.jvm_longest_ms >= 0.5 * excess_ms;
                out.push(c);
            }
        }
        if let Some(rq) = s.run_queue_ms {
            if let Some(x) = stands_out(rq, t.run_queue_ms, RUN_QUEUE_FLOOR_MS) {
                let cause = if p.client_only {
                    Cause::ClientHost
                } else {
                    Cause::CpuRunqueue
                };
                let psi = s
                    .cpu_pressure_ms
                    .map(|c| format!(", CPU pressure {c:.0} ms"))
                    .unwrap_or_default();
                out.push(clue(
                    cause,
                    x,
                    format!(
                        "{} waited {rq:.0} ms for a CPU in this second (typically {:.0} ms; longest thread {:.0} ms){psi}, CPUs {:.0}% busy",
                        p.watched,
                        t.run_queue_ms,
                        s.run_queue_max_thread_ms,
                        s.cpu_busy_pct.unwrap_or(0.0)
                    ),
                ));
            }
        }
        if p.client_only {
            if let Some(busy) = s.cpu_busy_pct.filter(|b| *b >= CLIENT_BUSY_PCT) {
                out.push(clue(
                    Cause::ClientHost,
                    busy / CLIENT_BUSY_PCT,
                    format!("the load generator's CPUs were {busy:.0}% busy"),
                ));
            }
            // The client host's own disks are not the database's: no IO cause from them.
            continue;
        }
        let other: u64 = s.other_bytes.values().sum();
        if let Some(x) = stands_out(other as f64, t.other_bytes, OTHER_IO_FLOOR_BYTES)
            .filter(|_| other as f64 >= OTHER_IO_MIN_SHARE * s.total_bytes as f64)
        {
            let (who, bytes) = s
                .other_bytes
                .iter()
                .max_by_key(|(_, b)| **b)
                .map(|(w, b)| (w.clone(), *b))
                .unwrap_or_default();
            out.push(clue(
                Cause::OtherIo,
                x,
                format!(
                    "{who} moved {} on the database's drives ({:.0}% of their bytes in this second)",
                    mb(bytes as f64),
                    100.0 * other as f64 / s.total_bytes.max(1) as f64
                ),
            ));
        }
        let dev = s
            .device_p99_ms
            .and_then(|d| Some((d, stands_out(d, t.device_p99_ms, LATENCY_FLOOR_MS)?)));
        let depth = s
            .qd_max
            .and_then(|q| Some((q, stands_out(q, t.qd_max, QUEUE_DEPTH_FLOOR)?)));
        if let Some((d, x)) = dev {
            // The activity that moved the most bytes filled the queue; another process's
            // bytes are `other-io`'s evidence, not the database's activity.
            let top = s
                .class_bytes
                .iter()
                .filter(|(c, _)| c.as_str() != "other")
                .max_by_key(|(_, b)| **b)
                .map(|(c, b)| format!(", most of its bytes {} ({})", c, mb(*b as f64)))
                .unwrap_or_default();
            let qd = s
                .qd_max
                .map(|q| format!(", queue depth up to {q:.0} (typically {:.0})", t.qd_max))
                .unwrap_or_default();
            out.push(clue(
                Cause::DeviceQueue,
                x.max(depth.map_or(0.0, |d| d.1)),
                format!(
                    "{} device p99 {d:.1} ms (typically {:.1} ms){qd}{top}",
                    s.worst_device, t.device_p99_ms
                ),
            ));
        }
        if let Some(q) = s.queue_p99_ms {
            let on_device = s.device_p99_ms.unwrap_or(0.0);
            if let Some(x) =
                stands_out(q, t.queue_p99_ms, LATENCY_FLOOR_MS).filter(|_| q >= 2.0 * on_device)
            {
                out.push(clue(
                    Cause::OsQueue,
                    x,
                    format!(
                        "IOs waited {q:.1} ms p99 in the OS queue against {on_device:.1} ms on the device (typically {:.1} ms queued)",
                        t.queue_p99_ms
                    ),
                ));
            }
        }
    }
    out
}

/// Faults that end another (`heal`, `uncap`, `restart`, `resume`, `start`) rather than begin
/// one: in effect only around their own moment.
const ENDING_ACTIONS: [&str; 5] = ["heal", "uncap", "restart", "resume", "start"];

/// The action word of a fault event's detail (`10s:heal:device: healed` → `heal`).
fn fault_action(detail: &str) -> &str {
    let action = detail.split(':').nth(1).unwrap_or("");
    action.split('=').next().unwrap_or(action)
}

/// A fault iodig injected is in effect from its start until the next fault on the same target
/// (a heal, a restart), or the step's end; one that ends another only around its moment.
fn faults_in_effect(step: &StepData, k: i64) -> Vec<String> {
    let mut faults: Vec<&crate::data::DbEvent> = step
        .events
        .iter()
        .chain(step.nodes.iter().flat_map(|n| &n.events))
        .filter(|e| e.kind == "fault")
        .collect();
    faults.sort_by_key(|e| e.start_unix_ms);
    let (from, to) = ((k - 1) * 1000, (k + 1) * 1000);
    faults
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            let until = if ENDING_ACTIONS.contains(&fault_action(&f.detail)) {
                f.end_unix_ms.unwrap_or(f.start_unix_ms) as i64 + 1
            } else {
                faults[i + 1..]
                    .iter()
                    .find(|g| g.node == f.node)
                    .map_or(i64::MAX, |g| g.start_unix_ms as i64)
            };
            (f.start_unix_ms as i64) < to && until > from
        })
        .map(|(_, f)| format!("iodig's fault {} on {}", f.detail, f.node))
        .collect()
}

/// The client's per-second p99 and max per op series (`READ`, and `Intended-READ` under
/// `--target`): `(second, p99 ms, max ms)` in time order.
fn client_seconds(step: &StepData) -> BTreeMap<String, Vec<(i64, f64, f64)>> {
    let mut out: BTreeMap<String, Vec<(i64, f64, f64)>> = BTreeMap::new();
    for s in &step.timeseries {
        if s.secs < 0.5 {
            continue;
        }
        for (name, v) in &s.series {
            // Under --target, `Intended-<OP>` holds what a user waited from each operation's
            // scheduled start: a starved worker that starts late shows there, not in the op's
            // own service time.
            let op = name.strip_prefix("Intended-").unwrap_or(name);
            if !super::is_primary_series(op) || v.count == 0 {
                continue;
            }
            out.entry(name.clone()).or_default().push((
                second_of_interval(s.unix_ms, s.secs),
                v.p99_us as f64 / 1000.0,
                v.max_us as f64 / 1000.0,
            ));
        }
    }
    out
}

/// Every slow second of a step, explained. `places` are the database's (each node's view, or
/// the client host when the database runs here) and, when it runs elsewhere, the client host
/// apart (`client_only`).
pub fn slow_seconds(step: &StepData, places: &[(&StepData, bool)]) -> Vec<SlowSecond> {
    let places: Vec<PlaceSeconds> = places
        .iter()
        .map(|(s, client_only)| place_seconds(s, *client_only))
        .collect();
    let mut out = Vec::new();
    for (op, secs) in client_seconds(step) {
        let typical = median(secs.iter().map(|s| s.1).collect());
        let mut by_p99: Vec<usize> = (0..secs.len()).collect();
        by_p99.sort_by(|a, b| secs[*b].1.total_cmp(&secs[*a].1));
        let top: Vec<usize> = by_p99.iter().copied().take(TOP_PER_OP).collect();
        for (i, &(k, p99, max)) in secs.iter().enumerate() {
            let far = p99 >= typical * FAR_ABOVE && p99 >= typical + FAR_ABOVE_MIN_MS;
            let high = top.contains(&i) && p99 >= typical * TOP_MIN_FACTOR;
            if !far && !high {
                continue;
            }
            out.push(explain(step, &places, &op, k, p99, max, typical));
        }
    }
    out.sort_by(|a, b| {
        a.start_unix_ms
            .cmp(&b.start_unix_ms)
            .then_with(|| a.op.cmp(&b.op))
    });
    out
}

fn explain(
    step: &StepData,
    places: &[PlaceSeconds],
    op: &str,
    k: i64,
    p99_ms: f64,
    max_ms: f64,
    typical_p99_ms: f64,
) -> SlowSecond {
    let second = |cause, place: String, evidence| SlowSecond {
        op: op.to_string(),
        start_unix_ms: u64::try_from(k * 1000).unwrap_or(0),
        p99_ms,
        max_ms,
        typical_p99_ms,
        place,
        cause,
        evidence,
    };
    let faults = faults_in_effect(step, k);
    let excess = p99_ms - typical_p99_ms;
    let base = op.strip_prefix("Intended-").unwrap_or(op);
    let writes = base != "READ" && base != "SCAN";
    let mut clues: Vec<Clue> = places
        .iter()
        .flat_map(|p| clues(p, k, excess, writes))
        .collect();
    clues.sort_by(|a, b| b.strength.total_cmp(&a.strength));
    let others = |skip: usize, clues: &[Clue]| {
        let rest: Vec<&str> = clues.iter().skip(skip).map(|c| c.words.as_str()).collect();
        if rest.is_empty() {
            String::new()
        } else {
            format!("; also: {}", rest.join("; "))
        }
    };
    if !faults.is_empty() {
        // iodig did it: no guess is needed about the rest, which is kept as evidence.
        return second(
            Cause::Fault,
            String::new(),
            format!("{}{}", faults.join("; "), others(0, &clues)),
        );
    }
    // Upstream evidence first (the strongest of it: clues are sorted): a JVM pause stops
    // every Java thread and a write stall every writer; a host whose CPUs were contended
    // most of the second slows everything that needs one, the completion of IO included (a
    // loop device, a software RAID), so it is upstream of any slow device it shows, but not
    // of another process named doing IO on the drive, whose IO may be what kept the CPUs
    // busy (a loop device copying it).
    let other_io = clues.iter().any(|c| c.cause == Cause::OtherIo);
    if let Some(i) = clues
        .iter()
        .position(|c| c.upstream && !(other_io && c.cause == Cause::CpuRunqueue))
    {
        let c = clues.remove(i);
        clues.insert(0, c);
    }
    match clues.first() {
        Some(c) => second(
            c.cause,
            c.place.clone(),
            format!("{}{}", c.words, others(1, &clues)),
        ),
        None => second(Cause::Unexplained, String::new(), looked_at(places)),
    }
}

/// What was looked at when nothing stood out, so "unexplained" says how much was ruled out.
fn looked_at(places: &[PlaceSeconds]) -> String {
    let mut what = Vec::new();
    let any = |f: &dyn Fn(&Second) -> bool| places.iter().any(|p| p.seconds.values().any(f));
    let jvm_probed = any(&|s| s.jvm_pause_ms.is_some());
    if jvm_probed {
        what.push("JVM pauses");
    }
    if any(&|s| s.run_queue_ms.is_some()) {
        what.push("run-queue wait");
    }
    if any(&|s| s.device_p99_ms.is_some() || s.qd_max.is_some()) {
        what.push("device latency and queue depth");
    }
    if any(&|s| s.queue_p99_ms.is_some()) {
        what.push("OS-queue time");
    }
    if any(&|s| !s.class_bytes.is_empty()) {
        what.push("other processes' IO");
    }
    what.push("iodig's faults");
    // Cassandra's nodes run in a JVM whose pauses iodig does not read yet: said, not implied.
    let jvm = !jvm_probed
        && places
            .iter()
            .any(|p| p.watched.contains("node") || p.watched.contains("cassandra"));
    format!(
        "nothing stood out in {} at {}{}",
        what.join(", "),
        places
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        if jvm {
            "; JVM pauses were not measured (an untraced step, or no probe: see jvm-pauses.json)"
        } else {
            ""
        }
    )
}

/// Each cause's share of a step's slow seconds, in [`Cause::ALL`] order, causes with none left
/// out: `(cause, seconds)`.
pub fn shares(seconds: &[SlowSecond]) -> Vec<(Cause, usize)> {
    Cause::ALL
        .iter()
        .map(|c| (*c, seconds.iter().filter(|s| s.cause == *c).count()))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Place;
    use iodig_model::sys::{ProcInfo, ProcSample, ProcStats, RunQueueWait, SysDoc, SysSample};
    use iodig_model::trace::{
        AttrRow, AttrSecond, Attribution, DeviceSecond, DeviceTrace, OpSecond, TraceDoc,
    };
    use iodig_model::{Sample, SeriesSummary, StepSummary};

    const T0: u64 = 1_700_000_000_000;
    const SECONDS: u64 = 60;

    fn summary() -> StepSummary {
        StepSummary {
            index: 1,
            phase: "run".into(),
            dir: String::new(),
            workload: "workloada".into(),
            threads: 8,
            target_ops_per_sec: None,
            started_unix_ms: T0,
            runtime_ms: SECONDS * 1000,
            operations: 0,
            throughput_ops_per_sec: 0.0,
            interrupted: false,
            series: BTreeMap::new(),
            returns: BTreeMap::new(),
            trace_mode: None,
            trace_note: None,
            client_cpu_s: None,
            nodes: Vec::new(),
            sweep_stop: None,
            ended_early: None,
        }
    }

    /// A step whose READ p99 is 1 ms every second but in `slow` (40 ms), with a database
    /// process waiting 20 ms a second for a CPU, a device at 0.5 ms and depth 2, and 4 MB a
    /// second of flush IO, each but where `edit` says otherwise.
    fn step(
        slow: &[u64],
        edit: impl Fn(u64, &mut SysSample, &mut DeviceSecond, &mut Vec<(String, u64)>),
    ) -> StepData {
        let mut timeseries = Vec::new();
        let mut samples = Vec::new();
        let mut dev_seconds = Vec::new();
        let mut flush = Vec::new();
        let mut other = Vec::new();
        for i in 0..SECONDS {
            let start = T0 + i * 1000;
            let p99 = if slow.contains(&i) { 40_000 } else { 1_000 };
            timeseries.push(Sample {
                t: (i + 1) as f64,
                unix_ms: start + 1000,
                secs: 1.0,
                operations: 100,
                ops_per_sec: 100.0,
                series: [(
                    "READ".to_string(),
                    SeriesSummary {
                        count: 100,
                        p99_us: p99,
                        max_us: p99 * 2,
                        ..Default::default()
                    },
                )]
                .into(),
            });
            let mut s = SysSample {
                unix_ms: start + 1000,
                secs: 1.0,
                procs: vec![ProcSample {
                    label: "iodig".into(),
                    pid: 1,
                    stats: Some(ProcStats {
                        run_queue: Some(RunQueueWait {
                            wait_ms: 20.0,
                            max_thread_ms: 5.0,
                            threads_waiting: 4,
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            };
            let mut d = DeviceSecond {
                unix_ms: start,
                covered_ms: 1000,
                ops: [(
                    "write".to_string(),
                    OpSecond {
                        ios: 100,
                        bytes: 4_000_000,
                        lat_p99_ns: Some(500_000),
                        queue_p99_ns: Some(50_000),
                        ..Default::default()
                    },
                )]
                .into(),
                qd_mean: Some(1.0),
                qd_max: Some(2),
                util_pct: None,
            };
            let mut others = Vec::new();
            edit(i, &mut s, &mut d, &mut others);
            samples.push(s);
            flush.push(AttrSecond {
                unix_ms: start,
                bytes: 4_000_000,
                ios: 100,
                ..Default::default()
            });
            for (who, bytes) in others {
                other.push((
                    who,
                    AttrSecond {
                        unix_ms: start,
                        bytes,
                        ios: 10,
                        ..Default::default()
                    },
                ));
                d.ops.get_mut("write").unwrap().bytes += bytes;
            }
            dev_seconds.push(d);
        }
        let mut rows = vec![AttrRow {
            device: "vdb".into(),
            op: "write".into(),
            class: "rocksdb.flush".into(),
            seconds: flush,
            ..Default::default()
        }];
        for (who, s) in other {
            rows.push(AttrRow {
                device: "vdb".into(),
                op: "write".into(),
                class: "other".into(),
                process: who,
                pid: 4242,
                seconds: vec![s],
                ..Default::default()
            });
        }
        let mut trace = TraceDoc {
            devices: vec![DeviceTrace {
                name: "vdb".into(),
                seconds: dev_seconds,
                ..Default::default()
            }],
            ..Default::default()
        };
        trace.self_check.attribution = Some(Attribution {
            rows,
            ..Default::default()
        });
        StepData {
            summary: summary(),
            dir: Default::default(),
            place: Place::ClientHost,
            io_dir: Default::default(),
            timeseries,
            histograms: None,
            trace: Some(trace),
            device_stats: None,
            sys: Some(SysDoc {
                processes: vec![ProcInfo {
                    label: "iodig".into(),
                    pid: 1,
                    ..Default::default()
                }],
                samples,
                ..Default::default()
            }),
            events: Vec::new(),
            nodes: Vec::new(),
            jvm_pauses: None,
        }
    }

    fn only(step: &StepData) -> Vec<SlowSecond> {
        slow_seconds(step, &[(step, false)])
            .into_iter()
            .filter(|s| s.p99_ms > 10.0)
            .collect()
    }

    #[test]
    fn a_starved_second_is_cpu_runqueue_with_its_numbers() {
        let s = step(&[20], |i, sys, _, _| {
            if i == 20 {
                let rq = sys.procs[0]
                    .stats
                    .as_mut()
                    .unwrap()
                    .run_queue
                    .as_mut()
                    .unwrap();
                rq.wait_ms = 900.0;
                rq.max_thread_ms = 300.0;
            }
        });
        let slow = only(&s);
        assert_eq!(slow.len(), 1, "{slow:?}");
        assert_eq!(slow[0].cause, Cause::CpuRunqueue, "{slow:?}");
        assert_eq!(slow[0].start_unix_ms, T0 + 20_000);
        assert!((slow[0].typical_p99_ms - 1.0).abs() < 1e-9);
        assert!(
            slow[0].evidence.contains("iodig waited 900 ms for a CPU"),
            "{}",
            slow[0].evidence
        );
    }

    #[test]
    fn a_deep_slow_device_names_the_activity_that_filled_it() {
        let s = step(&[30], |i, _, d, _| {
            if i == 30 {
                d.qd_max = Some(64);
                d.ops.get_mut("write").unwrap().lat_p99_ns = Some(30_000_000);
            }
        });
        let slow = only(&s);
        assert_eq!(slow[0].cause, Cause::DeviceQueue, "{slow:?}");
        assert!(
            slow[0].evidence.contains("vdb device p99 30.0 ms"),
            "{}",
            slow[0].evidence
        );
        assert!(
            slow[0].evidence.contains("rocksdb.flush"),
            "{}",
            slow[0].evidence
        );
        assert!(
            slow[0].evidence.contains("queue depth up to 64"),
            "{}",
            slow[0].evidence
        );
    }

    #[test]
    fn another_process_flooding_the_drive_is_other_io_by_name() {
        let s = step(&[40], |i, _, d, others| {
            if i == 40 {
                others.push(("dd".into(), 200_000_000));
                d.ops.get_mut("write").unwrap().lat_p99_ns = Some(30_000_000);
                d.qd_max = Some(128);
            }
        });
        let slow = only(&s);
        assert_eq!(slow[0].cause, Cause::OtherIo, "{slow:?}");
        assert!(
            slow[0].evidence.contains("dd (pid 4242) moved 200.0 MB"),
            "{}",
            slow[0].evidence
        );
        // The device's own evidence is kept beside it.
        assert!(slow[0].evidence.contains("also: "), "{}", slow[0].evidence);
    }

    #[test]
    fn an_injected_fault_wins_and_lasts_until_its_heal() {
        let mut s = step(&[10, 12, 30], |_, _, _, _| {});
        let fault = |at: u64, detail: &str| crate::data::DbEvent {
            kind: "fault".into(),
            start_unix_ms: T0 + at,
            end_unix_ms: Some(T0 + at + 5),
            bytes: None,
            node: "device".into(),
            detail: detail.into(),
        };
        s.events = vec![
            fault(9_500, "5s:slow-reads=20ms:device"),
            fault(13_200, "10s:heal:device"),
        ];
        let slow = only(&s);
        let cause = |k: u64| {
            slow.iter()
                .find(|x| x.start_unix_ms == T0 + k * 1000)
                .unwrap()
                .cause
        };
        assert_eq!(cause(10), Cause::Fault);
        assert_eq!(cause(12), Cause::Fault);
        // Long after the heal nothing stands out: said so, not guessed.
        assert_eq!(cause(30), Cause::Unexplained);
        let u = slow.iter().find(|x| x.cause == Cause::Unexplained).unwrap();
        assert!(
            u.evidence.contains("nothing stood out in run-queue wait"),
            "{}",
            u.evidence
        );
    }

    #[test]
    fn the_slowest_seconds_are_listed_even_when_none_is_far_above() {
        // Four seconds at 2 ms (2× the typical second, under the 3× of "far above"): the
        // three highest are listed; a step whose seconds are all alike lists none.
        let mut s = step(&[], |_, _, _, _| {});
        for i in [5, 6, 7, 8] {
            s.timeseries[i].series.get_mut("READ").unwrap().p99_us = 2_000;
        }
        let all = slow_seconds(&s, &[(&s, false)]);
        assert_eq!(all.len(), TOP_PER_OP, "{all:?}");
        assert!(all.iter().all(|x| x.cause == Cause::Unexplained));
        let flat = step(&[], |_, _, _, _| {});
        assert!(slow_seconds(&flat, &[(&flat, false)]).is_empty());
    }

    #[test]
    fn the_client_hosts_own_starvation_is_client_host_when_the_database_is_elsewhere() {
        let node = step(&[], |_, _, _, _| {});
        let mut client = step(&[50], |i, sys, _, _| {
            if i == 50 {
                sys.cpu.idle = 1.0;
                let rq = sys.procs[0]
                    .stats
                    .as_mut()
                    .unwrap()
                    .run_queue
                    .as_mut()
                    .unwrap();
                rq.wait_ms = 800.0;
            }
        });
        client.trace = None;
        let slow: Vec<_> = slow_seconds(&client, &[(&node, false), (&client, true)])
            .into_iter()
            .filter(|s| s.p99_ms > 10.0)
            .collect();
        assert_eq!(slow[0].cause, Cause::ClientHost, "{slow:?}");
        assert_eq!(slow[0].place, "the client host");
    }

    #[test]
    fn a_long_safepoint_is_jvm_pause_ahead_of_the_device_it_slowed() {
        use iodig_model::jvm::{JvmPause, JvmPausesDoc, JvmProcess};
        let mut s = step(&[25], |i, _, d, _| {
            if i == 25 {
                // The device looks slow in the same second: the pause explains the excess.
                d.ops.get_mut("write").unwrap().lat_p99_ns = Some(60_000_000);
            }
        });
        let pause = |at_ms: u64, ms: u64, kind: &str, full: Option<bool>| JvmPause {
            kind: kind.into(),
            start_unix_us: (T0 + at_ms) * 1000,
            duration_us: ms * 1000,
            full,
        };
        s.jvm_pauses = Some(JvmPausesDoc {
            processes: vec![JvmProcess {
                label: "node 127.0.0.2:9042".into(),
                pid: 9,
                probed: true,
                started_unix_ms: T0,
                ended_unix_ms: T0 + SECONDS * 1000,
                pauses: vec![
                    pause(3_100, 2, "safepoint", None),
                    pause(25_300, 212, "safepoint", None),
                    pause(25_301, 210, "gc", Some(true)),
                ],
                ..Default::default()
            }],
        });
        let slow = only(&s);
        assert_eq!(slow[0].cause, Cause::JvmPause, "{slow:?}");
        assert!(
            slow[0]
                .evidence
                .starts_with("the client host: 212 ms of safepoints in this second (longest pause 212 ms, a full collection among them"),
            "{}",
            slow[0].evidence
        );
        assert!(
            slow[0].evidence.contains("device p99 60.0 ms"),
            "{}",
            slow[0].evidence
        );
    }

    #[test]
    fn a_contended_cpu_is_upstream_of_the_slow_device_it_shows() {
        let s = step(&[15], |i, sys, d, _| {
            if i == 15 {
                d.ops.get_mut("write").unwrap().lat_p99_ns = Some(400_000_000);
                let rq = sys.procs[0]
                    .stats
                    .as_mut()
                    .unwrap()
                    .run_queue
                    .as_mut()
                    .unwrap();
                rq.wait_ms = 400.0;
                sys.pressure = Some(iodig_model::sys::Pressure {
                    cpu_some_ms: 900.0,
                    ..Default::default()
                });
            }
        });
        let slow = only(&s);
        assert_eq!(slow[0].cause, Cause::CpuRunqueue, "{slow:?}");
        assert!(
            slow[0].evidence.contains("CPU pressure 900 ms"),
            "{}",
            slow[0].evidence
        );
    }

    #[test]
    fn a_logged_write_stall_explains_a_slow_update_second_not_a_read() {
        let mut s = step(&[35], |_, _, _, _| {});
        for t in &mut s.timeseries {
            let read = t.series["READ"].clone();
            t.series.insert("UPDATE".into(), read);
        }
        s.events.push(crate::data::DbEvent {
            kind: "stall".into(),
            start_unix_ms: T0 + 35_400,
            end_unix_ms: Some(T0 + 35_400),
            bytes: None,
            node: "local".into(),
            detail: "usertable: Stalling writes because we have 4 immutable memtables".into(),
        });
        let slow = only(&s);
        let cause = |op: &str| slow.iter().find(|x| x.op == op).unwrap().cause;
        assert_eq!(cause("UPDATE"), Cause::DbStall, "{slow:?}");
        assert_eq!(cause("READ"), Cause::Unexplained, "{slow:?}");
    }
}
