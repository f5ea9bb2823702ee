//! Reading the kernel's aggregates: time slots and per-second latency histograms drained while
//! tracing, totals, histograms and counters read once at the end.

use super::skel::{types, IotraceSkel};
use crate::hist::{SEC_BUCKETS, SIZE_BUCKETS};
use crate::series::SlotRec;
use libbpf_rs::{MapCore, MapFlags};
use std::collections::BTreeMap;

pub const NOPS: usize = 5;
pub const NKINDS: usize = 4;
pub(super) const SLOT_RING: u64 = 64;
const SEC_RING: u64 = 8;
pub const NCOUNTERS: usize = 10;
/// Buckets of the attribution size histogram (ATTR_SIZE_BUCKETS).
pub const ATTR_SIZE_BUCKETS: usize = SEC_BUCKETS + 1;
/// Ops split by background IO (SPLIT_OPS): read and write.
pub const SPLIT_OPS: usize = 2;

/// Everything read back for one device.
#[derive(Debug, Default)]
pub struct DevRaw {
    pub slots: BTreeMap<u64, SlotRec>,
    /// Per (second, op): device-time buckets, then OS-time buckets (2 × SEC_BUCKETS).
    pub sec_lat: BTreeMap<(u64, usize), Vec<u64>>,
    /// [op][kind] bucket counts (kinds as H_* in iotrace.h).
    pub hists: Vec<Vec<Vec<u64>>>,
    /// (ios, bytes, max device latency ns) per op.
    pub totals: [(u64, u64, u64); NOPS],
}

/// Copies a plain-old-data value of a skeleton-generated type out of map value bytes.
fn pod<T: Copy>(b: &[u8]) -> Option<T> {
    if b.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: T is a #[repr(C)] type generated from the BPF object's BTF made only of integers
    // and integer arrays (every bit pattern is valid); the length was checked above, and
    // read_unaligned copes with the Vec's alignment.
    Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) })
}

fn percpu<T: Copy>(map: &dyn MapCore, key: u32) -> Vec<T> {
    match map.lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY) {
        Ok(Some(v)) => v.iter().filter_map(|b| pod::<T>(b)).collect(),
        _ => Vec::new(),
    }
}

/// Drains slots `from..to` (ids) of every device into `devs`.
pub fn drain_slots(skel: &IotraceSkel<'_>, devs: &mut [DevRaw], from: u64, to: u64) {
    let n = devs.len() as u64;
    for id in from..to {
        for (d, dev) in devs.iter_mut().enumerate() {
            let key = ((id % SLOT_RING) * n + d as u64) as u32;
            let mut rec = SlotRec::default();
            let mut seen = false;
            for s in percpu::<types::slot>(&skel.maps.slots, key)
                .iter()
                .filter(|s| s.id == id)
            {
                seen = true;
                rec.add(&slot_rec(s));
            }
            if seen {
                dev.slots.insert(id, rec);
            }
        }
    }
}

fn slot_rec(s: &types::slot) -> SlotRec {
    let mut r = SlotRec {
        qd_max: u64::from(s.qd_max),
        n_issue: u64::from(s.n_issue),
        n_done: u64::from(s.n_done),
        sum_issue_off: s.sum_issue_off,
        sum_done_off: s.sum_done_off,
        ..Default::default()
    };
    for (o, k) in r.ops.iter_mut().zip(s.op.iter()) {
        *o = (u64::from(k.ios), k.bytes, k.lat_max_ns);
    }
    r
}

/// Drains per-second latency histograms of seconds `from..to`.
pub fn drain_seconds(skel: &IotraceSkel<'_>, devs: &mut [DevRaw], from: u64, to: u64) {
    let n = devs.len() as u64;
    for sec in from..to {
        for (d, dev) in devs.iter_mut().enumerate() {
            for op in 0..NOPS {
                let key = (((sec % SEC_RING) * n + d as u64) * NOPS as u64 + op as u64) as u32;
                let mut acc = vec![0u64; 2 * SEC_BUCKETS];
                let mut seen = false;
                for (half, map) in [&skel.maps.seclat, &skel.maps.seclatq]
                    .into_iter()
                    .enumerate()
                {
                    for s in percpu::<types::sec_lat>(map, key)
                        .iter()
                        .filter(|s| s.id == sec)
                    {
                        seen = true;
                        acc[half * SEC_BUCKETS..]
                            .iter_mut()
                            .zip(s.hist.iter())
                            .for_each(|(a, b)| *a += u64::from(*b));
                    }
                }
                if seen {
                    dev.sec_lat.insert((sec, op), acc);
                }
            }
        }
    }
}

/// Reads run totals and histograms of every device.
pub fn read_totals(skel: &IotraceSkel<'_>, devs: &mut [DevRaw]) {
    for (d, dev) in devs.iter_mut().enumerate() {
        dev.hists = vec![vec![vec![0u64; SIZE_BUCKETS]; NKINDS]; NOPS];
        for op in 0..NOPS {
            let key = (d * NOPS + op) as u32;
            for t in percpu::<types::op_total>(&skel.maps.totals, key) {
                let e = &mut dev.totals[op];
                *e = (e.0 + t.ios, e.1 + t.bytes, e.2.max(t.lat_max_ns));
            }
            for kind in 0..NKINDS {
                let key = ((d * NOPS + op) * NKINDS + kind) as u32;
                for h in percpu::<types::hist>(&skel.maps.hists, key) {
                    let acc = &mut dev.hists[op][kind];
                    acc.iter_mut().zip(h.b.iter()).for_each(|(a, b)| *a += *b);
                }
            }
        }
    }
}

/// An attribution row's key, as the kernel wrote it.
#[derive(Debug, Default, Clone, Copy)]
pub struct AttrKey {
    /// The blkcg's cgroup id (0 = none).
    pub cgid: u64,
    /// The submitting process (0 = none, or past the key cap).
    pub tgid: u32,
    pub class: u16,
    pub dev: u8,
    pub op: u8,
    /// Bit i: the submitting task was inside the i-th watched v2 cgroup (0 unless some are).
    pub in_watched: u64,
}

/// One attribution row read back, summed over CPUs.
#[derive(Debug, Default, Clone)]
pub struct AttrRaw {
    /// Who the row is (none for the reserved rows and rows lost in an insert race).
    pub key: Option<AttrKey>,
    pub thread: String,
    pub process: String,
    pub ios: u64,
    pub bytes: u64,
    pub lat_max_ns: u64,
    pub size: Vec<u64>,
    pub lat: Vec<u64>,
    /// slot id → (ios, bytes, µs the completed IOs spent in the block layer)
    pub slots: BTreeMap<u64, (u64, u64, u64)>,
}

/// One class's reads or writes on one device, on one side of the background split.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SplitRaw {
    pub ios: u64,
    pub queue_ns: u64,
    pub dev_ns: u64,
    pub queue: Vec<u64>,
    pub dev: Vec<u64>,
}

/// The splits with IO: (device, op, class, overlapped background IO) → sums over CPUs.
pub fn read_splits(
    skel: &IotraceSkel<'_>,
    ndevs: usize,
) -> BTreeMap<(usize, usize, usize, bool), SplitRaw> {
    let classes = crate::attr::MAX_CLASSES;
    let mut out = BTreeMap::new();
    for d in 0..ndevs {
        for op in 0..SPLIT_OPS {
            for class in 0..classes {
                for ov in 0..2 {
                    let key = (((d * SPLIT_OPS + op) * classes + class) * 2 + ov) as u32;
                    let mut acc = SplitRaw {
                        queue: vec![0; SEC_BUCKETS],
                        dev: vec![0; SEC_BUCKETS],
                        ..Default::default()
                    };
                    for v in percpu::<types::split>(&skel.maps.splits, key) {
                        acc.ios += v.ios;
                        acc.queue_ns += v.queue_ns;
                        acc.dev_ns += v.dev_ns;
                        acc.queue
                            .iter_mut()
                            .zip(v.queue.iter())
                            .for_each(|(a, b)| *a += u64::from(*b));
                        acc.dev
                            .iter_mut()
                            .zip(v.dev.iter())
                            .for_each(|(a, b)| *a += u64::from(*b));
                    }
                    if acc.ios > 0 {
                        out.insert((d, op, class, ov == 1), acc);
                    }
                }
            }
        }
    }
    out
}

fn cstr(b: &[i8]) -> String {
    let bytes: Vec<u8> = b
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Rows in use: the reserved ones, those handed out to keys with a process (up to ATTR_KEYS)
/// and those handed out to keys without one (up to ATTR_SPARE, after the others).
pub fn attr_rows_in_use(skel: &IotraceSkel<'_>, reserved: u32) -> Vec<u32> {
    let (used, spare) = match skel.maps.bss.lookup(&0u32.to_ne_bytes(), MapFlags::ANY) {
        Ok(Some(b)) => pod::<types::bss>(&b).map_or((0, 0), |b| (b.attr_used, b.attr_spare_used)),
        _ => (0, 0),
    };
    let spare_start = reserved + super::ATTR_KEYS;
    (0..reserved + used.min(super::ATTR_KEYS))
        .chain(spare_start..spare_start + spare.min(super::load::ATTR_SPARE))
        .collect()
}

/// Reads slots `from..to` of every attribution row in use into `rows`.
pub fn drain_attr_slots(
    skel: &IotraceSkel<'_>,
    rows: &mut BTreeMap<u32, AttrRaw>,
    in_use: &[u32],
    from: u64,
    to: u64,
) {
    if from >= to {
        return;
    }
    for &idx in in_use {
        for v in percpu::<types::attr_val>(&skel.maps.attr_vals, idx) {
            for sl in v
                .slot
                .iter()
                .filter(|s| s.id >= from && s.id < to && s.id > 0)
            {
                let r = rows.entry(idx).or_default();
                let e = r.slots.entry(sl.id).or_default();
                e.0 += u64::from(sl.ios);
                e.1 += sl.bytes;
                e.2 += u64::from(sl.life_us);
            }
        }
    }
}

/// Reads the totals, histograms and identity of every attribution row in use.
pub fn read_attr(skel: &IotraceSkel<'_>, rows: &mut BTreeMap<u32, AttrRaw>, in_use: &[u32]) {
    for &idx in in_use {
        let r = rows.entry(idx).or_default();
        r.size = vec![0; ATTR_SIZE_BUCKETS];
        r.lat = vec![0; SEC_BUCKETS];
        for v in percpu::<types::attr_val>(&skel.maps.attr_vals, idx) {
            r.ios += v.ios;
            r.bytes += v.bytes;
            r.lat_max_ns = r.lat_max_ns.max(v.lat_max_ns);
            r.size
                .iter_mut()
                .zip(v.size.iter())
                .for_each(|(a, b)| *a += u64::from(*b));
            r.lat
                .iter_mut()
                .zip(v.lat.iter())
                .for_each(|(a, b)| *a += u64::from(*b));
        }
        if let Some((key, thread, process)) = attr_key(skel, idx) {
            r.key = Some(key);
            r.thread = thread;
            r.process = process;
        }
    }
}

/// Who attribution row `idx` is (its key, thread and process names), once the kernel has
/// handed it out; none for reserved rows.
pub fn attr_key(skel: &IotraceSkel<'_>, idx: u32) -> Option<(AttrKey, String, String)> {
    let b = skel
        .maps
        .attr_info
        .lookup(&idx.to_ne_bytes(), MapFlags::ANY)
        .ok()??;
    let info = pod::<types::attr_info>(&b)?;
    let k = info.key;
    let named = k.cgid != 0 || k.tgid != 0 || k.class_id != 0 || k.in_watched != 0;
    (named || info.thread[0] != 0).then(|| {
        (
            AttrKey {
                cgid: k.cgid,
                tgid: k.tgid,
                class: k.class_id,
                dev: k.dev,
                op: k.op,
                in_watched: k.in_watched,
            },
            cstr(&info.thread),
            cstr(&info.process),
        )
    })
}

/// Device index, op index and class of row `idx`: reserved rows by position (the first half
/// `unknown`, the second `capped`, each device × op), others by their key.
pub fn row_identity(
    reserved: u32,
    idx: u32,
    key: Option<AttrKey>,
) -> Option<(usize, usize, usize)> {
    let nops = NOPS as u32;
    let half = reserved / 2;
    if idx < reserved {
        let (class, i) = if idx < half {
            (crate::attr::UNKNOWN, idx)
        } else {
            (crate::attr::CAPPED, idx - half)
        };
        return Some(((i / nops) as usize, (i % nops) as usize, class));
    }
    let k = key?;
    Some((k.dev as usize, k.op as usize, k.class as usize))
}

/// Self-check counters summed over CPUs (indexes as C_* in iotrace.h).
pub fn read_counters(skel: &IotraceSkel<'_>) -> [u64; NCOUNTERS] {
    let mut c = [0u64; NCOUNTERS];
    for (i, v) in c.iter_mut().enumerate() {
        *v = percpu::<u64>(&skel.maps.counters, i as u32).iter().sum();
    }
    c
}

/// The raw event record of iotrace.h `struct event` (not in the skeleton: no map declares it).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Event {
    pub ts_ns: u64,
    pub sector: u64,
    pub dev_ns: u64,
    pub queue_ns: u64,
    pub dev: u32,
    pub cmd_flags: u32,
    pub bytes: u32,
    pub qd: u32,
}

pub fn parse_event(b: &[u8]) -> Option<Event> {
    pod::<Event>(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_layouts_match_the_header() {
        // Sizes from iotrace.h; a mismatch means the C structs changed without the Rust side.
        assert_eq!(size_of::<types::slot>(), 160);
        assert_eq!(size_of::<types::sec_lat>(), 8 + 4 * SEC_BUCKETS);
        assert_eq!(size_of::<types::hist>(), 8 * SIZE_BUCKETS);
        assert_eq!(size_of::<Event>(), 48);
        assert_eq!(size_of::<types::rq_state>(), 64);
        assert_eq!(size_of::<types::split>(), 24 + 8 * SEC_BUCKETS);
        assert_eq!(size_of::<types::attr_key>(), 24);
        assert_eq!(
            size_of::<types::attr_val>(),
            24 + 4 * (ATTR_SIZE_BUCKETS + SEC_BUCKETS) + 4 + 64 * 24
        );
        assert!(parse_event(&[0u8; 47]).is_none());
        let mut raw = [0u8; 48];
        raw[32..36].copy_from_slice(&((254u32 << 20) | 3).to_ne_bytes());
        assert_eq!(parse_event(&raw).unwrap().dev, (254 << 20) | 3);
    }
}
