//! The per-worker measurement log: a vector of raw entries behind an uncontended mutex, swapped
//! out by the collector once per second.

use iodig_model::OpKind;
use std::sync::Mutex;

/// Which series of an op an entry lands in, as YCSB names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// `<OP>`: successful operations.
    Ok = 0,
    /// `<OP>-FAILED`: any status other than OK / BATCHED_OK.
    Failed = 1,
    /// `Intended-<OP>`: latency from the intended start under a target rate.
    Intended = 2,
    /// `Intended-<OP>-FAILED`: a failure's latency from its intended start (YCSB's DBWrapper
    /// measures failures under both names too).
    IntendedFailed = 3,
}

/// One measured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The operation measured; its name is the series' base name (`READ`, `UPDATE`, …).
    pub op: OpKind,
    /// Index of the op's `Status` (YCSB's order).
    pub status: u8,
    /// Whether the status counts as success (OK or BATCHED_OK): picks `<OP>` or `<OP>-FAILED`.
    pub ok: bool,
    /// Service time in µs, from the actual start (YCSB's `(end-start)/1000`).
    pub service_us: u32,
    /// Time from the intended start in µs; equals `service_us` without a target rate.
    pub intended_us: u32,
    /// When the operation ended, in ms from the start of measurement: with the latency it says
    /// which second the operation started in (the split by start of `latency-by-start.hlog`).
    pub end_ms: u32,
}

/// A worker's buffer of entries since the collector's last drain.
#[derive(Debug, Default)]
pub struct WorkerLog {
    entries: Mutex<Vec<Entry>>,
}

impl WorkerLog {
    /// An empty log, one per worker.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one measured operation, for the collector's next drain.
    #[inline]
    pub fn push(&self, e: Entry) {
        // Only the collector contends, once per second, so the lock is almost always free.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(e);
    }

    /// Moves the buffered entries into `spare` (cleared first) and keeps `spare`'s old buffer,
    /// so both vectors are reused and the worker's lock is held only for a swap.
    pub fn drain_into(&self, spare: &mut Vec<Entry>) {
        spare.clear();
        let mut guard = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::swap(&mut *guard, spare);
    }
}
