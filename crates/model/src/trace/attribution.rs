//! IO attributed to its submitter, aggregated in the kernel: the class table, one row per
//! submitter, device and op with its seconds, the processes watched, the sums checked against
//! the device totals, and each class's queue and device time with and without background IO.

use super::histograms::{Bucket, Latency};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The process of a row whose processes came after the kernel's keys for processes ran out.
pub const PAST_PROCESS_KEYS: &str = "(processes past the key cap)";

/// IO attributed to its submitter, aggregated in the kernel (docs/tracing.md, "Attribution").
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Attribution {
    /// False when the kernel could not attribute (no `block_io_start`): every row is `unknown`.
    pub enabled: bool,
    /// Where cgroup ids were resolved, e.g. `cgroup v1 blkio at /sys/fs/cgroup/blkio`.
    #[serde(default)]
    pub cgroup_hierarchy: Option<String>,
    /// Caveats that apply to this run (writeback charging, missing kernel fields, caps hit).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The class table in use, in match order.
    #[serde(default)]
    pub classes: Vec<ClassInfo>,
    /// One row per (device, op, class, cgroup, process) that completed IO.
    #[serde(default)]
    pub rows: Vec<AttrRow>,
    /// Targets named with `--cgroup` / `--pid`, with what they issued.
    #[serde(default)]
    pub watched: Vec<Watched>,
    /// Per device and op: the rows' sums against the device totals (must be equal).
    #[serde(default)]
    pub check: Vec<AttrCheck>,
    /// IOs counted in overflow rows because the kernel's key cap was hit.
    #[serde(default)]
    pub capped_ios: u64,
    /// IOs of processes that came after the kernel's keys for processes ran out: counted in
    /// their class and cgroup's row without a process (pid 0, process
    /// [`PAST_PROCESS_KEYS`]); their classes stay exact.
    #[serde(default)]
    pub past_process_keys_ios: u64,
    /// The classes whose IO splits the others' (memtable flush, compaction).
    #[serde(default)]
    pub background_classes: Vec<String>,
    /// Reads and writes per device × op × class, split by whether background IO was in the
    /// block layer at some point of their life; none from tracers before the split existed.
    #[serde(default)]
    pub splits: Vec<ClassSplit>,
}

impl Attribution {
    /// Rows summed by a grouping key (class, cgroup, process…): (key, ios, bytes), by IOs.
    pub fn group_by(&self, key: impl Fn(&AttrRow) -> String) -> Vec<(String, u64, u64)> {
        let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for r in &self.rows {
            let e = m.entry(key(r)).or_default();
            e.0 += r.ios;
            e.1 += r.bytes;
        }
        let mut v: Vec<(String, u64, u64)> = m.into_iter().map(|(k, (i, b))| (k, i, b)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// True when every check line is equal.
    pub fn sums_match(&self) -> bool {
        self.check
            .iter()
            .all(|c| c.device_ios == c.class_ios && c.device_bytes == c.class_bytes)
    }
}

/// One class's reads or writes on one device, split by background IO (docs/tracing.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassSplit {
    /// Whole-disk name (`vda`, `nvme0n1`).
    pub device: String,
    /// `read` or `write`.
    pub op: String,
    /// Activity class of the submitting thread (`rocksdb.read`, `cassandra.compaction`, …).
    pub class: String,
    /// IOs during whose life (request allocation → completion) a background-class request was
    /// in the block layer: in flight when they started, or started before they completed.
    pub with_background: SplitSide,
    /// IOs during whose life no background-class request was in the block layer.
    pub without_background: SplitSide,
}

/// Queue and device time of a set of IOs (those issued and completed while tracing).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SplitSide {
    /// IOs on this side, counted at final completion.
    pub ios: u64,
    /// Sums in ns of OS queue time (request allocation → issue to the driver) and of device
    /// time (issue → completion); over the window's length, the mean depth this class held
    /// queued in the OS and at the device.
    pub queue_ns_sum: u64,
    /// Device time (issue → completion) summed over these IOs, in ns; see `queue_ns_sum`.
    pub device_ns_sum: u64,
    /// Distributions, ±12 % buckets.
    pub queue: Option<Latency>,
    /// Device time distribution, ±12 % buckets; none when no IO was timed.
    pub device: Option<Latency>,
}

impl ClassSplit {
    /// Both sides together.
    pub fn ios(&self) -> u64 {
        self.with_background.ios + self.without_background.ios
    }

    /// Mean number of this class's requests queued in the OS and at the device over `window_ms`.
    pub fn depth(&self, window_ms: u64) -> (f64, f64) {
        if window_ms == 0 {
            return (0.0, 0.0);
        }
        let w = window_ms as f64 * 1e6;
        let (a, b) = (&self.with_background, &self.without_background);
        (
            (a.queue_ns_sum + b.queue_ns_sum) as f64 / w,
            (a.device_ns_sum + b.device_ns_sum) as f64 / w,
        )
    }
}

/// One activity class: its name (`group.activity`), what it means and the threads it matches.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClassInfo {
    /// `group.activity`, e.g. `cassandra.flush`, `kernel.writeback`, `other`.
    pub name: String,
    /// What IO of the class is, in a sentence for the reader.
    pub description: String,
    /// Thread-name patterns (`Prefix*` or exact) with the ops they take, e.g. `iodig-worker* (write)`.
    #[serde(default)]
    pub threads: Vec<String>,
}

/// What one submitter did on one device and op.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AttrRow {
    /// Whole-disk name (`vda`, `nvme0n1`).
    pub device: String,
    /// Op name, one of [`OPS`](super::OPS).
    pub op: String,
    /// Activity class from the thread name; `unknown` when not seen at submission, `capped` past
    /// the kernel's key cap.
    pub class: String,
    /// Kernel id of the cgroup charged (the cgroup directory's inode number); 0 = none known.
    pub cgroup_id: u64,
    /// Its path relative to the hierarchy root (`/` = root), when found.
    pub cgroup: Option<String>,
    /// The watched `--cgroup` targets of the cgroup v2 tree that IO is not charged to (the v2
    /// tree of a hybrid host, v2 without `io`) whose tasks submitted this row's IO: the kernel
    /// checks per IO whether the submitting task is inside each. Empty when none is watched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub submitter_in: Vec<String>,
    /// Submitting process (thread-group id); 0 when unknown.
    pub pid: u32,
    /// The process's name (its main thread's comm) and the first submitting thread seen.
    pub process: String,
    /// Name of the first submitting thread seen (its comm, at most 15 characters).
    pub thread: String,
    /// IOs completed, each counted once at final completion.
    pub ios: u64,
    /// Bytes completed, partial completions included (as the device totals count them).
    pub bytes: u64,
    /// Sizes, `lower < size <= upper`, ±12 % buckets.
    #[serde(default)]
    pub size_hist: Vec<Bucket>,
    /// Device latency (issue → completion), ±12 % buckets.
    #[serde(default)]
    pub latency: Option<Latency>,
    /// Seconds with IO, on the unix clock of [`DeviceTrace::seconds`](super::DeviceTrace::seconds).
    #[serde(default)]
    pub seconds: Vec<AttrSecond>,
}

/// One unix second of an attribution row.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AttrSecond {
    /// Start of the second (unix ms, a multiple of 1000).
    pub unix_ms: u64,
    /// IOs completed in the second.
    pub ios: u64,
    /// Bytes completed in the second.
    pub bytes: u64,
    /// The busiest slot of the second, as rates.
    pub iops_max: f64,
    /// The busiest slot's bytes as MB/s (MB = 10^6 bytes).
    pub mb_s_max: f64,
    /// The depth these IOs held in the block layer (queued or at the device): the time its IOs
    /// completed in this second spent there (allocation → completion), over one second.
    #[serde(default)]
    pub qd: f64,
}

/// A `--cgroup` or `--pid` target and what it issued (its rows summed).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Watched {
    /// `--cgroup` or `--pid`.
    pub flag: String,
    /// As given on the command line.
    pub target: String,
    /// What it resolved to: a cgroup path with its id, or `pid N (name)`.
    pub name: String,
    /// IOs of the rows it matched.
    pub ios: u64,
    /// Bytes of the rows it matched.
    pub bytes: u64,
    /// IOs and bytes per class.
    #[serde(default)]
    pub by_class: BTreeMap<String, (u64, u64)>,
}

/// Attribution rows summed for one device and op, against the device's totals.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct AttrCheck {
    /// Whole-disk name.
    pub device: String,
    /// Op name, one of [`OPS`](super::OPS).
    pub op: String,
    /// IOs in the device's totals ([`OpTrace::ios`](super::OpTrace::ios)).
    pub device_ios: u64,
    /// IOs summed over the attribution rows; should equal `device_ios`.
    pub class_ios: u64,
    /// Bytes in the device's totals ([`OpTrace::bytes`](super::OpTrace::bytes)).
    pub device_bytes: u64,
    /// Bytes summed over the attribution rows; should equal `device_bytes`.
    pub class_bytes: u64,
}
