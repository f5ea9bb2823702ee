//! The drives' own statistics around one step (`device-stats.json`): what an NVMe controller
//! counted in its SMART / Health log and, where it implements it, the OCP latency monitor,
//! read before and after the step, and the difference; or why a device has none. Figures come
//! from the device only: a missing one is stated, never estimated.

use serde::{Deserialize, Serialize};

/// Bytes in one SMART "data unit": the log counts data in thousands of 512-byte units.
pub const SMART_DATA_UNIT_BYTES: u64 = 512_000;

/// Every traced disk's own statistics over one step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStatsDoc {
    /// One entry per traced disk, or per NVMe member of a traced md/dm device.
    #[serde(default)]
    pub devices: Vec<DeviceStats>,
}

/// One disk's own statistics over a step, or why there are none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// The disk the trace watched (`nvme0n1`, `md0`, `vda`).
    pub device: String,
    /// The NVMe disk whose controller was read when it is a member of `device` (md/dm);
    /// none when it is `device` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// The NVMe controller read (`nvme0`); none when the device has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// Why the device gave no statistics at all, e.g. `not an NVMe device: it reports no
    /// latency statistics of its own`; none when it gave some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    /// Why the OCP latency monitor gave no figures, e.g. `not implemented by this device`;
    /// none when it gave some or when the whole device is `unavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_monitor_unavailable: Option<String>,
    /// The logs as read when measurement started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<DeviceSnapshot>,
    /// The logs as read when measurement ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<DeviceSnapshot>,
    /// What the device counted in between; none when either read is missing or a counter went
    /// backwards (then `notes` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<DeviceChange>,
    /// What to know when reading the figures (a failed read, counters that restarted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The device's logs at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceSnapshot {
    /// When the read completed (unix ms).
    pub unix_ms: u64,
    /// The SMART / Health Information log (log page 02h); none when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smart: Option<SmartLog>,
    /// The OCP Latency Monitor log (log page C3h); none when the device does not implement it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_monitor: Option<LatencyMonitorLog>,
}

/// The NVMe SMART / Health Information log page (02h) of a controller, all namespaces. The
/// 16-byte counters are kept as u64 (saturating: 2^64 units is beyond any drive).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmartLog {
    /// Critical Warning bits: spare below threshold (0), temperature (1), reliability
    /// degraded (2), read only (3), volatile backup failed (4), persistent memory (5).
    pub critical_warning: u8,
    /// Composite Temperature in kelvins; 0 when the controller reports none.
    pub composite_temperature_k: u16,
    /// Available Spare, % of the spare capacity left.
    pub available_spare_pct: u8,
    /// Available Spare Threshold, %.
    pub available_spare_threshold_pct: u8,
    /// Percentage Used: the vendor's estimate of the life used (may exceed 100).
    pub percentage_used_pct: u8,
    /// Data Units Read: thousands of 512-byte units ([`SMART_DATA_UNIT_BYTES`]), rounded up.
    pub data_units_read: u64,
    /// Data Units Written, in the same units.
    pub data_units_written: u64,
    /// Host Read Commands completed.
    pub host_read_commands: u64,
    /// Host Write Commands completed.
    pub host_write_commands: u64,
    /// Controller Busy Time: minutes with an IO command outstanding.
    pub controller_busy_minutes: u64,
    /// Power Cycles.
    pub power_cycles: u64,
    /// Power On Hours.
    pub power_on_hours: u64,
    /// Unsafe Shutdowns.
    pub unsafe_shutdowns: u64,
    /// Media and Data Integrity Errors: unrecovered data integrity errors.
    pub media_errors: u64,
    /// Number of Error Information Log Entries over the controller's life.
    pub error_log_entries: u64,
    /// Warning Composite Temperature Time: minutes above the warning threshold.
    pub warning_temperature_minutes: u32,
    /// Critical Composite Temperature Time: minutes above the critical threshold.
    pub critical_temperature_minutes: u32,
}

impl SmartLog {
    /// Composite temperature in °C, when reported.
    pub fn temperature_c(&self) -> Option<i32> {
        (self.composite_temperature_k > 0).then(|| i32::from(self.composite_temperature_k) - 273)
    }

    /// What the controller counted between `self` (before) and `after`; the counters only
    /// grow, so one that went backwards (a reset, a format) gives an error naming it.
    pub fn change_to(&self, after: &SmartLog) -> Result<SmartChange, String> {
        let diff = |name: &str, b: u64, a: u64| {
            a.checked_sub(b).ok_or_else(|| {
                format!("the SMART counter {name} went backwards ({b} → {a}): the controller was reset or its log cleared")
            })
        };
        Ok(SmartChange {
            host_read_commands: diff(
                "host read commands",
                self.host_read_commands,
                after.host_read_commands,
            )?,
            host_write_commands: diff(
                "host write commands",
                self.host_write_commands,
                after.host_write_commands,
            )?,
            data_units_read: diff(
                "data units read",
                self.data_units_read,
                after.data_units_read,
            )?,
            data_units_written: diff(
                "data units written",
                self.data_units_written,
                after.data_units_written,
            )?,
            controller_busy_minutes: diff(
                "controller busy time",
                self.controller_busy_minutes,
                after.controller_busy_minutes,
            )?,
            media_errors: diff("media errors", self.media_errors, after.media_errors)?,
            error_log_entries: diff(
                "error log entries",
                self.error_log_entries,
                after.error_log_entries,
            )?,
            unsafe_shutdowns: diff(
                "unsafe shutdowns",
                self.unsafe_shutdowns,
                after.unsafe_shutdowns,
            )?,
            warning_temperature_minutes: diff(
                "warning temperature time",
                self.warning_temperature_minutes.into(),
                after.warning_temperature_minutes.into(),
            )?,
            critical_temperature_minutes: diff(
                "critical temperature time",
                self.critical_temperature_minutes.into(),
                after.critical_temperature_minutes.into(),
            )?,
        })
    }
}

/// What the controller counted during a step (after − before).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmartChange {
    /// Read commands completed.
    pub host_read_commands: u64,
    /// Write commands completed.
    pub host_write_commands: u64,
    /// Data read, in [`SMART_DATA_UNIT_BYTES`] units (each read rounded up by the device, so
    /// the difference is ±1 unit).
    pub data_units_read: u64,
    /// Data written, in the same units.
    pub data_units_written: u64,
    /// Minutes with an IO command outstanding (whole minutes: a short step often shows 0 or 1).
    pub controller_busy_minutes: u64,
    /// New media and data integrity errors.
    pub media_errors: u64,
    /// New error information log entries.
    pub error_log_entries: u64,
    /// New unsafe shutdowns.
    pub unsafe_shutdowns: u64,
    /// Minutes spent above the warning temperature.
    pub warning_temperature_minutes: u64,
    /// Minutes spent above the critical temperature.
    pub critical_temperature_minutes: u64,
}

/// The OCP Datacenter NVMe SSD Latency Monitor log page (C3h): the active buckets, counting
/// reads, writes and deallocations slower than each configured threshold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyMonitorLog {
    /// Feature Status bit 0: the latency monitor is enabled (its counters are meaningless when
    /// it is not).
    pub enabled: bool,
    /// How long the active buckets have been counting, minutes (5-minute steps).
    pub active_bucket_timer_minutes: u32,
    /// When the active buckets move to the static ones and restart, minutes; 0 = never.
    pub active_bucket_timer_threshold_minutes: u32,
    /// Active Latency Configuration bits, as the device reports them.
    pub active_latency_config: u16,
    /// The log page's version.
    pub log_page_version: u16,
    /// Buckets 0–3: latencies from threshold A to B, B to C, C to D, and D up.
    pub buckets: Vec<LatencyBucket>,
}

/// One active bucket of the latency monitor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyBucket {
    /// Commands counted here took at least this long (ms).
    pub from_ms: u32,
    /// ... and less than this (ms); none for the last bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<u32>,
    /// Read commands.
    pub read: LatencyCounter,
    /// Write commands.
    pub write: LatencyCounter,
    /// Dataset Management commands that deallocate (TRIM, discard).
    pub deallocate: LatencyCounter,
}

/// One command kind's counter in a bucket, with the latency the device recorded for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyCounter {
    /// Commands that fell in the bucket since the active buckets last restarted (saturating at
    /// u32::MAX).
    pub commands: u32,
    /// The Active Measured Latency (ms, SQ fetch → CQ write): the first or the largest of the
    /// bucket's, by the device's Active Latency Configuration; none when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_latency_ms: Option<u16>,
    /// When it was recorded: the device's Active Latency Stamp (ms; the host's clock when
    /// iodig's host set the NVMe Timestamp, else power-on time); none when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp_ms: Option<u64>,
}

impl LatencyMonitorLog {
    /// The commands each bucket counted between `self` (before) and `after`. The device
    /// restarts its active buckets when their timer reaches its threshold; a step across such
    /// a restart (the timer or a counter went down, the thresholds changed) has no difference.
    pub fn change_to(&self, after: &LatencyMonitorLog) -> Result<LatencyMonitorChange, String> {
        if !self.enabled || !after.enabled {
            return Err("the latency monitor is not enabled on the device".into());
        }
        if after.active_bucket_timer_minutes < self.active_bucket_timer_minutes {
            return Err("the device restarted its active latency buckets during the step".into());
        }
        if self.buckets.len() != after.buckets.len() {
            return Err("the latency monitor's buckets changed during the step".into());
        }
        let mut buckets = Vec::with_capacity(after.buckets.len());
        for (b, a) in self.buckets.iter().zip(&after.buckets) {
            if (b.from_ms, b.to_ms) != (a.from_ms, a.to_ms) {
                return Err("the latency monitor's thresholds changed during the step".into());
            }
            let counted = |b: &LatencyCounter, a: &LatencyCounter| {
                a.commands
                    .checked_sub(b.commands)
                    .map(u64::from)
                    .ok_or_else(|| {
                        "the device restarted its active latency buckets during the step"
                            .to_string()
                    })
            };
            // A stamp that changed says the device recorded a latency in this step.
            let recorded = |b: &LatencyCounter, a: &LatencyCounter| {
                (a.stamp_ms.is_some() && a.stamp_ms != b.stamp_ms)
                    .then_some(a.measured_latency_ms)
                    .flatten()
            };
            buckets.push(LatencyBucketChange {
                from_ms: a.from_ms,
                to_ms: a.to_ms,
                read: counted(&b.read, &a.read)?,
                write: counted(&b.write, &a.write)?,
                deallocate: counted(&b.deallocate, &a.deallocate)?,
                read_latency_ms: recorded(&b.read, &a.read),
                write_latency_ms: recorded(&b.write, &a.write),
                deallocate_latency_ms: recorded(&b.deallocate, &a.deallocate),
                saturated: [a.read, a.write, a.deallocate]
                    .iter()
                    .any(|c| c.commands == u32::MAX),
            });
        }
        Ok(LatencyMonitorChange { buckets })
    }
}

/// What the latency monitor counted during a step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyMonitorChange {
    /// Buckets 0–3, as in [`LatencyMonitorLog::buckets`].
    pub buckets: Vec<LatencyBucketChange>,
}

/// One bucket's commands counted during a step.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyBucketChange {
    /// Lower bound of the bucket (ms).
    pub from_ms: u32,
    /// Upper bound (ms, excluded); none for the last bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<u32>,
    /// Read commands that fell in the bucket during the step.
    pub read: u64,
    /// Write commands.
    pub write: u64,
    /// Deallocating Dataset Management commands.
    pub deallocate: u64,
    /// The read latency the device recorded during the step (ms), when it recorded one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_ms: Option<u16>,
    /// The write latency recorded during the step (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency_ms: Option<u16>,
    /// The deallocation latency recorded during the step (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deallocate_latency_ms: Option<u16>,
    /// A counter reached its ceiling: the difference is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saturated: bool,
}

/// What a device counted over a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceChange {
    /// From the read before to the read after (s): the device's window, inside the trace's by
    /// the milliseconds a read takes.
    pub seconds: f64,
    /// The SMART counters' difference, when both reads had the log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smart: Option<SmartChange>,
    /// The latency monitor's difference, when both reads had it and it did not restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_monitor: Option<LatencyMonitorChange>,
}

impl DeviceStats {
    /// Fills `change` (and `notes` where a difference cannot be taken) from `before` and
    /// `after`.
    pub fn settle(&mut self) {
        let (Some(b), Some(a)) = (&self.before, &self.after) else {
            return;
        };
        let mut change = DeviceChange {
            seconds: a.unix_ms.saturating_sub(b.unix_ms) as f64 / 1000.0,
            ..Default::default()
        };
        if let (Some(sb), Some(sa)) = (&b.smart, &a.smart) {
            match sb.change_to(sa) {
                Ok(c) => change.smart = Some(c),
                Err(e) => self.notes.push(e),
            }
        }
        if let (Some(lb), Some(la)) = (&b.latency_monitor, &a.latency_monitor) {
            match lb.change_to(la) {
                Ok(c) => change.latency_monitor = Some(c),
                Err(e) => self.notes.push(e),
            }
        }
        if change.smart.is_some() || change.latency_monitor.is_some() {
            self.change = Some(change);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(from: u32, to: Option<u32>, reads: u32, stamp: Option<u64>) -> LatencyBucket {
        LatencyBucket {
            from_ms: from,
            to_ms: to,
            read: LatencyCounter {
                commands: reads,
                measured_latency_ms: stamp.map(|_| 12),
                stamp_ms: stamp,
            },
            ..Default::default()
        }
    }

    fn monitor(timer: u32, reads: u32, stamp: Option<u64>) -> LatencyMonitorLog {
        LatencyMonitorLog {
            enabled: true,
            active_bucket_timer_minutes: timer,
            buckets: vec![bucket(5, Some(10), reads, stamp), bucket(10, None, 0, None)],
            ..Default::default()
        }
    }

    #[test]
    fn smart_change_is_the_difference_and_refuses_a_counter_that_went_back() {
        let before = SmartLog {
            host_read_commands: 100,
            data_units_written: 7,
            ..Default::default()
        };
        let after = SmartLog {
            host_read_commands: 160,
            data_units_written: 9,
            media_errors: 1,
            ..Default::default()
        };
        let c = before.change_to(&after).unwrap();
        assert_eq!(
            (c.host_read_commands, c.data_units_written, c.media_errors),
            (60, 2, 1)
        );
        let e = after.change_to(&before).unwrap_err();
        assert!(
            e.contains("host read commands went backwards (160 → 100)"),
            "{e}"
        );
    }

    #[test]
    fn latency_buckets_count_the_step_and_say_when_they_restarted() {
        let c = monitor(10, 3, Some(1))
            .change_to(&monitor(15, 5, Some(2)))
            .unwrap();
        assert_eq!(c.buckets[0].read, 2);
        assert_eq!(
            c.buckets[0].read_latency_ms,
            Some(12),
            "a new stamp in the step"
        );
        let same_stamp = monitor(10, 3, Some(1))
            .change_to(&monitor(10, 3, Some(1)))
            .unwrap();
        assert_eq!(same_stamp.buckets[0].read_latency_ms, None);
        let e = monitor(15, 3, None)
            .change_to(&monitor(0, 0, None))
            .unwrap_err();
        assert!(e.contains("restarted"), "{e}");
    }

    #[test]
    fn settle_gives_a_change_only_with_both_reads() {
        let snap = |reads| DeviceSnapshot {
            unix_ms: 1_000,
            smart: Some(SmartLog {
                host_read_commands: reads,
                ..Default::default()
            }),
            latency_monitor: None,
        };
        let mut d = DeviceStats {
            device: "nvme0n1".into(),
            before: Some(snap(1)),
            ..Default::default()
        };
        d.settle();
        assert_eq!(d.change, None);
        d.after = Some(DeviceSnapshot {
            unix_ms: 3_500,
            ..snap(4)
        });
        d.settle();
        let c = d.change.as_ref().unwrap();
        assert_eq!(c.seconds, 2.5);
        assert_eq!(c.smart.as_ref().unwrap().host_read_commands, 3);
        // Every field but the device has a default: a sparse record still reads.
        let old: DeviceStats = serde_json::from_str(r#"{"device":"vda"}"#).unwrap();
        assert_eq!(old.unavailable, None);
    }
}
