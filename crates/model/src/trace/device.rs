//! One whole disk's trace over the window: what sysfs says of it, its totals per op, its
//! per-second series, and its totals against /proc/diskstats.

use super::bands::{dominant_band, SizeBand};
use super::histograms::{Bucket, Latency};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

impl DeviceTrace {
    /// The dominant size band of `op` on this disk alone; see [`dominant_band`].
    pub fn dominant_band(&self, op: &str) -> Option<SizeBand> {
        self.ops.get(op).and_then(|o| dominant_band(&o.size_hist))
    }
}
