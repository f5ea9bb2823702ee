//! Block-IO trace results stored with each step; produced by crates/iotrace (`trace.json`).
//!
//! One [`TraceDoc`] per traced window: per device and per op (`read`, `write`, `discard`,
//! `flush`, `other`) the totals, size and latency histograms, a per-second series on the unix
//! clock shared with client and system samples, and the tracer's self-checks. The format is
//! documented in `docs/tracing.md`; the helpers below compute the briefs' summary figures.

mod bands;

pub use bands::{band_label, dominant_band, human_bytes, narrow_bands, NarrowBand, SizeBand};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Op names in display order; the keys of [`DeviceTrace::ops`] and [`DeviceSecond::ops`].
pub const OPS: [&str; 5] = ["read", "write", "discard", "flush", "other"];

/// The trace of one window (a run step, or one `iodig trace`). Its default is an empty trace
/// with no mode, for building one field by field.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TraceDoc {
    /// `ebpf`, `diskstats` or `off`.
    pub mode: String,
    /// Why this mode ran when it is not the one asked for (e.g. the fallback reason).
    pub note: Option<String>,
    /// eBPF attach flavour (`tp_btf` or `raw_tp`); none in other modes.
    #[serde(default)]
    pub attach: Option<String>,
    /// Start of the traced window (unix ms).
    pub start_unix_ms: u64,
    /// End of the traced window (unix ms).
    pub end_unix_ms: u64,
    /// Width of the sub-second slots behind the `*_max` per-second figures.
    pub slot_ms: u32,
    /// False in diskstats mode: no size or latency histograms, only iostat's figures.
    pub histograms: bool,
    /// One per whole disk traced; a disk picked automatically that saw no IO is left out.
    pub devices: Vec<DeviceTrace>,
    /// The tracer's blind spots and its totals against /proc/diskstats (and the attribution, see
    /// [`TraceDoc::attribution`]).
    pub self_check: SelfCheck,
    /// CSV file of raw per-IO events, when asked for with `--events`.
    #[serde(default)]
    pub events_file: Option<String>,
}

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
    /// Op name, one of [`OPS`].
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
    /// Seconds with IO, on the unix clock of [`DeviceTrace::seconds`].
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
    /// Op name, one of [`OPS`].
    pub op: String,
    /// IOs in the device's totals ([`OpTrace::ios`]).
    pub device_ios: u64,
    /// IOs summed over the attribution rows; should equal `device_ios`.
    pub class_ios: u64,
    /// Bytes in the device's totals ([`OpTrace::bytes`]).
    pub device_bytes: u64,
    /// Bytes summed over the attribution rows; should equal `device_bytes`.
    pub class_bytes: u64,
}

/// Static facts about a whole-disk device that explain its trace (size clusters, flushes).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceInfo {
    /// Kernel name of the whole disk (`nvme0n1`, `vda`, `loop0`).
    pub name: String,
    /// `MAJ:MIN` as in /sys/dev/block.
    pub dev: String,
    /// `device/model` in sysfs; none when the disk reports none (virtio, loop).
    pub model: Option<String>,
    /// `queue/rotational`: true for a spinning disk (a virtual disk may say either).
    pub rotational: Option<bool>,
    /// The active I/O scheduler (the bracketed entry of queue/scheduler).
    pub scheduler: Option<String>,
    /// `queue/nr_requests`: requests the block layer may queue for the disk, per hardware queue.
    pub nr_requests: Option<u64>,
    /// `queue/max_sectors_kb`: the largest request the block layer sends, in KiB; larger IO is
    /// split.
    pub max_sectors_kb: Option<u64>,
    /// `queue/discard_max_bytes`: the largest discard the disk takes, in bytes; 0 = no discard.
    pub discard_max_bytes: Option<u64>,
    /// `write back` (volatile cache: flushes reach the device) or `write through`.
    pub write_cache: Option<String>,
    /// Where a file system on the disk is mounted, when the disk was found from a path; the tracer
    /// leaves it none in `trace.json`.
    pub mount_point: Option<String>,
    /// That file system's type (`ext4`, `xfs`), under the same condition as `mount_point`.
    pub fs_type: Option<String>,
}

/// The trace of one whole disk over the window: totals per op and a per-second series.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceTrace {
    /// Kernel name of the whole disk (`nvme0n1`, `vda`, `loop0`).
    pub name: String,
    /// `MAJ:MIN` as in /sys/dev/block.
    pub dev: String,
    /// Model and queue settings of the disk, from sysfs.
    pub info: Option<DeviceInfo>,
    /// Keyed by op name; read, write, discard and flush are always present.
    pub ops: BTreeMap<String, OpTrace>,
    /// One entry per unix second of the window, oldest first.
    pub seconds: Vec<DeviceSecond>,
    /// Tracer totals against /proc/diskstats deltas (eBPF mode).
    #[serde(default)]
    pub diskstats_check: Vec<DiskstatsCheck>,
}

/// Totals of one op on one device over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct OpTrace {
    /// IOs counted once each, at final completion.
    pub ios: u64,
    /// Bytes completed (partial completions included).
    pub bytes: u64,
    /// IO sizes, counting IOs; bounds in bytes, `lower < size <= upper`; only non-empty buckets.
    #[serde(default)]
    pub size_hist: Vec<Bucket>,
    /// The same buckets weighted by bytes (the "% by volume" view).
    #[serde(default)]
    pub size_bytes_hist: Vec<Bucket>,
    /// `device` (issue → completion), `queue` (insert → issue, where inserts fire) and
    /// `total` (request allocation → completion).
    #[serde(default)]
    pub latency: BTreeMap<String, Latency>,
}

/// One histogram bucket. Sizes: `lower < value <= upper` bytes. Latencies: `lower <= ns < upper`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bucket {
    /// Lower bound: bytes (excluded) or ns (included).
    pub lower: u64,
    /// Upper bound: bytes (included) or ns (excluded).
    pub upper: u64,
    /// IOs in the bucket; bytes in a by-volume histogram ([`OpTrace::size_bytes_hist`]).
    pub count: u64,
}

/// A latency distribution in ns. Percentiles are bucket upper bounds (≤ 6% high).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// IOs timed: the sum of the buckets.
    pub count: u64,
    /// Exact maximum when the kernel kept one (device latency), else the top bucket's bound.
    pub max_ns: u64,
    /// Median in ns.
    pub p50_ns: u64,
    /// 90th percentile in ns.
    pub p90_ns: u64,
    /// 99th percentile in ns.
    pub p99_ns: u64,
    /// 99.9th percentile in ns.
    pub p999_ns: u64,
    /// 99.99th percentile in ns.
    pub p9999_ns: u64,
    /// The non-empty buckets, lowest first, `lower <= ns < upper`.
    pub buckets: Vec<Bucket>,
}

/// One unix second of one device.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceSecond {
    /// Start of the second (unix ms, a multiple of 1000).
    pub unix_ms: u64,
    /// Part of the second inside the traced window (edges are partial), in ms.
    pub covered_ms: u64,
    /// Keyed by op name; read, write, discard and flush are always present, `other` when seen.
    pub ops: BTreeMap<String, OpSecond>,
    /// Time-weighted mean in-flight depth (eBPF: exact; diskstats: iostat's aqu-sz).
    pub qd_mean: Option<f64>,
    /// Max in-flight depth (eBPF: exact; diskstats: max of sampled in_flight).
    pub qd_max: Option<u64>,
    /// iostat %util (diskstats mode only; meaningless for parallel devices).
    #[serde(default)]
    pub util_pct: Option<f64>,
}

/// One op in one second. MB = 10^6 bytes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct OpSecond {
    /// IOs completed in the second.
    pub ios: u64,
    /// Bytes completed in the second (diskstats: sectors × 512).
    pub bytes: u64,
    /// Mean over the covered part of the second.
    pub mb_s: f64,
    /// The busiest slot of the second, as a rate.
    pub mb_s_max: f64,
    /// IOs per second, over the covered part of the second.
    pub iops: f64,
    /// The busiest slot of the second, as IOs per second.
    pub iops_max: f64,
    /// Device latency (issue → completion) of IOs completed in this second (eBPF only).
    pub lat_max_ns: Option<u64>,
    /// p99 of the same device latency: a ±12 % bucket's upper bound, capped by `lat_max_ns`.
    pub lat_p99_ns: Option<u64>,
    /// OS time (request allocation → issue to the driver) of the same IOs, ±12 % buckets: p99
    /// and the top bucket's upper bound (eBPF only; none from tracers before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_p99_ns: Option<u64>,
    /// Upper bound of the top bucket of that OS time, in ns; see `queue_p99_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_max_ns: Option<u64>,
    /// Device latency of the same IOs as the kernel counted them, ±12 % buckets, non-empty
    /// buckets only (eBPF only; the report's latency heat map). Empty in traces from before it
    /// was kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lat_hist: Vec<Bucket>,
    /// iostat's await in ms (diskstats mode: includes OS queueing).
    #[serde(default)]
    pub await_ms: Option<f64>,
    /// Average request size in bytes.
    #[serde(default)]
    pub avg_size_bytes: Option<f64>,
}

/// Tracer vs /proc/diskstats over the same window, for one op group.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DiskstatsCheck {
    /// `read`, `write` (write + other write-class ops, as diskstats groups them), `discard`, `flush`.
    pub op: String,
    /// IOs the tracer counted over the window.
    pub tracer_ios: u64,
    /// IOs /proc/diskstats counted over the same window.
    pub diskstats_ios: u64,
    /// Bytes the tracer counted, in 512-byte sectors.
    pub tracer_sectors: u64,
    /// 512-byte sectors /proc/diskstats counted over the same window.
    pub diskstats_sectors: u64,
}

/// What the tracer knows about its own blind spots.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SelfCheck {
    /// Raw events dropped because the ring buffer was full (event stream only).
    pub lost_events: u64,
    /// Issues whose per-request state entry was held by another live request (not in QD/latency).
    pub state_collisions: u64,
    /// Final completions of requests not seen at issue (in flight at attach): counted, no latency.
    pub completions_without_issue: u64,
    /// Requests whose completion the kernel did not run the tracer for, found when their
    /// request was used again and counted then (IO, bytes, size, attribution; no latency, no
    /// event), their place in the queue depth and their background-IO mark given back. None in
    /// traces from before it was counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions_unseen: Option<u64>,
    /// Completions of only part of a request: their bytes are counted, the IO at its last part.
    pub partial_completions: u64,
    /// Requests the driver gave back to the block layer to issue again (`block_rq_requeue`).
    pub requeues: u64,
    /// Program runs the kernel skipped (prog info `recursion_misses`), summed.
    pub recursion_misses: u64,
    /// The loaded BPF programs' own statistics; empty outside eBPF mode.
    pub programs: Vec<ProgStat>,
    /// True when every device's tracer totals equal its diskstats deltas.
    pub diskstats_match: Option<bool>,
    /// True when the attribution rows add up exactly to the device totals (see
    /// [`Attribution::check`] for the figures when not); none without attribution.
    #[serde(default)]
    pub attribution_match: Option<bool>,
    /// Who issued the IO: per device × op × activity class × cgroup × process (eBPF mode).
    /// Kept here rather than on [`TraceDoc`] so struct literals of TraceDoc elsewhere stay
    /// valid; read it with [`TraceDoc::attribution`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Attribution>,
}

/// One loaded BPF program's statistics, from the kernel's program info.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProgStat {
    /// Program name (`rq_issue_btf`, …).
    pub name: String,
    /// Times the kernel ran it; like `run_time_ns`, counted only while BPF stats are on.
    pub run_cnt: u64,
    /// Zero unless BPF stats were on (`/proc/sys/kernel/bpf_stats_enabled`).
    pub run_time_ns: u64,
    /// Runs the kernel skipped because the program was already running on that CPU.
    pub recursion_misses: u64,
}

/// One row of the briefs' summary: an op's share of all IOs and all bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct OpShare {
    /// Op name, one of [`OPS`].
    pub op: String,
    /// IOs of the op over all devices.
    pub ios: u64,
    /// Bytes of the op over all devices.
    pub bytes: u64,
    /// Percent of all IOs (0..=100).
    pub pct_ios: f64,
    /// Percent of all bytes (0..=100).
    pub pct_bytes: f64,
}

impl TraceDoc {
    /// Who issued the IO, when the tracer attributed it (eBPF mode).
    pub fn attribution(&self) -> Option<&Attribution> {
        self.self_check.attribution.as_ref()
    }

    /// Applies `shift` to every timestamp (start, end, each second, each attributed second):
    /// how a trace taken on another host's clock is put on this one's.
    pub fn shift_clock(&mut self, shift: &impl Fn(&mut u64)) {
        shift(&mut self.start_unix_ms);
        shift(&mut self.end_unix_ms);
        for d in &mut self.devices {
            for s in &mut d.seconds {
                shift(&mut s.unix_ms);
            }
        }
        if let Some(a) = &mut self.self_check.attribution {
            for row in &mut a.rows {
                for s in &mut row.seconds {
                    shift(&mut s.unix_ms);
                }
            }
        }
    }

    /// The trace without the devices `drop` names: how the client host's own disks are told
    /// apart from a database node's that share its kernel (a node observed on this machine).
    /// Attribution rows, checks and splits of those devices go with them; the diskstats
    /// self-check of the devices kept stays as it was.
    #[must_use]
    pub fn without_devices(&self, drop: &impl Fn(&str) -> bool) -> TraceDoc {
        let mut t = self.clone();
        t.devices.retain(|d| !drop(&d.name));
        if let Some(a) = &mut t.self_check.attribution {
            a.rows.retain(|r| !drop(&r.device));
            a.check.retain(|c| !drop(&c.device));
            a.splits.retain(|s| !drop(&s.device));
        }
        t
    }

    /// IOs and bytes of `op` summed over devices.
    pub fn op_totals(&self, op: &str) -> (u64, u64) {
        self.devices
            .iter()
            .filter_map(|d| d.ops.get(op))
            .fold((0, 0), |(i, b), o| (i + o.ios, b + o.bytes))
    }

    /// Each op's share of all IOs and of all bytes (ops with no IO are left out).
    pub fn op_mix(&self) -> Vec<OpShare> {
        let totals: Vec<(&str, u64, u64)> = OPS
            .iter()
            .map(|op| (*op, self.op_totals(op).0, self.op_totals(op).1))
            .collect();
        let all_ios: u64 = totals.iter().map(|t| t.1).sum();
        let all_bytes: u64 = totals.iter().map(|t| t.2).sum();
        let pct = |v: u64, all: u64| {
            if all == 0 {
                0.0
            } else {
                100.0 * v as f64 / all as f64
            }
        };
        totals
            .into_iter()
            .filter(|t| t.1 > 0)
            .map(|(op, ios, bytes)| OpShare {
                op: op.to_string(),
                ios,
                bytes,
                pct_ios: pct(ios, all_ios),
                pct_bytes: pct(bytes, all_bytes),
            })
            .collect()
    }

    /// The size histogram (by IO count) of `op`, merged over devices.
    pub fn size_hist(&self, op: &str) -> Vec<Bucket> {
        merge_buckets(
            self.devices
                .iter()
                .filter_map(|d| d.ops.get(op))
                .map(|o| o.size_hist.as_slice()),
        )
    }

    /// The size histogram weighted by bytes of `op`, merged over devices.
    pub fn size_bytes_hist(&self, op: &str) -> Vec<Bucket> {
        merge_buckets(
            self.devices
                .iter()
                .filter_map(|d| d.ops.get(op))
                .map(|o| o.size_bytes_hist.as_slice()),
        )
    }

    /// The dominant buckets of `op` at the trace's resolution; see [`narrow_bands`].
    pub fn narrow_bands(&self, op: &str, n: usize) -> Vec<NarrowBand> {
        narrow_bands(&self.size_hist(op), &self.size_bytes_hist(op), n)
    }

    /// The dominant size band of `op` over all devices; see [`dominant_band`].
    pub fn dominant_band(&self, op: &str) -> Option<SizeBand> {
        dominant_band(&self.size_hist(op))
    }
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

impl DeviceTrace {
    /// The dominant size band of `op` on this disk alone; see [`dominant_band`].
    pub fn dominant_band(&self, op: &str) -> Option<SizeBand> {
        self.ops.get(op).and_then(|o| dominant_band(&o.size_hist))
    }
}

/// The upper bound of the bucket holding quantile `q` (0..=1) of the counts; 0 when empty.
pub fn bucket_quantile(buckets: &[Bucket], q: f64) -> u64 {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    if total == 0 {
        return 0;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for b in buckets {
        seen += b.count;
        if seen >= rank {
            return b.upper;
        }
    }
    buckets.last().map_or(0, |b| b.upper)
}

/// Sums histograms bucket by bucket (buckets are identified by their bounds).
pub fn merge_buckets<'a>(hists: impl Iterator<Item = &'a [Bucket]>) -> Vec<Bucket> {
    let mut m: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for h in hists {
        for b in h {
            *m.entry((b.lower, b.upper)).or_default() += b.count;
        }
    }
    m.into_iter()
        .map(|((lower, upper), count)| Bucket {
            lower,
            upper,
            count,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_mix_percentages() {
        let mut ops = BTreeMap::new();
        ops.insert(
            "read".into(),
            OpTrace {
                ios: 996,
                bytes: 680,
                ..Default::default()
            },
        );
        ops.insert(
            "write".into(),
            OpTrace {
                ios: 4,
                bytes: 320,
                ..Default::default()
            },
        );
        let doc = TraceDoc {
            mode: "ebpf".into(),
            slot_ms: 100,
            histograms: true,
            devices: vec![DeviceTrace {
                name: "vda".into(),
                dev: "254:0".into(),
                ops,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mix = doc.op_mix();
        assert_eq!(mix.len(), 2);
        assert!((mix[0].pct_ios - 99.6).abs() < 1e-9);
        assert!((mix[1].pct_bytes - 32.0).abs() < 1e-9);
        let back: TraceDoc = serde_json::from_str(&serde_json::to_string(&doc).unwrap()).unwrap();
        assert_eq!(back, doc);
    }
}

/// One second of a trace as it completes while a step runs (`--metrics`, the live line, and
/// the agents' stream): every traced device's [`DeviceSecond`], with its IO by activity class
/// when attribution runs. The whole-step `trace.json` stays the record; this is the preview.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveSecond {
    /// Start of the second (unix ms, a multiple of 1000).
    pub unix_ms: u64,
    /// One entry per traced device that had the second in its window.
    pub devices: Vec<LiveDevice>,
}

/// One device in a [`LiveSecond`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LiveDevice {
    /// Kernel name of the whole disk (`nvme0n1`).
    pub name: String,
    /// The second as `trace.json` will hold it (busiest slot and queue depth included).
    pub second: DeviceSecond,
    /// IOs and bytes by activity class and op (`cassandra.flush` → `write` → (ios, bytes)),
    /// empty without attribution.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub classes: BTreeMap<String, BTreeMap<String, (u64, u64)>>,
}
