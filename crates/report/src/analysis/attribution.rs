//! Who issued a step's block IO, from the kernel's attribution in trace.json: the briefs'
//! "% by IO count / % by volume" table per activity class and per node, what background writes
//! (memtable flush, compaction) did to the reads' device latency, and whether the classes add up
//! to the device totals. Pure functions of a [`TraceDoc`]; the report and the runner word them.

use iodig_model::trace::{AttrRow, Attribution, TraceDoc};
use std::collections::{BTreeMap, BTreeSet};

/// One line of a share table: what `who` issued of one op.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareRow {
    /// Block-layer op as the kernel names it: `read`, `write`, `discard`, `flush` or `other`.
    pub op: String,
    /// The activity class (`rocksdb.flush`, `kernel.journal`, …) or, in the per-node table, the
    /// managed node's address, another cgroup's path or `(no cgroup)`.
    pub who: String,
    /// IOs of the op that `who` issued over the step, all devices.
    pub ios: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Share of the op's IOs over all submitters (every class, or every node), in %.
    pub pct_ios: f64,
    /// Share of the op's bytes over all submitters, in %.
    pub pct_bytes: f64,
}

/// Classes whose writes run beside the queries: the IO the briefs blame for read spikes.
pub const BACKGROUND_CLASSES: &[&str] = &[
    "cassandra.flush",
    "cassandra.compaction",
    "rocksdb.flush",
    "rocksdb.compaction",
];

/// The cgroup prefix iodig gives each managed Cassandra node (`iodig/cassandra-ADDR`).
const NODE_CGROUP: &str = "iodig/cassandra-";

/// Per op × activity class, largest first within each op.
pub fn class_shares(a: &Attribution) -> Vec<ShareRow> {
    shares(a, |r| r.class.clone())
}

/// Per op × node: managed nodes by address, other cgroups by path, none as `(no cgroup)`.
pub fn node_shares(a: &Attribution) -> Vec<ShareRow> {
    shares(a, |r| node_of(r).unwrap_or_else(|| "(no cgroup)".into()))
}

/// The node a row's IO belongs to: a managed node's address, or the cgroup's path.
pub fn node_of(r: &AttrRow) -> Option<String> {
    let path = r.cgroup.as_deref()?.trim_start_matches('/');
    if path.is_empty() {
        return None;
    }
    Some(match path.find(NODE_CGROUP) {
        Some(i) => path[i + NODE_CGROUP.len()..].to_string(),
        None => path.to_string(),
    })
}

fn shares(a: &Attribution, key: impl Fn(&AttrRow) -> String) -> Vec<ShareRow> {
    let mut by: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    let mut per_op: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in &a.rows {
        let e = by.entry((r.op.clone(), key(r))).or_default();
        e.0 += r.ios;
        e.1 += r.bytes;
        let t = per_op.entry(r.op.clone()).or_default();
        t.0 += r.ios;
        t.1 += r.bytes;
    }
    let pct = |x: u64, total: u64| {
        if total == 0 {
            0.0
        } else {
            100.0 * x as f64 / total as f64
        }
    };
    let mut rows: Vec<ShareRow> = by
        .into_iter()
        .map(|((op, who), (ios, bytes))| {
            let (ti, tb) = per_op[&op];
            ShareRow {
                pct_ios: pct(ios, ti),
                pct_bytes: pct(bytes, tb),
                op,
                who,
                ios,
                bytes,
            }
        })
        .collect();
    let order = |op: &str| {
        iodig_model::trace::OPS
            .iter()
            .position(|o| *o == op)
            .unwrap_or(99)
    };
    rows.sort_by(|x, y| {
        order(&x.op)
            .cmp(&order(&y.op))
            .then(y.bytes.cmp(&x.bytes))
            .then(y.ios.cmp(&x.ios))
            .then(x.who.cmp(&y.who))
    });
    rows
}

/// Reads' device latency in seconds with background writes and in seconds without.
#[derive(Debug, Clone, PartialEq)]
pub struct Contention {
    /// The background classes that wrote in the step, largest first.
    pub classes: Vec<String>,
    /// Seconds with reads in which a [`BACKGROUND_CLASSES`] class wrote; a second counts once
    /// per device that completed reads in it.
    pub seconds_with: usize,
    /// Seconds with reads and no background write, counted the same way.
    pub seconds_without: usize,
    /// Median over the seconds with of each second's read p99 (device time), ms.
    pub read_p99_with_ms: f64,
    /// The same median over the seconds without, ms.
    pub read_p99_without_ms: f64,
    /// Worst read (device time) in the seconds with, ms.
    pub read_max_with_ms: f64,
    /// Worst read in the seconds without, ms.
    pub read_max_without_ms: f64,
}

/// Splits the trace's seconds by whether flush or compaction wrote in them, and compares the
/// reads' device latency; `None` unless both kinds of second have reads.
pub fn contention(doc: &TraceDoc) -> Option<Contention> {
    let a = doc.attribution()?;
    let mut busy: BTreeSet<u64> = BTreeSet::new();
    let mut classes: BTreeMap<String, u64> = BTreeMap::new();
    for r in a
        .rows
        .iter()
        .filter(|r| r.op == "write" && BACKGROUND_CLASSES.contains(&r.class.as_str()))
    {
        *classes.entry(r.class.clone()).or_default() += r.bytes;
        for s in r.seconds.iter().filter(|s| s.ios > 0) {
            busy.insert(s.unix_ms);
        }
    }
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for d in &doc.devices {
        for s in &d.seconds {
            let Some(read) = s.ops.get("read").filter(|r| r.ios > 0) else {
                continue;
            };
            let (Some(p99), Some(max)) = (read.lat_p99_ns, read.lat_max_ns) else {
                continue;
            };
            let v = (p99 as f64 / 1e6, max as f64 / 1e6);
            if busy.contains(&s.unix_ms) {
                with.push(v);
            } else {
                without.push(v);
            }
        }
    }
    if with.is_empty() || without.is_empty() {
        return None;
    }
    let mut classes: Vec<(String, u64)> = classes.into_iter().collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.1));
    Some(Contention {
        classes: classes.into_iter().map(|(c, _)| c).collect(),
        seconds_with: with.len(),
        seconds_without: without.len(),
        read_p99_with_ms: median(with.iter().map(|v| v.0).collect()),
        read_p99_without_ms: median(without.iter().map(|v| v.0).collect()),
        read_max_with_ms: with.iter().map(|v| v.1).fold(0.0, f64::max),
        read_max_without_ms: without.iter().map(|v| v.1).fold(0.0, f64::max),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The self-check as the report states it: equal, or by how much the classes differ.
pub fn check_sentence(a: &Attribution) -> String {
    let (di, ci, db, cb) = a.check.iter().fold((0, 0, 0, 0), |t, c| {
        (
            t.0 + c.device_ios,
            t.1 + c.class_ios,
            t.2 + c.device_bytes,
            t.3 + c.class_bytes,
        )
    });
    if a.check.is_empty() {
        "No attribution check was recorded.".into()
    } else if a.sums_match() {
        format!("The classes add up exactly to the device totals ({di} IOs, {db} bytes).")
    } else {
        format!(
            "The classes hold {ci} IOs and {cb} bytes where the devices completed {di} IOs and {db} bytes: the per-class figures are off by {} IOs.",
            di.abs_diff(ci)
        )
    }
}

/// The sentences a step's report and the runner print: who wrote the bytes, which node stood
/// out, what background writes did to reads, and the self-check when it failed.
pub fn findings(doc: &TraceDoc) -> Vec<String> {
    let Some(a) = doc.attribution() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let writes: Vec<ShareRow> = class_shares(a)
        .into_iter()
        .filter(|r| r.op == "write" && r.bytes > 0 && r.pct_bytes >= 1.0)
        .collect();
    if writes.len() > 1 {
        let parts: Vec<String> = writes
            .iter()
            .take(4)
            .map(|r| format!("{} {:.0} %", r.who, r.pct_bytes))
            .collect();
        out.push(format!(
            "Writes by activity, share of bytes: {}",
            parts.join(", ")
        ));
    }
    let nodes: Vec<ShareRow> = node_shares(a)
        .into_iter()
        .filter(|r| r.op == "write" && r.who != "(no cgroup)")
        .collect();
    if nodes.len() > 1 {
        let mean = nodes.iter().map(|r| r.bytes as f64).sum::<f64>() / nodes.len() as f64;
        if let Some(top) = nodes
            .first()
            .filter(|t| mean > 0.0 && t.bytes as f64 > 1.5 * mean)
        {
            out.push(format!(
                "Node {} wrote {:.1}× the mean of the {} nodes ({:.1} MB of {:.1} MB)",
                top.who,
                top.bytes as f64 / mean,
                nodes.len(),
                top.bytes as f64 / 1e6,
                nodes.iter().map(|r| r.bytes).sum::<u64>() as f64 / 1e6
            ));
        }
    }
    if let Some(c) = contention(doc) {
        if c.read_p99_with_ms > 1.5 * c.read_p99_without_ms && c.read_p99_with_ms > 0.1 {
            out.push(format!(
                "Reads' device p99 was {:.2} ms in the {} with {} writes against {:.2} ms in the {} without ({}; worst read {:.1} ms against {:.1} ms)",
                c.read_p99_with_ms,
                if c.seconds_with == 1 {
                    "1 second".to_string()
                } else {
                    format!("{} seconds", c.seconds_with)
                },
                c.classes.join("/"),
                c.read_p99_without_ms,
                c.seconds_without,
                super::times(c.read_p99_with_ms / c.read_p99_without_ms.max(1e-9)),
                c.read_max_with_ms,
                c.read_max_without_ms
            ));
        }
    }
    if !a.check.is_empty() && !a.sums_match() {
        out.push(format!("Attribution self-check: {}", check_sentence(a)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodig_model::trace::AttrRow;

    fn row(op: &str, class: &str, cgroup: Option<&str>, ios: u64, bytes: u64) -> AttrRow {
        AttrRow {
            device: "vda".into(),
            op: op.into(),
            class: class.into(),
            cgroup: cgroup.map(String::from),
            ios,
            bytes,
            ..Default::default()
        }
    }

    #[test]
    fn class_shares_are_per_op_and_add_to_100() {
        let a = Attribution {
            enabled: true,
            rows: vec![
                row("write", "rocksdb.compaction", None, 10, 6_100),
                row("write", "rocksdb.flush", None, 5, 2_700),
                row("write", "rocksdb.wal", None, 85, 1_200),
                row("read", "rocksdb.read", None, 40, 40_960),
            ],
            ..Default::default()
        };
        let rows = class_shares(&a);
        assert_eq!(rows[0].op, "read");
        assert_eq!(rows[0].pct_bytes, 100.0);
        let w: Vec<&ShareRow> = rows.iter().filter(|r| r.op == "write").collect();
        assert_eq!(w[0].who, "rocksdb.compaction");
        assert!((w[0].pct_bytes - 61.0).abs() < 1e-9);
        assert!((w[2].pct_ios - 85.0).abs() < 1e-9);
        let total: f64 = w.iter().map(|r| r.pct_bytes).sum();
        assert!((total - 100.0).abs() < 1e-9);
    }

    #[test]
    fn managed_nodes_are_named_by_address_and_other_cgroups_by_path() {
        let a = Attribution {
            enabled: true,
            rows: vec![
                row(
                    "write",
                    "cassandra.flush",
                    Some("/iodig/cassandra-127.0.0.2"),
                    1,
                    10,
                ),
                row("write", "kernel.journal", Some("/"), 1, 10),
                row("write", "kernel.other", Some("/system.slice/x"), 1, 10),
            ],
            ..Default::default()
        };
        let who: Vec<String> = node_shares(&a).into_iter().map(|r| r.who).collect();
        assert!(who.contains(&"127.0.0.2".to_string()), "{who:?}");
        assert!(who.contains(&"(no cgroup)".to_string()), "{who:?}");
        assert!(who.contains(&"system.slice/x".to_string()), "{who:?}");
    }
}
