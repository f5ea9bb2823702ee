//! The collecting side of a step: every second it takes each worker's finished recordings
//! (never waiting on a worker that holds its lock), merges them into the second's sample, the
//! whole step's histograms and the HDR interval logs (by end, and the shift that makes it the
//! log by start), and ends the step on time.

use super::{process_cpu, Shared, Start, StepObserver, StepResult};
use crate::live::{LatencyBuckets, LiveSink};
use crate::progress::Progress;
use crate::step_plan::StepPlan;
use crate::utc::unix_ms;
use anyhow::{anyhow, Context, Result};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use iodig_model::by_node::NodeSecondRow;
use iodig_model::Sample;
use iodig_stats::{
    series_name, Carried, NodeSecond, Recording, SeriesSet, StoredV2Serializer, ENDED_LATER,
    STARTED_EARLIER,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(super) struct Collector<'a> {
    plan: &'a StepPlan,
    shared: Arc<Shared>,
    stop: &'a AtomicBool,
}

impl<'a> Collector<'a> {
    pub(super) fn new(plan: &'a StepPlan, shared: Arc<Shared>, stop: &'a AtomicBool) -> Self {
        Self { plan, shared, stop }
    }

    fn all_finished(&self) -> bool {
        self.shared.finished.load(Ordering::Acquire) >= self.shared.recorders.len()
    }

    fn should_end(&self) -> bool {
        self.all_finished()
            || self.stop.load(Ordering::Relaxed)
            || self.shared.halt.load(Ordering::Relaxed)
    }

    /// Sleeps until `until`, waking early when the step should end.
    fn wait_until(&self, until: Instant) {
        while !self.should_end() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(20)));
        }
    }

    pub(super) fn run(
        self,
        progress: &mut Progress,
        observer: &mut dyn StepObserver,
    ) -> Result<StepResult> {
        let priority = CollectorPriority::raise();
        progress.phase_started(self.plan);
        // The warm-up and the window start once every worker is ready (its binding's init
        // done, waiting at the gate), not while threads are still being started.
        while self.shared.ready.load(Ordering::Acquire)
            + self.shared.finished.load(Ordering::Acquire)
            < self.shared.recorders.len()
            && !self.stop.load(Ordering::Relaxed)
            && !self.shared.halt.load(Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        let Start {
            measure_from,
            measure_from_wall,
            first_boundary,
        } = self.shared.open_gate(self.plan.warmup);
        self.wait_until(measure_from);
        // Workers count operations from `measure_from`, so the window starts there too, not
        // after the tracer has attached (that takes a few hundred ms, and a short load can be
        // over by then). Client CPU is taken before the attach: a bit more, never less.
        let cpu_at_start = process_cpu();
        let now = Instant::now();
        let started = measure_from.min(now);
        // Earlier than `measure_from` only when every worker ended during the warm-up.
        let started_wall = measure_from_wall - (measure_from - started);
        // Threads inherit their creator's nice value: the tracers and samplers started here
        // run at the process's own.
        priority.lowered(|| observer.measurement_started());
        let deadline = self.plan.max_execution.map(|d| started + d);
        let mut state = CollectState::new(started_wall, progress.live());
        let mut ended_early = None;
        // Interval k ends at `first_boundary` + k s, whenever the collector gets to it: the
        // workers place each operation by its end, so a late collector (starved of CPU by 1024
        // busy workers, say) still gives each second what ended in it. An interval is complete
        // once every worker's part is taken; a worker descheduled while recording holds its
        // part until its next turn, and meanwhile the collector keeps watching the clock.
        let boundary = |k: u32| first_boundary + Duration::from_secs(u64::from(k));
        let mut k = 0u32;
        loop {
            let next = boundary(k);
            let until = if state.taking() {
                Instant::now() + Duration::from_millis(1)
            } else {
                next
            };
            self.wait_until(deadline.map_or(until, |d| d.min(until)));
            let time_up = deadline.is_some_and(|d| Instant::now() >= d);
            if self.should_end() || time_up {
                break;
            }
            if Instant::now() < next || !state.take(&self.shared, k) {
                continue;
            }
            state.emit(next - started)?;
            k += 1;
            if let Some(reason) = self
                .plan
                .unusable_after
                .and_then(|n| unusable(&state.samples, n))
            {
                progress.live().event(&crate::live::LiveEvent {
                    unix_ms: unix_ms(SystemTime::now()),
                    place: "client".into(),
                    kind: "step_ended_early".into(),
                    text: format!("warning: ending the step: {reason}"),
                });
                ended_early = Some(reason);
                break;
            }
            progress.tick(
                self.plan,
                &state.totals,
                state.operations,
                started.elapsed(),
                state.samples.last(),
            );
        }
        // Let workers finish the operation in hand, then take what they recorded.
        let halted = Instant::now();
        self.shared.halt.store(true, Ordering::Release);
        while !self.all_finished() {
            std::thread::sleep(Duration::from_millis(2));
        }
        let runtime = started.elapsed();
        let client_cpu = process_cpu().saturating_sub(cpu_at_start);
        // Whole seconds that ended before the halt but were not complete yet, each on its own
        // (no worker holds its lock now); then the last interval takes everything left:
        // operations that ended after the last whole second, the ones in hand at the halt,
        // and the workers' cleanup.
        while ended_early.is_none() && boundary(k) <= halted {
            state.take_all(&self.shared, k);
            state.emit(boundary(k) - started)?;
            k += 1;
        }
        state.take_all(&self.shared, u32::MAX);
        state.emit(runtime.max(state.last_t))?;
        state.close_shift()?;
        progress.finished();
        let error = self
            .shared
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let interrupted = self.stop.load(Ordering::Relaxed) || error.is_some();
        let by_node = by_node_rows(self.shared.by_node.take(), &state.samples);
        Ok(StepResult {
            started_unix_ms: unix_ms(started_wall),
            runtime,
            operations: state.operations,
            totals: state.totals,
            samples: state.samples,
            hlog: state.hlog,
            shift_hlog: state.shift_hlog,
            interrupted,
            error,
            ended_early,
            client_cpu,
            by_node,
        })
    }
}

/// The per-node rows stamped as the step's samples stamp their seconds: interval k is sample
/// k. The last sample took every interval after it, so their rows fold into one there (the
/// larger p99 kept: an upper bound, for a second that is rarely whole).
fn by_node_rows(rows: Vec<NodeSecond>, samples: &[Sample]) -> Vec<NodeSecondRow> {
    let Some(last) = samples.last() else {
        return Vec::new();
    };
    let mut out: Vec<NodeSecondRow> = Vec::with_capacity(rows.len());
    let mut at: BTreeMap<(u64, String, &str), usize> = BTreeMap::new();
    for r in rows {
        let s = samples.get(r.interval as usize).unwrap_or(last);
        let (node, op) = (r.node.to_string(), r.op.name());
        match at.get(&(s.unix_ms, node.clone(), op)) {
            Some(&i) => {
                let o = &mut out[i];
                o.count += r.count;
                o.p50_us = o.p50_us.max(r.p50_us);
                o.p99_us = o.p99_us.max(r.p99_us);
                o.max_us = o.max_us.max(r.max_us);
            }
            None => {
                at.insert((s.unix_ms, node.clone(), op), out.len());
                out.push(NodeSecondRow {
                    unix_ms: s.unix_ms,
                    secs: s.secs,
                    node,
                    op: op.to_string(),
                    count: r.count,
                    p50_us: r.p50_us,
                    p99_us: r.p99_us,
                    max_us: r.max_us,
                });
            }
        }
    }
    out
}

/// The collector's thread at a higher scheduling priority for the step, when the process may
/// raise it (root, CAP_SYS_NICE); the old one is restored on drop. A thread that sleeps gets no
/// head start over busy ones under the kernel's EEVDF scheduler: with 1024 CPU-bound workers on
/// two CPUs it waited seconds for each turn, so the step's seconds and its end came late. At
/// nice −10 it runs within milliseconds of waking; it uses ~1 % of a CPU.
struct CollectorPriority {
    tid: libc::id_t,
    old: Option<libc::c_int>,
}

impl CollectorPriority {
    const NICE: libc::c_int = -10;

    fn raise() -> Self {
        // The system call, not glibc's gettid(), which is glibc 2.30's: iodig's agent build
        // runs on glibc 2.28 (scripts/build-agent.sh, docs/remote.md).
        // SAFETY: gettid has no arguments, no preconditions and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
        // SAFETY: getpriority and setpriority only read and set this thread's nice value;
        // errno is cleared first because -1 is a valid nice value.
        let old = unsafe {
            *libc::__errno_location() = 0;
            let old = libc::getpriority(libc::PRIO_PROCESS, tid);
            (*libc::__errno_location() == 0
                && old > Self::NICE
                && libc::setpriority(libc::PRIO_PROCESS, tid, Self::NICE) == 0)
                .then_some(old)
        };
        Self { tid, old }
    }
}

impl CollectorPriority {
    /// Runs `f` at the thread's old priority (for threads it starts, which inherit it).
    fn lowered<T>(&self, f: impl FnOnce() -> T) -> T {
        let Some(old) = self.old else {
            return f();
        };
        // SAFETY: as in `raise`; lowering a priority is always allowed, and raising it back
        // was allowed in `raise`.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, self.tid, old) };
        let out = f();
        // SAFETY: as above.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, self.tid, Self::NICE) };
        out
    }
}

impl Drop for CollectorPriority {
    fn drop(&mut self) {
        if let Some(old) = self.old {
            // SAFETY: as in `raise`; lowering a priority back is always allowed.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, self.tid, old);
            }
        }
    }
}

/// Why the database is unusable, when every operation of the last `seconds` whole seconds
/// failed (and some were tried in each): "database unusable: every operation failed for 10 s
/// (UPDATE-FAILED 52,114)".
pub(super) fn unusable(samples: &[Sample], seconds: u64) -> Option<String> {
    let n = usize::try_from(seconds).ok().filter(|n| *n > 0)?;
    // Called every second: only the last `n` whole seconds are looked at, not the whole step.
    let last: Vec<&Sample> = samples
        .iter()
        .rev()
        .filter(|s| s.secs >= 0.999)
        .take(n)
        .collect();
    if last.len() < n {
        return None;
    }
    let mut failed = BTreeMap::<&str, u64>::new();
    for s in &last {
        let mut ok = 0;
        let mut bad = 0;
        for (name, v) in &s.series {
            if name.starts_with("Intended-") || name == "CLEANUP" {
                continue;
            }
            if name.ends_with("-FAILED") {
                bad += v.count;
                *failed.entry(name.as_str()).or_default() += v.count;
            } else {
                ok += v.count;
            }
        }
        if ok > 0 || bad == 0 {
            return None;
        }
    }
    let counts: Vec<String> = failed
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    Some(format!(
        "database unusable: every operation failed for {seconds} s ({}); -p unusableafter=0 keeps such steps to their end",
        counts.join(", ")
    ))
}

/// How long from `wall` to the next whole wall-clock second at least `min` away, so client
/// samples share their boundaries with the tracer's and the system sampler's.
pub(super) fn to_second_boundary(wall: SystemTime, min: Duration) -> Duration {
    let since_epoch = wall.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut to_next =
        Duration::from_secs(1) - Duration::from_nanos(u64::from(since_epoch.subsec_nanos()));
    while to_next < min {
        to_next += Duration::from_secs(1);
    }
    to_next
}

/// Accumulated results of the collector.
struct CollectState {
    started_wall: SystemTime,
    interval: SeriesSet,
    totals: SeriesSet,
    samples: Vec<Sample>,
    operations: u64,
    last_t: Duration,
    /// Empty recordings to hand to workers: the ones taken come back here once merged, so a
    /// step holds a few recordings per worker, not one per second.
    spares: Vec<Recording>,
    /// Recordings taken from a worker, being merged.
    taken: Vec<Recording>,
    /// Workers whose recordings are still to be taken this interval.
    pending: Vec<usize>,
    /// Workload operations of the interval being taken.
    interval_ops: u64,
    hlog: Vec<u8>,
    /// Each emitted interval's start and length, as its log lines give them.
    spans: Vec<(Duration, Duration)>,
    /// Operations that started in another interval than they ended in, until written out.
    carried: Carried,
    shift_hlog: Vec<u8>,
    /// Who watches the run live: each second is published to it as it is emitted.
    live: Arc<dyn LiveSink>,
    /// The second's latencies in the live buckets, reused from second to second; `None` when
    /// the live sink does not want them.
    latency: Option<Vec<LatencyBuckets>>,
}

/// Start intervals stay open for this many intervals after they end: an operation still
/// running then (a stall longer than this) lands in a second line of its start interval, which
/// readers add to the first.
const START_INTERVALS_OPEN: u32 = 5;

/// An empty interval log whose times are on the wall clock from `started_wall`.
fn hlog_header(started_wall: SystemTime, comment: &str) -> Vec<u8> {
    let mut hlog = Vec::new();
    let mut ser = V2DeflateSerializer::new();
    // Header only: StartTime and BaseTime make the log readable by HdrHistogram's Java tools.
    let _ = IntervalLogWriterBuilder::new()
        .add_comment(comment)
        .with_start_time(started_wall)
        .with_base_time(started_wall)
        .begin_log_with(&mut hlog, &mut ser);
    hlog.extend_from_slice(b"\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n");
    hlog
}

impl CollectState {
    fn new(started_wall: SystemTime, live: Arc<dyn LiveSink>) -> Self {
        let hlog = hlog_header(
            started_wall,
            "iodig latency log: one tagged histogram per series per second, values in microseconds",
        );
        let shift_hlog = hlog_header(
            started_wall,
            &format!(
                "iodig latency shift log: per series and interval, the operations that ended in it but started in an earlier one (<series>{STARTED_EARLIER}) and those that started in it and ended in a later one (<series>{ENDED_LATER}), values in microseconds. The log by start is latency.hlog less the first plus the second, interval by interval (docs/run-directory.md)"
            ),
        );
        Self {
            started_wall,
            interval: SeriesSet::new(),
            totals: SeriesSet::new(),
            samples: Vec::new(),
            operations: 0,
            last_t: Duration::ZERO,
            spares: Vec::new(),
            taken: Vec::new(),
            pending: Vec::new(),
            interval_ops: 0,
            hlog,
            spans: Vec::new(),
            carried: Carried::default(),
            shift_hlog,
            latency: live.wants_client_latency().then(Vec::new),
            live,
        }
    }

    /// Whether an interval is being taken (some workers' parts are still to come).
    fn taking(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes the workers' recordings of intervals up to `through` into the interval being
    /// built (an operation counts in the interval it ended in, and apart when it started in an
    /// earlier one); `true` once every worker's part is in. Workers whose lock is held are left
    /// for the next call.
    fn take(&mut self, shared: &Shared, through: u32) -> bool {
        if self.pending.is_empty() {
            self.pending.extend(0..shared.recorders.len());
        }
        // The interval being built is the next sample.
        let index = u32::try_from(self.samples.len()).unwrap_or(u32::MAX);
        let Self {
            pending,
            taken,
            spares,
            interval,
            interval_ops,
            carried,
            ..
        } = self;
        pending.retain(|&w| {
            if !shared.recorders[w].try_take(through, taken, spares) {
                return true;
            }
            for mut r in taken.drain(..) {
                *interval_ops += r.drain_into(index, interval, carried);
                spares.push(r);
            }
            false
        });
        // Spares beyond a few per worker would only be memory kept.
        spares.truncate(2 * shared.recorders.len());
        pending.is_empty()
    }

    /// [`CollectState::take`] until every part is in: for when the workers have finished, so
    /// no lock is held for long.
    fn take_all(&mut self, shared: &Shared, through: u32) {
        while !self.take(shared, through) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Ends the interval taken: one sample ending at `t` from the start of the window, its
    /// interval log lines, and the start intervals that can no longer change.
    fn emit(&mut self, t: Duration) -> Result<()> {
        let secs = (t - self.last_t).as_secs_f64();
        let operations = std::mem::take(&mut self.interval_ops);
        self.operations += operations;
        self.totals.merge(&self.interval);
        // One span for both logs, so their lines of an interval carry the same timestamps.
        let span = (
            t.saturating_sub(Duration::from_secs_f64(secs)),
            Duration::from_secs_f64(secs),
        );
        self.spans.push(span);
        self.write_hlog(span)?;
        let index = u32::try_from(self.samples.len()).unwrap_or(u32::MAX);
        self.write_shift(index, index.checked_sub(START_INTERVALS_OPEN))?;
        self.samples.push(Sample {
            t: t.as_secs_f64(),
            unix_ms: unix_ms(self.started_wall + t),
            secs,
            operations,
            ops_per_sec: if secs > 0.0 {
                operations as f64 / secs
            } else {
                0.0
            },
            series: self.interval.summaries(),
        });
        self.last_t = t;
        if let Some(latency) = &mut self.latency {
            latency.clear();
            latency.extend(
                (self.interval.histograms()).map(|(id, h)| LatencyBuckets::of(series_name(id), h)),
            );
            self.live.client_latency(latency);
        }
        if let Some(sample) = self.samples.last() {
            self.live.client_second(sample);
        }
        self.interval.clear();
        Ok(())
    }

    /// Writes the shift log's lines of interval `index` (the operations that ended in it but
    /// started earlier), then those of the start intervals up to `close_through` (the
    /// operations that started in them and ended later), which no longer change: all when
    /// `close_through` is `u32::MAX`.
    fn write_shift(&mut self, index: u32, close_through: Option<u32>) -> Result<()> {
        let mut ser = StoredV2Serializer::default();
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.shift_hlog, &mut ser)
            .context("cannot write the HDR shift log")?;
        let mut write = |set: &SeriesSet, (start, length): (Duration, Duration), suffix: &str| {
            for (id, h) in set.histograms() {
                let tag = format!("{}{suffix}", series_name(id));
                writer
                    .write_histogram(h, start, length, Tag::new(&tag))
                    .map_err(|e| anyhow!("cannot write the HDR shift log: {e:?}"))?;
            }
            anyhow::Ok(())
        };
        if let Some(&span) = self.spans.get(index as usize) {
            write(&self.carried.started_earlier, span, STARTED_EARLIER)?;
        }
        self.carried.started_earlier.clear();
        let Some(close_through) = close_through else {
            return Ok(());
        };
        while let Some(entry) = self.carried.ended_later.first_entry() {
            let started = *entry.key();
            if started > close_through {
                break;
            }
            let set = entry.remove();
            // Every start interval is an emitted one: a recording's is clamped to the interval
            // it is merged into.
            if let Some(&span) = self.spans.get(started as usize) {
                write(&set, span, ENDED_LATER)?;
            }
        }
        Ok(())
    }

    /// Writes what is left of the shift log once the last interval is emitted.
    fn close_shift(&mut self) -> Result<()> {
        self.write_shift(u32::MAX, Some(u32::MAX))
    }

    fn write_hlog(&mut self, (start, length): (Duration, Duration)) -> Result<()> {
        let mut ser = V2DeflateSerializer::new();
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.hlog, &mut ser)
            .context("cannot write the HDR interval log")?;
        for (id, h) in self.interval.histograms() {
            let name = series_name(id);
            writer
                .write_histogram(h, start, length, Tag::new(&name))
                .map_err(|e| anyhow!("cannot write the HDR interval log: {e:?}"))?;
        }
        Ok(())
    }
}
