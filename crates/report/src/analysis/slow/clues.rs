//! The clues a place gives for a slow second: each piece of its evidence that stands out of
//! its typical second, as a cause, how far it stands out, and the words with its numbers.

use super::evidence::PlaceSeconds;
use super::*;

/// How far `value` stands out of its typical level, as a multiple of the bar it had to clear
/// (`STANDS_OUT` × typical, or the floor when that is higher); none when it does not clear it.
fn stands_out(value: f64, typical: f64, floor: f64) -> Option<f64> {
    let bar = (typical * STANDS_OUT).max(floor);
    (value >= bar).then(|| value / bar)
}

/// One piece of evidence that stood out: its cause, strength (how far over its bar) and words.
pub(super) struct Clue {
    pub(super) cause: Cause,
    /// Evidence upstream of the rest: a JVM pause long enough for the excess, or run-queue
    /// wait while the host's CPU pressure covered at least [`CONTENDED_SHARE`] of the second.
    pub(super) upstream: bool,
    pub(super) strength: f64,
    pub(super) place: String,
    pub(super) words: String,
}

fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

/// The clues a place gives for the second `k` (the second itself, or the one before it, where
/// a slow operation ending in `k` may have started waiting).
pub(super) fn clues(p: &PlaceSeconds, k: i64, excess_ms: f64, writes: bool) -> Vec<Clue> {
    let mut out = Vec::new();
    let t = p.typical;
    for key in [k, k.saturating_sub(1)] {
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
        if !s.restarts.is_empty() && !p.client_only {
            // The database's process went away: whatever waited on it waited for its return.
            let mut c = clue(
                Cause::NodeRestart,
                1.0,
                format!("the database's process: {}", s.restarts.join("; ")),
            );
            c.upstream = true;
            out.push(c);
        }
        for (label, cpu) in &s.proc_cpu_pct {
            let typical = p.typical_cpu.get(label).copied().unwrap_or(0.0);
            if *cpu >= STILL_CPU_PCT || typical < BUSY_CPU_PCT || p.client_only {
                continue;
            }
            // Busy in a typical second, idle in this one while the client waited on it: the
            // process was stopped (a signal, a debugger) or frozen, which no safepoint shows.
            let mut c = clue(
                Cause::JvmPause,
                typical / BUSY_CPU_PCT,
                format!(
                    "{label} used {cpu:.1}% of a CPU in this second (typically {typical:.0}%): the process stood still (stopped or frozen, outside any safepoint HotSpot reported)"
                ),
            );
            c.upstream = true;
            out.push(c);
        }
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
                let words = if s.jvm_from_log {
                    format!(
                        "{pause:.0} ms of collections its log reported in this second (Cassandra's GCInspector; longest {:.0} ms; HotSpot's pause probes were not attached, so shorter pauses are not seen)",
                        s.jvm_longest_ms
                    )
                } else {
                    format!(
                        "{pause:.0} ms of safepoints in this second (longest pause {:.0} ms{gc}; typically {:.0} ms)",
                        s.jvm_longest_ms, t.jvm_pause_ms
                    )
                };
                let mut c = clue(Cause::JvmPause, x, words);
                // Every Java thread stood still: the client waited at least that long.
                c.upstream = s.jvm_longest_ms >= 0.5 * excess_ms;
                out.push(c);
            }
        }
        if let Some(rq) = s.run_queue_ms {
            if let Some(x) = stands_out(rq, t.run_queue_ms, RUN_QUEUE_FLOOR_MS) {
                // The load generator's CPUs are the database's where they share a machine.
                let cause = if p.client_only && p.beside.is_none() {
                    Cause::ClientHost
                } else {
                    Cause::CpuRunqueue
                };
                let psi = s
                    .cpu_pressure_ms
                    .map(|c| format!(", CPU pressure {c:.0} ms"))
                    .unwrap_or_default();
                let shared = p
                    .beside
                    .as_ref()
                    .map(|n| format!(" (the same machine as {n}, whose CPUs they share)"))
                    .unwrap_or_default();
                let mut c = clue(
                    cause,
                    x,
                    format!(
                        "{} waited {rq:.0} ms for a CPU in this second{shared} (typically {:.0} ms; longest thread {:.0} ms){psi}, CPUs {:.0}% busy",
                        p.watched,
                        t.run_queue_ms,
                        s.run_queue_max_thread_ms,
                        s.cpu_busy_pct.unwrap_or(0.0)
                    ),
                );
                if let Some(n) = &p.beside {
                    c.place = n.clone();
                }
                out.push(c);
            }
        }
        if p.client_only {
            // Busy CPUs on a machine the database shares are not the load generator's alone.
            if let Some(busy) = s
                .cpu_busy_pct
                .filter(|b| *b >= CLIENT_BUSY_PCT && p.beside.is_none())
            {
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
