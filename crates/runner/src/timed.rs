//! The one place that measures: [`Timed`] wraps any binding, times each call and records it
//! with its status, its service time and its latency from the intended start (YCSB's
//! `DBWrapper`).

use crate::pacer::{micros_u32, Pacer};
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
    /// Operations that start before this instant (warm-up) are not recorded.
    measure_from: Instant,
    /// `measure_from` on the wall clock (Unix ms), from which operations are placed in the
    /// second they started in.
    measure_from_unix_ms: u64,
    /// The end of the collector's first interval; the others follow a second apart.
    first_boundary: Instant,
    /// Scheduled start of the current operation; the actual start without a target rate.
    pub intended_start: Instant,
    /// How the worker waits for its scheduled starts and the workload's pauses.
    pub pacer: P,
    /// When the last call recorded since the last [`Timed::count_operation`] ended: the
    /// transaction's end, without reading the clock again (a clock read was an eighth of a
    /// no-op binding's CPU per operation).
    last_end: std::cell::Cell<Option<Instant>>,
}

impl<D: Db, P: Pacer> Timed<D, P> {
    /// Wraps one worker's binding, recording into `recorder` every operation whose intended
    /// start is at or after `measure_from` (the end of warm-up, `measure_from_unix_ms` on the
    /// wall clock), in the collector's interval its end falls in (the first ends at
    /// `first_boundary`, the others a second apart).
    pub fn new(
        db: D,
        recorder: Arc<WorkerRecorder>,
        measure_from: Instant,
        measure_from_unix_ms: u64,
        first_boundary: Instant,
        pacer: P,
    ) -> Self {
        Self {
            db,
            recorder,
            measure_from,
            measure_from_unix_ms,
            first_boundary,
            intended_start: Instant::now(),
            pacer,
            last_end: std::cell::Cell::new(None),
        }
    }

    #[inline]
    fn measure(&self, op: OpKind, status: Status, start: Instant, end: Instant) {
        self.last_end.set(Some(end));
        // Decided by the intended start, as the worker counts operations: an operation that
        // straddles the end of the warm-up is in neither, never in one only.
        if self.intended_start < self.measure_from {
            return;
        }
        self.recorder.record(
            self.measure_from_unix_ms,
            self.interval(end),
            &Entry {
                op,
                status: status.index() as u8,
                ok: status.is_ok(),
                service_us: micros_u32(end - start),
                intended_us: micros_u32(
                    end.saturating_duration_since(self.intended_start.min(start)),
                ),
                end_ms: millis_u32(end.saturating_duration_since(self.measure_from)),
            },
        );
    }

    /// Runs and measures the binding's per-worker cleanup (YCSB's `[CLEANUP]`).
    pub async fn cleanup(&mut self) -> Result<(), DbError> {
        let start = Instant::now();
        let result = self.db.cleanup().await;
        let end = Instant::now();
        // Cleanup happens after the measured window; record it regardless of warm-up.
        let status = if result.is_ok() {
            Status::Ok
        } else {
            Status::Error
        };
        self.recorder.record(
            self.measure_from_unix_ms,
            self.interval(end),
            &Entry {
                op: OpKind::Cleanup,
                status: status.index() as u8,
                ok: status.is_ok(),
                service_us: micros_u32(end - start),
                intended_us: micros_u32(end - start),
                end_ms: millis_u32(
                    (end - start) + start.saturating_duration_since(self.measure_from),
                ),
            },
        );
        result
    }
}

impl<D: Db, P: Pacer> Timed<D, P> {
    /// Counts one measured workload operation (the worker's, once per transaction) in the
    /// interval its last call ended in (now, when it recorded none or paused after it), for
    /// the sample's throughput.
    #[inline]
    pub fn count_operation(&self) {
        let end = self.last_end.take().unwrap_or_else(Instant::now);
        self.recorder.count_operation(self.interval(end));
    }

    /// The collector's interval an operation that ended at `end` belongs to.
    #[inline]
    fn interval(&self, end: Instant) -> u32 {
        match end.checked_duration_since(self.first_boundary) {
            None => 0,
            Some(d) => u32::try_from(d.as_secs())
                .unwrap_or(u32::MAX)
                .saturating_add(1),
        }
    }
}

/// Milliseconds, saturating at u32::MAX (49 days).
fn millis_u32(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

impl<D: Db, P: Pacer> Db for Timed<D, P> {
    async fn read(
        &mut self,
        table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> Status {
        let start = Instant::now();
        let status = self.db.read(table, key, fields, out).await;
        self.measure(OpKind::Read, status, start, Instant::now());
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
        let start = Instant::now();
        let status = self.db.scan(table, start_key, count, fields, out).await;
        self.measure(OpKind::Scan, status, start, Instant::now());
        status
    }

    async fn update(&mut self, table: &str, key: &str, values: &Record) -> Status {
        let start = Instant::now();
        let status = self.db.update(table, key, values).await;
        self.measure(OpKind::Update, status, start, Instant::now());
        status
    }

    async fn insert(&mut self, table: &str, key: &str, values: &Record) -> Status {
        let start = Instant::now();
        let status = self.db.insert(table, key, values).await;
        self.measure(OpKind::Insert, status, start, Instant::now());
        status
    }

    async fn delete(&mut self, table: &str, key: &str) -> Status {
        let start = Instant::now();
        let status = self.db.delete(table, key).await;
        self.measure(OpKind::Delete, status, start, Instant::now());
        status
    }
}

impl<D: Db, P: Pacer> MeasuredDb for Timed<D, P> {
    fn record(&mut self, op: OpKind, status: Status, start: Instant, end: Instant) {
        self.measure(op, status, start, end);
    }

    async fn pause(&mut self, d: Duration) {
        self.last_end.set(None);
        self.pacer.sleep_until(Instant::now() + d).await;
    }
}
