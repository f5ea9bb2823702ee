//! The cluster: ownership per node as the database states it, the hosts observed over SSH with
//! their clocks, and in each step the nodes' IO side by side with their write throughput on the
//! step's time axis.

use super::step::{line, Timeline};
use crate::analysis::cluster::ClusterView;
use crate::analysis::{Report, StepView};
use crate::doc::{thousands, Doc, Table};

pub(super) fn section(doc: &mut Doc, report: &Report) {
    let Some(c) = &report.cluster else { return };
    doc.h(2, "Cluster");
    ownership(doc, c);
    hosts(doc, c);
    config(doc, c);
    if !c.notes.is_empty() {
        doc.list(c.notes.clone());
    }
}

fn ownership(doc: &mut Doc, c: &ClusterView) {
    if c.owners.is_empty() {
        return;
    }
    doc.p(format!(
        "Ownership of keyspace {}{}, as `nodetool status` states it (effective, replication included):",
        c.keyspace.as_deref().unwrap_or("?"),
        c.replication
            .as_ref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    ));
    let mut t = Table::new(&[
        "node",
        "datacenter / rack",
        "version",
        "tokens",
        "owns (effective)",
        "load at start",
    ])
    .text_columns(&[0, 1, 2]);
    for o in &c.owners {
        t.row(vec![
            o.address.clone(),
            o.datacenter.clone(),
            o.version.clone(),
            o.tokens.to_string(),
            o.owns_pct.map_or("—".into(), |p| format!("{p:.1}%")),
            o.load_bytes
                .map_or("—".into(), |b| format!("{:.1} MB", b as f64 / 1e6)),
        ]);
    }
    doc.table(t);
}

fn hosts(doc: &mut Doc, c: &ClusterView) {
    if c.hosts.is_empty() {
        return;
    }
    doc.p("Hosts observed over SSH; their timestamps are put on this machine's clock (an offset within half the round trip is not applied):");
    let mut t = Table::new(&[
        "host",
        "hostname",
        "node",
        "devices",
        "clock offset (ms)",
        "round trip max (ms)",
        "agent",
    ])
    .text_columns(&[0, 1, 2, 3, 4, 6]);
    for h in &c.hosts {
        t.row(vec![
            h.host.clone(),
            h.hostname.clone(),
            h.node.clone(),
            h.devices.clone(),
            h.offset_range_ms
                .map_or("—".into(), |(lo, hi)| format!("{lo:+.2} … {hi:+.2}")),
            h.rtt_max_ms.map_or("—".into(), |r| format!("{r:.2}")),
            h.agent.clone(),
        ]);
    }
    doc.table(t);
}

/// Each node's configuration, one column per node, as the briefs' test-configuration tables.
fn config(doc: &mut Doc, c: &ClusterView) {
    if c.config.nodes.is_empty() {
        return;
    }
    doc.h(3, "Each node's configuration");
    doc.p("As each node's agent read it on its host: the OS and hardware, the drive under the node's data, the kernel settings, and what shapes the database's IO (its configuration file's settings, `unset` where it leaves the default; its JVM's heap and collector; its process limits).");
    let mut headers = vec!["setting".to_string()];
    headers.extend(c.config.nodes.iter().cloned());
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let mut t = Table::new(&refs).text_columns(&(0..refs.len()).collect::<Vec<_>>());
    for (name, values) in &c.config.rows {
        let mut row = vec![name.clone()];
        row.extend(values.iter().cloned());
        t.row(row);
    }
    doc.table(t);
}

/// A step's nodes: the per-node IO table and their write throughput over time.
pub(super) fn step_nodes(doc: &mut Doc, s: &StepView, t: &Timeline) {
    if s.cluster_nodes.is_empty() {
        return;
    }
    doc.h(3, "Nodes");
    let shared = s.cluster_nodes.iter().any(|n| n.cgroup_share);
    let mut table = Table::new(&[
        "node",
        "read MB",
        "write MB",
        "IOs",
        "% by IO count",
        "% by volume",
        "write MB/s mean",
        "write MB/s busiest second",
        if shared {
            "peak QD (shared device)"
        } else {
            "peak QD"
        },
        if shared {
            "read p99 device ms (shared)"
        } else {
            "read p99 device ms"
        },
    ])
    .text_columns(&[0]);
    for n in &s.cluster_nodes {
        let name = match (&n.node, &n.partial) {
            (Some(node), None) => node.clone(),
            (None, None) => n.host.clone(),
            (node, Some(_)) => format!("{} (partial)", node.as_deref().unwrap_or(&n.host)),
        };
        table.row(vec![
            name,
            format!("{:.1}", n.read_bytes as f64 / 1e6),
            format!("{:.1}", n.write_bytes as f64 / 1e6),
            thousands((n.read_ios + n.write_ios) as f64),
            format!("{:.1}%", n.pct_ios),
            format!("{:.1}%", n.pct_bytes),
            format!("{:.1}", n.write_mb_s_mean),
            format!("{:.1}", n.write_mb_s_peak),
            n.qd_max.map_or("—".into(), |q| q.to_string()),
            n.read_p99_ms.map_or("—".into(), |p| format!("{p:.2}")),
        ]);
    }
    doc.table(table);
    let mut c = t.chart("Write throughput per node", "write (MB/s)");
    for (i, n) in s.cluster_nodes.iter().enumerate() {
        c.series.push(line(
            n.node.clone().unwrap_or_else(|| n.host.clone()),
            &n.write_series,
            i,
            false,
        ));
    }
    if !c.is_empty() {
        doc.line_chart(c);
    }
}
