//! Block-IO trace results stored with each step; produced by crates/iotrace (`trace.json`).
//!
//! One [`TraceDoc`] per traced window: per device and per op (`read`, `write`, `discard`,
//! `flush`, `other`) the totals, size and latency histograms, a per-second series on the unix
//! clock shared with client and system samples, and the tracer's self-checks. The format is
//! documented in `docs/tracing.md`; the helpers below compute the briefs' summary figures.

mod attribution;
mod bands;
mod device;
mod histograms;
mod live;

pub use attribution::{
    AttrCheck, AttrRow, AttrSecond, Attribution, ClassInfo, ClassSplit, SplitSide, Watched,
    PAST_PROCESS_KEYS,
};
pub use bands::{band_label, dominant_band, human_bytes, narrow_bands, NarrowBand, SizeBand};
pub use device::{DeviceInfo, DeviceSecond, DeviceTrace, DiskstatsCheck, OpSecond, OpTrace};
pub use histograms::{bucket_quantile, merge_buckets, Bucket, Latency};
pub use live::{LiveDevice, LiveSecond, SoFar, SoFarDevice};
use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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
