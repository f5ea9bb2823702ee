//! Turns what a session collected (kernel aggregates or diskstats samples) into the TraceDoc.

use crate::attr;
use crate::cgroups::{self, Hierarchy, Target, Watch};
use crate::devices::{self, Disk};
use crate::diskstats::Stat;
use crate::ebpf::{DevRaw, Raw, SplitRaw};
use crate::fallback::Samples;
use crate::hist::{self, LAT_SUB_BITS};
use crate::series::{self, Window};
use iodig_model::trace::{
    AttrCheck, AttrRow, AttrSecond, Attribution, ClassSplit, DeviceTrace, DiskstatsCheck, OpTrace,
    SelfCheck, SplitSide, TraceDoc, Watched, OPS, PAST_PROCESS_KEYS,
};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

pub struct Ctx {
    pub disks: Vec<Disk>,
    pub auto_devices: bool,
    pub slot_ms: u32,
    pub note: Option<String>,
    pub start_unix_ms: u64,
    pub events_file: Option<PathBuf>,
    pub watch: Watch,
    pub attr_notes: Vec<String>,
    pub hierarchy: Option<Hierarchy>,
    pub cgroups_at_start: HashMap<u64, String>,
}

fn base(ctx: &Ctx, mode: &str, start_ms: u64, end_ms: u64, histograms: bool) -> TraceDoc {
    TraceDoc {
        mode: mode.into(),
        note: ctx.note.clone(),
        attach: None,
        start_unix_ms: start_ms,
        end_unix_ms: end_ms,
        slot_ms: ctx.slot_ms,
        histograms,
        devices: Vec::new(),
        self_check: SelfCheck::default(),
        events_file: None,
    }
}

pub fn off(ctx: &Ctx) -> TraceDoc {
    let now = crate::ebpf::unix_now_ns() / 1_000_000;
    base(ctx, "off", ctx.start_unix_ms, now, false)
}

/// Keeps a device unless it was picked automatically and saw no IO at all.
fn keep(ctx: &Ctx, d: &DeviceTrace) -> bool {
    !ctx.auto_devices || d.ops.values().any(|o| o.ios > 0 || o.bytes > 0)
}

fn new_device(disk: &Disk) -> DeviceTrace {
    DeviceTrace {
        name: disk.name.clone(),
        dev: disk.dev(),
        info: Some(devices::info(disk)),
        ops: BTreeMap::new(),
        seconds: Vec::new(),
        diskstats_check: Vec::new(),
    }
}

pub fn from_ebpf(ctx: &Ctx, raw: Raw) -> TraceDoc {
    let mut doc = base(
        ctx,
        "ebpf",
        raw.start_ns / 1_000_000,
        raw.end_ns / 1_000_000,
        true,
    );
    doc.attach = Some(raw.attach.clone());
    doc.events_file = ctx.events_file.as_ref().map(|p| p.display().to_string());
    let w = Window {
        start_ns: raw.start_ns,
        end_ns: raw.end_ns,
        slot_ns: u64::from(ctx.slot_ms) * 1_000_000,
    };
    for (disk, dev) in ctx.disks.iter().zip(raw.devs.iter()) {
        let mut d = new_device(disk);
        for (i, op) in OPS.iter().enumerate() {
            let t = op_trace(dev, i);
            if i < 4 || t.ios > 0 || t.bytes > 0 {
                d.ops.insert(op.to_string(), t);
            }
        }
        d.seconds = series::from_slots(w, &dev.slots, &dev.sec_lat);
        if let (Some(a), Some(b)) = (raw.ds_start.get(&disk.name), raw.ds_end.get(&disk.name)) {
            d.diskstats_check = check(&d, &b.since(a));
        }
        if keep(ctx, &d) {
            doc.devices.push(d);
        }
    }
    doc.self_check = self_check(&raw, &doc.devices);
    let a = attribution(ctx, &raw, w);
    doc.self_check.attribution_match = Some(a.sums_match());
    doc.self_check.attribution = Some(a);
    doc
}

/// Bounds `(lower, upper]` in bytes of attribution size bucket `i` (0 = zero bytes).
fn attr_size_bounds(i: usize) -> (u64, u64) {
    if i == 0 {
        return (0, 0);
    }
    hist::lat_bounds(i - 1, hist::SEC_SUB_BITS)
}

fn attribution(ctx: &Ctx, raw: &Raw, w: Window) -> Attribution {
    let mut paths = ctx.cgroups_at_start.clone();
    if let Some(h) = &ctx.hierarchy {
        paths.extend(cgroups::cgroup_paths(h));
    }
    let slot_s = w.slot_ns as f64 / 1e9;
    let mut rows = Vec::new();
    let (mut capped_ios, mut past_process_keys_ios) = (0, 0);
    for (&idx, r) in &raw.attr {
        if r.ios == 0 && r.bytes == 0 {
            continue;
        }
        let Some((d, op, class)) = crate::ebpf::row_identity(raw.attr_reserved, idx, r.key) else {
            continue;
        };
        let (Some(disk), Some(op_name), Some(c)) =
            (ctx.disks.get(d), OPS.get(op), attr::CLASSES.get(class))
        else {
            continue;
        };
        if class == attr::CAPPED {
            capped_ios += r.ios;
        }
        let (cgid, pid, in_watched) = r.key.map_or((0, 0, 0), |k| (k.cgid, k.tgid, k.in_watched));
        // A key without a process whose row the kernel left unnamed: the processes that came
        // after the keys for processes ran out (IO started with no process has its names).
        let past_keys = r.key.is_some() && pid == 0 && r.process.is_empty() && r.thread.is_empty();
        if past_keys {
            past_process_keys_ios += r.ios;
        }
        let mut seconds: BTreeMap<u64, AttrSecond> = BTreeMap::new();
        for (&id, &(ios, bytes, life_us)) in &r.slots {
            let ms = id * w.slot_ns / 1_000_000;
            let s = seconds.entry(ms / 1000).or_insert_with(|| AttrSecond {
                unix_ms: ms / 1000 * 1000,
                ..Default::default()
            });
            s.ios += ios;
            s.bytes += bytes;
            s.qd += life_us as f64 / 1e6;
            s.iops_max = s.iops_max.max(ios as f64 / slot_s);
            s.mb_s_max = s.mb_s_max.max(bytes as f64 / slot_s / 1e6);
        }
        let lat_max = (r.lat_max_ns > 0).then_some(r.lat_max_ns);
        rows.push(AttrRow {
            device: disk.name.clone(),
            op: op_name.to_string(),
            class: c.name.to_string(),
            cgroup_id: cgid,
            cgroup: (cgid != 0).then(|| paths.get(&cgid).cloned()).flatten(),
            submitter_in: ctx.watch.task_cgroups_in(in_watched),
            pid,
            process: if past_keys {
                PAST_PROCESS_KEYS.to_string()
            } else {
                r.process.clone()
            },
            thread: r.thread.clone(),
            ios: r.ios,
            bytes: r.bytes,
            size_hist: hist::to_buckets(&r.size, attr_size_bounds),
            latency: lat_max.and_then(|m| hist::latency(&r.lat, hist::SEC_SUB_BITS, Some(m))),
            seconds: seconds.into_values().collect(),
        });
    }
    rows.sort_by(|a, b| {
        (&a.device, &a.op, &a.class, a.cgroup_id, a.pid).cmp(&(
            &b.device,
            &b.op,
            &b.class,
            b.cgroup_id,
            b.pid,
        ))
    });
    let mut check = Vec::new();
    for (disk, dev) in ctx.disks.iter().zip(raw.devs.iter()) {
        for (i, op) in OPS.iter().enumerate() {
            let (ios, bytes, _) = dev.totals[i];
            let mine = rows.iter().filter(|r| r.device == disk.name && r.op == *op);
            let (cios, cbytes) = mine.fold((0, 0), |(a, b), r| (a + r.ios, b + r.bytes));
            if ios + bytes + cios + cbytes > 0 {
                check.push(AttrCheck {
                    device: disk.name.clone(),
                    op: op.to_string(),
                    device_ios: ios,
                    class_ios: cios,
                    device_bytes: bytes,
                    class_bytes: cbytes,
                });
            }
        }
    }
    let mut notes = ctx.attr_notes.clone();
    notes.extend(ctx.watch.notes.iter().cloned());
    if let Some(h) = &ctx.hierarchy {
        notes.push(hierarchy_note(h));
    }
    if past_process_keys_ios > 0 {
        notes.push(format!(
            "the kernel's {} attribution keys for processes ran out (short-lived processes each take one): {past_process_keys_ios} IOs of later processes are counted under their class and cgroup as `{PAST_PROCESS_KEYS}`; a watched --pid, or a --cgroup watched through its processes, among them is undercounted",
            crate::ebpf::ATTR_KEYS
        ));
    }
    if capped_ios > 0 {
        notes.push(format!(
            "attribution key cap ({} keys) hit: {capped_ios} IOs counted as `capped`, with no process or cgroup (a watched --cgroup or --pid among them is undercounted)",
            crate::ebpf::ATTR_KEYS
        ));
    }
    let watched = ctx
        .watch
        .targets
        .iter()
        .map(|t| watched(t, &rows))
        .collect();
    Attribution {
        background_classes: attr::BACKGROUND.iter().map(ToString::to_string).collect(),
        splits: splits(ctx, raw),
        enabled: raw.attribution,
        cgroup_hierarchy: ctx.hierarchy.as_ref().map(Hierarchy::describe),
        notes,
        classes: attr::class_infos(),
        rows,
        watched,
        check,
        capped_ios,
        past_process_keys_ios,
    }
}

/// The kernel's per class background splits, named.
fn splits(ctx: &Ctx, raw: &Raw) -> Vec<ClassSplit> {
    let side = |s: Option<&SplitRaw>| {
        s.map(|s| SplitSide {
            ios: s.ios,
            queue_ns_sum: s.queue_ns,
            device_ns_sum: s.dev_ns,
            queue: hist::latency(&s.queue, hist::SEC_SUB_BITS, None),
            device: hist::latency(&s.dev, hist::SEC_SUB_BITS, None),
        })
        .unwrap_or_default()
    };
    let mut keys: Vec<(usize, usize, usize)> =
        raw.splits.keys().map(|&(d, op, c, _)| (d, op, c)).collect();
    keys.dedup();
    keys.into_iter()
        .filter_map(|(d, op, c)| {
            Some(ClassSplit {
                device: ctx.disks.get(d)?.name.clone(),
                op: OPS.get(op)?.to_string(),
                class: attr::CLASSES.get(c)?.name.to_string(),
                with_background: side(raw.splits.get(&(d, op, c, true))),
                without_background: side(raw.splits.get(&(d, op, c, false))),
            })
        })
        .collect()
}

fn hierarchy_note(h: &Hierarchy) -> String {
    match (h.version, h.io_enabled) {
        (1, _) => "cgroup v1 blkio: IO is charged to the submitting task's blkio cgroup, including writeback its own fsync starts; background writeback by kernel flusher threads cannot be charged to a cgroup under v1 and counts as kernel.writeback in the root cgroup".into(),
        (_, true) => "cgroup v2 with io: writeback is charged to the cgroup that dirtied the pages, even when a kernel flusher thread submits it (class kernel.writeback, that cgroup)".into(),
        _ => "cgroup v2 without the io controller: every IO is charged to the root cgroup; use the process rows (--by process, --pid), or watch a cgroup with --cgroup (told by the submitting task's cgroup)".into(),
    }
}

/// Picks the rows a watched target issued.
type RowFilter = Box<dyn Fn(&AttrRow) -> bool>;

fn watched(t: &Target, rows: &[AttrRow]) -> Watched {
    let (flag, given, name, pick): (&str, &str, String, RowFilter) = match t {
        Target::Cgroup { given, path, id } => {
            let (path, id) = (path.clone(), *id);
            let prefix = format!("{}/", path.trim_end_matches('/'));
            (
                "--cgroup",
                given,
                format!("cgroup {path} (id {id})"),
                Box::new(move |r: &AttrRow| {
                    r.cgroup_id == id || r.cgroup.as_deref().is_some_and(|p| p.starts_with(&prefix))
                }),
            )
        }
        Target::Pid { given, pid, name } => {
            let pid = *pid;
            (
                "--pid",
                given,
                format!("pid {pid} ({name})"),
                Box::new(move |r: &AttrRow| r.pid == pid),
            )
        }
        Target::TaskCgroup { given, dir, .. } => {
            let target = given.clone();
            (
                "--cgroup",
                given,
                format!("cgroup {} (by the submitting task's cgroup)", dir.display()),
                Box::new(move |r: &AttrRow| r.submitter_in.contains(&target)),
            )
        }
        Target::Processes { given, dir, .. } => {
            let procs = t.processes();
            let listed = if procs.is_empty() {
                "none found".to_string()
            } else {
                procs
                    .iter()
                    .map(|(pid, name)| format!("{pid} ({name})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let pids: Vec<u32> = procs.iter().map(|p| p.0).collect();
            (
                "--cgroup",
                given,
                format!("processes of {}: {listed}", dir.display()),
                Box::new(move |r: &AttrRow| r.pid != 0 && pids.contains(&r.pid)),
            )
        }
    };
    let mut out = Watched {
        flag: flag.into(),
        target: given.to_string(),
        name,
        ..Default::default()
    };
    for r in rows.iter().filter(|r| pick(r)) {
        out.ios += r.ios;
        out.bytes += r.bytes;
        let e = out.by_class.entry(r.class.clone()).or_default();
        e.0 += r.ios;
        e.1 += r.bytes;
    }
    out
}

fn op_trace(dev: &DevRaw, op: usize) -> OpTrace {
    // OS time: the kernel keeps it per second only (±12 % buckets); the run's is their sum.
    let mut os_time = vec![0u64; hist::SEC_BUCKETS];
    for ((_, o), h) in &dev.sec_lat {
        if *o == op {
            add_os_time(&mut os_time, h);
        }
    }
    op_trace_of(dev, op, &os_time)
}

/// Adds a per-second latency histogram's OS-time half (device time, then OS time) to `acc`.
pub(crate) fn add_os_time(acc: &mut [u64], sec_lat: &[u64]) {
    acc.iter_mut()
        .zip(&sec_lat[hist::SEC_BUCKETS..])
        .for_each(|(a, b)| *a += b);
}

/// An op's figures from its totals and histograms as read from the kernel, with its OS time
/// summed from the seconds (`os_time`, SEC_BUCKETS counts).
pub(crate) fn op_trace_of(dev: &DevRaw, op: usize, os_time: &[u64]) -> OpTrace {
    let (ios, bytes, lat_max) = dev.totals[op];
    let h = &dev.hists[op];
    let mut latency = BTreeMap::new();
    for (name, kind, max) in [("device", 2, Some(lat_max)), ("total", 3, None)] {
        if let Some(l) = hist::latency(&h[kind][..hist::LAT_BUCKETS], LAT_SUB_BITS, max) {
            latency.insert(name.to_string(), l);
        }
    }
    if let Some(l) = hist::latency(os_time, hist::SEC_SUB_BITS, None) {
        latency.insert("queue".to_string(), l);
    }
    OpTrace {
        ios,
        bytes,
        size_hist: hist::to_buckets(&h[0], hist::size_bounds),
        size_bytes_hist: hist::to_buckets(&h[1], hist::size_bounds),
        latency,
    }
}

/// Tracer totals against diskstats deltas, grouped as diskstats groups them: "other" ops
/// (secure erase, write zeroes, zone ops) are write-class there.
fn check(d: &DeviceTrace, ds: &Stat) -> Vec<DiskstatsCheck> {
    let get = |op: &str| d.ops.get(op).map_or((0, 0), |o| (o.ios, o.bytes / 512));
    ["read", "write", "discard", "flush"]
        .iter()
        .map(|op| {
            let (mut ios, mut sectors) = get(op);
            if *op == "write" {
                let o = get("other");
                ios += o.0;
                sectors += o.1;
            }
            let (dios, dsec, _) = ds.group(op);
            DiskstatsCheck {
                op: op.to_string(),
                tracer_ios: ios,
                diskstats_ios: dios,
                tracer_sectors: sectors,
                diskstats_sectors: dsec,
            }
        })
        .collect()
}

/// IOs that may complete between reading /proc/diskstats and attaching or detaching the probes:
/// at saturation (100k+ IOPS) a few microseconds of skew at each edge is tens of IOs.
const EDGE_IOS: u64 = 64;

/// Tracer and diskstats agree when they differ by no more than what completes at the window's
/// edges: 64 IOs (and their sectors), or 0.1%, whichever is larger. A quiet device matches exactly.
fn diskstats_agrees(k: &DiskstatsCheck) -> bool {
    let sectors_per_io = (k.diskstats_sectors / k.diskstats_ios.max(1)).max(1);
    let ios_ok = k.tracer_ios.abs_diff(k.diskstats_ios) <= EDGE_IOS.max(k.diskstats_ios / 1000);
    let sectors_ok = k.tracer_sectors.abs_diff(k.diskstats_sectors)
        <= (EDGE_IOS * sectors_per_io).max(k.diskstats_sectors / 1000);
    ios_ok && sectors_ok
}

fn self_check(raw: &Raw, devs: &[DeviceTrace]) -> SelfCheck {
    let c = raw.counters;
    let all_match = devs
        .iter()
        .flat_map(|d| d.diskstats_check.iter())
        .all(diskstats_agrees);
    SelfCheck {
        lost_events: c[0],
        state_collisions: c[1],
        completions_without_issue: c[2],
        completions_unseen: Some(c[3]),
        requeues: c[4],
        partial_completions: c[5],
        recursion_misses: raw.progs.iter().map(|p| p.recursion_misses).sum(),
        programs: raw.progs.clone(),
        diskstats_match: Some(all_match),
        attribution_match: None,
        attribution: None,
    }
}

pub fn from_diskstats(ctx: &Ctx, samples: Samples) -> TraceDoc {
    let start = samples.first().map_or(0, |s| s.0);
    let end = samples.last().map_or(0, |s| s.0);
    let mut doc = base(ctx, "diskstats", start / 1_000_000, end / 1_000_000, false);
    for disk in &ctx.disks {
        let per: Vec<(u64, Stat)> = samples
            .iter()
            .filter_map(|(t, m)| m.get(&disk.name).map(|s| (*t, *s)))
            .collect();
        let mut d = new_device(disk);
        if let (Some(a), Some(b)) = (per.first(), per.last()) {
            totals_from(&mut d, &b.1.since(&a.1));
        }
        d.seconds = series::from_diskstats(&per);
        if keep(ctx, &d) {
            doc.devices.push(d);
        }
    }
    doc
}

fn totals_from(d: &mut DeviceTrace, delta: &Stat) {
    let groups: HashMap<&str, (u64, u64, u64)> =
        OPS[..4].iter().map(|op| (*op, delta.group(op))).collect();
    for op in &OPS[..4] {
        let (ios, sectors, _) = groups[op];
        d.ops.insert(
            op.to_string(),
            OpTrace {
                ios,
                bytes: sectors * 512,
                ..Default::default()
            },
        );
    }
}

#[cfg(test)]
mod agreement_tests {
    use super::*;

    fn check(t: u64, d: u64) -> DiskstatsCheck {
        DiskstatsCheck {
            op: "read".into(),
            tracer_ios: t,
            diskstats_ios: d,
            tracer_sectors: t * 8,
            diskstats_sectors: d * 8,
        }
    }

    #[test]
    fn edges_are_tolerated_but_real_gaps_are_not() {
        assert!(diskstats_agrees(&check(1000, 1000)));
        assert!(
            diskstats_agrees(&check(1_000_000, 1_000_040)),
            "40 IOs at the edges of a busy window"
        );
        assert!(
            diskstats_agrees(&check(10, 70)),
            "64 IOs absolute at low volume"
        );
        assert!(
            !diskstats_agrees(&check(900_000, 1_000_000)),
            "10% missing is a real problem"
        );
        assert!(!diskstats_agrees(&check(0, 200)));
    }
}
