//! Text views of a TraceDoc: the briefs' summary table (per op: dominant size band, volume, %
//! by IO count and by volume) and the per-second table that shows bursts under the averages.

use iodig_model::trace::{human_bytes, AttrRow, DeviceSecond, TraceDoc, OPS};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::str::FromStr;

/// What `--by` groups the attribution tables by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// By activity class (`cassandra.flush`, `rocksdb.wal`, …); also prints the background split.
    Class,
    /// By the cgroup the IO was charged to (its path, else its id).
    Cgroup,
    /// By submitting process (name and pid); IO not seen at submission under its class.
    Process,
}

impl FromStr for By {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "class" => Ok(By::Class),
            "cgroup" => Ok(By::Cgroup),
            "process" => Ok(By::Process),
            _ => Err(format!("unknown --by {s:?}: use class, cgroup or process")),
        }
    }
}

impl By {
    fn key(self, r: &AttrRow) -> String {
        match self {
            By::Class => r.class.clone(),
            By::Cgroup => match (&r.cgroup, r.cgroup_id) {
                (Some(p), _) => p.clone(),
                (None, 0) => "-".into(),
                (None, id) => format!("id {id}"),
            },
            By::Process if r.pid == 0 && r.process.is_empty() => format!("({})", r.class),
            By::Process if r.pid == 0 => r.process.clone(),
            By::Process => format!("{} ({})", r.process, r.pid),
        }
    }

    fn title(self) -> &'static str {
        match self {
            By::Class => "class",
            By::Cgroup => "cgroup",
            By::Process => "process",
        }
    }
}

/// The text report with the summary and per-second tables grouped by class, cgroup or
/// process (from the attribution rows), then the watched targets and the self-checks.
pub fn by(doc: &TraceDoc, by: By) -> String {
    let mut s = String::new();
    let Some(a) = doc.attribution() else {
        s.push_str("(no attribution: it needs eBPF mode)\n");
        s.push_str(&text(doc));
        return s;
    };
    let secs = (doc.end_unix_ms.saturating_sub(doc.start_unix_ms)) as f64 / 1000.0;
    let _ = writeln!(
        s,
        "mode: {}  window: {secs:.1} s  by {}",
        doc.mode,
        by.title()
    );
    if let Some(h) = &a.cgroup_hierarchy {
        let _ = writeln!(s, "cgroups: {h}");
    }
    for n in doc.note.iter().chain(a.notes.iter()) {
        let _ = writeln!(s, "note: {n}");
    }
    s.push('\n');
    // Summary: one line per (group, op).
    let mut groups: BTreeMap<(String, usize), (u64, u64)> = BTreeMap::new();
    for r in &a.rows {
        let op = OPS.iter().position(|o| *o == r.op).unwrap_or(4);
        let e = groups.entry((by.key(r), op)).or_default();
        e.0 += r.ios;
        e.1 += r.bytes;
    }
    let all_ios: u64 = groups.values().map(|v| v.0).sum::<u64>().max(1);
    let all_bytes: u64 = groups.values().map(|v| v.1).sum::<u64>().max(1);
    let w = groups
        .keys()
        .map(|k| k.0.len())
        .max()
        .unwrap_or(5)
        .clamp(5, 48);
    let _ = writeln!(
        s,
        "{:<w$} {:<8} {:>12} {:>10} {:>10} {:>10}",
        by.title(),
        "op",
        "total",
        "IOs",
        "% by IOs",
        "% by vol"
    );
    let mut lines: Vec<_> = groups.iter().collect();
    lines.sort_by(|x, y| y.1 .1.cmp(&x.1 .1).then(x.0.cmp(y.0)));
    for ((g, op), (ios, bytes)) in lines {
        let _ = writeln!(
            s,
            "{g:<w$} {:<8} {:>12} {ios:>10} {:>9.1}% {:>9.1}%",
            OPS[*op],
            human_bytes(*bytes),
            100.0 * *ios as f64 / all_ios as f64,
            100.0 * *bytes as f64 / all_bytes as f64
        );
    }
    if a.rows.is_empty() {
        s.push_str("(no block IO seen)\n");
    }
    // Per second: MB/s and IOPS per (group, op).
    let mut per: BTreeMap<(u64, String, usize), (u64, u64)> = BTreeMap::new();
    for r in &a.rows {
        let op = OPS.iter().position(|o| *o == r.op).unwrap_or(4);
        for sec in &r.seconds {
            let e = per.entry((sec.unix_ms, by.key(r), op)).or_default();
            e.0 += sec.ios;
            e.1 += sec.bytes;
        }
    }
    let _ = writeln!(s, "\nper second by {}:", by.title());
    let _ = writeln!(
        s,
        "{:<13} {:<w$} {:<8} {:>9} {:>9}",
        "time",
        by.title(),
        "op",
        "MB/s",
        "IOPS"
    );
    let mut last = None;
    for ((ms, g, op), (ios, bytes)) in &per {
        let t = if last == Some(*ms) {
            String::new()
        } else {
            format_hms(*ms)
        };
        last = Some(*ms);
        let _ = writeln!(
            s,
            "{t:<13} {g:<w$} {:<8} {:>9.1} {:>9}",
            OPS[*op],
            *bytes as f64 / 1e6,
            ios
        );
    }
    s.push_str(
        "(whole seconds; partial seconds at the window's edges show what completed in them)\n",
    );
    if by == By::Class {
        s.push_str(&beside_background(doc));
    }
    s.push_str(&watched(a));
    s.push_str(&checks(doc));
    s
}

/// What each `--cgroup` / `--pid` issued, by class; empty when none was given.
fn watched(a: &iodig_model::trace::Attribution) -> String {
    let mut s = String::new();
    if a.watched.is_empty() {
        return s;
    }
    s.push_str("\nwatched:\n");
    for wt in &a.watched {
        let _ = writeln!(
            s,
            "  {} {}: {} — {} IOs, {}",
            wt.flag,
            wt.target,
            wt.name,
            wt.ios,
            human_bytes(wt.bytes)
        );
        for (c, (i, b)) in &wt.by_class {
            let _ = writeln!(s, "    {c:<28} {i:>10} IOs {:>12}", human_bytes(*b));
        }
    }
    // What the targets may be missing: IO whose submitter the kernel could not keep.
    if a.capped_ios > 0 {
        let _ = writeln!(
            s,
            "  {} IOs went past the attribution key cap: their process and cgroup are unknown, so a target above may miss some",
            a.capped_ios
        );
    }
    if a.past_process_keys_ios > 0 {
        let _ = writeln!(
            s,
            "  {} IOs came from processes past the key cap and have no process: a --pid, or a --cgroup watched by its processes, may miss some",
            a.past_process_keys_ios
        );
    }
    s
}

/// Each class's reads and writes with and without flush/compaction IO in flight (the kernel's
/// per-IO split): queue and device p99, and the mean depth the class held.
fn beside_background(doc: &TraceDoc) -> String {
    let mut s = String::new();
    let Some(a) = doc.attribution().filter(|a| !a.splits.is_empty()) else {
        return s;
    };
    let window = doc.end_unix_ms.saturating_sub(doc.start_unix_ms);
    let _ = writeln!(
        s,
        "\nbeside {} IO (per IO: with = one was in flight during its life), ms:",
        a.background_classes.join("/")
    );
    let _ = writeln!(
        s,
        "{:<8} {:<26} {:<6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
        "device",
        "class",
        "op",
        "IOs with",
        "queue p99",
        "dev p99",
        "IOs w/o",
        "queue p99",
        "dev p99",
        "qd OS",
        "qd dev"
    );
    let ms = |l: Option<&iodig_model::trace::Latency>| {
        l.map_or("–".to_string(), |l| {
            format!("{:.3}", l.p99_ns as f64 / 1e6)
        })
    };
    for c in &a.splits {
        let (w, wo) = (&c.with_background, &c.without_background);
        let (qd_os, qd_dev) = c.depth(window);
        let _ = writeln!(
            s,
            "{:<8} {:<26} {:<6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {qd_os:>7.2} {qd_dev:>7.2}",
            c.device,
            c.class,
            c.op,
            w.ios,
            ms(w.queue.as_ref()),
            ms(w.device.as_ref()),
            wo.ios,
            ms(wo.queue.as_ref()),
            ms(wo.device.as_ref()),
        );
    }
    s
}

/// The whole text report: header, summary, per-second table per device, self-checks.
pub fn text(doc: &TraceDoc) -> String {
    let mut s = String::new();
    let secs = (doc.end_unix_ms.saturating_sub(doc.start_unix_ms)) as f64 / 1000.0;
    let _ = writeln!(
        s,
        "mode: {}{}  window: {secs:.1} s  slots: {} ms",
        doc.mode,
        doc.attach
            .as_ref()
            .map_or(String::new(), |a| format!(" ({a})")),
        doc.slot_ms
    );
    if let Some(n) = &doc.note {
        let _ = writeln!(s, "note: {n}");
    }
    // What was said of the targets asked for by --cgroup / --pid (the other attribution notes
    // belong to `--by`'s tables).
    let attribution = doc.attribution();
    for n in attribution
        .iter()
        .flat_map(|a| &a.notes)
        .filter(|n| n.starts_with("--cgroup") || n.starts_with("--pid"))
    {
        let _ = writeln!(s, "note: {n}");
    }
    s.push('\n');
    s.push_str(&summary(doc));
    for d in &doc.devices {
        let _ = writeln!(s, "\n{} ({}) per second:", d.name, d.dev);
        s.push_str(&per_second(&d.seconds));
    }
    if let Some(a) = attribution {
        s.push_str(&watched(a));
    }
    s.push_str(&checks(doc));
    s
}

/// One row per op with IOs: dominant band, total, % by IO count, % by volume.
pub fn summary(doc: &TraceDoc) -> String {
    let mut s = format!(
        "{:<8} {:>24} {:>12} {:>10} {:>10} {:>10}\n",
        "op", "block size", "total", "IOs", "% by IOs", "% by vol"
    );
    for m in doc.op_mix() {
        let band = if doc.histograms {
            doc.dominant_band(&m.op)
                .map_or("-".to_string(), |b| b.label)
        } else {
            avg_size(doc, &m.op, m.ios, m.bytes)
        };
        let _ = writeln!(
            s,
            "{:<8} {:>24} {:>12} {:>10} {:>9.1}% {:>9.1}%",
            m.op,
            band,
            human_bytes(m.bytes),
            m.ios,
            m.pct_ios,
            m.pct_bytes
        );
    }
    if doc.op_mix().is_empty() {
        s.push_str("(no block IO seen)\n");
    }
    s
}

/// Without histograms (diskstats) only the average size is known; say so.
fn avg_size(_doc: &TraceDoc, op: &str, ios: u64, bytes: u64) -> String {
    if op == "flush" || ios == 0 {
        return "-".into();
    }
    format!("avg {}", human_bytes(bytes / ios))
}

fn ms(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |v| format!("{:.2}", v as f64 / 1e6))
}

/// Per second: for each active op MB/s mean/max, IOPS mean/max, latency max/p99; QD mean/max.
pub fn per_second(seconds: &[DeviceSecond]) -> String {
    let mut s = format!(
        "{:<13} {:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}\n",
        "time",
        "op",
        "MB/s",
        "MB/s max",
        "IOPS",
        "IOPS max",
        "lat max",
        "lat p99",
        "QD avg",
        "QD max"
    );
    for sec in seconds {
        let t = format_hms(sec.unix_ms);
        let qd = (
            sec.qd_mean.map_or("-".into(), |v| format!("{v:.1}")),
            sec.qd_max.map_or("-".into(), |v| v.to_string()),
        );
        let mut first = true;
        for op in OPS {
            let Some(o) = sec.ops.get(op).filter(|o| o.ios > 0 || o.bytes > 0) else {
                continue;
            };
            let lat_max = o.lat_max_ns.or(o.await_ms.map(|a| (a * 1e6) as u64));
            let (tq, qa, qm) = if first {
                (t.as_str(), qd.0.as_str(), qd.1.as_str())
            } else {
                ("", "", "")
            };
            let _ = writeln!(
                s,
                "{tq:<13} {op:<8} {:>9.1} {:>9.1} {:>9.0} {:>9.0} {:>9} {:>9} {qa:>7} {qm:>6}",
                o.mb_s,
                o.mb_s_max,
                o.iops,
                o.iops_max,
                ms(lat_max),
                ms(o.lat_p99_ns)
            );
            first = false;
        }
        if first {
            let _ = writeln!(
                s,
                "{t:<13} {:<8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6}",
                "idle", "0", "0", "0", "0", "-", "-", qd.0, qd.1
            );
        }
    }
    s.push_str(
        "(lat in ms: device time issue→completion in eBPF mode, iostat await in diskstats mode)\n",
    );
    s
}

/// UTC time of day with ms: "12:34:56.000".
fn format_hms(unix_ms: u64) -> String {
    let s = unix_ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60,
        unix_ms % 1000
    )
}

fn checks(doc: &TraceDoc) -> String {
    if doc.mode != "ebpf" {
        return String::new();
    }
    let c = &doc.self_check;
    let mut s = format!(
        "\nself-check: lost events {}, recursion misses {}, state collisions {}, completions without issue {}, completions unseen {}, requeues {}, diskstats {}\n",
        c.lost_events,
        c.recursion_misses,
        c.state_collisions,
        c.completions_without_issue,
        c.completions_unseen.unwrap_or(0),
        c.requeues,
        match c.diskstats_match {
            Some(true) => "match",
            Some(false) => "DIFFER",
            None => "-",
        }
    );
    if let (Some(m), Some(a)) = (c.attribution_match, doc.attribution()) {
        let _ = writeln!(
            s,
            "attribution: classes {} device totals",
            if m { "match" } else { "DIFFER from" }
        );
        for k in a
            .check
            .iter()
            .filter(|k| k.class_ios != k.device_ios || k.class_bytes != k.device_bytes)
        {
            let _ = writeln!(
                s,
                "  {} {}: classes {} IOs / {} B, device {} / {}",
                k.device, k.op, k.class_ios, k.class_bytes, k.device_ios, k.device_bytes
            );
        }
    }
    for d in &doc.devices {
        for k in d
            .diskstats_check
            .iter()
            .filter(|k| k.tracer_ios != k.diskstats_ios || k.tracer_sectors != k.diskstats_sectors)
        {
            let _ = writeln!(
                s,
                "  {} {}: tracer {} IOs / {} sectors, diskstats {} / {}",
                d.name, k.op, k.tracer_ios, k.tracer_sectors, k.diskstats_ios, k.diskstats_sectors
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::trace::{Bucket, DeviceTrace, OpSecond, OpTrace, SelfCheck};
    use std::collections::BTreeMap;

    fn doc() -> TraceDoc {
        let mut ops = BTreeMap::new();
        let hist = vec![Bucket {
            lower: 0,
            upper: 4096,
            count: 996,
        }];
        ops.insert(
            "read".into(),
            OpTrace {
                ios: 996,
                bytes: 996 * 4096,
                size_hist: hist,
                ..Default::default()
            },
        );
        let hist = vec![Bucket {
            lower: 508 << 10,
            upper: 512 << 10,
            count: 4,
        }];
        ops.insert(
            "write".into(),
            OpTrace {
                ios: 4,
                bytes: 4 * (512 << 10),
                size_hist: hist,
                ..Default::default()
            },
        );
        let mut sec = DeviceSecond {
            unix_ms: 3_723_000,
            covered_ms: 1000,
            qd_mean: Some(1.5),
            qd_max: Some(32),
            ..Default::default()
        };
        sec.ops.insert(
            "write".into(),
            OpSecond {
                ios: 4,
                bytes: 2 << 20,
                mb_s: 2.1,
                mb_s_max: 21.0,
                iops: 4.0,
                iops_max: 40.0,
                lat_max_ns: Some(1_500_000),
                ..Default::default()
            },
        );
        TraceDoc {
            mode: "ebpf".into(),
            attach: Some("tp_btf".into()),
            start_unix_ms: 3_723_000,
            end_unix_ms: 3_724_000,
            slot_ms: 100,
            histograms: true,
            devices: vec![DeviceTrace {
                name: "vda".into(),
                dev: "254:0".into(),
                ops,
                seconds: vec![sec],
                ..Default::default()
            }],
            self_check: SelfCheck {
                diskstats_match: Some(true),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn summary_table_has_bands_and_shares() {
        let s = summary(&doc());
        assert!(s.contains("100% 0–4 KiB"), "{s}");
        assert!(s.contains("100% 508–512 KiB"), "{s}");
        assert!(s.contains("99.6%"), "{s}");
    }

    #[test]
    fn per_second_table_shows_max_next_to_mean() {
        let s = per_second(&doc().devices[0].seconds);
        let row = s.lines().find(|l| l.contains("write")).unwrap();
        assert!(row.starts_with("01:02:03.000"), "{row}");
        assert!(
            row.contains("21.0") && row.contains("1.50") && row.contains("32"),
            "{row}"
        );
        assert!(text(&doc()).contains("diskstats match"));
    }

    #[test]
    fn by_class_shows_the_split_beside_background_io() {
        use iodig_model::trace::{Attribution, ClassSplit, Latency, SplitSide};
        let mut d = doc();
        d.start_unix_ms = 0;
        d.end_unix_ms = 2000;
        let lat = |p99_ns| {
            Some(Latency {
                count: 1,
                p99_ns,
                ..Default::default()
            })
        };
        d.self_check.attribution = Some(Attribution {
            enabled: true,
            background_classes: vec!["rocksdb.flush".into()],
            splits: vec![ClassSplit {
                device: "vda".into(),
                op: "read".into(),
                class: "rocksdb.read".into(),
                with_background: SplitSide {
                    ios: 7,
                    queue_ns_sum: 2_000_000_000,
                    device_ns_sum: 0,
                    queue: lat(4_100_000),
                    device: lat(900_000),
                },
                without_background: SplitSide {
                    ios: 993,
                    queue_ns_sum: 1_000_000_000,
                    device_ns_sum: 1_000_000_000,
                    queue: lat(300_000),
                    device: lat(100_000),
                },
            }],
            ..Default::default()
        });
        let s = by(&d, By::Class);
        let row = s
            .lines()
            .find(|l| l.starts_with("vda") && l.contains("rocksdb.read"));
        let row = row.unwrap_or_else(|| panic!("{s}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        // 3 s of queueing and 1 s at the device over a 2 s window: depths 1.50 and 0.50.
        assert_eq!(
            cells[3..],
            ["7", "4.100", "0.900", "993", "0.300", "0.100", "1.50", "0.50"],
            "{row}"
        );
        assert!(!by(&d, By::Process).contains("beside rocksdb.flush IO"));
    }
}
