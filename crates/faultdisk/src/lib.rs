//! A disk that misbehaves on cue, for fault schedules under an embedded database: an ext4 file
//! system whose every IO can be delayed or failed, and which can be filled. Where the kernel has
//! device-mapper, its `delay`, `flakey` and `error` targets do it (`dm`); elsewhere the backing
//! file of a loop device is served by iodig itself through FUSE (`fuse`), built from what
//! kernels without device-mapper still have. Torn down on drop, and by the next run if a killed
//! one left it behind.
//!
//! The stack, top to bottom: the data directory (ext4) → `/dev/loopN` → `<state>/fuse/disk`
//! (this process, `fuse`) → `<state>/image` (a sparse file beside the data directory); or ext4 →
//! `/dev/mapper/…-upper` (delay) → `…-lower` (flakey, error) → `/dev/loopN` → `<state>/image`.

mod dm;
mod fuse;
mod stack;

pub use stack::FaultyDisk;

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

/// How the disk misbehaves (`-p faultdisk.mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Device-mapper where the kernel has it, else FUSE.
    Auto,
    /// A loop device over a file iodig serves through FUSE.
    Fuse,
    /// Device-mapper's `delay`, `flakey` and `error` targets over a loop device.
    DeviceMapper,
}

impl Mechanism {
    /// `auto`, `fuse` or `dm`; the error names the property and the values.
    pub fn parse(value: Option<&str>) -> Result<Mechanism, String> {
        match value.map(str::trim) {
            None | Some("auto") => Ok(Mechanism::Auto),
            Some("fuse") => Ok(Mechanism::Fuse),
            Some("dm" | "device-mapper") => Ok(Mechanism::DeviceMapper),
            Some(other) => Err(format!(
                "faultdisk.mechanism={other:?}: give auto (device-mapper where the kernel has it, else FUSE), dm or fuse"
            )),
        }
    }

    /// The mechanism that will run here: `Auto` decided, `DeviceMapper` refused with the
    /// reason when this kernel cannot.
    pub fn resolve(self) -> Result<Mechanism, String> {
        match self {
            Mechanism::Fuse => Ok(Mechanism::Fuse),
            Mechanism::DeviceMapper => {
                dm::available()
                    .map(|()| Mechanism::DeviceMapper)
                    .map_err(|e| {
                        format!("faultdisk.mechanism=dm: {e}; use -p faultdisk.mechanism=fuse")
                    })
            }
            Mechanism::Auto => Ok(if dm::available().is_ok() {
                Mechanism::DeviceMapper
            } else {
                Mechanism::Fuse
            }),
        }
    }

    /// How the faults are made, for the events that record them.
    pub fn describe(self) -> &'static str {
        match self {
            Mechanism::Fuse | Mechanism::Auto => {
                "loop device over a file iodig serves through FUSE (no device-mapper needed)"
            }
            Mechanism::DeviceMapper => "device-mapper delay, flakey and error targets",
        }
    }
}
