//! Per-worker recording in HdrHistogram's recorder pattern: each worker counts its own
//! operations, per series and per second of start, in the bucket layout of [`new_histogram`];
//! once per interval the collector swaps the filled [`Recording`] for an empty one and merges
//! it into HDR histograms. The collector's work per interval is O(workers × buckets used), not
//! O(operations), so it keeps up at any op rate, and nothing queues.
//!
//! A worker's counts are sparse (chunks of the layout allocated as values land in them), not
//! full histograms: one 1 µs–1 h, 3-digit HDR histogram is 23,552 counters (184 KB of u64), and
//! 1024 workers × a few series × two start seconds of those would be hundreds of MB, while
//! one worker's latencies in one second fall in a few chunks.
//!
//! [`new_histogram`]: crate::new_histogram

use crate::log::{Entry, Variant};
use crate::series::{IntervalMode, SeriesSet, HIGHEST_US, STATUSES};
use iodig_model::OpKind;
use std::collections::BTreeMap;
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
/// Start-second sets a recording keeps for reuse once emptied: a worker runs one operation at
/// a time, so an interval's operations started in one or two seconds (more only after a stall).
const KEPT_SETS: usize = 4;

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

/// A worker's counts of the operations that started in one unix second.
struct StartSet {
    /// The unix second (in ms) the operations started in.
    second_ms: u64,
    series: [Option<Box<Counts>>; SLOTS],
}

impl StartSet {
    fn new(second_ms: u64) -> Self {
        Self {
            second_ms,
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

/// What one worker recorded in one interval: counts per start second and series, and return
/// codes. Swapped between a worker and the collector, never reallocated per operation.
pub struct Recording {
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
            .field("start_seconds", &self.active)
            .finish_non_exhaustive()
    }
}

impl Recording {
    /// An empty recording: the collector's spare, or a worker's first.
    pub fn new() -> Self {
        Self {
            sets: Vec::new(),
            active: 0,
            returns: [[0; STATUSES]; OpKind::ALL.len()],
        }
    }

    fn set_for(&mut self, second_ms: u64) -> &mut StartSet {
        // Start seconds mostly arrive in order, so the newest set is the likely one.
        let found = self.sets[..self.active]
            .iter()
            .rposition(|s| s.second_ms == second_ms);
        let i = match found {
            Some(i) => i,
            None => {
                if self.active == self.sets.len() {
                    self.sets.push(StartSet::new(second_ms));
                }
                self.sets[self.active].second_ms = second_ms;
                self.active += 1;
                self.active - 1
            }
        };
        &mut self.sets[i]
    }

    /// Counts one entry exactly as [`SeriesSet::record`] would, under the second it started
    /// in: `measure_from_unix_ms` plus its end, less its latency in whole ms (clamped at the
    /// start of measurement), as the interval log by start has always placed operations.
    #[inline]
    fn record(&mut self, e: &Entry, mode: IntervalMode, measure_from_unix_ms: u64) {
        let main_us = mode.latency_us(e);
        let end_ms = u64::from(e.end_ms);
        let started_ms = measure_from_unix_ms + end_ms - u64::from(main_us / 1000).min(end_ms);
        let set = self.set_for(started_ms / 1000 * 1000);
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

    /// Adds this recording to `interval` (by second of completion: everything recorded) and
    /// to `by_start` (by the unix second, in ms, the operations started in), then empties it
    /// for reuse. Exact: every count lands in the same HDR bucket as a direct record.
    pub fn drain_into(
        &mut self,
        interval: &mut SeriesSet,
        by_start: &mut BTreeMap<u64, SeriesSet>,
    ) {
        for set in &mut self.sets[..self.active] {
            let start = by_start.entry(set.second_ms).or_default();
            for (slot, counts) in set.series.iter_mut().enumerate() {
                let Some(counts) = counts.as_deref_mut() else {
                    continue;
                };
                let id = (OpKind::ALL[slot / 4], VARIANTS[slot % 4]);
                counts.drain(|v, n| {
                    interval.record_n(id, v, n);
                    start.record_n(id, v, n);
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
        // A stall can leave many start seconds in one interval; their sets are not kept.
        self.sets.truncate(KEPT_SETS);
    }
}

/// One worker's recorder: the worker records into the current [`Recording`] behind a mutex
/// that only the collector's swap, once per interval, ever contends.
#[derive(Debug)]
pub struct WorkerRecorder {
    mode: IntervalMode,
    current: Mutex<Recording>,
}

impl WorkerRecorder {
    /// A recorder for one worker, recording latency as `mode` says.
    pub fn new(mode: IntervalMode) -> Self {
        Self {
            mode,
            current: Mutex::new(Recording::new()),
        }
    }

    /// Records one measured operation of a step whose measurement started at
    /// `measure_from_unix_ms` (the entry's `end_ms` counts from there).
    #[inline]
    pub fn record(&self, measure_from_unix_ms: u64, e: &Entry) {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(e, self.mode, measure_from_unix_ms);
    }

    /// Takes what the worker recorded since the last swap into `spare`, leaving `spare`'s
    /// (empty) recording with the worker: the lock is held for a swap of two structs, and the
    /// worker goes on recording into memory already allocated.
    pub fn swap(&self, spare: &mut Recording) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::swap(&mut *current, spare);
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

    /// The same entries give the same histograms, per interval and by start second, whether
    /// the collector records them one by one (as it did from per-worker logs) or merges
    /// per-worker recordings swapped out at arbitrary points.
    #[test]
    fn swapped_recordings_merge_to_the_entries_histograms() {
        const WALL_MS: u64 = 1_700_000_000_750;
        for mode in [IntervalMode::Op, IntervalMode::Intended, IntervalMode::Both] {
            let mut rng = Lcg(mode as u64 + 1);
            let workers: Vec<WorkerRecorder> = (0..5).map(|_| WorkerRecorder::new(mode)).collect();
            let mut spare = Recording::new();
            let mut by_start_old = BTreeMap::<u64, SeriesSet>::new();
            let mut by_start_new = BTreeMap::<u64, SeriesSet>::new();
            let mut totals_old = SeriesSet::new();
            let mut totals_new = SeriesSet::new();
            for _interval in 0..6 {
                let mut old = SeriesSet::new();
                let mut new = SeriesSet::new();
                for _ in 0..(rng.next_u64() % 3000) {
                    let e = entry(&mut rng);
                    workers[(rng.next_u64() % 5) as usize].record(WALL_MS, &e);
                    old.record(&e, mode);
                    let end = u64::from(e.end_ms);
                    let started = WALL_MS + end - u64::from(mode.latency_us(&e) / 1000).min(end);
                    by_start_old
                        .entry(started / 1000 * 1000)
                        .or_default()
                        .record(&e, mode);
                }
                for w in &workers {
                    w.swap(&mut spare);
                    spare.drain_into(&mut new, &mut by_start_new);
                }
                assert_same(&old, &new);
                totals_old.merge(&old);
                totals_new.merge(&new);
            }
            assert_same(&totals_old, &totals_new);
            assert_eq!(
                by_start_old.keys().collect::<Vec<_>>(),
                by_start_new.keys().collect::<Vec<_>>()
            );
            for (second, set) in &by_start_old {
                let h_old: Vec<_> = set.histograms().collect();
                let h_new: Vec<_> = by_start_new[second].histograms().collect();
                assert_eq!(h_old.len(), h_new.len());
                for ((ai, ah), (bi, bh)) in h_old.iter().zip(&h_new) {
                    assert_eq!(ai, bi);
                    assert!(ah == bh, "second {second}, {ai:?} differs");
                }
            }
        }
    }

    #[test]
    fn a_swap_leaves_the_worker_an_empty_recording_and_memory_is_reused() {
        let w = WorkerRecorder::new(IntervalMode::Op);
        let mut spare = Recording::new();
        let e = Entry {
            op: OpKind::Read,
            status: 0,
            ok: true,
            service_us: 120,
            intended_us: 120,
            end_ms: 1500,
        };
        for _ in 0..1000 {
            w.record(0, &e);
        }
        w.swap(&mut spare);
        let mut interval = SeriesSet::new();
        let mut by_start = BTreeMap::new();
        spare.drain_into(&mut interval, &mut by_start);
        assert_eq!(interval.summaries()["READ"].count, 1000);
        assert_eq!(by_start.keys().copied().collect::<Vec<_>>(), vec![1000]);
        // The drained recording is empty but keeps its start set and chunk for the next worker.
        assert_eq!((spare.active, spare.sets.len()), (0, 1));
        let mut again = SeriesSet::new();
        spare.drain_into(&mut again, &mut by_start);
        assert!(again.summaries().is_empty());
        // The worker records into the recording it was given, from empty.
        w.record(0, &e);
        w.swap(&mut spare);
        let mut next = SeriesSet::new();
        spare.drain_into(&mut next, &mut by_start);
        assert_eq!(next.summaries()["READ"].count, 1);
        assert_eq!(by_start[&1000].summaries()["READ"].count, 1001);
    }
}
