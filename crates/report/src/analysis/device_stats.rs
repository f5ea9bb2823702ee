//! What each traced disk counted itself over a step (`device-stats.json`: its NVMe SMART /
//! Health log and OCP latency monitor, before and after) beside what the trace counted on it;
//! or, for a disk without such statistics, why — one line, never a figure the device did not
//! give.

use crate::data::StepData;
use iodig_model::device_stats::{DeviceStats, SMART_DATA_UNIT_BYTES};
use iodig_model::trace::DeviceTrace;

/// One disk's statistics in a step, set beside the trace's.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceStatsView {
    /// `nvme0n1 (NVMe controller nvme0)`, `md0 member nvme0n1 (…)`, or just `vda`; on an
    /// observed host, `db1: nvme0n1 (…)`.
    pub label: String,
    /// The observed host the disk is on; none for iodig's own machine.
    pub host: Option<String>,
    /// Why the disk gave no figures, as the report's one line says it; none when it gave some.
    pub unavailable: Option<String>,
    /// Why the OCP latency monitor gave none, when the SMART log did.
    pub latency_monitor_unavailable: Option<String>,
    /// Seconds between the reads before and after.
    pub seconds: f64,
    /// Counters: what the device counted against what the trace counted.
    pub counts: Vec<CountRow>,
    /// The latency monitor's buckets per command kind; empty without it.
    pub buckets: Vec<BucketRow>,
    /// What to know with the figures (counters that went backwards, a failed read after).
    pub notes: Vec<String>,
}

/// One counter: the device's own figure beside the trace's, already worded.
#[derive(Debug, Clone, PartialEq)]
pub struct CountRow {
    /// What is counted (`read commands`, `data written`, `temperature`).
    pub what: String,
    /// The device's figure over the step.
    pub device: String,
    /// The trace's figure for the same disk, or `–` where the trace has none.
    pub trace: String,
}

/// One latency-monitor bucket of one command kind.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketRow {
    /// `read`, `write` or `deallocate`.
    pub op: String,
    /// The bucket's latencies: `5–10 ms`, `≥ 100 ms`.
    pub range: String,
    /// Its lower bound, ms.
    pub from_ms: u64,
    /// Commands the device counted in the bucket during the step (a lower bound when
    /// `saturated`).
    pub device: u64,
    /// Whether the device's counter reached its ceiling.
    pub saturated: bool,
    /// IOs of the same op the trace timed in that range (issue → completion): exact, or the
    /// span its histogram buckets allow (`3–5`); none without the op's device latency.
    pub trace: Option<(u64, u64)>,
    /// The latency the device recorded for the bucket during the step (ms), when it did.
    pub recorded_ms: Option<u16>,
}

/// Every disk of the step's `device-stats.json`, in its order, then each observed host's
/// (labelled with the host, beside the host's own trace); empty when none has any (untraced,
/// or from before they were read).
pub(super) fn device_stats(step: &StepData) -> Vec<DeviceStatsView> {
    let mut out = Vec::new();
    let traced_of = |t: &Option<iodig_model::trace::TraceDoc>| {
        t.as_ref().map(|t| t.devices.clone()).unwrap_or_default()
    };
    if let Some(doc) = &step.device_stats {
        let traced = traced_of(&step.trace);
        out.extend(doc.devices.iter().map(|d| view(d, &traced)));
    }
    for n in &step.nodes {
        let Some(doc) = &n.device_stats else { continue };
        let traced = traced_of(&n.trace);
        out.extend(doc.devices.iter().map(|d| {
            let mut v = view(d, &traced);
            v.label = format!("{}: {}", n.step.host, v.label);
            v.unavailable = v.unavailable.map(|why| format!("{}: {why}", n.step.host));
            v.host = Some(n.step.host.clone());
            v
        }));
    }
    out
}

/// One disk's view; `traced` are the step's traced disks (none without a trace).
fn view(d: &DeviceStats, traced: &[DeviceTrace]) -> DeviceStatsView {
    let name = match &d.member {
        Some(m) => format!("{} member {m}", d.device),
        None => d.device.clone(),
    };
    let label = match &d.controller {
        Some(c) => format!("{name} (NVMe controller {c})"),
        None => name.clone(),
    };
    let mut v = DeviceStatsView {
        label,
        host: None,
        unavailable: None,
        latency_monitor_unavailable: d.latency_monitor_unavailable.clone(),
        seconds: 0.0,
        counts: Vec::new(),
        buckets: Vec::new(),
        notes: d.notes.clone(),
    };
    let change = match (&d.unavailable, &d.change) {
        (Some(why), _) => {
            v.unavailable = Some(format!("{name}: {why}"));
            return v;
        }
        (None, Some(c)) => c,
        (None, None) => {
            // Read before but not after (or a counter went back): the notes say which.
            v.unavailable = Some(format!(
                "{name}: no difference between the reads before and after the step"
            ));
            return v;
        }
    };
    v.seconds = change.seconds;
    // The trace of the disk the controller serves: the member itself when it was traced.
    let disk = d.member.as_deref().unwrap_or(&d.device);
    let traced = traced.iter().find(|x| x.name == disk);
    if let Some(s) = &change.smart {
        v.counts = smart_rows(s, d, traced);
    }
    if let Some(l) = &change.latency_monitor {
        for (op, trace_op) in [
            ("read", "read"),
            ("write", "write"),
            ("deallocate", "discard"),
        ] {
            for b in &l.buckets {
                let (device, recorded_ms) = match op {
                    "read" => (b.read, b.read_latency_ms),
                    "write" => (b.write, b.write_latency_ms),
                    _ => (b.deallocate, b.deallocate_latency_ms),
                };
                v.buckets.push(BucketRow {
                    op: op.into(),
                    range: match b.to_ms {
                        Some(to) => format!("{}–{to} ms", b.from_ms),
                        None => format!("≥ {} ms", b.from_ms),
                    },
                    from_ms: u64::from(b.from_ms),
                    device,
                    saturated: b.saturated,
                    trace: traced.and_then(|t| timed_between(t, trace_op, b.from_ms, b.to_ms)),
                    recorded_ms,
                });
            }
        }
        // Deallocations are shown only when either side saw some.
        v.buckets
            .retain(|r| r.op != "deallocate" || r.device > 0 || r.trace.is_some_and(|t| t.1 > 0));
    }
    v
}

/// The SMART counters beside the trace's totals for the same disk.
fn smart_rows(
    s: &iodig_model::device_stats::SmartChange,
    d: &DeviceStats,
    traced: Option<&DeviceTrace>,
) -> Vec<CountRow> {
    let dash = || "–".to_string();
    let op = |name: &str| traced.and_then(|t| t.ops.get(name));
    let ios = |name: &str| op(name).map_or_else(dash, |o| crate::doc::thousands(o.ios as f64));
    let mb = |name: &str| op(name).map_or_else(dash, |o| format!("{:.1} MB", o.bytes as f64 / 1e6));
    let units = |u: u64| {
        format!(
            "{:.1} MB (±{:.1})",
            (u * SMART_DATA_UNIT_BYTES) as f64 / 1e6,
            SMART_DATA_UNIT_BYTES as f64 / 1e6
        )
    };
    let row = |what: &str, device: String, trace: String| CountRow {
        what: what.into(),
        device,
        trace,
    };
    let mut rows = vec![
        row(
            "read commands",
            crate::doc::thousands(s.host_read_commands as f64),
            ios("read"),
        ),
        row(
            "write commands",
            crate::doc::thousands(s.host_write_commands as f64),
            ios("write"),
        ),
        row("data read", units(s.data_units_read), mb("read")),
        row("data written", units(s.data_units_written), mb("write")),
        row(
            "controller busy time",
            format!("{} min", s.controller_busy_minutes),
            dash(),
        ),
        row(
            "media and data integrity errors",
            s.media_errors.to_string(),
            dash(),
        ),
        row("error log entries", s.error_log_entries.to_string(), dash()),
    ];
    let temperature = |snap: &Option<iodig_model::device_stats::DeviceSnapshot>| {
        snap.as_ref()
            .and_then(|x| x.smart.as_ref())
            .and_then(iodig_model::device_stats::SmartLog::temperature_c)
    };
    if let (Some(b), Some(a)) = (temperature(&d.before), temperature(&d.after)) {
        rows.push(row("temperature", format!("{b} → {a} °C"), dash()));
    }
    if s.warning_temperature_minutes + s.critical_temperature_minutes > 0 {
        rows.push(row(
            "time above the warning / critical temperature",
            format!(
                "{} / {} min",
                s.warning_temperature_minutes, s.critical_temperature_minutes
            ),
            dash(),
        ));
    }
    rows
}

/// IOs of `op` whose device time (issue → completion) the trace put in `[from, to)` ms: the
/// histogram buckets wholly inside, and those that overlap the range at all.
fn timed_between(
    t: &DeviceTrace,
    op: &str,
    from_ms: u32,
    to_ms: Option<u32>,
) -> Option<(u64, u64)> {
    let lat = t.ops.get(op)?.latency.get("device")?;
    let (lo, hi) = (
        u64::from(from_ms) * 1_000_000,
        to_ms.map_or(u64::MAX, |t| u64::from(t) * 1_000_000),
    );
    let inside = lat
        .buckets
        .iter()
        .filter(|b| b.lower >= lo && b.upper <= hi)
        .map(|b| b.count)
        .sum();
    let overlapping = lat
        .buckets
        .iter()
        .filter(|b| b.upper > lo && b.lower < hi)
        .map(|b| b.count)
        .sum();
    Some((inside, overlapping))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::device_stats::{
        DeviceChange, DeviceSnapshot, LatencyBucketChange, LatencyMonitorChange, SmartChange,
        SmartLog,
    };
    use iodig_model::trace::{Bucket, Latency, OpTrace};

    fn trace_of(name: &str) -> DeviceTrace {
        let mut reads = OpTrace {
            ios: 1_000,
            bytes: 4_096_000,
            ..Default::default()
        };
        // 3 reads between 6 and 7 ms, 2 across 9.5–10.5 ms, 1 at 120 ms.
        reads.latency.insert(
            "device".into(),
            Latency {
                buckets: vec![
                    Bucket {
                        lower: 6_000_000,
                        upper: 7_000_000,
                        count: 3,
                    },
                    Bucket {
                        lower: 9_500_000,
                        upper: 10_500_000,
                        count: 2,
                    },
                    Bucket {
                        lower: 120_000_000,
                        upper: 127_000_000,
                        count: 1,
                    },
                ],
                ..Default::default()
            },
        );
        DeviceTrace {
            name: name.into(),
            dev: "259:0".into(),
            info: None,
            ops: [("read".to_string(), reads)].into(),
            seconds: Vec::new(),
            diskstats_check: Vec::new(),
        }
    }

    fn nvme() -> DeviceStats {
        let snap = |k| DeviceSnapshot {
            unix_ms: 0,
            smart: Some(SmartLog {
                composite_temperature_k: k,
                ..Default::default()
            }),
            latency_monitor: None,
        };
        DeviceStats {
            device: "nvme0n1".into(),
            controller: Some("nvme0".into()),
            before: Some(snap(310)),
            after: Some(snap(312)),
            change: Some(DeviceChange {
                seconds: 4.9,
                smart: Some(SmartChange {
                    host_read_commands: 1_002,
                    data_units_read: 8,
                    ..Default::default()
                }),
                latency_monitor: Some(LatencyMonitorChange {
                    buckets: vec![
                        LatencyBucketChange {
                            from_ms: 5,
                            to_ms: Some(10),
                            read: 4,
                            read_latency_ms: Some(9),
                            ..Default::default()
                        },
                        LatencyBucketChange {
                            from_ms: 100,
                            to_ms: None,
                            read: 1,
                            ..Default::default()
                        },
                    ],
                }),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_devices_counts_stand_beside_the_traces() {
        let v = view(&nvme(), &[trace_of("nvme0n1")]);
        assert_eq!(v.label, "nvme0n1 (NVMe controller nvme0)");
        let reads = &v.counts[0];
        assert_eq!(
            (
                reads.what.as_str(),
                reads.device.as_str(),
                reads.trace.as_str()
            ),
            ("read commands", "1,002", "1,000")
        );
        assert_eq!(v.counts[2].device, "4.1 MB (±0.5)");
        assert_eq!(v.counts[2].trace, "4.1 MB");
        assert!(v
            .counts
            .iter()
            .any(|r| r.what == "temperature" && r.device == "37 → 39 °C"));
        // 5–10 ms: 3 reads surely, 5 at most (the 9.5–10.5 ms bucket straddles 10 ms).
        let b = &v.buckets[0];
        assert_eq!(
            (
                b.op.as_str(),
                b.range.as_str(),
                b.device,
                b.trace,
                b.recorded_ms
            ),
            ("read", "5–10 ms", 4, Some((3, 5)), Some(9))
        );
        assert_eq!(v.buckets[1].range, "≥ 100 ms");
        assert_eq!(v.buckets[1].trace, Some((1, 1)));
        assert!(
            v.buckets.iter().all(|r| r.op != "deallocate"),
            "none on either side"
        );
    }

    #[test]
    fn a_disk_without_statistics_is_one_line_and_no_figures() {
        let d = DeviceStats {
            device: "vda".into(),
            unavailable: Some(
                "not an NVMe device — the device reports no latency statistics of its own".into(),
            ),
            ..Default::default()
        };
        let v = view(&d, &[]);
        assert_eq!(
            v.unavailable.as_deref(),
            Some("vda: not an NVMe device — the device reports no latency statistics of its own")
        );
        assert!(v.counts.is_empty() && v.buckets.is_empty());
    }
}
