//! System level vs device level: per second, the OS time of reads and writes (request
//! allocation → issue to the driver) beside their device time (issue → completion), and
//! where the worst second's p99 lives (the blog's "the spikes were system level").

use super::io::IoLines;
use std::collections::BTreeMap;

/// One op's per-second OS and device p99 over a step, and its worst second.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelRow {
    /// `read` or `write`.
    pub op: String,
    /// Seconds with both figures (the seconds compared).
    pub seconds: usize,
    /// The second (drawn at its middle, unix ms) whose larger p99 of the two is the highest.
    pub worst_x: f64,
    /// The OS time p99 (request allocation → issue) in that second, ms.
    pub worst_os_ms: f64,
    /// The device time p99 (issue → completion) in that second, ms.
    pub worst_device_ms: f64,
    /// The highest per-second OS time p99 over the step, ms.
    pub os_peak_ms: f64,
    /// The highest per-second device time p99 over the step, ms.
    pub device_peak_ms: f64,
}

impl LevelRow {
    /// "system level" when the OS time is ≥ 2× the device time in the worst second,
    /// "device level" for the converse, else "both".
    pub fn level(&self) -> &'static str {
        if self.worst_os_ms >= 2.0 * self.worst_device_ms {
            "system level"
        } else if self.worst_device_ms >= 2.0 * self.worst_os_ms {
            "device level"
        } else {
            "both system and device level"
        }
    }
}

/// Reads and writes with per-second OS time (traces from before it was kept have none).
pub(super) fn levels(io: &BTreeMap<String, IoLines>) -> Vec<LevelRow> {
    ["read", "write"]
        .iter()
        .filter_map(|op| level_row(op, io.get(*op)?))
        .collect()
}

fn level_row(op: &str, l: &IoLines) -> Option<LevelRow> {
    let dev: BTreeMap<u64, f64> = l.lat_p99_ms.iter().map(|p| (p.0 as u64, p.1)).collect();
    let both: Vec<(f64, f64, f64)> = l
        .os_p99_ms
        .iter()
        .filter_map(|&(x, os)| Some((x, os, *dev.get(&(x as u64))?)))
        .collect();
    let worst = both
        .iter()
        .max_by(|a, b| a.1.max(a.2).total_cmp(&b.1.max(b.2)))?;
    Some(LevelRow {
        op: op.to_string(),
        seconds: both.len(),
        worst_x: worst.0,
        worst_os_ms: worst.1,
        worst_device_ms: worst.2,
        os_peak_ms: both.iter().map(|b| b.1).fold(0.0, f64::max),
        device_peak_ms: both.iter().map(|b| b.2).fold(0.0, f64::max),
    })
}

/// The finding: where an op's worst second lives, when its p99 there reaches 1 ms.
pub(super) fn findings(rows: &[LevelRow]) -> Vec<String> {
    use super::findings::{capitalise, lat_ms};
    rows.iter()
        .filter(|r| r.worst_os_ms.max(r.worst_device_ms) >= 1.0)
        .map(|r| {
            format!(
                "{} p99 spikes are {}: in the worst second ({} UTC) {} in the OS queue \
                 (allocation → issue) against {} on the device (issue → completion); \
                 per-second p99 peaks at {} in the OS and {} on the device over {} s.",
                capitalise(&r.op),
                r.level(),
                crate::svg::clock(r.worst_x),
                lat_ms(r.worst_os_ms),
                lat_ms(r.worst_device_ms),
                lat_ms(r.os_peak_ms),
                lat_ms(r.device_peak_ms),
                r.seconds
            )
        })
        .collect()
}

/// What the drive's own evidence adds to an op's verdict, as the blog reasoned ("the SSD
/// reports no latency outliers > 5 ms: these latencies are system level"): the drive's latency
/// monitor counts each command from the moment the drive takes it, so commands the trace timed
/// over 5 ms "on the device" that the drive never counted that slow waited before the drive
/// took them — in the driver's and the device's submission queues, which with the scheduler
/// `none` of an NVMe disk are the only queue there is. `drives` are the step's traced disks'
/// statistics, `schedulers` each traced disk's scheduler in effect.
pub(super) fn drive_evidence(
    r: &LevelRow,
    drives: &[super::device_stats::DeviceStatsView],
    schedulers: &[(String, String)],
) -> Option<String> {
    use super::findings::lat_ms;
    const OUTLIER_MS: u64 = 5;
    let monitored: Vec<_> = drives.iter().filter(|d| !d.buckets.is_empty()).collect();
    let slow_on_device = r.device_peak_ms >= OUTLIER_MS as f64;
    if !monitored.is_empty() {
        let counted: u64 = monitored
            .iter()
            .flat_map(|d| &d.buckets)
            .filter(|b| b.op == r.op && b.from_ms >= OUTLIER_MS)
            .map(|b| b.device)
            .sum();
        let names = monitored
            .iter()
            .map(|d| d.label.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Some(match (counted, slow_on_device) {
            (0, true) => format!(
                "The drive's own latency monitor ({names}) counted no {op} command over {OUTLIER_MS} ms while the trace timed {op}s up to {} on the device: that time was spent before the drive took the commands (queued in the driver and the device's submission queues), so it is system level, not the drive's.",
                lat_ms(r.device_peak_ms),
                op = r.op
            ),
            (0, false) => format!(
                "The drive's own latency monitor ({names}) counted no {} command over {OUTLIER_MS} ms either.",
                r.op
            ),
            (n, _) => format!(
                "The drive's own latency monitor ({names}) counted {n} {} commands over {OUTLIER_MS} ms: the drive itself was slow (device level).",
                r.op
            ),
        });
    }
    let none: Vec<&str> = schedulers
        .iter()
        .filter(|(_, s)| s == "none")
        .map(|(d, _)| d.as_str())
        .collect();
    if r.level() != "system level" && !none.is_empty() {
        return Some(format!(
            "With the scheduler none on {}, a request is not held in an OS queue once it has a tag: it waits in the device's own queue, which the trace counts as device time, so \"device level\" here means past the OS's queue, not necessarily in the drive; no latency log of the drive's own tells which.",
            none.join(", ")
        ));
    }
    (slow_on_device && !drives.is_empty()).then(|| {
        "No drive here keeps a latency log of its own (see the drive's own statistics): the verdict rests on the trace alone.".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(os: &[(f64, f64)], dev: &[(f64, f64)]) -> BTreeMap<String, IoLines> {
        let mut m = BTreeMap::new();
        m.insert(
            "read".to_string(),
            IoLines {
                os_p99_ms: os.to_vec(),
                lat_p99_ms: dev.to_vec(),
                ..Default::default()
            },
        );
        m
    }

    #[test]
    fn worst_second_in_the_os_is_system_level() {
        let rows = levels(&io(
            &[(500.0, 0.2), (1500.0, 38.0), (2500.0, 0.3)],
            &[(500.0, 0.9), (1500.0, 1.2), (2500.0, 1.5)],
        ));
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(
            (r.worst_x, r.worst_os_ms, r.worst_device_ms),
            (1500.0, 38.0, 1.2)
        );
        assert_eq!((r.os_peak_ms, r.device_peak_ms, r.seconds), (38.0, 1.5, 3));
        assert_eq!(r.level(), "system level");
        let f = findings(&rows);
        assert_eq!(f.len(), 1);
        assert!(
            f[0].starts_with(
                "Read p99 spikes are system level: in the worst second (00:00:01 UTC)"
            ),
            "{}",
            f[0]
        );
        assert!(f[0].contains("38.0 ms in the OS queue") && f[0].contains("1.2 ms on the device"));
    }

    fn drive(op: &str, from_ms: u64, device: u64) -> super::super::device_stats::DeviceStatsView {
        super::super::device_stats::DeviceStatsView {
            label: "nvme0n1 (NVMe controller nvme0)".into(),
            host: None,
            unavailable: None,
            latency_monitor_unavailable: None,
            seconds: 10.0,
            counts: Vec::new(),
            buckets: vec![super::super::device_stats::BucketRow {
                op: op.into(),
                range: format!("{from_ms}–10 ms"),
                from_ms,
                device,
                saturated: false,
                trace: None,
                recorded_ms: None,
            }],
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_drives_own_log_decides_where_device_time_was_spent() {
        let r = &levels(&io(&[(500.0, 0.5)], &[(500.0, 40.0)]))[0];
        assert_eq!(r.level(), "device level", "by the trace alone");
        let quiet = drive_evidence(r, &[drive("read", 5, 0)], &[]).unwrap();
        assert!(
            quiet.contains(
                "counted no read command over 5 ms while the trace timed reads up to 40.0 ms"
            ) && quiet.contains("system level, not the drive's"),
            "{quiet}"
        );
        let slow = drive_evidence(r, &[drive("read", 5, 12)], &[]).unwrap();
        assert!(
            slow.contains("counted 12 read commands over 5 ms: the drive itself was slow"),
            "{slow}"
        );
        let writes_only = drive_evidence(r, &[drive("write", 5, 9)], &[]).unwrap();
        assert!(
            writes_only.contains("counted no read command"),
            "{writes_only}"
        );
        let none = drive_evidence(r, &[], &[("nvme0n1".into(), "none".into())]).unwrap();
        assert!(none.contains("scheduler none on nvme0n1"), "{none}");
        assert_eq!(
            drive_evidence(r, &[], &[("sda".into(), "mq-deadline".into())]),
            None
        );
    }

    #[test]
    fn device_level_and_quiet_steps() {
        let rows = levels(&io(&[(500.0, 0.1)], &[(500.0, 4.0)]));
        assert_eq!(rows[0].level(), "device level");
        assert_eq!(findings(&rows).len(), 1);
        // Under 1 ms in the worst second: no finding; no OS time at all: no row.
        let rows = levels(&io(&[(500.0, 0.1)], &[(500.0, 0.4)]));
        assert!(findings(&rows).is_empty());
        assert!(levels(&io(&[], &[(500.0, 4.0)])).is_empty());
    }
}
