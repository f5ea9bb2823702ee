//! The NVMe log pages iodig reads, decoded from their bytes: the SMART / Health Information log
//! (02h, NVMe base specification), the OCP Datacenter NVMe SSD Latency Monitor log (C3h), and
//! the Identify UUID list that says which UUID index the OCP pages answer to. Pure: the bytes
//! in, the model out, so the offsets are tested against buffers laid out by the specifications.

use crate::le::{u16_at, u32_at, u64_at};
use iodig_model::device_stats::{LatencyBucket, LatencyCounter, LatencyMonitorLog, SmartLog};

/// Both log pages are 512 bytes.
pub const LOG_PAGE_LEN: usize = 512;
/// Log Identifier of the SMART / Health Information log.
pub const LID_SMART: u8 = 0x02;
/// Log Identifier of the OCP Latency Monitor log (vendor-specific range: another vendor's C3h
/// is something else, which the GUID tells apart).
pub const LID_LATENCY_MONITOR: u8 = 0xC3;

/// The Log Page GUID an OCP latency monitor carries in its last 16 bytes, as stored (little
/// endian: 0x85D45E58D4E643709C6C84D08CC07A92).
pub const LATENCY_MONITOR_GUID: [u8; 16] = [
    0x92, 0x7a, 0xc0, 0x8c, 0xd0, 0x84, 0x6c, 0x9c, 0x70, 0x43, 0xe6, 0xd4, 0x58, 0x5e, 0xd4, 0x85,
];

/// The OCP Datacenter SSD UUID, as the Identify UUID list holds it: its index selects the OCP
/// meaning of vendor-specific log pages on drives that serve several vendors' pages.
pub const OCP_UUID: [u8; 16] = [
    0xc1, 0x94, 0xd5, 0x5b, 0xe0, 0x94, 0x47, 0x94, 0xa2, 0x1d, 0x29, 0x99, 0x8f, 0x56, 0xbe, 0x6f,
];

/// Why a C3h page is not an OCP latency monitor.
pub const NOT_IMPLEMENTED: &str = "not implemented by this device";

/// A 16-byte little-endian counter, saturating at u64::MAX (2^64 data units is 9 ZB).
fn u128_at(b: &[u8], at: usize) -> u64 {
    let low = u64_at(b, at);
    if u64_at(b, at + 8) == 0 {
        low
    } else {
        u64::MAX
    }
}

/// The SMART / Health Information log (NVMe base specification, Get Log Page 02h).
pub fn parse_smart(b: &[u8; LOG_PAGE_LEN]) -> SmartLog {
    SmartLog {
        critical_warning: b[0],
        composite_temperature_k: u16_at(b, 1),
        available_spare_pct: b[3],
        available_spare_threshold_pct: b[4],
        percentage_used_pct: b[5],
        data_units_read: u128_at(b, 32),
        data_units_written: u128_at(b, 48),
        host_read_commands: u128_at(b, 64),
        host_write_commands: u128_at(b, 80),
        controller_busy_minutes: u128_at(b, 96),
        power_cycles: u128_at(b, 112),
        power_on_hours: u128_at(b, 128),
        unsafe_shutdowns: u128_at(b, 144),
        media_errors: u128_at(b, 160),
        error_log_entries: u128_at(b, 176),
        warning_temperature_minutes: u32_at(b, 192),
        critical_temperature_minutes: u32_at(b, 196),
    }
}

/// Where the latency monitor keeps each command kind within a bucket: the counters put reads
/// last (bytes 12–15 of a bucket's 16, writes 8–11, deallocations 4–7, 0–3 reserved), and the
/// stamps and measured latencies list each bucket's three as deallocate, write, read.
#[derive(Clone, Copy)]
enum Kind {
    Deallocate = 0,
    Write = 1,
    Read = 2,
}

const ACTIVE_BUCKET_COUNTERS: usize = 0x20;
const ACTIVE_LATENCY_STAMPS: usize = 0x60;
const ACTIVE_MEASURED_LATENCIES: usize = 0xC0;
const LOG_PAGE_VERSION: usize = 0x1EE;
const LOG_PAGE_GUID: usize = 0x1F0;

/// A stamp of all ones (in its 48 timestamp bits or in all 64) is "not valid".
const STAMP_MS_MASK: u64 = (1 << 48) - 1;

fn counter(b: &[u8], bucket: usize, kind: Kind) -> LatencyCounter {
    let commands = u32_at(
        b,
        ACTIVE_BUCKET_COUNTERS + 16 * bucket + 4 * (kind as usize + 1),
    );
    // Stamps and latencies run from bucket 3 down to bucket 0.
    let slot = 3 * (3 - bucket) + kind as usize;
    let stamp = u64_at(b, ACTIVE_LATENCY_STAMPS + 8 * slot) & STAMP_MS_MASK;
    let latency = u16_at(b, ACTIVE_MEASURED_LATENCIES + 2 * slot);
    LatencyCounter {
        commands,
        measured_latency_ms: (latency != 0).then_some(latency),
        stamp_ms: (stamp != STAMP_MS_MASK).then_some(stamp),
    }
}

/// The OCP Latency Monitor log (Datacenter NVMe SSD specification, log page C3h): its active
/// buckets. A page without the OCP GUID is another vendor's C3h: "not implemented by this
/// device".
pub fn parse_latency_monitor(b: &[u8; LOG_PAGE_LEN]) -> Result<LatencyMonitorLog, String> {
    if b[LOG_PAGE_GUID..] != LATENCY_MONITOR_GUID {
        return Err(format!(
            "{NOT_IMPLEMENTED} (its log page C3h does not carry the OCP latency monitor's GUID)"
        ));
    }
    // Thresholds A–D are in 5 ms steps from 5 ms (0 means 5 ms).
    let thresholds: Vec<u32> = (6..10).map(|i| 5 * (u32::from(b[i]) + 1)).collect();
    let buckets = (0..4)
        .map(|i| LatencyBucket {
            from_ms: thresholds[i],
            to_ms: thresholds.get(i + 1).copied(),
            read: counter(b, i, Kind::Read),
            write: counter(b, i, Kind::Write),
            deallocate: counter(b, i, Kind::Deallocate),
        })
        .collect();
    Ok(LatencyMonitorLog {
        enabled: b[0] & 1 == 1,
        active_bucket_timer_minutes: 5 * u32::from(u16_at(b, 2)),
        active_bucket_timer_threshold_minutes: 5 * u32::from(u16_at(b, 4)),
        active_latency_config: u16_at(b, 0x0A),
        log_page_version: u16_at(b, LOG_PAGE_VERSION),
        buckets,
    })
}

/// The UUID index of the OCP UUID in an Identify UUID list (CNS 17h: 32 reserved bytes, then
/// 32-byte entries whose last 16 bytes are the UUID; the list ends at an all-zero UUID);
/// indexes count from 1, as Get Log Page takes them.
pub fn ocp_uuid_index(list: &[u8]) -> Option<u8> {
    list.get(32..)?
        .chunks_exact(32)
        .map(|entry| &entry[16..])
        .take_while(|uuid| uuid.iter().any(|&x| x != 0))
        .position(|uuid| uuid == OCP_UUID)
        .and_then(|i| u8::try_from(i + 1).ok())
        .filter(|&i| i <= 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_u128(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn smart_fields_come_from_the_specification_offsets() {
        let mut b = [0u8; LOG_PAGE_LEN];
        b[0] = 0b100;
        b[1..3].copy_from_slice(&310u16.to_le_bytes());
        (b[3], b[4], b[5]) = (97, 10, 3);
        for (i, v) in [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
            .into_iter()
            .enumerate()
        {
            put_u128(&mut b, 32 + 16 * i, v);
        }
        b[192..196].copy_from_slice(&21u32.to_le_bytes());
        b[196..200].copy_from_slice(&22u32.to_le_bytes());
        let s = parse_smart(&b);
        assert_eq!(s.critical_warning, 4);
        assert_eq!(s.temperature_c(), Some(37));
        assert_eq!(
            (s.available_spare_pct, s.available_spare_threshold_pct),
            (97, 10)
        );
        assert_eq!(s.percentage_used_pct, 3);
        assert_eq!(
            [
                s.data_units_read,
                s.data_units_written,
                s.host_read_commands,
                s.host_write_commands,
                s.controller_busy_minutes,
                s.power_cycles,
                s.power_on_hours,
                s.unsafe_shutdowns,
                s.media_errors,
                s.error_log_entries
            ],
            [11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
        );
        assert_eq!(
            (
                s.warning_temperature_minutes,
                s.critical_temperature_minutes
            ),
            (21, 22)
        );
        // A counter past 64 bits saturates rather than wrapping.
        b[72] = 1;
        assert_eq!(parse_smart(&b).host_read_commands, u64::MAX);
    }

    /// A C3h page as the OCP specification lays it out: enabled, thresholds A–D of 5, 10, 50
    /// and 100 ms, and per bucket i: reads 100 + i, writes 200 + i, deallocations 300 + i.
    fn latency_page() -> [u8; LOG_PAGE_LEN] {
        let mut b = [0u8; LOG_PAGE_LEN];
        b[0] = 0x07;
        b[2..4].copy_from_slice(&3u16.to_le_bytes());
        b[4..6].copy_from_slice(&288u16.to_le_bytes());
        b[6..10].copy_from_slice(&[0, 1, 9, 19]);
        for i in 0..4u32 {
            let at = 0x20 + 16 * i as usize;
            b[at + 12..at + 16].copy_from_slice(&(100 + i).to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&(200 + i).to_le_bytes());
            b[at + 4..at + 8].copy_from_slice(&(300 + i).to_le_bytes());
        }
        // Every stamp invalid, but bucket 0's read (bytes 184–191) and bucket 3's
        // deallocation (bytes 96–103).
        b[0x60..0xC0].fill(0xff);
        b[184..192].copy_from_slice(&1_700_000_000_123u64.to_le_bytes());
        b[96..104].copy_from_slice(&42u64.to_le_bytes());
        // Bucket 0's read latency at bytes 214–215, bucket 3's deallocation at 192–193.
        b[214..216].copy_from_slice(&7u16.to_le_bytes());
        b[192..194].copy_from_slice(&250u16.to_le_bytes());
        b[0x1EE..0x1F0].copy_from_slice(&4u16.to_le_bytes());
        b[0x1F0..].copy_from_slice(&LATENCY_MONITOR_GUID);
        b
    }

    #[test]
    fn latency_monitor_buckets_counters_stamps_and_latencies() {
        let l = parse_latency_monitor(&latency_page()).unwrap();
        assert!(l.enabled);
        assert_eq!(l.active_bucket_timer_minutes, 15);
        assert_eq!(l.active_bucket_timer_threshold_minutes, 1440);
        assert_eq!(l.log_page_version, 4);
        let bounds: Vec<_> = l.buckets.iter().map(|b| (b.from_ms, b.to_ms)).collect();
        assert_eq!(
            bounds,
            [(5, Some(10)), (10, Some(50)), (50, Some(100)), (100, None)]
        );
        for (i, b) in l.buckets.iter().enumerate() {
            let i = i as u32;
            assert_eq!(
                (b.read.commands, b.write.commands, b.deallocate.commands),
                (100 + i, 200 + i, 300 + i)
            );
        }
        let b0 = &l.buckets[0].read;
        assert_eq!(
            (b0.measured_latency_ms, b0.stamp_ms),
            (Some(7), Some(1_700_000_000_123))
        );
        let b3 = &l.buckets[3].deallocate;
        assert_eq!((b3.measured_latency_ms, b3.stamp_ms), (Some(250), Some(42)));
        assert_eq!(l.buckets[1].write.stamp_ms, None, "all ones: not valid");
        assert_eq!(l.buckets[1].write.measured_latency_ms, None, "0: not valid");
    }

    #[test]
    fn another_vendors_c3h_page_is_not_a_latency_monitor() {
        let mut b = latency_page();
        b[0x1F0] ^= 1;
        let e = parse_latency_monitor(&b).unwrap_err();
        assert!(e.starts_with("not implemented by this device"), "{e}");
        b[0] = 0x06;
        b[0x1F0] ^= 1;
        assert!(!parse_latency_monitor(&b).unwrap().enabled);
    }

    #[test]
    fn the_ocp_uuid_index_counts_from_one_and_stops_at_the_list_end() {
        let mut list = vec![0u8; 4096];
        list[32 + 16..64].fill(0x11);
        assert_eq!(ocp_uuid_index(&list), None);
        list[64 + 16..96].copy_from_slice(&OCP_UUID);
        assert_eq!(ocp_uuid_index(&list), Some(2));
        // After an all-zero entry, nothing counts.
        list[32 + 16..64].fill(0);
        assert_eq!(ocp_uuid_index(&list), None);
    }
}
