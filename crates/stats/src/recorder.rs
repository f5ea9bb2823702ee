//! Per-worker recording in HdrHistogram's recorder pattern: each worker counts its own
//! operations, per series and per interval of start, in the bucket layout of [`new_histogram`],
//! in one [`Recording`] per collector interval (the interval the operation ended in, from its
//! end time); the collector takes the recordings of intervals that are over and merges them
//! into HDR histograms, and sets apart the operations that started in another interval (the
//! log by start's shift, [`crate::shift`]). Its work per interval is O(workers × buckets
//! used), not O(operations), so it keeps up at any op rate, and nothing queues.
//!
//! The collector never waits for a worker: it takes a worker's recordings only when its lock is
//! free, and comes back to the others. A worker descheduled while it records (1024 busy
//! threads on 2 CPUs wait ~1 s for their next turn) would otherwise hold the collector up once
//! per such worker, and a step's seconds would merge into one sample.
//!
//! A worker's counts are sparse (chunks of the layout allocated as values land in them), not
//! full histograms: one 1 µs–1 h, 3-digit HDR histogram is 23,552 counters (184 KB of u64), and
//! 1024 workers × a few series × two start intervals of those would be hundreds of MB, while
//! one worker's latencies in one second fall in a few chunks.
//!
//! [`new_histogram`]: crate::new_histogram

use crate::log::{Entry, Variant};
use crate::series::{IntervalMode, SeriesSet, HIGHEST_US, STATUSES};
use crate::shift::Carried;
use iodig_model::OpKind;
use std::sync::{Mutex, PoisonError};

// The layout of `new_histogram` (lowest 1, 3 significant digits, HdrHistogram's formulas):
// 2048 sub-buckets (the smallest power of two ≥ 2·10³), unit magnitude 0. A test checks these
// against the hdrhistogram crate itself, value by value.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_HALF: usize = 1 << SUB_BUCKET_HALF_MAGNITUDE;
const SUB_BUCKET_MASK: u64 = (1 << (SUB_BUCKET_HALF_MAGNITUDE + 1)) - 1;
/// 64 − unit magnitude − log2(sub-bucket count).
const LEADING_ZERO_BASE: u32 = 64 - (SUB_BUCKET_HALF_MAGNITUDE + 1);
/// Counters of the layout up to [`HIGHEST_US`]: (22 buckets + 1) × 1024.
const INDICES: usize = 23 * SUB_BUCKET_HALF;
/// Counters per allocation: 1 KB of u32, a few of which hold one worker's second.
const CHUNK: usize = 256;
const CHUNKS: usize = INDICES / CHUNK;
/// Series slots: every op × every variant, indexed directly (no lookup per operation).
const SLOTS: usize = OpKind::ALL.len() * 4;
const VARIANTS: [Variant; 4] = [
    Variant::Ok,
    Variant::Failed,
    Variant::Intended,
    Variant::IntendedFailed,
];
/// Start-interval sets a recording keeps for reuse once emptied: a worker runs one operation
/// at a time, so an interval's operations started in one or two intervals (more only after a
/// stall).
const KEPT_SETS: usize = 4;

/// The collector's interval an operation that started `started_ms` after the start of
/// measurement started in: the first ends `first_boundary_ms` after it, the others follow a
/// second apart.
#[inline]
fn start_interval(started_ms: u32, first_boundary_ms: u32) -> u32 {
    match started_ms.checked_sub(first_boundary_ms) {
        None => 0,
        Some(after) => after / 1000 + 1,
    }
}

/// HdrHistogram's counts index of `v` in the layout above (`index_for`).
#[inline]
fn index_for(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << SUB_BUCKET_HALF_MAGNITUDE) + sub - SUB_BUCKET_HALF
}

/// The lowest value of counts index `i` (HdrHistogram's `value_for`), which records back into
/// the same index.
fn value_for(i: usize) -> u64 {
    let bucket = (i >> SUB_BUCKET_HALF_MAGNITUDE) as u32;
    let sub = (i & (SUB_BUCKET_HALF - 1)) as u64;
    if bucket == 0 {
        sub
    } else {
        (sub + SUB_BUCKET_HALF as u64) << (bucket - 1)
    }
}

/// One series' counts, in chunks of the HDR layout allocated on first use.
struct Counts {
    chunks: [Option<Box<[u32; CHUNK]>>; CHUNKS],
    /// Chunks written since the last drain (bit per chunk), so a drain reads only those.
    dirty: u128,
}

impl Counts {
    fn new() -> Box<Self> {
        Box::new(Self {
            chunks: [const { None }; CHUNKS],
            dirty: 0,
        })
    }

    #[inline]
    fn add(&mut self, us: u32) {
        let i = index_for(u64::from(us).min(HIGHEST_US));
        let c = i / CHUNK;
        let chunk = self.chunks[c].get_or_insert_with(|| Box::new([0; CHUNK]));
        // A u32 per worker, bucket and interval: 4 billion operations of one worker in one
        // interval cannot happen; saturating keeps even that from wrapping.
        chunk[i % CHUNK] = chunk[i % CHUNK].saturating_add(1);
        self.dirty |= 1 << c;
    }

    /// Calls `f(value, count)` for every counter set since the last drain and zeroes it,
    /// keeping the chunks for the next interval.
    fn drain(&mut self, mut f: impl FnMut(u64, u64)) {
        let mut dirty = std::mem::take(&mut self.dirty);
        while dirty != 0 {
            let c = dirty.trailing_zeros() as usize;
            dirty &= dirty - 1;
            if let Some(chunk) = self.chunks[c].as_deref_mut() {
                for (j, n) in chunk.iter_mut().enumerate() {
                    if *n != 0 {
                        f(value_for(c * CHUNK + j), u64::from(*n));
                        *n = 0;
                    }
                }
            }
        }
    }
}

/// A worker's counts of the operations that started in one collector interval.
struct StartSet {
    /// The collector's interval the operations started in.
    interval: u32,
    series: [Option<Box<Counts>>; SLOTS],
}

impl StartSet {
    fn new(interval: u32) -> Self {
        Self {
            interval,
            series: [const { None }; SLOTS],
        }
    }

    #[inline]
    fn add(&mut self, op: OpKind, variant: Variant, us: u32) {
        self.series[op.index() * 4 + variant as usize]
            .get_or_insert_with(Counts::new)
            .add(us);
    }
}

/// What one worker recorded in one interval: counts per start interval and series, and return
/// codes. Passed between a worker and the collector, never reallocated per operation.
pub struct Recording {
    /// The collector's interval (its sample's index) the operations ended in.
    interval: u32,
    /// Workload operations the worker counted in this interval (YCSB's: a read-modify-write
    /// once, not its inner read and update), for the sample's throughput.
    operations: u64,
    /// The first `active` sets hold this interval's counts; the rest are kept for reuse.
    sets: Vec<StartSet>,
    active: usize,
    returns: [[u64; STATUSES]; OpKind::ALL.len()],
}

impl Default for Recording {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording")
            .field("start_intervals", &self.active)
            .finish_non_exhaustive()
    }
}

impl Recording {
    /// An empty recording: the collector's spare, or a worker's first.
    pub fn new() -> Self {
        Self {
            interval: 0,
            operations: 0,
            sets: Vec::new(),
            active: 0,
            returns: [[0; STATUSES]; OpKind::ALL.len()],
        }
    }

    fn is_empty(&self) -> bool {
        self.active == 0 && self.operations == 0
    }

    fn set_for(&mut self, interval: u32) -> &mut StartSet {
        // Start intervals mostly arrive in order, so the newest set is the likely one.
        let found = self.sets[..self.active]
            .iter()
            .rposition(|s| s.interval == interval);
        let i = match found {
            Some(i) => i,
            None => {
                if self.active == self.sets.len() {
                    self.sets.push(StartSet::new(interval));
                }
                self.sets[self.active].interval = interval;
                self.active += 1;
                self.active - 1
            }
        };
        &mut self.sets[i]
    }

    /// Counts one entry exactly as [`SeriesSet::record`] would, under the collector interval
    /// it started in: its end less its latency in whole ms (clamped at the start of
    /// measurement), where the first interval ends `first_boundary_ms` after the start of
    /// measurement and the others follow a second apart.
    #[inline]
    fn record(&mut self, e: &Entry, mode: IntervalMode, first_boundary_ms: u32) {
        let main_us = mode.latency_us(e);
        let started_ms = e.end_ms.saturating_sub(main_us / 1000);
        let set = self.set_for(start_interval(started_ms, first_boundary_ms));
        let (main, intended) = if e.ok {
            (Variant::Ok, Variant::Intended)
        } else {
            (Variant::Failed, Variant::IntendedFailed)
        };
        set.add(e.op, main, main_us);
        if mode == IntervalMode::Both {
            set.add(e.op, intended, e.intended_us);
        }
        if e.op != OpKind::Cleanup {
            let n = &mut self.returns[e.op.index()][usize::from(e.status).min(STATUSES - 1)];
            *n += 1;
        }
    }

    /// Adds this recording to `interval`, the collector's interval `index` (by completion:
    /// everything recorded), and its operations that started in an earlier interval to
    /// `carried` as well (an operation whose start, in whole ms, falls after its interval is
    /// counted as starting in it), then empties it for reuse; returns the workload operations
    /// it counted. Exact: every count lands in the same HDR bucket as a direct record.
    pub fn drain_into(
        &mut self,
        index: u32,
        interval: &mut SeriesSet,
        carried: &mut Carried,
    ) -> u64 {
        let Carried {
            started_earlier,
            ended_later,
        } = carried;
        for set in &mut self.sets[..self.active] {
            let started = set.interval.min(index);
            let mut later = (started < index).then(|| ended_later.entry(started).or_default());
            for (slot, counts) in set.series.iter_mut().enumerate() {
                let Some(counts) = counts.as_deref_mut() else {
                    continue;
                };
                let id = (OpKind::ALL[slot / 4], VARIANTS[slot % 4]);
                counts.drain(|v, n| {
                    interval.record_n(id, v, n);
                    if let Some(later) = later.as_deref_mut() {
                        later.record_n(id, v, n);
                        started_earlier.record_n(id, v, n);
                    }
                });
            }
        }
        for (op, counts) in OpKind::ALL.iter().zip(&mut self.returns) {
            for (status, n) in counts.iter_mut().enumerate() {
                if *n > 0 {
                    interval.add_returns(*op, status, std::mem::take(n));
                }
            }
        }
        self.active = 0;
        self.interval = 0;
        // A stall can leave many start intervals in one interval; their sets are not kept.
        self.sets.truncate(KEPT_SETS);
        std::mem::take(&mut self.operations)
    }
}

/// A worker's recordings: the one it records into, and those of intervals it has left.
#[derive(Debug, Default)]
struct Slots {
    current: Recording,
    /// Recordings of earlier intervals, for the collector, oldest first.
    sealed: Vec<Recording>,
    /// An empty recording the collector handed back, for the worker's next interval.
    spare: Option<Recording>,
}

impl Slots {
    /// Moves on to `interval` when the worker's operations have reached it, keeping the
    /// current recording for the collector.
    #[inline]
    fn advance(&mut self, interval: u32) {
        if interval <= self.current.interval {
            return;
        }
        let fresh = self.spare.take().unwrap_or_default();
        let mut done = std::mem::replace(&mut self.current, fresh);
        self.current.interval = interval;
        if done.is_empty() {
            done.interval = 0;
            self.spare = Some(done);
        } else {
            self.sealed.push(done);
        }
    }
}

/// One worker's recorder: the worker records into its current [`Recording`] behind a mutex
/// that only the collector, once per interval and without waiting, ever contends.
#[derive(Debug)]
pub struct WorkerRecorder {
    mode: IntervalMode,
    slots: Mutex<Slots>,
}

impl WorkerRecorder {
    /// A recorder for one worker, recording latency as `mode` says.
    pub fn new(mode: IntervalMode) -> Self {
        Self {
            mode,
            slots: Mutex::new(Slots::default()),
        }
    }

    /// Records one measured operation that ended in the collector's interval `interval`, of a
    /// step whose first interval ended `first_boundary_ms` after its measurement started (the
    /// entry's `end_ms` counts from there). An operation of an interval the collector has already taken (its worker
    /// was descheduled between the operation's end and this call) goes to the worker's
    /// current interval: the one case where an operation is counted a second late.
    #[inline]
    pub fn record(&self, first_boundary_ms: u32, interval: u32, e: &Entry) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.advance(interval);
        slots.current.record(e, self.mode, first_boundary_ms);
    }

    /// Counts one measured workload operation that ended in interval `interval` (placed as
    /// [`WorkerRecorder::record`] places operations).
    #[inline]
    pub fn count_operation(&self, interval: u32) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.advance(interval);
        slots.current.operations += 1;
    }

    /// [`WorkerRecorder::record`] of a workload operation's last call, and
    /// [`WorkerRecorder::count_operation`] of the operation, which ended with it: one lock
    /// for both (the lock was a tenth of a no-op binding's CPU per operation, taken twice).
    #[inline]
    pub fn record_operation(&self, first_boundary_ms: u32, interval: u32, e: &Entry) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots.advance(interval);
        slots.current.record(e, self.mode, first_boundary_ms);
        slots.current.operations += 1;
    }

    /// Moves the worker's recordings of intervals up to `through` into `out`, giving the
    /// worker an empty recording from `spares` in their place; `false` (nothing taken) when
    /// the worker holds its lock, so the collector comes back rather than wait.
    pub fn try_take(
        &self,
        through: u32,
        out: &mut Vec<Recording>,
        spares: &mut Vec<Recording>,
    ) -> bool {
        let mut slots = match self.slots.try_lock() {
            Ok(slots) => slots,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let slots = &mut *slots;
        let ahead = slots.sealed.iter().position(|r| r.interval > through);
        out.extend(slots.sealed.drain(..ahead.unwrap_or(slots.sealed.len())));
        if slots.current.interval <= through && !slots.current.is_empty() {
            let mut fresh = spares.pop().unwrap_or_default();
            fresh.interval = through.saturating_add(1);
            out.push(std::mem::replace(&mut slots.current, fresh));
        }
        if slots.spare.is_none() {
            slots.spare = spares.pop();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::new_histogram;

    /// A small deterministic generator (tests need no seed crate).
    struct Lcg(u64);

    impl Lcg {
        fn next_u64(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 33
        }
    }

    #[test]
    fn the_layout_is_hdrhistograms() {
        let h = new_histogram();
        assert_eq!(h.distinct_values(), INDICES);
        let mut values: Vec<u64> = (0..5000).collect();
        for shift in 0..32 {
            for d in [0u64, 1, 2, 3] {
                values.push((1u64 << shift).saturating_sub(d));
                values.push((1u64 << shift) + d);
            }
        }
        values.extend([999_999, 1_000_000, HIGHEST_US - 1, HIGHEST_US]);
        let mut rng = Lcg(7);
        values.extend((0..100_000).map(|_| rng.next_u64() % HIGHEST_US));
        for v in values.into_iter().filter(|v| *v <= HIGHEST_US) {
            let i = index_for(v);
            assert!(i < INDICES, "{v}");
            assert_eq!(value_for(i), h.lowest_equivalent(v), "value {v}, index {i}");
            assert_eq!(index_for(value_for(i)), i, "value {v}");
        }
    }

    fn entry(rng: &mut Lcg) -> Entry {
        let op = OpKind::ALL[(rng.next_u64() % 8) as usize];
        let ok = !rng.next_u64().is_multiple_of(10);
        // Mostly small latencies, some long ones, and the edges (0, the clamp, u32::MAX).
        let service_us = match rng.next_u64() % 20 {
            0 => rng.next_u64() as u32,
            1 => u32::MAX,
            2 => 0,
            _ => (rng.next_u64() % 5000) as u32,
        };
        let intended_us = service_us.saturating_add((rng.next_u64() % 3000) as u32);
        Entry {
            op,
            status: if ok {
                0
            } else {
                1 + (rng.next_u64() % 12) as u8
            },
            ok,
            service_us,
            intended_us,
            end_ms: (rng.next_u64() % 20_000) as u32,
        }
    }

    fn assert_same(a: &SeriesSet, b: &SeriesSet) {
        let ah: Vec<_> = a.histograms().collect();
        let bh: Vec<_> = b.histograms().collect();
        assert_eq!(ah.len(), bh.len());
        for ((ai, ah), (bi, bh)) in ah.iter().zip(&bh) {
            assert_eq!(ai, bi);
            assert!(ah == bh, "{ai:?} differs");
        }
        assert_eq!(a.to_encoded().unwrap(), b.to_encoded().unwrap());
        assert_eq!(a.summaries(), b.summaries());
        let names: Vec<String> = (0..9).map(|i| format!("S{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(a.returns(&names), b.returns(&names));
    }

    /// Takes every worker's recordings through `through`, coming back to a locked one as the
    /// collector does.
    fn collect(
        workers: &[WorkerRecorder],
        through: u32,
        spares: &mut Vec<Recording>,
        index: u32,
        interval: &mut SeriesSet,
        carried: &mut Carried,
    ) {
        let mut taken = Vec::new();
        for w in workers {
            assert!(w.try_take(through, &mut taken, spares));
            for mut r in taken.drain(..) {
                r.drain_into(index, interval, carried);
                spares.push(r);
            }
        }
    }

    fn assert_same_histograms(a: &SeriesSet, b: &SeriesSet, what: &str) {
        let ah: Vec<_> = a.histograms().collect();
        let bh: Vec<_> = b.histograms().collect();
        assert_eq!(ah.len(), bh.len(), "{what}");
        for ((ai, ah), (bi, bh)) in ah.iter().zip(&bh) {
            assert_eq!(ai, bi, "{what}");
            assert!(ah == bh, "{what}: {ai:?} differs");
        }
    }

    /// The same entries give the same histograms, per interval and moved between intervals of
    /// start and end, whether the collector records them one by one (as it did from per-worker
    /// logs) or merges the workers' recordings, some workers already recording the next
    /// interval when it does.
    #[test]
    fn taken_recordings_merge_to_the_entries_histograms() {
        const FIRST_BOUNDARY_MS: u32 = 1_250;
        const INTERVALS: u32 = 6;
        for mode in [IntervalMode::Op, IntervalMode::Intended, IntervalMode::Both] {
            let mut rng = Lcg(mode as u64 + 1);
            let workers: Vec<WorkerRecorder> = (0..5).map(|_| WorkerRecorder::new(mode)).collect();
            // Which workers have moved on to the next interval (they must not go back).
            let mut at = [0u32; 5];
            let mut spares = Vec::new();
            let mut old: Vec<SeriesSet> = (0..=INTERVALS).map(|_| SeriesSet::new()).collect();
            // Entry by entry: what ended in interval k but started earlier, and what started
            // in interval j and ended later.
            let mut earlier_old: Vec<SeriesSet> =
                (0..=INTERVALS).map(|_| SeriesSet::new()).collect();
            let mut later_old = std::collections::BTreeMap::<u32, SeriesSet>::new();
            let mut carried = Carried::default();
            let mut earlier_new = Vec::new();
            let mut totals_old = SeriesSet::new();
            let mut totals_new = SeriesSet::new();
            for k in 0..INTERVALS {
                for _ in 0..(rng.next_u64() % 3000) {
                    let w = (rng.next_u64() % 5) as usize;
                    // A few operations of the next interval before the collector comes.
                    let next = rng.next_u64().is_multiple_of(20);
                    let interval = if next { k + 1 } else { k.max(at[w]) };
                    at[w] = interval;
                    let e = entry(&mut rng);
                    workers[w].record(FIRST_BOUNDARY_MS, interval, &e);
                    old[interval as usize].record(&e, mode);
                    let started_ms = e.end_ms.saturating_sub(mode.latency_us(&e) / 1000);
                    let started = start_interval(started_ms, FIRST_BOUNDARY_MS).min(interval);
                    if started < interval {
                        earlier_old[interval as usize].record(&e, mode);
                        later_old.entry(started).or_default().record(&e, mode);
                    }
                }
                let mut new = SeriesSet::new();
                collect(&workers, k, &mut spares, k, &mut new, &mut carried);
                earlier_new.push(std::mem::take(&mut carried.started_earlier));
                assert_same(&old[k as usize], &new);
                totals_old.merge(&old[k as usize]);
                totals_new.merge(&new);
            }
            // The step's end: everything left, whatever its interval.
            let mut last = SeriesSet::new();
            collect(
                &workers,
                u32::MAX,
                &mut spares,
                INTERVALS,
                &mut last,
                &mut carried,
            );
            earlier_new.push(std::mem::take(&mut carried.started_earlier));
            assert_same(&old[INTERVALS as usize], &last);
            totals_old.merge(&old[INTERVALS as usize]);
            totals_new.merge(&last);
            assert_same(&totals_old, &totals_new);
            for (k, (o, n)) in earlier_old.iter().zip(&earlier_new).enumerate() {
                assert_same_histograms(o, n, &format!("interval {k}, started earlier"));
            }
            assert!(
                later_old.keys().eq(carried.ended_later.keys()),
                "{:?}",
                carried.ended_later.keys()
            );
            for (j, set) in &later_old {
                assert_same_histograms(
                    set,
                    &carried.ended_later[j],
                    &format!("interval {j}, ended later"),
                );
            }
            assert!(!later_old.is_empty(), "the entries moved between intervals");
            // Recordings circulate: a few per worker, not one per interval.
            assert!(spares.len() <= 3 * workers.len(), "{}", spares.len());
        }
    }

    #[test]
    fn a_take_leaves_the_worker_an_empty_recording_and_never_waits() {
        let w = WorkerRecorder::new(IntervalMode::Op);
        let e = Entry {
            op: OpKind::Read,
            status: 0,
            ok: true,
            service_us: 120,
            intended_us: 120,
            end_ms: 1500,
        };
        for _ in 0..1000 {
            w.record(1000, 0, &e);
        }
        w.record(1000, 1, &e);
        // Ended 1.5 s in, 700 ms after its start in the first interval (which ended at 1 s).
        let slow = Entry {
            service_us: 700_000,
            intended_us: 700_000,
            ..e
        };
        w.record(1000, 1, &slow);
        let (mut taken, mut spares) = (Vec::new(), Vec::new());
        // While the worker holds its lock, the collector takes nothing and goes on.
        {
            let _held = w.slots.lock().unwrap();
            assert!(!w.try_take(0, &mut taken, &mut spares));
        }
        assert!(w.try_take(0, &mut taken, &mut spares));
        assert_eq!(taken.len(), 1, "interval 1 is not over");
        let mut interval = SeriesSet::new();
        let mut carried = Carried::default();
        let mut r = taken.pop().unwrap();
        r.drain_into(0, &mut interval, &mut carried);
        assert_eq!(interval.summaries()["READ"].count, 1000);
        // Ended 1.5 s in, after the first interval's end: counted as starting in the interval it
        // ended in, since an operation cannot start after its end.
        assert!(carried.ended_later.is_empty());
        assert_eq!(carried.started_earlier.summaries().len(), 0);
        // The drained recording is empty but keeps its start set and chunk for reuse.
        assert_eq!((r.active, r.sets.len()), (0, 1));
        spares.push(r);
        assert!(w.try_take(1, &mut taken, &mut spares));
        let mut next = SeriesSet::new();
        for mut r in taken.drain(..) {
            r.drain_into(1, &mut next, &mut carried);
        }
        assert_eq!(next.summaries()["READ"].count, 2);
        assert_eq!(carried.started_earlier.summaries()["READ"].count, 1);
        assert!(carried.started_earlier.summaries()["READ"].max_us >= 700_000);
        assert_eq!(
            carried.ended_later.keys().copied().collect::<Vec<_>>(),
            vec![0]
        );
        assert_eq!(carried.ended_later[&0].summaries()["READ"].count, 1);
        // The worker went on into the spare it was handed.
        assert!(spares.is_empty());
    }
}
