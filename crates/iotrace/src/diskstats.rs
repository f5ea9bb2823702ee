//! /proc/diskstats: parsing, deltas, iostat's derived figures, and the sampler behind the
//! fallback mode (used when eBPF is not permitted or not supported).

use crate::devices::Disk;
use std::collections::HashMap;

/// One line of /proc/diskstats (fields 1–17 of Documentation/admin-guide/iostats.rst).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Field 1: reads completed.
    pub rd_ios: u64,
    /// Field 3: sectors read (512 bytes each).
    pub rd_sectors: u64,
    /// Field 4: ms spent on reads, summed over requests.
    pub rd_ticks: u64,
    /// Field 5: writes completed.
    pub wr_ios: u64,
    /// Field 7: sectors written (512 bytes each).
    pub wr_sectors: u64,
    /// Field 8: ms spent on writes, summed over requests.
    pub wr_ticks: u64,
    /// Field 9: requests in flight at the moment of reading (a gauge).
    pub in_flight: u64,
    /// Field 10: ms during which at least one request was in flight (%util).
    pub io_ticks: u64,
    /// Field 11: since ≈5.7 the sum of request durations in ms, added at completion.
    pub time_in_queue: u64,
    /// Field 12: discards completed (0 before Linux 4.18).
    pub dc_ios: u64,
    /// Field 14: sectors discarded (512 bytes each).
    pub dc_sectors: u64,
    /// Field 15: ms spent on discards, summed over requests.
    pub dc_ticks: u64,
    /// Field 16: flush requests completed (0 before Linux 5.5).
    pub fl_ios: u64,
    /// Field 17: ms spent on flushes, summed over requests.
    pub fl_ticks: u64,
}

impl Stat {
    /// Counter deltas `self - earlier` (in_flight is a gauge and keeps `self`'s value).
    pub fn since(&self, e: &Stat) -> Stat {
        Stat {
            rd_ios: self.rd_ios.wrapping_sub(e.rd_ios),
            rd_sectors: self.rd_sectors.wrapping_sub(e.rd_sectors),
            rd_ticks: self.rd_ticks.wrapping_sub(e.rd_ticks),
            wr_ios: self.wr_ios.wrapping_sub(e.wr_ios),
            wr_sectors: self.wr_sectors.wrapping_sub(e.wr_sectors),
            wr_ticks: self.wr_ticks.wrapping_sub(e.wr_ticks),
            in_flight: self.in_flight,
            io_ticks: self.io_ticks.wrapping_sub(e.io_ticks),
            time_in_queue: self.time_in_queue.wrapping_sub(e.time_in_queue),
            dc_ios: self.dc_ios.wrapping_sub(e.dc_ios),
            dc_sectors: self.dc_sectors.wrapping_sub(e.dc_sectors),
            dc_ticks: self.dc_ticks.wrapping_sub(e.dc_ticks),
            fl_ios: self.fl_ios.wrapping_sub(e.fl_ios),
            fl_ticks: self.fl_ticks.wrapping_sub(e.fl_ticks),
        }
    }

    /// (ios, sectors, ticks ms) of an op group: read, write, discard, flush.
    pub fn group(&self, op: &str) -> (u64, u64, u64) {
        match op {
            "read" => (self.rd_ios, self.rd_sectors, self.rd_ticks),
            "write" => (self.wr_ios, self.wr_sectors, self.wr_ticks),
            "discard" => (self.dc_ios, self.dc_sectors, self.dc_ticks),
            "flush" => (self.fl_ios, 0, self.fl_ticks),
            _ => (0, 0, 0),
        }
    }
}

/// Parses one diskstats line into (MAJ, MIN, name, Stat). Kernels before 4.18 have no discard
/// fields and before 5.5 no flush fields: those read as zero.
pub fn parse_line(line: &str) -> Option<(u32, u32, String, Stat)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
    if f.len() < 14 {
        return None;
    }
    let s = Stat {
        rd_ios: n(3),
        rd_sectors: n(5),
        rd_ticks: n(6),
        wr_ios: n(7),
        wr_sectors: n(9),
        wr_ticks: n(10),
        in_flight: n(11),
        io_ticks: n(12),
        time_in_queue: n(13),
        dc_ios: n(14),
        dc_sectors: n(16),
        dc_ticks: n(17),
        fl_ios: n(18),
        fl_ticks: n(19),
    };
    Some((f[0].parse().ok()?, f[1].parse().ok()?, f[2].to_string(), s))
}

/// Current stats of the given disks, keyed by disk name.
pub fn read(disks: &[Disk]) -> HashMap<String, Stat> {
    let text = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    text.lines()
        .filter_map(parse_line)
        .filter(|(ma, mi, _, _)| disks.iter().any(|d| d.major == *ma && d.minor == *mi))
        .map(|(_, _, name, s)| (name, s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_6x_line_and_groups() {
        let l = " 254       0 vda 32900 6158 3072474 22120 13354 15766 3305760 13004 2 6620 35643 5098 21 1131384 465 1169 52";
        let (ma, mi, name, s) = parse_line(l).unwrap();
        assert_eq!((ma, mi, name.as_str()), (254, 0, "vda"));
        assert_eq!(s.group("read"), (32900, 3072474, 22120));
        assert_eq!(s.group("write"), (13354, 3305760, 13004));
        assert_eq!(s.group("discard"), (5098, 1131384, 465));
        assert_eq!(s.group("flush"), (1169, 0, 52));
        assert_eq!(s.in_flight, 2);
        let d = s.since(&Stat {
            rd_ios: 900,
            ..Default::default()
        });
        assert_eq!(d.rd_ios, 32000);
        assert!(parse_line("7 0 loop0").is_none());
    }
}
