//! A disk that misbehaves on cue, for fault schedules under an embedded database: an ext4 file
//! system on a loop device whose backing file iodig serves itself through FUSE, so every IO that
//! reaches the "device" can be delayed or failed, and the file system can be filled. Built from
//! what kernels without device-mapper still have (loop, FUSE); torn down on drop, and by the next
//! run if a killed one left it behind.
//!
//! The stack, top to bottom: the data directory (ext4) → `/dev/loopN` → `<state>/fuse/disk`
//! (this process, `fuse`) → `<state>/image` (a sparse file beside the data directory).

mod fuse;
mod stack;

pub use stack::{FaultyDisk, LEFTOVER_PREFIX};

use std::sync::atomic::{AtomicBool, AtomicU64};

/// What the FUSE layer does to the IO it serves; changed at any moment by the fault schedule.
#[derive(Debug, Default)]
pub struct Injection {
    /// Added to every read, in µs.
    pub read_delay_us: AtomicU64,
    /// Added to every write, in µs.
    pub write_delay_us: AtomicU64,
    /// Every read fails with EIO.
    pub fail_reads: AtomicBool,
    /// Every write (and cache flush) fails with EIO.
    pub fail_writes: AtomicBool,
    /// Requests delayed so far, for the fault's account of what it did.
    pub delayed: AtomicU64,
    /// Requests failed so far.
    pub failed: AtomicU64,
}

/// Which direction of IO a slow or failing device affects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Reads only (`slow-reads`, `fail-reads`).
    Reads,
    /// Writes only (`slow-writes`, `fail-writes`; under the latter cache flushes fail too).
    Writes,
    /// Both (`slow`, `fail`).
    Both,
}

impl Direction {
    /// Whether reads are affected.
    pub fn reads(self) -> bool {
        self != Direction::Writes
    }

    /// Whether writes are affected.
    pub fn writes(self) -> bool {
        self != Direction::Reads
    }

    /// "reads", "writes" or "reads and writes", for the fault's event.
    pub fn describe(self) -> &'static str {
        match self {
            Direction::Reads => "reads",
            Direction::Writes => "writes",
            Direction::Both => "reads and writes",
        }
    }
}

/// How the faults are made, for the events that record them.
pub const MECHANISM: &str =
    "loop device over a file iodig serves through FUSE (no device-mapper needed)";
