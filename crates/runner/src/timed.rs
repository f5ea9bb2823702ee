//! The one place that measures: [`Timed`] wraps any binding, times each call and records it
//! with its status, its service time and its latency from the intended start (YCSB's
//! `DBWrapper`).

pub mod clock;

use crate::pacer::Pacer;
use clock::{Clock, Reader};
use iodig_db::{Db, DbError, Fields, Record, Status};
use iodig_model::OpKind;
use iodig_stats::{Entry, NodeLatencies, WorkerRecorder};
use iodig_workload::MeasuredDb;
use std::net::IpAddr;
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
    /// together with the transaction's count under one lock, or as soon as another call
    /// starts (so a slow second call cannot move the first into a later interval).
    held: Option<(u32, Entry)>,
    /// Where each request's latency is also recorded under the node that answered it, for a
    /// binding that names one ([`Db::last_coordinator`]).
    by_node: Option<Arc<NodeLatencies>>,
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
            by_node: None,
        }
    }

    /// Records each request's latency under the node that answered it too.
    pub fn with_node_latencies(mut self, by_node: Arc<NodeLatencies>) -> Self {
        self.by_node = Some(by_node);
        self
    }

    /// Sets the scheduled start of the next operation (a target rate's deadline); `None`: the
    /// start of its first call.
    #[inline]
    pub fn set_intended_start(&mut self, deadline: Option<Instant>) {
        self.intended_start = deadline.map(|d| self.clock.clock().ns_of(d));
    }

    /// Measures one call; `coordinator` is the node that answered it, when known.
    #[inline]
    fn measure(
        &mut self,
        op: OpKind,
        status: Status,
        start: u64,
        end: u64,
        coordinator: Option<IpAddr>,
    ) {
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
        let interval = self.interval(end);
        if let (Some(by_node), Some(node)) = (&self.by_node, coordinator) {
            by_node.record(interval, node, op, entry.service_us);
        }
        // Every call released the one before it as it started; this only keeps that true.
        self.release_held();
        self.held = Some((interval, entry));
    }

    /// Records the held call, if any, on its own (before another call, a pause or the
    /// cleanup). Checked before every call, and mostly there is none: the check is inlined, the
    /// recording is not.
    #[inline(always)]
    fn release_held(&mut self) {
        if self.held.is_some() {
            self.record_held();
        }
    }

    #[inline(never)]
    fn record_held(&mut self) {
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

    fn last_coordinator(&self) -> Option<IpAddr> {
        self.db.last_coordinator()
    }

    async fn read(
        &mut self,
        table: &str,
        key: &str,
        fields: Fields<'_>,
        out: &mut Record,
    ) -> Status {
        self.release_held();
        let start = self.clock.now();
        let status = self.db.read(table, key, fields, out).await;
        let end = self.clock.now();
        self.measure(OpKind::Read, status, start, end, self.db.last_coordinator());
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
        self.release_held();
        let start = self.clock.now();
        let status = self.db.scan(table, start_key, count, fields, out).await;
        let end = self.clock.now();
        self.measure(OpKind::Scan, status, start, end, self.db.last_coordinator());
        status
    }

    async fn update(&mut self, table: &str, key: &str, values: &Record) -> Status {
        self.release_held();
        let start = self.clock.now();
        let status = self.db.update(table, key, values).await;
        let end = self.clock.now();
        self.measure(
            OpKind::Update,
            status,
            start,
            end,
            self.db.last_coordinator(),
        );
        status
    }

    async fn insert(&mut self, table: &str, key: &str, values: &Record) -> Status {
        self.release_held();
        let start = self.clock.now();
        let status = self.db.insert(table, key, values).await;
        let end = self.clock.now();
        self.measure(
            OpKind::Insert,
            status,
            start,
            end,
            self.db.last_coordinator(),
        );
        status
    }

    async fn delete(&mut self, table: &str, key: &str) -> Status {
        self.release_held();
        let start = self.clock.now();
        let status = self.db.delete(table, key).await;
        let end = self.clock.now();
        self.measure(
            OpKind::Delete,
            status,
            start,
            end,
            self.db.last_coordinator(),
        );
        status
    }
}

impl<D: Db, P: Pacer> MeasuredDb for Timed<D, P> {
    fn record(&mut self, op: OpKind, status: Status, start: Instant, end: Instant) {
        self.release_held();
        let (start, end) = (self.ns_of(start), self.ns_of(end));
        // A transaction of several requests (read-modify-write) has no one node.
        self.measure(op, status, start, end, None);
    }

    async fn pause(&mut self, d: Duration) {
        self.last_end = None;
        // Recorded now, not after the pause: the collector may take its interval meanwhile.
        self.release_held();
        self.pacer.sleep_until(Instant::now() + d).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacer::ThreadPacer;
    use iodig_stats::{Carried, IntervalMode, SeriesSet};

    /// A binding whose `update` counts what its worker's recorder holds when it starts.
    struct Watching {
        recorder: Arc<WorkerRecorder>,
        reads_recorded_at_update: Option<u64>,
    }

    impl Watching {
        fn recorded(&self, op: &str) -> u64 {
            let (mut taken, mut spares) = (Vec::new(), Vec::new());
            assert!(self.recorder.try_take(u32::MAX, &mut taken, &mut spares));
            let mut set = SeriesSet::new();
            for mut r in taken {
                r.drain_into(0, &mut set, &mut Carried::default());
            }
            set.summaries().get(op).map_or(0, |s| s.count)
        }
    }

    impl Db for Watching {
        async fn read(&mut self, _: &str, _: &str, _: Fields<'_>, _: &mut Record) -> Status {
            Status::Ok
        }
        async fn scan(
            &mut self,
            _: &str,
            _: &str,
            _: usize,
            _: Fields<'_>,
            _: &mut Vec<Record>,
        ) -> Status {
            Status::Ok
        }
        async fn update(&mut self, _: &str, _: &str, _: &Record) -> Status {
            self.reads_recorded_at_update = Some(self.recorded("READ"));
            Status::Ok
        }
        async fn insert(&mut self, _: &str, _: &str, _: &Record) -> Status {
            Status::Ok
        }
        async fn delete(&mut self, _: &str, _: &str) -> Status {
            Status::Ok
        }
    }

    /// A read-modify-write's read is recorded before its update starts, so an update that
    /// stalls past the second's end cannot move the read into a later second; the update is
    /// recorded with the transaction's count when it ends.
    #[test]
    fn a_call_is_recorded_before_the_next_one_starts() {
        let recorder = Arc::new(WorkerRecorder::new(IntervalMode::Op));
        let clock = Clock::os();
        let now = Instant::now();
        let db = Watching {
            recorder: Arc::clone(&recorder),
            reads_recorded_at_update: None,
        };
        let mut timed = Timed::new(
            db,
            Arc::clone(&recorder),
            &clock,
            now,
            now + Duration::from_secs(1),
            ThreadPacer,
        );
        futures_lite::future::block_on(async {
            let mut out = Record::default();
            timed.read("t", "k", None, &mut out).await;
            timed.update("t", "k", &Record::default()).await;
        });
        assert_eq!(timed.db.reads_recorded_at_update, Some(1));
        assert!(
            timed.held.is_some(),
            "the update waits for the transaction's end"
        );
        assert!(timed.finish_operation());
        assert!(timed.held.is_none());
        assert_eq!(timed.db.recorded("UPDATE"), 1);
    }
}
