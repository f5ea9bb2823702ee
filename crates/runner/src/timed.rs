//! The one place that measures: [`Timed`] wraps any binding, times each call and records it
//! with its status, its service time and its latency from the intended start (YCSB's
//! `DBWrapper`).

pub mod clock;

use crate::pacer::Pacer;
use clock::{Clock, Reader};
use iodig_db::{Db, DbError, Fields, Record, Status};
use iodig_model::OpKind;
use iodig_stats::{Entry, WorkerRecorder};
use iodig_workload::MeasuredDb;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A binding with timing around every call.
pub struct Timed<D: Db, P: Pacer> {
    db: D,
    recorder: Arc<WorkerRecorder>,
    /// Every time below is in ns since this clock's epoch, read through it.
    clock: Reader,
    /// Operations that start before this (warm-up) are not recorded.
    measure_from: u64,
    /// The end of the collector's first interval; the others follow a second apart.
    first_boundary: u64,
    /// The same in whole ms after `measure_from`, as the recorder places an operation in the
    /// interval it started in.
    first_boundary_ms: u32,
    /// Scheduled start of the current operation; `None` without a target rate, where the
    /// start of its first call stands in (as YCSB's intended start is the actual one then),
    /// so no clock is read for it.
    intended_start: Option<u64>,
    /// How the worker waits for its scheduled starts and the workload's pauses.
    pub pacer: P,
    /// When the last call recorded since the last [`Timed::finish_operation`] ended: the
    /// transaction's end, without reading the clock again (a clock read was an eighth of a
    /// no-op binding's CPU per operation).
    last_end: Option<u64>,
    /// The last measured call (with its interval), recorded when the transaction ends,
    /// together with the transaction's count under one lock, or when another call ends.
    held: Option<(u32, Entry)>,
}

impl<D: Db, P: Pacer> Timed<D, P> {
    /// Wraps one worker's binding, recording into `recorder` every operation whose intended
    /// start is at or after `measure_from` (the end of warm-up), in the collector's interval
    /// its end falls in (the first ends at `first_boundary`, the others a second apart).
    ///
    /// `clock` must have been taken before `measure_from` and `first_boundary` (instants
    /// before its epoch count as the epoch).
    pub fn new(
        db: D,
        recorder: Arc<WorkerRecorder>,
        clock: &Clock,
        measure_from: Instant,
        first_boundary: Instant,
        pacer: P,
    ) -> Self {
        let first_boundary_ms = first_boundary
            .saturating_duration_since(measure_from)
            .as_millis();
        Self {
            db,
            recorder,
            measure_from: clock.ns_of(measure_from),
            first_boundary: clock.ns_of(first_boundary),
            first_boundary_ms: u32::try_from(first_boundary_ms).unwrap_or(u32::MAX),
            clock: clock.reader(),
            intended_start: None,
            pacer,
            last_end: None,
            held: None,
        }
    }

    /// Sets the scheduled start of the next operation (a target rate's deadline); `None`: the
    /// start of its first call.
    #[inline]
    pub fn set_intended_start(&mut self, deadline: Option<Instant>) {
        self.intended_start = deadline.map(|d| self.clock.clock().ns_of(d));
    }

    #[inline]
    fn measure(&mut self, op: OpKind, status: Status, start: u64, end: u64) {
        self.last_end = Some(end);
        let intended = *self.intended_start.get_or_insert(start);
        // Decided by the intended start, as the worker counts operations: an operation that
        // straddles the end of the warm-up is in neither, never in one only.
        if intended < self.measure_from {
            return;
        }
        let entry = Entry {
            op,
            status: status.index() as u8,
            ok: status.is_ok(),
            service_us: micros_u32_ns(end.saturating_sub(start)),
            intended_us: micros_u32_ns(end.saturating_sub(intended.min(start))),
            end_ms: millis_u32_ns(end.saturating_sub(self.measure_from)),
        };
        if let Some((interval, held)) = self.held.replace((self.interval(end), entry)) {
            self.recorder
                .record(self.first_boundary_ms, interval, &held);
        }
    }

    /// Records the held call, if any, on its own (before a pause or the cleanup).
    fn release_held(&mut self) {
        if let Some((interval, held)) = self.held.take() {
            self.recorder
                .record(self.first_boundary_ms, interval, &held);
        }
    }

    /// Runs and measures the binding's per-worker cleanup (YCSB's `[CLEANUP]`).
    pub async fn cleanup(&mut self) -> Result<(), DbError> {
        // A transaction that failed before its end leaves its last call held.
        self.release_held();
        let start = self.clock.now();
        let result = self.db.cleanup().await;
        let end = self.clock.now();
        // Cleanup happens after the measured window; record it regardless of warm-up.
        let status = if result.is_ok() {
            Status::Ok
        } else {
            Status::Error
        };
        self.recorder.record(
            self.first_boundary_ms,
            self.interval(end),
            &Entry {
                op: OpKind::Cleanup,
                status: status.index() as u8,
                ok: status.is_ok(),
                service_us: micros_u32_ns(end.saturating_sub(start)),
                intended_us: micros_u32_ns(end.saturating_sub(start)),
                end_ms: millis_u32_ns(end.saturating_sub(self.measure_from)),
            },
        );
        result
    }
}

impl<D: Db, P: Pacer> Timed<D, P> {
    /// Ends one workload operation (the worker's, once per transaction): true when it is
    /// measured (its intended start is past the warm-up), and then counted in the interval
    /// its last call ended in (now, when it recorded none or paused after it), for the
    /// sample's throughput.
    #[inline]
    pub fn finish_operation(&mut self) -> bool {
        let end = match self.last_end.take() {
            Some(end) => end,
            None => self.clock.now(),
        };
        let intended = self.intended_start.take().unwrap_or(end);
        if intended < self.measure_from {
            // Its calls were not measured either (one intended start per transaction).
            self.release_held();
            return false;
        }
        let interval = self.interval(end);
        match self.held.take() {
            Some((at, held)) if at == interval => {
                self.recorder
                    .record_operation(self.first_boundary_ms, at, &held);
            }
            Some((at, held)) => {
                self.recorder.record(self.first_boundary_ms, at, &held);
                self.recorder.count_operation(interval);
            }
            None => self.recorder.count_operation(interval),
        }
        true
    }

    /// The collector's interval an operation that ended at `end` belongs to.
    #[inline]
    fn interval(&self, end: u64) -> u32 {
        if end < self.first_boundary {
            return 0;
        }
        u32::try_from((end - self.first_boundary) / 1_000_000_000)
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    }

    /// `t`, an instant the workload read, on this worker's timeline.
    #[inline]
    fn ns_of(&self, t: Instant) -> u64 {
        self.clock.clock().ns_of(t)
    }
}

/// Microseconds of `ns` nanoseconds, saturating, as YCSB's `(int)((end - start) / 1000)`.
#[inline]
fn micros_u32_ns(ns: u64) -> u32 {
    u32::try_from(ns / 1_000).unwrap_or(u32::MAX)
}

/// Milliseconds of `ns` nanoseconds, saturating at u32::MAX (49 days).
#[inline]
fn millis_u32_ns(ns: u64) -> u32 {
    u32::try_from(ns / 1_000_000).unwrap_or(u32::MAX)
}

impl<D: Db, P: Pacer> Db for Timed<D, P> {
    fn reads_values(&self) -> bool {
        self.db.reads_values()
    }

    async fn read(
        &mut self,
        table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> Status {
        let start = self.clock.now();
        let status = self.db.read(table, key, fields, out).await;
        let end = self.clock.now();
        self.measure(OpKind::Read, status, start, end);
        status
    }

    async fn scan(
        &mut self,
        table: &str,
        start_key: &str,
        count: usize,
        fields: Fields<'_>,
        out: &mut Vec<Record>,
    ) -> Status {
        let start = self.clock.now();
        let status = self.db.scan(table, start_key, count, fields, out).await;
        let end = self.clock.now();
        self.measure(OpKind::Scan, status, start, end);
        status
    }

    async fn update(&mut self, table: &str, key: &str, values: &Record) -> Status {
        let start = self.clock.now();
        let status = self.db.update(table, key, values).await;
        let end = self.clock.now();
        self.measure(OpKind::Update, status, start, end);
        status
    }

    async fn insert(&mut self, table: &str, key: &str, values: &Record) -> Status {
        let start = self.clock.now();
        let status = self.db.insert(table, key, values).await;
        let end = self.clock.now();
        self.measure(OpKind::Insert, status, start, end);
        status
    }

    async fn delete(&mut self, table: &str, key: &str) -> Status {
        let start = self.clock.now();
        let status = self.db.delete(table, key).await;
        let end = self.clock.now();
        self.measure(OpKind::Delete, status, start, end);
        status
    }
}

impl<D: Db, P: Pacer> MeasuredDb for Timed<D, P> {
    fn record(&mut self, op: OpKind, status: Status, start: Instant, end: Instant) {
        let (start, end) = (self.ns_of(start), self.ns_of(end));
        self.measure(op, status, start, end);
    }

    async fn pause(&mut self, d: Duration) {
        self.last_end = None;
        // Recorded now, not after the pause: the collector may take its interval meanwhile.
        self.release_held();
        self.pacer.sleep_until(Instant::now() + d).await;
    }
}
