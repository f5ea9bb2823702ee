//! The database's nodes as the run saw them: ownership from the database, the hosts observed
//! over SSH with their clocks, and each node's IO per step (the briefs' per-node view), with a
//! finding when one node stands out.
//!
//! Nodes on hosts of their own are measured by their devices. Observed "hosts" that share one
//! kernel (the same boot id: a loopback cluster) see the same devices, so each node's IO is its
//! cgroup's share from the kernel's attribution, and device-wide figures (queue depth, device
//! latency) are marked as shared.

use crate::data::{NodeData, RunData, StepData};
use iodig_model::cluster::ObservedHost;
use iodig_model::trace::TraceDoc;
use std::collections::BTreeMap;

/// One node's IO over one step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeIo {
    /// The observed host, as given to `--observe`.
    pub host: String,
    /// The node found there (`127.0.0.2:9042`), when one was.
    pub node: Option<String>,
    /// True when the figures are the node's cgroup share of devices other nodes share.
    pub cgroup_share: bool,
    /// Reads completed in the step: the node's devices' totals, or its cgroup's reads when hosts
    /// share a kernel; 0 without a trace.
    pub read_ios: u64,
    /// Bytes of those reads.
    pub read_bytes: u64,
    /// Writes completed in the step, counted the same way.
    pub write_ios: u64,
    /// Bytes of those writes.
    pub write_bytes: u64,
    /// Share of all nodes' IOs (reads and writes) in the step, %.
    pub pct_ios: f64,
    /// Share of all nodes' bytes read and written in the step, %.
    pub pct_bytes: f64,
    /// Busiest second's write rate, MB/s (MB = 10^6 bytes).
    pub write_mb_s_peak: f64,
    /// Write bytes over the trace's window, MB/s (MB = 10^6 bytes).
    pub write_mb_s_mean: f64,
    /// Device-wide: the deepest queue of any second on the node's devices; none without a
    /// trace or queue figures.
    pub qd_max: Option<u64>,
    /// Device-wide: the reads' device p99 over the step, ms, the worst of the node's devices; none
    /// without timed reads.
    pub read_p99_ms: Option<f64>,
    /// Write MB/s per second (unix ms, MB/s), on the run's clock.
    pub write_series: Vec<(f64, f64)>,
    /// Why the host's data is incomplete, when it is.
    pub partial: Option<String>,
    /// The host's clock minus the client's, ms, from the step's first clock sample (before, else
    /// after); none without a sample.
    pub clock_offset_ms: Option<f64>,
    /// Milliseconds subtracted from the host's timestamps to put them on the client's clock; 0 when
    /// the offset is within its own uncertainty.
    pub applied_offset_ms: i64,
}

/// Ownership, observed hosts and clocks, for the report's cluster section.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    /// The keyspace (or database) the ownership figures are for, when known.
    pub keyspace: Option<String>,
    /// Replication as the database states it (`SimpleStrategy rf=3`, `dc1:3`), when known.
    pub replication: Option<String>,
    /// One row per node of the ring, in address order.
    pub owners: Vec<OwnerRow>,
    /// One row per host observed over SSH (`--observe`), in the order given.
    pub hosts: Vec<HostRow>,
    /// How the facts were read and what could not be, each host's fallbacks (prefixed with the
    /// host), and a warning when observed hosts share one kernel.
    pub notes: Vec<String>,
    /// Each observed node's configuration as the briefs print it: one column per node (its
    /// name first), one row per setting; empty when no agent described its host.
    pub config: NodeConfig,
}

/// The nodes' configuration table: the briefs' "test configuration" per database server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeConfig {
    /// The nodes, in `--observe` order ([`crate::data::Place::name`]).
    pub nodes: Vec<String>,
    /// (setting, one value per node); `–` where a node's agent could not tell.
    pub rows: Vec<(String, Vec<String>)>,
}

/// One row per key any host's map has, in name order, `–` where a host's has none.
fn keyed_rows<'a>(
    hosts: &[&'a ObservedHost],
    map: impl Fn(&'a ObservedHost) -> Option<&'a BTreeMap<String, String>>,
) -> Vec<(String, Vec<String>)> {
    let keys: std::collections::BTreeSet<&String> = hosts
        .iter()
        .filter_map(|h| map(h))
        .flat_map(BTreeMap::keys)
        .collect();
    keys.into_iter()
        .map(|k| {
            let values = hosts
                .iter()
                .map(|h| {
                    map(h)
                        .and_then(|m| m.get(k).cloned())
                        .unwrap_or_else(|| "–".into())
                })
                .collect();
            (k.clone(), values)
        })
        .collect()
}

/// The configuration table of the observed hosts that hold a node.
fn node_config(run: &RunData) -> NodeConfig {
    let Some(c) = &run.doc.cluster else {
        return NodeConfig::default();
    };
    let hosts: Vec<&ObservedHost> = c
        .observed
        .iter()
        .filter(|h| h.node.is_some() && h.environment.is_some())
        .collect();
    if hosts.is_empty() {
        return NodeConfig::default();
    }
    let ip = |a: &str| a.rsplit_once(':').map_or(a, |(ip, _)| ip).to_string();
    type Fact = (&'static str, fn(&ObservedHost) -> Option<String>);
    let facts: [Fact; 14] = [
        ("host", |h| Some(h.hostname.clone())),
        ("OS", |h| h.environment.as_ref()?.os.clone()),
        ("kernel", |h| Some(h.environment.as_ref()?.kernel.clone())),
        ("CPU", |h| {
            let e = h.environment.as_ref()?;
            Some(format!("{} × {}", e.cpus, e.cpu_model))
        }),
        ("RAM", |h| {
            Some(format!(
                "{:.1} GiB",
                h.environment.as_ref()?.memory_bytes as f64 / (1u64 << 30) as f64
            ))
        }),
        ("data drive", |h| {
            let s = h.environment.as_ref()?.storage.as_ref()?;
            Some(format!(
                "{} ({})",
                s.device.clone().unwrap_or_else(|| s.source.clone()),
                s.model
                    .clone()
                    .unwrap_or_else(|| "no model reported".into())
            ))
        }),
        ("firmware", |h| {
            h.environment.as_ref()?.storage.as_ref()?.firmware.clone()
        }),
        ("capacity", |h| {
            let b = h.environment.as_ref()?.storage.as_ref()?.capacity_bytes?;
            Some(format!("{:.1} GB", b as f64 / 1e9))
        }),
        ("scheduler", |h| {
            h.environment.as_ref()?.storage.as_ref()?.scheduler.clone()
        }),
        ("rotational", |h| {
            let r = h.environment.as_ref()?.storage.as_ref()?.rotational?;
            Some(if r { "yes" } else { "no" }.into())
        }),
        ("read-ahead", |h| {
            let kb = h.environment.as_ref()?.storage.as_ref()?.read_ahead_kb?;
            Some(format!("{kb} KiB"))
        }),
        ("file system", |h| {
            let s = h.environment.as_ref()?.storage.as_ref()?;
            Some(format!("{} on {}", s.fs_type, s.mount_point))
        }),
        ("mount options", |h| {
            h.environment
                .as_ref()?
                .storage
                .as_ref()?
                .mount_options
                .clone()
        }),
        ("data directories", |h| {
            Some(h.node.as_ref()?.data_dirs.join(", "))
        }),
    ];
    let mut rows: Vec<(String, Vec<String>)> = facts
        .iter()
        .map(|(name, f)| {
            let values = hosts
                .iter()
                .map(|h| f(h).unwrap_or_else(|| "–".into()))
                .collect();
            ((*name).to_string(), values)
        })
        .collect();
    let version = |h: &ObservedHost| {
        let addr = ip(&h.node.as_ref()?.address);
        c.nodes
            .iter()
            .find(|n| ip(&n.address) == addr)?
            .version
            .clone()
    };
    rows.push((
        "database version".into(),
        hosts
            .iter()
            .map(|h| version(h).unwrap_or_else(|| "–".into()))
            .collect(),
    ));
    // Every kernel setting and node setting any host reported, each in name order.
    rows.extend(keyed_rows(&hosts, |h| {
        h.environment.as_ref().map(|e| &e.kernel_settings)
    }));
    rows.extend(keyed_rows(&hosts, |h| h.node.as_ref().map(|n| &n.settings)));
    NodeConfig {
        nodes: hosts
            .iter()
            .map(|h| {
                ip(&h
                    .node
                    .as_ref()
                    .map_or(h.host.clone(), |n| n.address.clone()))
            })
            .collect(),
        rows,
    }
}

/// One node of the ring as the database's own metadata describes it.
#[derive(Debug, Clone, Default)]
pub struct OwnerRow {
    /// The node's client (CQL) address.
    pub address: String,
    /// `datacenter / rack`, each left out when unknown; empty when both are.
    pub datacenter: String,
    /// Database version the node reports; empty when unknown.
    pub version: String,
    /// Tokens (virtual nodes) it holds.
    pub tokens: u64,
    /// Effective ownership of the keyspace's data in %, replication included (what `nodetool
    /// status KEYSPACE` prints as "Owns (effective)"); none when it could not be read.
    pub owns_pct: Option<f64>,
    /// Bytes under the node's data directories at the start, when its host was observed.
    pub load_bytes: Option<u64>,
}

/// One host observed over SSH, and the node found on it.
#[derive(Debug, Clone, Default)]
pub struct HostRow {
    /// As given to `--observe` (`host`, `user@host`, `host:port`, an ssh_config alias).
    pub host: String,
    /// The host's own name (`uname -n`).
    pub hostname: String,
    /// The database node found there, as `ADDR (pid N, cgroup C)`, or `none found`.
    pub node: String,
    /// Devices traced on the host, comma-separated.
    pub devices: String,
    /// How iodig got there: the binary it ran and whether it had to send it.
    pub agent: String,
    /// Smallest and largest clock offset (host minus client) over the steps' samples, ms; none
    /// without samples.
    pub offset_range_ms: Option<(f64, f64)>,
    /// Longest round trip of those clock samples, ms: each offset is known to ± half of its own.
    pub rtt_max_ms: Option<f64>,
}

/// The cluster section's content; none for a run without cluster facts.
pub fn cluster_view(run: &RunData) -> Option<ClusterView> {
    let c = run.doc.cluster.as_ref()?;
    let load_of = |addr: &str| {
        c.observed.iter().find_map(|h| {
            h.node
                .as_ref()
                .filter(|n| n.address.split(':').next() == Some(addr))
                .and_then(|n| n.data_bytes)
        })
    };
    let owners = c
        .nodes
        .iter()
        .map(|n| OwnerRow {
            address: n.address.clone(),
            datacenter: [n.datacenter.clone(), n.rack.clone()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" / "),
            version: n.version.clone().unwrap_or_default(),
            tokens: n.tokens,
            owns_pct: n.owns_pct,
            load_bytes: load_of(&n.address),
        })
        .collect();
    let hosts = c
        .observed
        .iter()
        .map(|h| {
            let clocks: Vec<_> = run
                .steps
                .iter()
                .flat_map(|s| &s.summary.nodes)
                .filter(|n| n.host == h.host)
                .flat_map(|n| [n.clock_before, n.clock_after])
                .flatten()
                .collect();
            let offsets = clocks.iter().map(|c| c.offset_ms);
            HostRow {
                host: h.host.clone(),
                hostname: h.hostname.clone(),
                node: h
                    .node
                    .as_ref()
                    .map(|n| {
                        format!(
                            "{} (pid {}{})",
                            n.address,
                            n.pid,
                            n.cgroup
                                .as_ref()
                                .map(|c| format!(", cgroup {c}"))
                                .unwrap_or_default()
                        )
                    })
                    .unwrap_or_else(|| "none found".into()),
                devices: h.devices.join(", "),
                agent: h.agent.clone(),
                offset_range_ms: (!clocks.is_empty()).then(|| {
                    (
                        offsets.clone().fold(f64::INFINITY, f64::min),
                        offsets.fold(f64::NEG_INFINITY, f64::max),
                    )
                }),
                rtt_max_ms: clocks.iter().map(|c| c.rtt_ms).reduce(f64::max),
            }
        })
        .collect();
    let mut notes = c.notes.clone();
    for h in &c.observed {
        notes.extend(h.notes.iter().map(|n| format!("{}: {n}", h.host)));
    }
    if shares_kernel(&c.observed) {
        notes.push("Some observed hosts share one kernel (same boot id): their devices are the same, so each node's IO below is its own cgroup's share, and queue depth and device latency are the shared device's.".into());
    }
    Some(ClusterView {
        config: node_config(run),
        keyspace: c.keyspace.clone(),
        replication: c.replication.clone(),
        owners,
        hosts,
        notes,
    })
}

fn shares_kernel(hosts: &[ObservedHost]) -> bool {
    let mut ids: Vec<&str> = hosts.iter().map(|h| h.boot_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.len() < hosts.len()
}

/// Each observed node's IO in one step.
pub fn step_nodes(run: &RunData, step: &StepData) -> Vec<NodeIo> {
    let Some(c) = &run.doc.cluster else {
        return Vec::new();
    };
    let shared = shares_kernel(&c.observed);
    let mut rows: Vec<NodeIo> = step
        .nodes
        .iter()
        .map(|n| {
            let host = c.observed.iter().find(|h| h.host == n.step.host);
            let cgroup = host
                .and_then(|h| h.node.as_ref())
                .and_then(|n| n.cgroup.clone());
            node_io(n, host, shared.then_some(cgroup).flatten())
        })
        .collect();
    let total_ios: u64 = rows.iter().map(|r| r.read_ios + r.write_ios).sum();
    let total_bytes: u64 = rows.iter().map(|r| r.read_bytes + r.write_bytes).sum();
    for r in &mut rows {
        r.pct_ios = pct(r.read_ios + r.write_ios, total_ios);
        r.pct_bytes = pct(r.read_bytes + r.write_bytes, total_bytes);
    }
    rows
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn node_io(n: &NodeData, host: Option<&ObservedHost>, cgroup: Option<String>) -> NodeIo {
    let mut io = NodeIo {
        host: n.step.host.clone(),
        node: host
            .and_then(|h| h.node.as_ref())
            .map(|n| n.address.clone()),
        cgroup_share: cgroup.is_some(),
        partial: n.step.partial.clone(),
        clock_offset_ms: n
            .step
            .clock_before
            .or(n.step.clock_after)
            .map(|c| c.offset_ms),
        applied_offset_ms: n.step.applied_offset_ms,
        ..Default::default()
    };
    let Some(t) = &n.trace else { return io };
    let mut per_second: BTreeMap<u64, u64> = BTreeMap::new();
    match (&cgroup, t.attribution()) {
        (Some(cg), Some(a)) => {
            for row in a.rows.iter().filter(|r| r.cgroup.as_deref() == Some(cg)) {
                match row.op.as_str() {
                    "read" => {
                        io.read_ios += row.ios;
                        io.read_bytes += row.bytes;
                    }
                    "write" => {
                        io.write_ios += row.ios;
                        io.write_bytes += row.bytes;
                        for s in &row.seconds {
                            *per_second.entry(s.unix_ms).or_default() += s.bytes;
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {
            (io.read_ios, io.read_bytes) = t.op_totals("read");
            (io.write_ios, io.write_bytes) = t.op_totals("write");
            for d in &t.devices {
                for s in &d.seconds {
                    if let Some(w) = s.ops.get("write") {
                        *per_second.entry(s.unix_ms).or_default() += w.bytes;
                    }
                }
            }
        }
    }
    io.write_series = per_second
        .iter()
        .map(|(t, b)| (*t as f64, *b as f64 / 1e6))
        .collect();
    io.write_mb_s_peak = io.write_series.iter().map(|p| p.1).fold(0.0, f64::max);
    let secs = t.end_unix_ms.saturating_sub(t.start_unix_ms) as f64 / 1000.0;
    if secs > 0.0 {
        io.write_mb_s_mean = io.write_bytes as f64 / 1e6 / secs;
    }
    io.qd_max = t
        .devices
        .iter()
        .flat_map(|d| d.seconds.iter().filter_map(|s| s.qd_max))
        .max();
    io.read_p99_ms = read_p99_ms(t);
    io
}

fn read_p99_ms(t: &TraceDoc) -> Option<f64> {
    t.devices
        .iter()
        .filter_map(|d| d.ops.get("read"))
        .filter_map(|o| o.latency.get("device"))
        .filter(|l| l.count > 0)
        .map(|l| l.p99_ns as f64 / 1e6)
        .reduce(f64::max)
}

/// Findings of one step's nodes: a node that wrote far more than the others' mean.
pub fn node_findings(nodes: &[NodeIo]) -> Vec<String> {
    let mut f = Vec::new();
    let measured: Vec<&NodeIo> = nodes.iter().filter(|n| n.partial.is_none()).collect();
    if measured.len() >= 3 {
        let mean =
            measured.iter().map(|n| n.write_bytes as f64).sum::<f64>() / measured.len() as f64;
        for n in &measured {
            let ratio = n.write_bytes as f64 / mean;
            if mean > 0.0 && ratio >= 1.5 {
                f.push(format!(
                    "Node {} wrote {:.1}× the mean of the {} nodes ({:.1} MB against {:.1} MB); its busiest second wrote {:.1} MB/s.",
                    n.node.as_deref().unwrap_or(&n.host),
                    ratio,
                    measured.len(),
                    n.write_bytes as f64 / 1e6,
                    mean / 1e6,
                    n.write_mb_s_peak
                ));
            }
        }
    }
    for n in nodes {
        if let Some(p) = &n.partial {
            f.push(format!(
                "Host {}: its data for this step is partial ({p}).",
                n.host
            ));
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, write_bytes: u64) -> NodeIo {
        NodeIo {
            host: host.into(),
            write_bytes,
            ..Default::default()
        }
    }

    #[test]
    fn a_node_writing_far_more_than_the_mean_is_named() {
        let nodes = [node("a", 100), node("b", 100), node("c", 400)];
        let f = node_findings(&nodes);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("Node c wrote 2.0× the mean of the 3 nodes"),
            "{f:?}"
        );
        assert!(node_findings(&[node("a", 100), node("b", 110), node("c", 120)]).is_empty());
    }
}
