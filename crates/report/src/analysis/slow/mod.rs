//! Why the slowest seconds were slow: each step's seconds whose client p99 stands out, each set
//! against what every place measured in that second (the database's threads waiting for a CPU,
//! the device's queue and time, the OS queue, other processes' IO, iodig's own faults, and the
//! client host itself when the database runs elsewhere), with the most likely cause named.
//!
//! The rule (docs/report.md, "Why the slowest seconds were slow") judges each piece of evidence
//! against the same place's own typical second in the step, never against a fixed level alone,
//! and names a cause only when its evidence stands out; otherwise the second is `unexplained`,
//! with what was looked at. It reads only the run directory's files, like every analysis.

mod clues;
mod evidence;
#[cfg(test)]
mod tests;

use crate::data::StepData;
use clues::{clues, Clue};
use evidence::{median, place_seconds, second_of_interval, PlaceSeconds, Second};
use std::collections::BTreeMap;

/// A second is far above its step when its p99 is at least this many times the step's typical
/// (median) second's p99 for the op…
pub const FAR_ABOVE: f64 = 3.0;
/// …and at least this much higher, in ms, so a 40 µs → 130 µs wobble is no story.
pub const FAR_ABOVE_MIN_MS: f64 = 1.0;
/// The highest seconds of each op, listed whether or not they are far above…
pub const TOP_PER_OP: usize = 5;
/// …when they stand at least this many times over the typical second: in a step whose seconds
/// are all alike there is nothing to explain.
pub const TOP_MIN_FACTOR: f64 = 1.25;
/// Evidence stands out when it is at least this many times the place's typical (median) second
/// in the step, and over its own floor below.
pub const STANDS_OUT: f64 = 3.0;
/// Stop-the-world time of the database's JVM, ms in a second.
pub const JVM_PAUSE_FLOOR_MS: f64 = 20.0;
/// A database process that typically uses at least this much CPU (percent of one)…
pub const BUSY_CPU_PCT: f64 = 20.0;
/// …and less than this in a second stood still in it (stopped or frozen).
pub const STILL_CPU_PCT: f64 = 2.0;
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
    /// The database's process exited or started again (not by iodig's fault): a node that
    /// crashed, or was restarted by its service manager.
    NodeRestart,
    /// Nothing measured stood out.
    Unexplained,
}

impl Cause {
    /// Every cause, in the order tables list them.
    pub const ALL: [Cause; 10] = [
        Cause::JvmPause,
        Cause::CpuRunqueue,
        Cause::DeviceQueue,
        Cause::OsQueue,
        Cause::OtherIo,
        Cause::DbStall,
        Cause::ClientHost,
        Cause::Fault,
        Cause::NodeRestart,
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
            Cause::NodeRestart => "node-restart",
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
    let (from, to) = (
        k.saturating_sub(1).saturating_mul(1000),
        k.saturating_add(1).saturating_mul(1000),
    );
    faults
        .iter()
        .enumerate()
        .filter(|(i, f)| {
            let until = if ENDING_ACTIONS.contains(&fault_action(&f.detail)) {
                (f.end_unix_ms.unwrap_or(f.start_unix_ms) as i64).saturating_add(1)
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

/// One second of one op series at the client.
#[derive(Debug, Clone, Copy)]
struct ClientSecond {
    k: i64,
    p99_ms: f64,
    max_ms: f64,
    /// No operation of the series completed in the second, while a typical second completes
    /// this many: the operations in flight waited through it (their p99 and max above are the
    /// slowest latency of the next second that completed some).
    stalled: Option<f64>,
}

/// A second in which no operation of a series completed is a stall when a typical second of
/// the step completes at least this many.
pub const STALL_MIN_OPS: f64 = 10.0;

/// The client's per-second p99 and max per op series (`READ`, and `Intended-READ` under
/// `--target`) in time order, with the seconds in which none completed (stalls).
fn client_seconds(step: &StepData) -> BTreeMap<String, Vec<ClientSecond>> {
    let whole: Vec<_> = step.timeseries.iter().filter(|s| s.secs >= 0.5).collect();
    let mut names: Vec<&String> = whole
        .iter()
        .flat_map(|s| s.series.iter())
        // Under --target, `Intended-<OP>` holds what a user waited from each operation's
        // scheduled start: a starved worker that starts late shows there, not in the op's
        // own service time.
        .filter(|(name, v)| {
            v.count > 0 && super::is_primary_series(name.strip_prefix("Intended-").unwrap_or(name))
        })
        .map(|(name, _)| name)
        .collect();
    names.sort();
    names.dedup();
    let mut out = BTreeMap::new();
    for name in names {
        fn at<'s>(
            s: &'s iodig_model::Sample,
            name: &str,
        ) -> Option<&'s iodig_model::SeriesSummary> {
            s.series.get(name).filter(|v| v.count > 0)
        }
        let typical_count = median(
            whole
                .iter()
                .map(|s| at(s, name).map_or(0.0, |v| v.count as f64))
                .collect(),
        );
        let mut secs = Vec::new();
        for (i, s) in whole.iter().enumerate() {
            let k = second_of_interval(s.unix_ms, s.secs);
            match at(s, name) {
                Some(v) => secs.push(ClientSecond {
                    k,
                    p99_ms: v.p99_us as f64 / 1000.0,
                    max_ms: v.max_us as f64 / 1000.0,
                    stalled: None,
                }),
                None if typical_count >= STALL_MIN_OPS => {
                    // The requests in flight completed later, having waited through it.
                    let waited = whole[i + 1..]
                        .iter()
                        .find_map(|n| at(n, name))
                        .map_or(1000.0, |v| v.max_us as f64 / 1000.0)
                        .max(1000.0);
                    secs.push(ClientSecond {
                        k,
                        p99_ms: waited,
                        max_ms: waited,
                        stalled: Some(typical_count),
                    });
                }
                None => {}
            }
        }
        out.insert(name.clone(), secs);
    }
    out
}

/// What a place is to the database, for the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Where the database runs: a node, or the client host with the database embedded or its
    /// nodes run here unobserved.
    Database,
    /// The load generator, on a machine of its own: its starved CPUs are `client-host`.
    ClientApart,
    /// The load generator on the same machine (kernel) as the named database node: its CPUs
    /// are that node's too, so their starvation is `cpu-runqueue` there.
    ClientBeside(String),
}

/// Every slow second of a step, explained. `places` are the database's (each node's view, or
/// the client host when the database runs here) and, when it runs elsewhere, the client host
/// with its [`Role`].
pub fn slow_seconds(step: &StepData, places: &[(&StepData, Role)]) -> Vec<SlowSecond> {
    let places: Vec<PlaceSeconds> = places
        .iter()
        .map(|(s, role)| place_seconds(s, role))
        .collect();
    let mut out = Vec::new();
    for (op, secs) in client_seconds(step) {
        // The typical second is of the seconds that completed operations.
        let typical = median(
            secs.iter()
                .filter(|s| s.stalled.is_none())
                .map(|s| s.p99_ms)
                .collect(),
        );
        let mut by_p99: Vec<usize> = (0..secs.len()).collect();
        by_p99.sort_by(|a, b| secs[*b].p99_ms.total_cmp(&secs[*a].p99_ms));
        let top: Vec<usize> = by_p99.iter().copied().take(TOP_PER_OP).collect();
        for (i, c) in secs.iter().enumerate() {
            let far = c.p99_ms >= typical * FAR_ABOVE && c.p99_ms >= typical + FAR_ABOVE_MIN_MS;
            let high = top.contains(&i) && c.p99_ms >= typical * TOP_MIN_FACTOR;
            if !far && !high && c.stalled.is_none() {
                continue;
            }
            let mut second = explain(step, &places, &op, c.k, c.p99_ms, c.max_ms, typical);
            if let Some(n) = c.stalled {
                second.evidence = format!(
                    "no {op} completed in this second (typically {n:.0} a second): the requests in flight waited through it, up to {:.0} ms; {}",
                    c.max_ms, second.evidence
                );
            }
            out.push(second);
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
        start_unix_ms: u64::try_from(k.saturating_mul(1000)).unwrap_or(0),
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
    // The node that answered the slow requests, when one stands out of the others: its own
    // evidence comes first (a stable sort keeps the strength order within).
    let coordinator = coordinators(step, base, k);
    if let Some(node) = coordinator.as_ref().and_then(|c| c.pinned.as_ref()) {
        clues.sort_by_key(|c| c.place != *node);
    }
    let told = coordinator
        .as_ref()
        .map_or(String::new(), |c| format!("; {}", c.words));
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
    let pinned = coordinator.as_ref().and_then(|c| c.pinned.clone());
    if let Some(i) = clues.iter().position(|c| {
        c.upstream
            && !(other_io && c.cause == Cause::CpuRunqueue)
            && pinned.as_ref().is_none_or(|n| c.place == *n)
    }) {
        let c = clues.remove(i);
        clues.insert(0, c);
    }
    match clues.first() {
        Some(c) => second(
            c.cause,
            c.place.clone(),
            format!("{}{told}{}", c.words, others(1, &clues)),
        ),
        None => second(
            Cause::Unexplained,
            pinned.unwrap_or_default(),
            format!("{}{told}", looked_at(places)),
        ),
    }
}

/// What the client's latency per coordinator says of one second of one op.
struct Coordinators {
    /// The node whose answers were slow while the others' were not.
    pinned: Option<String>,
    /// Its numbers, or every node's when they were slow alike.
    words: String,
}

/// The coordinators of op `base`'s requests in second `k`, from `client-by-node.json`: none
/// when the binding names no node or a single node answered (nothing to tell apart).
fn coordinators(step: &StepData, base: &str, k: i64) -> Option<Coordinators> {
    let doc = step.by_node.as_ref()?;
    let mut rows: Vec<_> = doc
        .seconds
        .iter()
        .filter(|r| r.op == base && r.count > 0 && second_of_interval(r.unix_ms, r.secs) == k)
        .collect();
    if rows.len() < 2 {
        return None;
    }
    rows.sort_by_key(|r| std::cmp::Reverse(r.p99_us));
    let ms = |us: u64| us as f64 / 1000.0;
    let (worst, next) = (rows[0], rows[1]);
    if ms(worst.p99_us) >= STANDS_OUT * ms(next.p99_us)
        && ms(worst.p99_us) >= ms(next.p99_us) + FAR_ABOVE_MIN_MS
    {
        return Some(Coordinators {
            pinned: Some(worst.node.clone()),
            words: format!(
                "its slow requests were coordinated by {}: {} requests at p99 {:.1} ms, max {:.1} ms (the other nodes' p99 at most {:.1} ms)",
                worst.node,
                worst.count,
                ms(worst.p99_us),
                ms(worst.max_us),
                ms(next.p99_us)
            ),
        });
    }
    let each: Vec<String> = rows
        .iter()
        .map(|r| format!("{} {:.1} ms", r.node, ms(r.p99_us)))
        .collect();
    Some(Coordinators {
        pinned: None,
        words: format!("every coordinator alike (p99 {})", each.join(", ")),
    })
}

/// What was looked at when nothing stood out, so "unexplained" says how much was ruled out.
fn looked_at(places: &[PlaceSeconds]) -> String {
    let mut what = Vec::new();
    let any = |f: &dyn Fn(&Second) -> bool| places.iter().any(|p| p.seconds.values().any(f));
    let jvm_probed = any(&|s| s.jvm_pause_ms.is_some());
    if jvm_probed {
        what.push(if any(&|s| s.jvm_from_log) {
            "the JVM collections its log reported"
        } else {
            "JVM pauses"
        });
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
