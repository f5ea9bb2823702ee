//! One measured operation as the timing wrapper sees it ([`Entry`]), and the series it lands
//! in ([`Variant`]); workers record entries into their [`crate::WorkerRecorder`].

use iodig_model::OpKind;

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
    /// which interval the operation started in (the log by start, `latency-start-shift.hlog`).
    pub end_ms: u32,
}
