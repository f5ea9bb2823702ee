//! Whose IO tells a step's story. In the briefs the database runs on servers of its own: when
//! its nodes are observed on their hosts (`--observe`), every IO analysis runs on each node's
//! own trace and events, the cluster is rolled up from them (sums, and the worst node for each
//! peak), and the client host's disks are shown apart, never as the database's IO. When the
//! database runs here (embedded, or managed nodes not observed), the client host is the
//! database's host and tells the story itself: one code path, a node being a place like any.

use super::step::{step_view, StepView};
use super::{findings, times};
use crate::data::{Place, RunData, StepData};
use std::collections::BTreeSet;

/// The observed hosts of a step that hold a database node, as (index in `step.nodes`, the
/// node's client address): the places whose IO is the database's.
pub fn database_nodes(run: &RunData, step: &StepData) -> Vec<(usize, String)> {
    let Some(c) = &run.doc.cluster else {
        return Vec::new();
    };
    step.nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let host = c.observed.iter().find(|h| h.host == n.step.host)?;
            Some((i, host.node.as_ref()?.address.clone()))
        })
        .collect()
}

/// The client host's own IO: its trace without the devices that database nodes observed on
/// this same kernel traced (their IO is the nodes' story, not the client's).
fn client_host_apart(run: &RunData, step: &StepData, nodes: &[(usize, String)]) -> StepData {
    let here = run.doc.environment.boot_id.as_deref();
    let observed = run.doc.cluster.as_ref().map(|c| &c.observed[..]);
    let nodes_devices: BTreeSet<String> = nodes
        .iter()
        .map(|(i, _)| &step.nodes[*i])
        .filter(|n| {
            observed
                .and_then(|o| o.iter().find(|h| h.host == n.step.host))
                .is_some_and(|h| Some(h.boot_id.as_str()) == here)
        })
        .filter_map(|n| n.trace.as_ref())
        .flat_map(|t| t.devices.iter().map(|d| d.name.clone()))
        .collect();
    let mut apart = step.clone();
    apart.nodes = Vec::new();
    if let Some(t) = &step.trace {
        apart.trace = Some(t.without_devices(&|d| nodes_devices.contains(d)));
    }
    if let Some(ds) = &mut apart.device_stats {
        ds.devices.retain(|d| !nodes_devices.contains(&d.device));
    }
    apart
}

/// A step's view: the client host's, and when database nodes were observed, each node's view
/// with its findings named after it, the cluster roll-up, and the step's findings told from
/// the nodes (the client host's own kept apart in `host_findings`).
pub(super) fn step_story(run: &RunData, step: &StepData) -> StepView {
    let nodes = database_nodes(run, step);
    if nodes.is_empty() {
        let mut v = step_view(step);
        v.slow_seconds = super::slow::slow_seconds(step, &[(step, false)]);
        return v;
    }
    let client = client_host_apart(run, step, &nodes);
    let mut v = step_view(&client);
    // The load generator's disk did not serve the database's reads: no storage verdict of it.
    v.storage = None;
    v.findings
        .retain(|f| !f.starts_with(super::storage::NOT_STORAGE_BOUND));
    v.host_findings = std::mem::take(&mut v.findings);
    let node_data: Vec<(usize, String, StepData)> = nodes
        .into_iter()
        .map(|(i, addr)| (i, addr.clone(), step.at_node(i, Some(addr))))
        .collect();
    let places: Vec<(&StepData, bool)> = node_data
        .iter()
        .map(|(_, _, d)| (d, false))
        .chain(std::iter::once((&client, true)))
        .collect();
    v.slow_seconds = super::slow::slow_seconds(step, &places);
    v.node_views = node_data
        .into_iter()
        .map(|(i, addr, data)| {
            let mut nv = step_view(&data);
            let ns = &step.nodes[i].step;
            nv.place_notes = ns
                .partial
                .iter()
                .map(|p| format!("Its data for this step is partial: {p}."))
                .chain(
                    ns.notes
                        .iter()
                        .map(|n| format!("{}.", n.trim_end_matches('.'))),
                )
                .collect();
            if let Some(sb) = nv.storage.as_mut() {
                sb.node_share = node_share(run, &addr);
                nv.findings.extend(super::storage::node_share_finding(sb));
            }
            let name = nv.place.name();
            nv.findings = nv.findings.iter().map(|f| named(&name, f)).collect();
            nv
        })
        .collect();
    let rollup = Rollup::of(&v.node_views);
    v.findings = v
        .node_views
        .iter()
        .flat_map(|n| n.findings.iter().cloned())
        .chain(rollup.findings())
        .collect();
    v.rollup = Some(rollup);
    v
}

/// The database's storage-bound figures of a step: the client host's when the database's IO
/// is its own, else its observed nodes' device reads summed against the client's database
/// reads, never the load generator's idle disk.
pub fn database_storage_bound(
    run: &RunData,
    step: &StepData,
) -> Option<super::storage::StorageBound> {
    let nodes = database_nodes(run, step);
    if nodes.is_empty() {
        return super::storage::storage_bound(step);
    }
    let per_node: Vec<_> = nodes
        .into_iter()
        .filter_map(|(i, addr)| super::storage::storage_bound(&step.at_node(i, Some(addr))))
        .collect();
    super::storage::summed(&per_node)
}

/// A node's share of the dataset: the bytes under its data directories at the start (measured
/// on its host), else its effective ownership of the logical dataset.
fn node_share(run: &RunData, addr: &str) -> Option<super::storage::NodeShare> {
    let c = run.doc.cluster.as_ref()?;
    let ip = |a: &str| a.split(':').next().unwrap_or(a).to_string();
    let measured = c
        .observed
        .iter()
        .filter_map(|h| h.node.as_ref())
        .find(|n| n.address == addr)
        .and_then(|n| n.data_bytes);
    if let Some(bytes) = measured.filter(|b| *b > 0) {
        return Some(super::storage::NodeShare {
            bytes,
            how: "its data directories at the start".into(),
        });
    }
    let owns = c
        .nodes
        .iter()
        .find(|n| ip(&n.address) == ip(addr))?
        .owns_pct?;
    let logical = super::storage::logical_dataset_bytes(&run.doc.config.properties)?;
    Some(super::storage::NodeShare {
        bytes: (logical as f64 * owns / 100.0) as u64,
        how: format!(
            "{owns:.1} % effective ownership of the {:.3} GB logical dataset",
            logical as f64 / 1e9
        ),
    })
}

/// "127.0.0.3: write bursts reach …": a finding named after its place, its first word
/// lower-cased unless it is an acronym ("IO", "OS").
pub fn named(place: &str, finding: &str) -> String {
    let mut chars = finding.chars();
    let first: String = match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => {
            a.to_lowercase().chain(std::iter::once(b)).collect()
        }
        (Some(a), Some(b)) => [a, b].into_iter().collect(),
        (Some(a), None) => a.to_string(),
        _ => String::new(),
    };
    format!("{place}: {first}{}", chars.as_str())
}

/// One peak of the cluster: its value, the node where it was reached and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// What peaked, in words (`write MB/s in a 100 ms slot`).
    pub what: &'static str,
    /// The peak's value in the unit `what` names.
    pub value: f64,
    /// The node where it was reached ([`Place::name`]).
    pub node: String,
    /// Unix ms at the middle of the second it was reached in; none for a whole-step figure.
    pub at_ms: Option<f64>,
}

/// The database's nodes in one step, summed, with the worst node for every peak.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rollup {
    /// Nodes with a trace in the step.
    pub traced: usize,
    /// Nodes observed in the step.
    pub nodes: usize,
    /// Bytes read, written and discarded over all nodes.
    pub read_bytes: u64,
    /// Bytes written over all nodes.
    pub write_bytes: u64,
    /// Bytes discarded over all nodes.
    pub discard_bytes: u64,
    /// Write MB/s over the step, summed over nodes (each node's bytes over its traced window).
    pub write_mb_s_mean: f64,
    /// Read MB/s over the step, summed over nodes.
    pub read_mb_s_mean: f64,
    /// Each peak with the node that reached it: busiest write and read slots (as MB/s), read
    /// IOPS, deepest queue, slowest read p99 at the device and in the OS of any second.
    pub peaks: Vec<Peak>,
}

impl Rollup {
    /// Sums and peaks over the node views.
    pub fn of(nodes: &[StepView]) -> Rollup {
        let mut r = Rollup {
            nodes: nodes.len(),
            ..Default::default()
        };
        for n in nodes {
            let secs = (n.trace_window_ms as f64 / 1000.0).max(1e-3);
            let bytes = |op: &str| n.io_rows.iter().find(|r| r.op == op).map_or(0, |r| r.bytes);
            if n.trace_mode != "off" && !n.io_rows.is_empty() {
                r.traced += 1;
            }
            r.read_bytes += bytes("read");
            r.write_bytes += bytes("write");
            r.discard_bytes += bytes("discard");
            r.write_mb_s_mean += bytes("write") as f64 / 1e6 / secs;
            r.read_mb_s_mean += bytes("read") as f64 / 1e6 / secs;
        }
        type Pick = fn(&StepView) -> Option<(f64, f64)>;
        let picks: [(&'static str, Pick); 6] = [
            ("write MB/s in its busiest slot", |n| {
                max_of(n.io.get("write").map(|l| &l.mb_s_max[..]))
            }),
            ("read MB/s in its busiest slot", |n| {
                max_of(n.io.get("read").map(|l| &l.mb_s_max[..]))
            }),
            ("read IOPS", |n| {
                max_of(n.io.get("read").map(|l| &l.iops[..]))
            }),
            ("queue depth", |n| max_of(Some(&n.qd_max[..]))),
            ("read p99 at the device (ms)", |n| {
                max_of(n.io.get("read").map(|l| &l.lat_p99_ms[..]))
            }),
            ("read p99 in the OS (ms)", |n| {
                max_of(n.io.get("read").map(|l| &l.os_p99_ms[..]))
            }),
        ];
        for (what, pick) in picks {
            let worst = nodes
                .iter()
                .filter_map(|n| pick(n).map(|(x, v)| (n, x, v)))
                .max_by(|a, b| a.2.total_cmp(&b.2));
            if let Some((n, x, v)) = worst.filter(|w| w.2 > 0.0) {
                r.peaks.push(Peak {
                    what,
                    value: v,
                    node: n.place.name(),
                    at_ms: Some(x),
                });
            }
        }
        r
    }

    /// The peak of `what`, when one was reached.
    pub fn peak(&self, what: &str) -> Option<&Peak> {
        self.peaks.iter().find(|p| p.what == what)
    }

    /// The roll-up in one sentence, when there are several nodes: totals, and where each
    /// peak was reached (the briefs' "QD 800 during the flush" is one node's, not a sum's).
    pub fn findings(&self) -> Vec<String> {
        if self.nodes < 2 || self.traced == 0 {
            return Vec::new();
        }
        let gb = |b: u64| b as f64 / 1e9;
        let mut s = format!(
            "The {} nodes together read {:.2} GB and wrote {:.2} GB ({} read, {} written on average)",
            self.nodes,
            gb(self.read_bytes),
            gb(self.write_bytes),
            findings::rate(self.read_mb_s_mean),
            findings::rate(self.write_mb_s_mean),
        );
        if let Some(p) = self.peak("write MB/s in its busiest slot") {
            let mean_per_node = self.write_mb_s_mean / self.nodes as f64;
            let ratio = if mean_per_node > 0.0 {
                format!(", {} a node's mean", times(p.value / mean_per_node))
            } else {
                String::new()
            };
            s.push_str(&format!(
                "; the worst write burst is {}'s ({}{ratio}{})",
                p.node,
                findings::rate(p.value),
                at(p)
            ));
        }
        if let Some(p) = self.peak("queue depth") {
            s.push_str(&format!(
                "; the deepest queue {}'s ({:.0}{})",
                p.node,
                p.value,
                at(p)
            ));
        }
        if let Some(p) = self.peak("read p99 at the device (ms)") {
            s.push_str(&format!(
                "; the slowest second's read p99 at the device {}'s ({}{})",
                p.node,
                findings::lat_ms(p.value),
                at(p)
            ));
        }
        vec![s + "."]
    }
}

/// " at 13:04:21" for a peak with a second.
fn at(p: &Peak) -> String {
    p.at_ms
        .map(|x| format!(" at {}", crate::svg::clock(x)))
        .unwrap_or_default()
}

/// The largest value of a line with its x.
fn max_of(line: Option<&[(f64, f64)]>) -> Option<(f64, f64)> {
    line?.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The place names of a step's story: its nodes, or the client host.
pub fn story_places(v: &StepView) -> Vec<Place> {
    if v.node_views.is_empty() {
        vec![v.place.clone()]
    } else {
        v.node_views.iter().map(|n| n.place.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finding_is_named_after_its_node_with_its_first_word_lowered() {
        assert_eq!(
            named("127.0.0.3", "Write bursts reach 41×"),
            "127.0.0.3: write bursts reach 41×"
        );
        assert_eq!(
            named("127.0.0.3", "IO by class"),
            "127.0.0.3: IO by class",
            "an acronym keeps its case"
        );
    }

    fn view(name: &str, write_max: f64, qd: f64, write_bytes: u64) -> StepView {
        let mut v = StepView {
            place: Place::Node {
                host: name.into(),
                node: Some(format!("{name}:9042")),
            },
            trace_mode: "ebpf".into(),
            trace_window_ms: 10_000,
            ..Default::default()
        };
        v.io.insert(
            "write".into(),
            super::super::IoLines {
                mb_s_max: vec![(1500.0, write_max / 2.0), (2500.0, write_max)],
                ..Default::default()
            },
        );
        v.qd_max = vec![(1500.0, qd)];
        v.io_rows.push(super::super::IoRow {
            op: "write".into(),
            band: String::new(),
            gb: write_bytes as f64 / 1e9,
            pct_ios: 100.0,
            pct_bytes: 100.0,
            ios: 10,
            bytes: write_bytes,
        });
        v
    }

    #[test]
    fn the_roll_up_sums_nodes_and_names_the_worst_for_each_peak() {
        let nodes = [
            view("10.0.0.1", 900.0, 40.0, 100_000_000),
            view("10.0.0.2", 5600.0, 12.0, 300_000_000),
            view("10.0.0.3", 700.0, 812.0, 200_000_000),
        ];
        let r = Rollup::of(&nodes);
        assert_eq!(r.write_bytes, 600_000_000);
        assert!((r.write_mb_s_mean - 60.0).abs() < 1e-9, "{r:?}");
        let w = r.peak("write MB/s in its busiest slot").unwrap();
        assert_eq!((w.node.as_str(), w.value), ("10.0.0.2", 5600.0));
        let q = r.peak("queue depth").unwrap();
        assert_eq!((q.node.as_str(), q.value), ("10.0.0.3", 812.0));
        let f = r.findings();
        assert_eq!(f.len(), 1);
        assert!(
            f[0].contains("the worst write burst is 10.0.0.2's (5.6 GB/s, 280× a node's mean")
                && f[0].contains("the deepest queue 10.0.0.3's (812"),
            "{f:?}"
        );
        assert!(
            Rollup::of(&nodes[..1]).findings().is_empty(),
            "one node is its own roll-up"
        );
    }
}
