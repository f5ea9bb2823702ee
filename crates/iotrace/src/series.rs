//! Per-second series on the unix clock: from the kernel's time slots (eBPF mode) or from
//! /proc/diskstats samples (fallback mode). Pure functions, so the arithmetic is unit-tested.

use crate::diskstats::Stat;
use crate::hist::{lat_bounds, quantile, to_buckets, SEC_BUCKETS, SEC_SUB_BITS};
use iodig_model::trace::{DeviceSecond, OpSecond, OPS};
use std::collections::BTreeMap;

const NS: u64 = 1_000_000_000;

/// One device in one slot, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SlotRec {
    /// (ios, bytes, max device latency ns) per op, in [`OPS`] order.
    pub ops: [(u64, u64, u64); 5],
    /// Highest device queue depth reached at an issue in this slot (exact).
    pub qd_max: u64,
    /// Tracked requests issued to the driver in this slot (depth +1 each).
    pub n_issue: u64,
    /// Tracked requests that left the device in this slot, at final completion or requeue (depth −1
    /// each).
    pub n_done: u64,
    /// Sum over this slot's issues of their time after the slot's start, ns (for the mean depth).
    pub sum_issue_off: u64,
    /// Sum over this slot's leaves of their time after the slot's start, ns.
    pub sum_done_off: u64,
}

impl SlotRec {
    /// Adds another CPU's share of the same slot.
    pub fn add(&mut self, o: &SlotRec) {
        for (a, b) in self.ops.iter_mut().zip(o.ops.iter()) {
            *a = (a.0 + b.0, a.1 + b.1, a.2.max(b.2));
        }
        self.qd_max = self.qd_max.max(o.qd_max);
        self.n_issue += o.n_issue;
        self.n_done += o.n_done;
        self.sum_issue_off += o.sum_issue_off;
        self.sum_done_off += o.sum_done_off;
    }
}

/// The traced window and slot width, all in unix ns.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// When tracing started.
    pub start_ns: u64,
    /// When tracing stopped (exclusive).
    pub end_ns: u64,
    /// Slot width (`--slot-ms`); divides a second.
    pub slot_ns: u64,
}

impl Window {
    fn covered(&self, from: u64, to: u64) -> u64 {
        to.min(self.end_ns).saturating_sub(from.max(self.start_ns))
    }
}

fn empty_second(sec: u64, covered_ns: u64) -> DeviceSecond {
    let mut s = DeviceSecond {
        unix_ms: sec * 1000,
        covered_ms: covered_ns / 1_000_000,
        ..Default::default()
    };
    for op in &OPS[..4] {
        s.ops.insert(op.to_string(), OpSecond::default());
    }
    s
}

fn rate(v: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        v as f64 * NS as f64 / ns as f64
    }
}

/// Builds the per-second series from slot records keyed by slot id, and per-second device
/// latency histograms keyed by (second, op index). The queue depth is integrated exactly:
/// within a slot of width S the area under depth(t) is depth_at_start·S + Σ_issues (S − off) −
/// Σ_leaves (S − off), so per-CPU additive sums are enough (docs/tracing.md).
pub fn from_slots(
    w: Window,
    slots: &BTreeMap<u64, SlotRec>,
    sec_lat: &BTreeMap<(u64, usize), Vec<u64>>,
) -> Vec<DeviceSecond> {
    if w.end_ns <= w.start_ns {
        return Vec::new();
    }
    let mut b = SecondsBuilder::new(w);
    (w.start_ns / NS..=(w.end_ns - 1) / NS)
        .map(|sec| b.second(sec, slots, sec_lat))
        .collect()
}

/// One device's seconds built in order, carrying the queue depth from one to the next: the
/// whole window at the end ([`from_slots`]) and each second as it completes while tracing (the
/// live feed) are the same arithmetic.
#[derive(Debug, Clone)]
pub struct SecondsBuilder {
    w: Window,
    /// In-flight depth at the start of the next slot.
    depth: i64,
}

impl SecondsBuilder {
    /// Starts at the window's first slot. While tracing the window's end is unknown: give
    /// `u64::MAX` and every second after the first is whole.
    pub fn new(w: Window) -> Self {
        SecondsBuilder { w, depth: 0 }
    }

    /// The window's end, once known: the last second is then as partial as it was.
    pub fn end_at(&mut self, end_ns: u64) {
        self.w.end_ns = end_ns;
    }

    /// Second `sec` (unix s) from its slots: seconds must be asked in order, from the window's
    /// first, and every slot of the second must have been drained.
    pub fn second(
        &mut self,
        sec: u64,
        slots: &BTreeMap<u64, SlotRec>,
        sec_lat: &BTreeMap<(u64, usize), Vec<u64>>,
    ) -> DeviceSecond {
        let (w, s_ns) = (self.w, self.w.slot_ns);
        let first = (sec * NS / s_ns).max(w.start_ns / s_ns);
        let last = ((sec + 1) * NS / s_ns - 1).min(w.end_ns.saturating_sub(1) / s_ns);
        let mut d = empty_second(sec, w.covered(sec * NS, (sec + 1) * NS));
        let mut area = 0.0;
        let empty = SlotRec::default();
        for id in first..=last {
            let r = slots.get(&id).unwrap_or(&empty);
            let (from, to) = (id * s_ns, (id + 1) * s_ns);
            let cov = w.covered(from, to).max(1);
            area += self.depth as f64 * s_ns as f64 + (r.n_issue * s_ns) as f64
                - r.sum_issue_off as f64
                - (r.n_done * s_ns) as f64
                + r.sum_done_off as f64;
            let qd_max = (self.depth.max(0) as u64).max(r.qd_max);
            self.depth += r.n_issue as i64 - r.n_done as i64;
            d.qd_max = Some(d.qd_max.unwrap_or(0).max(qd_max));
            for (i, op) in OPS.iter().enumerate() {
                let (ios, bytes, lat_max) = r.ops[i];
                if i == 4 && ios == 0 && bytes == 0 {
                    continue;
                }
                let o = d.ops.entry(op.to_string()).or_default();
                o.ios += ios;
                o.bytes += bytes;
                o.mb_s_max = o.mb_s_max.max(rate(bytes, cov) / 1e6);
                o.iops_max = o.iops_max.max(rate(ios, cov));
                if lat_max > 0 {
                    o.lat_max_ns = Some(o.lat_max_ns.unwrap_or(0).max(lat_max));
                }
            }
        }
        finish_second(&mut d, sec, area, sec_lat)
    }
}

fn finish_second(
    d: &mut DeviceSecond,
    sec: u64,
    area: f64,
    sec_lat: &BTreeMap<(u64, usize), Vec<u64>>,
) -> DeviceSecond {
    let cov_ns = (d.covered_ms * 1_000_000).max(1);
    d.qd_mean = Some(area / cov_ns as f64);
    for (i, op) in OPS.iter().enumerate() {
        let Some(o) = d.ops.get_mut(*op) else {
            continue;
        };
        o.mb_s = rate(o.bytes, cov_ns) / 1e6;
        o.iops = rate(o.ios, cov_ns);
        if o.ios > 0 {
            o.avg_size_bytes = Some(o.bytes as f64 / o.ios as f64);
        }
        if let Some(h) = sec_lat.get(&(sec, i)) {
            let (dev, os) = h.split_at(h.len().min(SEC_BUCKETS));
            let b = to_buckets(dev, |j| lat_bounds(j, SEC_SUB_BITS));
            let p99 = quantile(&b, 0.99);
            o.lat_p99_ns = (p99 > 0).then(|| p99.min(o.lat_max_ns.unwrap_or(u64::MAX)));
            o.lat_hist = b;
            // OS time (allocation → issue) of the same IOs, where the allocation was seen.
            let q = to_buckets(os, |j| lat_bounds(j, SEC_SUB_BITS));
            if q.iter().any(|b| b.count > 0) {
                o.queue_p99_ns = Some(quantile(&q, 0.99));
                o.queue_max_ns = q.last().map(|b| b.upper);
            }
        }
    }
    d.clone()
}

/// Builds iostat's per-second figures from diskstats samples `(unix ns, stat)` taken at slot
/// boundaries: rates over each second, the busiest sample interval as `*_max`, await, average
/// request size, aqu-sz (Δfield 11 / Δt) and %util (Δfield 10 / Δt).
pub fn from_diskstats(samples: &[(u64, Stat)]) -> Vec<DeviceSecond> {
    let mut per_sec: BTreeMap<u64, (Stat, u64, DeviceSecond)> = BTreeMap::new();
    for pair in samples.windows(2) {
        let ((t0, a), (t1, b)) = (pair[0], pair[1]);
        let (dt, delta) = (t1.saturating_sub(t0).max(1), b.since(&a));
        let sec = t0 / NS;
        let e = per_sec
            .entry(sec)
            .or_insert_with(|| (Stat::default(), 0, empty_second(sec, 0)));
        add_stat(&mut e.0, &delta);
        e.1 += dt;
        let d = &mut e.2;
        d.qd_max = Some(d.qd_max.unwrap_or(0).max(a.in_flight).max(b.in_flight));
        for op in &OPS[..4] {
            let (ios, sectors, _) = delta.group(op);
            let o = d.ops.entry(op.to_string()).or_default();
            o.mb_s_max = o.mb_s_max.max(rate(sectors * 512, dt) / 1e6);
            o.iops_max = o.iops_max.max(rate(ios, dt));
        }
    }
    per_sec
        .into_values()
        .map(|(st, dt, d)| iostat_second(st, dt, d))
        .collect()
}

fn add_stat(acc: &mut Stat, d: &Stat) {
    acc.rd_ios += d.rd_ios;
    acc.rd_sectors += d.rd_sectors;
    acc.rd_ticks += d.rd_ticks;
    acc.wr_ios += d.wr_ios;
    acc.wr_sectors += d.wr_sectors;
    acc.wr_ticks += d.wr_ticks;
    acc.io_ticks += d.io_ticks;
    acc.time_in_queue += d.time_in_queue;
    acc.dc_ios += d.dc_ios;
    acc.dc_sectors += d.dc_sectors;
    acc.dc_ticks += d.dc_ticks;
    acc.fl_ios += d.fl_ios;
    acc.fl_ticks += d.fl_ticks;
}

fn iostat_second(st: Stat, dt: u64, mut d: DeviceSecond) -> DeviceSecond {
    let dt_ms = dt as f64 / 1e6;
    d.covered_ms = (dt / 1_000_000).max(1);
    d.qd_mean = Some(st.time_in_queue as f64 / dt_ms);
    d.util_pct = Some((100.0 * st.io_ticks as f64 / dt_ms).min(100.0));
    for op in &OPS[..4] {
        let (ios, sectors, ticks) = st.group(op);
        let o = d.ops.entry(op.to_string()).or_default();
        o.ios = ios;
        o.bytes = sectors * 512;
        o.iops = rate(ios, dt);
        o.mb_s = rate(o.bytes, dt) / 1e6;
        if ios > 0 {
            o.await_ms = Some(ticks as f64 / ios as f64);
            o.avg_size_bytes = (*op != "flush").then(|| o.bytes as f64 / ios as f64);
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 100_000_000;

    #[test]
    fn burst_shows_in_max_not_mean() {
        // 10 slots in second 5; one slot carries 100 MB of writes, the rest nothing.
        let mut slots = BTreeMap::new();
        let mut r = SlotRec::default();
        r.ops[1] = (200, 100_000_000, 5_000_000);
        slots.insert(53, r);
        let w = Window {
            start_ns: 5 * NS,
            end_ns: 6 * NS,
            slot_ns: S,
        };
        let secs = from_slots(w, &slots, &BTreeMap::new());
        assert_eq!(secs.len(), 1);
        let wr = &secs[0].ops["write"];
        assert!((wr.mb_s - 100.0).abs() < 1e-6, "mean {}", wr.mb_s);
        assert!((wr.mb_s_max - 1000.0).abs() < 1e-6, "max {}", wr.mb_s_max);
        assert!((wr.iops_max - 2000.0).abs() < 1e-6);
        assert_eq!(wr.lat_max_ns, Some(5_000_000));
        assert_eq!(secs[0].unix_ms, 5000);
    }

    #[test]
    fn queue_depth_integral_is_exact() {
        // Two IOs issued at the start of slot 0, one leaves mid slot 0, the other mid slot 1.
        let mut slots = BTreeMap::new();
        slots.insert(
            0,
            SlotRec {
                n_issue: 2,
                n_done: 1,
                sum_issue_off: 0,
                sum_done_off: S / 2,
                qd_max: 2,
                ..Default::default()
            },
        );
        slots.insert(
            1,
            SlotRec {
                n_done: 1,
                sum_done_off: S / 2,
                ..Default::default()
            },
        );
        let w = Window {
            start_ns: 0,
            end_ns: 2 * S,
            slot_ns: S,
        };
        let secs = from_slots(w, &slots, &BTreeMap::new());
        // area = 2·0.5S + 1·0.5S (slot 0) + 1·0.5S (slot 1) = 2S over 2S covered → mean 1.0
        assert!(
            (secs[0].qd_mean.unwrap() - 1.0).abs() < 1e-9,
            "{:?}",
            secs[0].qd_mean
        );
        assert_eq!(secs[0].qd_max, Some(2));
    }

    #[test]
    fn diskstats_iostat_figures() {
        let a = Stat {
            rd_ios: 0,
            wr_ios: 0,
            ..Default::default()
        };
        let b = Stat {
            rd_ios: 100,
            rd_sectors: 800,
            rd_ticks: 50,
            time_in_queue: 500,
            io_ticks: 250,
            in_flight: 3,
            ..Default::default()
        };
        let c = Stat {
            rd_ios: 1000,
            rd_sectors: 8000,
            rd_ticks: 500,
            time_in_queue: 1000,
            io_ticks: 1000,
            ..b
        };
        let secs = from_diskstats(&[(0, a), (NS / 2, b), (NS, c)]);
        assert_eq!(secs.len(), 1);
        let r = &secs[0].ops["read"];
        assert_eq!(r.ios, 1000);
        assert!((r.iops - 1000.0).abs() < 1e-9);
        assert!((r.iops_max - 1800.0).abs() < 1e-9);
        assert_eq!(r.avg_size_bytes, Some(4096.0));
        assert_eq!(r.await_ms, Some(0.5));
        assert!((secs[0].qd_mean.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(secs[0].util_pct, Some(100.0));
        assert_eq!(secs[0].qd_max, Some(3));
    }
}
